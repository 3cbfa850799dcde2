package ndjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"path/filepath"
	"strings"

	"github.com/plexus-agent/plexus/engine"
)

// Request kinds of the contract.
const (
	kindUserMessage  = "user_message"
	kindClearHistory = "clear_history"
	kindGetStatus    = "get_status"
)

// request is a decoded, valid request.
type request struct {
	ID   string
	Kind string
	// Message and Attachments are set for user_message.
	Message     string
	Attachments []engine.Attachment
	// ConversationID is metadata.conversationId; "" means the default
	// conversation.
	ConversationID string
}

// malformedError is an input line that is not JSON. It cannot be answered:
// no id can be read from it.
type malformedError struct{ err error }

func (e *malformedError) Error() string { return "malformed JSON: " + e.err.Error() }

func (e *malformedError) Unwrap() error { return e.err }

// invalidError is JSON that is not a valid request. It is answered with an
// error response carrying ID ("" when the request has no string id).
type invalidError struct {
	ID  string
	Msg string
}

func (e *invalidError) Error() string { return e.Msg }

// decodeRequest decodes one input line. Errors are *malformedError or
// *invalidError.
func decodeRequest(line []byte) (request, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil {
		if _, ok := err.(*json.UnmarshalTypeError); !ok {
			return request{}, &malformedError{err: err}
		}
	}
	if fields == nil {
		return request{}, &invalidError{Msg: fmt.Sprintf("a request must be a JSON object, got %s", jsonKind(line))}
	}

	var req request
	raw, ok := fields["id"]
	switch {
	case !ok:
		return request{}, &invalidError{Msg: "request has no id; every request needs a string id"}
	case decodeString(raw, &req.ID) != nil:
		return request{}, &invalidError{Msg: fmt.Sprintf("request id must be a string, got %s", jsonKind(raw))}
	case req.ID == "":
		return request{}, &invalidError{Msg: "request id is empty"}
	}
	invalid := func(format string, args ...any) error {
		return &invalidError{ID: req.ID, Msg: fmt.Sprintf(format, args...)}
	}

	raw, ok = fields["kind"]
	if !ok {
		return request{}, invalid("request has no kind; expected user_message, clear_history or get_status")
	}
	if err := decodeString(raw, &req.Kind); err != nil {
		return request{}, invalid("kind must be a string, got %s", jsonKind(raw))
	}
	switch req.Kind {
	case kindUserMessage, kindClearHistory, kindGetStatus:
	default:
		return request{}, invalid("unknown request kind %q; expected user_message, clear_history or get_status", req.Kind)
	}

	if raw, ok := fields["metadata"]; ok && jsonKind(raw) != "null" {
		var meta map[string]json.RawMessage
		if jsonKind(raw) != "object" || json.Unmarshal(raw, &meta) != nil {
			return request{}, invalid("metadata must be an object, got %s", jsonKind(raw))
		}
		if raw, ok := meta["conversationId"]; ok && jsonKind(raw) != "null" {
			if err := decodeString(raw, &req.ConversationID); err != nil {
				return request{}, invalid("metadata.conversationId must be a string, got %s", jsonKind(raw))
			}
		}
	}

	if req.Kind != kindUserMessage {
		return req, nil
	}
	raw, ok = fields["message"]
	if !ok {
		return request{}, invalid("user_message has no message")
	}
	if err := decodeString(raw, &req.Message); err != nil {
		return request{}, invalid("message must be a string, got %s", jsonKind(raw))
	}
	if strings.TrimSpace(req.Message) == "" {
		return request{}, invalid("message is empty")
	}
	if raw, ok := fields["attachments"]; ok && jsonKind(raw) != "null" {
		atts, err := decodeAttachments(raw)
		if err != nil {
			return request{}, invalid("%s", err.Error())
		}
		req.Attachments = atts
	}
	return req, nil
}

// decodeAttachments decodes the attachments array: objects with a required
// non-empty path and an optional mime (guessed from the extension when
// absent or empty).
func decodeAttachments(raw json.RawMessage) ([]engine.Attachment, error) {
	var items []json.RawMessage
	if jsonKind(raw) != "array" || json.Unmarshal(raw, &items) != nil {
		return nil, fmt.Errorf("attachments must be an array, got %s", jsonKind(raw))
	}
	atts := make([]engine.Attachment, 0, len(items))
	for i, item := range items {
		var obj map[string]json.RawMessage
		if jsonKind(item) != "object" || json.Unmarshal(item, &obj) != nil {
			return nil, fmt.Errorf("attachments[%d] must be an object with path and mime, got %s", i, jsonKind(item))
		}
		var a engine.Attachment
		path, ok := obj["path"]
		if !ok {
			return nil, fmt.Errorf("attachments[%d] has no path", i)
		}
		if decodeString(path, &a.Path) != nil {
			return nil, fmt.Errorf("attachments[%d].path must be a string, got %s", i, jsonKind(path))
		}
		if a.Path == "" {
			return nil, fmt.Errorf("attachments[%d].path is empty", i)
		}
		if m, ok := obj["mime"]; ok && jsonKind(m) != "null" {
			if decodeString(m, &a.MIME) != nil {
				return nil, fmt.Errorf("attachments[%d].mime must be a string, got %s", i, jsonKind(m))
			}
		}
		if a.MIME == "" {
			a.MIME = guessMIME(a.Path)
		}
		atts = append(atts, a)
	}
	return atts, nil
}

// guessMIME is the MIME type of path's extension, or
// application/octet-stream.
func guessMIME(path string) string {
	if t := mime.TypeByExtension(filepath.Ext(path)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// decodeString decodes raw into s; raw must be a JSON string.
func decodeString(raw json.RawMessage, s *string) error {
	if jsonKind(raw) != "string" {
		return errors.New("not a string")
	}
	return json.Unmarshal(raw, s)
}

// jsonKind names the kind of the JSON value raw holds, from its first
// non-space byte: object, array, string, number, boolean or null.
func jsonKind(raw []byte) string {
	s := bytes.TrimLeft(raw, " \t\r\n")
	if len(s) == 0 {
		return "nothing"
	}
	switch s[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

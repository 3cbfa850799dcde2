package ndjson

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/plexus-agent/plexus/engine"
)

func TestDecodeRequest(t *testing.T) {
	tests := []struct {
		name      string
		line      string
		want      request
		malformed bool
		errID     string
		errText   string
	}{
		{
			name: "contract user_message",
			line: `{"id":"req-uuid-123","kind":"user_message","message":"Hello, can you help me?","attachments":[{"path":"/path/to/file.txt","mime":"text/plain"}],"metadata":{"conversationId":"conv-456","userId":"user-789"}}`,
			want: request{ID: "req-uuid-123", Kind: "user_message", Message: "Hello, can you help me?",
				Attachments: []engine.Attachment{{Path: "/path/to/file.txt", MIME: "text/plain"}}, ConversationID: "conv-456"},
		},
		{name: "contract clear_history", line: `{"id":"req-uuid-124","kind":"clear_history"}`,
			want: request{ID: "req-uuid-124", Kind: "clear_history"}},
		{name: "contract get_status", line: `{"id":"req-uuid-125","kind":"get_status"}`,
			want: request{ID: "req-uuid-125", Kind: "get_status"}},
		{name: "get_status with conversation", line: `{"id":"s","kind":"get_status","metadata":{"conversationId":"c"}}`,
			want: request{ID: "s", Kind: "get_status", ConversationID: "c"}},
		{name: "null optionals", line: `{"id":"1","kind":"user_message","message":"hi","attachments":null,"metadata":null}`,
			want: request{ID: "1", Kind: "user_message", Message: "hi"}},
		{name: "null and empty conversationId", line: `{"id":"1","kind":"user_message","message":"hi","metadata":{"conversationId":null}}`,
			want: request{ID: "1", Kind: "user_message", Message: "hi"}},
		{name: "empty conversationId is the default", line: `{"id":"1","kind":"user_message","message":"hi","metadata":{"conversationId":""}}`,
			want: request{ID: "1", Kind: "user_message", Message: "hi"}},
		{name: "unknown fields ignored", line: `{"id":"1","kind":"get_status","extra":{"a":[1]},"message":5}`,
			want: request{ID: "1", Kind: "get_status"}},
		{name: "mime guessed", line: `{"id":"1","kind":"user_message","message":"hi","attachments":[{"path":"a.unknownext"},{"path":"b.txt","mime":null}]}`,
			want: request{ID: "1", Kind: "user_message", Message: "hi", Attachments: []engine.Attachment{
				{Path: "a.unknownext", MIME: "application/octet-stream"}, {Path: "b.txt", MIME: guessMIME("b.txt")}}}},
		{name: "surrounding whitespace", line: " \t{\"id\":\"1\",\"kind\":\"get_status\"} ",
			want: request{ID: "1", Kind: "get_status"}},

		{name: "truncated", line: `{"id":"1","kind":`, malformed: true},
		{name: "not JSON", line: `hello`, malformed: true},
		{name: "two values", line: `{"id":"1","kind":"get_status"}{}`, malformed: true},
		{name: "empty", line: ``, malformed: true},

		{name: "array", line: `[{"id":"1"}]`, errText: "a request must be a JSON object, got array"},
		{name: "null", line: `null`, errText: "a request must be a JSON object, got null"},
		{name: "string", line: `"get_status"`, errText: "a request must be a JSON object, got string"},
		{name: "number", line: `12`, errText: "a request must be a JSON object, got number"},
		{name: "missing id", line: `{"kind":"get_status"}`, errText: "request has no id; every request needs a string id"},
		{name: "numeric id", line: `{"id":7,"kind":"get_status"}`, errText: "request id must be a string, got number"},
		{name: "null id", line: `{"id":null,"kind":"get_status"}`, errText: "request id must be a string, got null"},
		{name: "empty id", line: `{"id":"","kind":"get_status"}`, errText: "request id is empty"},
		{name: "missing kind", line: `{"id":"k"}`, errID: "k",
			errText: "request has no kind; expected user_message, clear_history or get_status"},
		{name: "kind not a string", line: `{"id":"k","kind":["get_status"]}`, errID: "k", errText: "kind must be a string, got array"},
		{name: "unknown kind", line: `{"id":"k","kind":"shutdown"}`, errID: "k",
			errText: `unknown request kind "shutdown"; expected user_message, clear_history or get_status`},
		{name: "kind is case sensitive", line: `{"id":"k","kind":"User_Message","message":"hi"}`, errID: "k",
			errText: `unknown request kind "User_Message"; expected user_message, clear_history or get_status`},
		{name: "no message", line: `{"id":"m","kind":"user_message"}`, errID: "m", errText: "user_message has no message"},
		{name: "message not a string", line: `{"id":"m","kind":"user_message","message":{"text":"hi"}}`, errID: "m",
			errText: "message must be a string, got object"},
		{name: "blank message", line: `{"id":"m","kind":"user_message","message":" \n "}`, errID: "m", errText: "message is empty"},
		{name: "attachments not an array", line: `{"id":"a","kind":"user_message","message":"hi","attachments":"x.txt"}`, errID: "a",
			errText: "attachments must be an array, got string"},
		{name: "attachment not an object", line: `{"id":"a","kind":"user_message","message":"hi","attachments":["x.txt"]}`, errID: "a",
			errText: "attachments[0] must be an object with path and mime, got string"},
		{name: "attachment without path", line: `{"id":"a","kind":"user_message","message":"hi","attachments":[{"path":"a"},{"mime":"text/plain"}]}`, errID: "a",
			errText: "attachments[1] has no path"},
		{name: "attachment path not a string", line: `{"id":"a","kind":"user_message","message":"hi","attachments":[{"path":1}]}`, errID: "a",
			errText: "attachments[0].path must be a string, got number"},
		{name: "attachment path empty", line: `{"id":"a","kind":"user_message","message":"hi","attachments":[{"path":""}]}`, errID: "a",
			errText: "attachments[0].path is empty"},
		{name: "attachment mime not a string", line: `{"id":"a","kind":"user_message","message":"hi","attachments":[{"path":"x","mime":true}]}`, errID: "a",
			errText: "attachments[0].mime must be a string, got boolean"},
		{name: "metadata not an object", line: `{"id":"d","kind":"user_message","message":"hi","metadata":[]}`, errID: "d",
			errText: "metadata must be an object, got array"},
		{name: "conversationId not a string", line: `{"id":"d","kind":"clear_history","metadata":{"conversationId":12}}`, errID: "d",
			errText: "metadata.conversationId must be a string, got number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeRequest([]byte(tt.line))
			var malformed *malformedError
			var invalid *invalidError
			switch {
			case tt.malformed:
				if !errors.As(err, &malformed) {
					t.Fatalf("err = %v, want a malformed JSON error", err)
				}
			case tt.errText != "":
				if !errors.As(err, &invalid) {
					t.Fatalf("err = %v, want an invalid request error", err)
				}
				if invalid.ID != tt.errID || invalid.Msg != tt.errText {
					t.Errorf("got id %q error %q, want id %q error %q", invalid.ID, invalid.Msg, tt.errID, tt.errText)
				}
			default:
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("got %+v, want %+v", got, tt.want)
				}
			}
		})
	}
}

func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"id":"req-uuid-123","kind":"user_message","message":"Hello","attachments":[{"path":"/p/file.txt","mime":"text/plain"}],"metadata":{"conversationId":"conv-456","userId":"u"}}`,
		`{"id":"req-uuid-124","kind":"clear_history"}`,
		`{"id":"req-uuid-125","kind":"get_status","metadata":{"conversationId":"c"}}`,
		`{"id":"x","kind":"nope"}`,
		`{"id":7}`,
		`{"kind":"get_status"}`,
		`[1,2]`,
		`null`,
		`{"id":"a","kind":"user_message","message":"  "}`,
		`{"id":"a","kind":"user_message","message":"hi","attachments":[{"path":""}]}`,
		`{"id":"\u00e9\ud83d\ude00","kind":"user_message","message":"\u2028"}`,
		`{"id":"a",`,
		"{\"id\":\"\xff\",\"kind\":\"get_status\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		req, err := decodeRequest(line)
		var malformed *malformedError
		var invalid *invalidError
		switch {
		case err == nil:
		case errors.As(err, &malformed):
			if json.Valid(line) {
				t.Fatalf("valid JSON reported malformed: %v", err)
			}
			return
		case errors.As(err, &invalid):
			if !json.Valid(line) {
				t.Fatalf("malformed JSON reported as an invalid request: %v", err)
			}
			if invalid.Msg == "" {
				t.Fatal("empty error text")
			}
			// The error carries the request's id whenever it has a
			// non-empty string id.
			var obj map[string]any
			if json.Unmarshal(line, &obj) == nil {
				if id, ok := obj["id"].(string); ok && id != invalid.ID {
					t.Fatalf("error id %q, request id %q", invalid.ID, id)
				}
			}
			return
		default:
			t.Fatalf("unexpected error type %T: %v", err, err)
		}

		if req.ID == "" {
			t.Fatal("accepted a request without an id")
		}
		switch req.Kind {
		case kindUserMessage:
			if strings.TrimSpace(req.Message) == "" {
				t.Fatal("accepted a user_message without text")
			}
			for _, a := range req.Attachments {
				if a.Path == "" || a.MIME == "" {
					t.Fatalf("attachment without path or mime: %+v", a)
				}
			}
		case kindClearHistory, kindGetStatus:
			if req.Message != "" || req.Attachments != nil {
				t.Fatalf("%s carries user_message fields: %+v", req.Kind, req)
			}
		default:
			t.Fatalf("accepted kind %q", req.Kind)
		}

		// Encoding the decoded request and decoding it again gives it back.
		canon := map[string]any{"id": req.ID, "kind": req.Kind}
		if req.Kind == kindUserMessage {
			canon["message"] = req.Message
			if req.Attachments != nil {
				canon["attachments"] = req.Attachments
			}
		}
		if req.ConversationID != "" {
			canon["metadata"] = map[string]any{"conversationId": req.ConversationID}
		}
		b, err := json.Marshal(canon)
		if err != nil {
			t.Fatal(err)
		}
		again, err := decodeRequest(b)
		if err != nil {
			t.Fatalf("re-encoded request rejected: %v\n%s", err, b)
		}
		if !reflect.DeepEqual(again, req) {
			t.Fatalf("round trip: got %+v, want %+v", again, req)
		}
	})
}

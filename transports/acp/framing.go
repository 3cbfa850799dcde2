package acp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// DefaultMaxMessageBytes is the largest input line (one JSON-RPC message)
// Serve accepts when Options.MaxMessageBytes is zero: 8 MiB, under the
// SDK's own 10 MiB line buffer, so that no line the SDK cannot hold ever
// reaches it.
const DefaultMaxMessageBytes = 8 << 20

// JSON-RPC 2.0 error codes of the framing checks.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
)

// lineWriter writes whole lines to the output, one Write call each, under
// one lock: the SDK's messages and this package's error responses never
// interleave. after, when set, sees every line written, after it was
// written.
type lineWriter struct {
	mu    sync.Mutex
	w     io.Writer
	after func(line []byte)
}

func (lw *lineWriter) Write(p []byte) (int, error) {
	lw.mu.Lock()
	n, err := lw.w.Write(p)
	after := lw.after
	lw.mu.Unlock()
	if err == nil && after != nil {
		after(p)
	}
	return n, err
}

// rpcError is a JSON-RPC error response this package writes itself.
type rpcError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (lw *lineWriter) writeError(id json.RawMessage, code int, msg string) error {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	e := rpcError{JSONRPC: "2.0", ID: id}
	e.Error.Code, e.Error.Message = code, msg
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	_, err = lw.Write(append(b, '\n'))
	return err
}

// guard reads the client's input line by line and passes on, to w (the
// SDK's input), only lines that are one well-formed JSON-RPC 2.0 message.
// It answers the others itself, on out, as the SDK would not (it logs and
// drops a line that is not JSON, and ends the connection on a line longer
// than its buffer):
//
//   - a line that is not JSON: -32700, id null;
//   - a line over max bytes: -32600, id null, without holding the line in
//     memory;
//   - JSON that is not one JSON-RPC 2.0 message (a batch, a scalar, a
//     "jsonrpc" other than "2.0", an id that is not a string, number or
//     null, a method that is not a non-empty string, params that are not
//     an object or array, neither a method nor a result or error): -32600,
//     with the message's id when it has a usable one and is a request.
//
// Blank lines are skipped. guard returns when the input ends (nil) or
// fails, or when writing to w fails; it closes w either way, which ends
// the SDK's connection.
func guard(in io.Reader, w io.WriteCloser, out *lineWriter, max int) error {
	defer w.Close()
	br := bufio.NewReaderSize(in, 64<<10)
	for {
		line, tooLong, err := readLine(br, max)
		if len(line) > 0 || tooLong > 0 {
			if tooLong > 0 {
				msg := fmt.Sprintf("the message is %d bytes or more, over the limit of %d bytes; it was skipped", tooLong, max)
				if werr := out.writeError(nil, codeInvalidRequest, msg); werr != nil {
					return werr
				}
			} else if len(bytes.TrimSpace(line)) > 0 {
				if id, code, msg := check(line); code != 0 {
					if werr := out.writeError(id, code, msg); werr != nil {
						return werr
					}
				} else if _, werr := w.Write(append(line, '\n')); werr != nil {
					return werr
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// readLine reads one line without its "\n" (and "\r"). A line longer than
// max is read to its end and dropped: tooLong is then the number of bytes
// read (at least max+1) and line is nil. err is the reader's (io.EOF at
// the end of the input, possibly with a last unterminated line).
func readLine(br *bufio.Reader, max int) (line []byte, tooLong int, err error) {
	for {
		chunk, isPrefix, rerr := br.ReadLine()
		if tooLong > 0 {
			tooLong += len(chunk)
		} else if len(line)+len(chunk) > max {
			tooLong = len(line) + len(chunk)
			line = nil
		} else {
			line = append(line, chunk...)
		}
		if rerr != nil {
			return line, tooLong, rerr
		}
		if !isPrefix {
			return line, tooLong, nil
		}
	}
}

// check validates one line as a JSON-RPC 2.0 message. code is 0 for a good
// one; otherwise id (nil for null), code and msg make the error response.
func check(line []byte) (id json.RawMessage, code int, msg string) {
	if !json.Valid(line) {
		var v any
		err := json.Unmarshal(line, &v)
		return nil, codeParseError, "the message is not valid JSON: " + jsonErrText(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		kind := "a JSON " + jsonKind(bytes.TrimSpace(line))
		if kind == "a JSON array" {
			kind = "a batch (a JSON array); ACP sends one message per line"
		}
		return nil, codeInvalidRequest, fmt.Sprintf("the message is %s, not a JSON-RPC 2.0 object", kind)
	}
	rawID, hasID := m["id"]
	if hasID {
		switch jsonKind(rawID) {
		case "string", "number", "null":
		default:
			return nil, codeInvalidRequest, fmt.Sprintf("id must be a string, a number or null, not a JSON %s", jsonKind(rawID))
		}
	}
	method, hasMethod := m["method"]
	reply := func(msg string) (json.RawMessage, int, string) {
		if hasID && hasMethod {
			return rawID, codeInvalidRequest, msg
		}
		return nil, codeInvalidRequest, msg
	}
	var version string
	if err := json.Unmarshal(m["jsonrpc"], &version); err != nil || version != "2.0" {
		return reply(`"jsonrpc" must be "2.0"`)
	}
	if hasMethod {
		var name string
		if err := json.Unmarshal(method, &name); err != nil || name == "" {
			return reply("method must be a non-empty string")
		}
		if p, ok := m["params"]; ok {
			if k := jsonKind(p); k != "object" && k != "array" && k != "null" {
				return reply(fmt.Sprintf("params must be an object, not a JSON %s", k))
			}
		}
		if _, ok := m["result"]; ok {
			return reply("a request or notification has no result")
		}
		if _, ok := m["error"]; ok {
			return reply("a request or notification has no error")
		}
		return nil, 0, ""
	}
	_, hasResult := m["result"]
	_, hasError := m["error"]
	if !hasID || hasResult == hasError {
		return nil, codeInvalidRequest, "the message is neither a request or notification (no method) nor a response (an id and one of result or error)"
	}
	return nil, 0, ""
}

// jsonKind names the kind of a JSON value by its first byte.
func jsonKind(v []byte) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
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

// jsonErrText is a JSON syntax error with its byte offset.
func jsonErrText(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%v (at byte %d)", se, se.Offset)
	}
	if err == nil {
		return "unknown error"
	}
	return err.Error()
}

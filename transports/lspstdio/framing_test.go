package lspstdio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

func frame(body string) string { return fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body) }

// probe is a shutdown request (id 99): answered only if the framing
// survived what came before it.
var probe = frame(`{"jsonrpc":"2.0","id":99,"method":"shutdown"}`)

type wantErr struct {
	code int
	id   string // the response's id as JSON
	text string // a part of the message
}

// TestFramingErrors feeds malformed input and checks each gets the right
// error response (in order), and that the server either goes on (the
// probe after it is answered and Serve returns nil) or stops with a
// FramingError.
func TestFramingErrors(t *testing.T) {
	big := strings.Repeat(" ", 2000)
	cases := []struct {
		name  string
		input string
		want  []wantErr
		// stops: the framing is lost; the probe is not answered and Serve
		// returns a *FramingError.
		stops bool
	}{
		// The framing survives these.
		{name: "invalid JSON", input: frame(`{"jsonrpc":`), want: []wantErr{{-32700, "null", "the message is not valid JSON: unexpected end of JSON input"}}},
		{name: "trailing garbage", input: frame(`{"jsonrpc":"2.0","method":"exit"}X`), want: []wantErr{{-32700, "null", "invalid character 'X' after top-level value"}}},
		{name: "empty body", input: "Content-Length: 0\r\n\r\n", want: []wantErr{{-32700, "null", "not valid JSON"}}},
		{name: "not an object", input: frame(`42`), want: []wantErr{{-32600, "null", "must be a JSON object"}}},
		{name: "method not a string", input: frame(`{"jsonrpc":"2.0","id":7,"method":1}`), want: []wantErr{{-32600, "7", `"method" must be a non-empty string`}}},
		{name: "method empty", input: frame(`{"jsonrpc":"2.0","method":""}`), want: []wantErr{{-32600, "null", `"method" must be a non-empty string`}}},
		{name: "jsonrpc not a string", input: frame(`{"jsonrpc":2,"id":"a","method":"x"}`), want: []wantErr{{-32600, `"a"`, `"jsonrpc" must be "2.0"`}}},
		{name: "no jsonrpc", input: frame(`{"id":8,"method":"shutdown"}`), want: []wantErr{{-32600, "8", `"jsonrpc" must be "2.0"`}}},
		{name: "wrong version notification", input: frame(`{"jsonrpc":"1.0","method":"exit"}`), want: []wantErr{{-32600, "null", `"jsonrpc" must be "2.0"`}}},
		{name: "wrong version", input: frame(`{"jsonrpc":"1.0","id":9,"method":"shutdown"}`), want: []wantErr{{-32600, "9", `"jsonrpc" must be "2.0"`}}},
		{name: "params a scalar", input: frame(`{"jsonrpc":"2.0","id":10,"method":"executeTask","params":3}`), want: []wantErr{{-32600, "10", `"params" must be an object or an array`}}},
		{name: "params an array", input: frame(`{"jsonrpc":"2.0","id":10,"method":"executeTask","params":[1]}`), want: []wantErr{{-32602, "10", "params must be an object"}}},
		{name: "unknown method", input: frame(`{"jsonrpc":"2.0","id":11,"method":"nope"}`), want: []wantErr{{-32601, "11", ""}}},
		{name: "rpc method", input: frame(`{"jsonrpc":"2.0","id":11,"method":"rpc.serverInfo"}`), want: []wantErr{{-32601, "11", ""}}},
		{name: "unknown notification", input: frame(`{"jsonrpc":"2.0","method":"$/setTrace","params":{"value":"off"}}`)},
		{name: "empty batch", input: frame(`[]`), want: []wantErr{{-32600, "null", "batches are not supported"}}},
		{name: "batch", input: frame(`[{"jsonrpc":"2.0","id":1,"method":"shutdown"}]`), want: []wantErr{{-32600, "null", "batches are not supported"}}},
		{name: "extra member", input: frame(`{"jsonrpc":"2.0","id":14,"method":"shutdown","x":1}`), want: []wantErr{{-32600, "14", `unknown member "x"`}}},
		{name: "request with result", input: frame(`{"jsonrpc":"2.0","id":15,"method":"shutdown","result":1}`), want: []wantErr{{-32600, "15", `a request cannot have "result"`}}},
		{name: "id an object", input: frame(`{"jsonrpc":"2.0","id":{},"method":"x"}`), want: []wantErr{{-32600, "null", `"id" must be a string or a number`}}},
		{name: "stray response", input: frame(`{"jsonrpc":"2.0","id":12,"result":1}`)},
		{name: "stray error response", input: frame(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}`)},
		{name: "neither request nor response", input: frame(`{"jsonrpc":"2.0","id":13}`), want: []wantErr{{-32600, "13", "a message needs a method"}}},
		{name: "too large", input: fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(big), big), want: []wantErr{{-32600, "null", "a message of 2000 bytes exceeds the limit of 1024 bytes"}}},
		{name: "unsupported charset", input: "Content-Type: application/vscode-jsonrpc; charset=latin1\r\n" + frame(`{}`), want: []wantErr{{-32700, "null", `charset "latin1" is not supported`}}},
		{name: "bare LF line endings", input: "Content-Length: 2\n\n{}", want: []wantErr{{-32600, "null", "a message needs a method"}}},
		{name: "blank lines between messages", input: "\r\n\r\n"},
		{name: "header names in any case", input: "content-length: 2\r\nCONTENT-TYPE: application/json\r\nX-Other: 1\r\n\r\n{}", want: []wantErr{{-32600, "null", ""}}},

		// These break the framing.
		{name: "header line without colon", input: "Content-Length 5\r\n\r\nhello", stops: true,
			want: []wantErr{{-32700, "null", `header line "Content-Length 5" has no colon`}}},
		{name: "Content-Length not a number", input: "Content-Length: five\r\n\r\n", stops: true,
			want: []wantErr{{-32700, "null", `Content-Length "five" is not a byte count`}}},
		{name: "negative Content-Length", input: "Content-Length: -1\r\n\r\n", stops: true,
			want: []wantErr{{-32700, "null", "is not a byte count"}}},
		{name: "no Content-Length", input: "Content-Type: application/vscode-jsonrpc\r\n\r\n{}", stops: true,
			want: []wantErr{{-32700, "null", "a header block has no Content-Length"}}},
		{name: "two Content-Lengths", input: "Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}", stops: true,
			want: []wantErr{{-32700, "null", "two Content-Length headers disagree"}}},
		{name: "header block too long", input: "X-Pad: " + strings.Repeat("a", 9000) + "\r\n", stops: true,
			want: []wantErr{{-32700, "null", "a header block is longer than 8192 bytes"}}},
		{name: "Content-Length too short", input: "Content-Length: 10\r\n\r\n" + `{"jsonrpc":"2.0","id":1,"method":"shutdown"}` + "\r\n", stops: true,
			want: []wantErr{{-32700, "null", ""}, {-32700, "null", "does not start with a header name"}}},
		{name: "Content-Length too long", input: fmt.Sprintf("Content-Length: %d\r\n\r\n{}", 2+5), stops: true,
			// The probe's first 5 bytes complete the body; the rest of the
			// probe has no Content-Length header.
			want: []wantErr{{-32700, "null", ""}, {-32700, "null", "a header block has no Content-Length"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, &scriptModel{}, func(o *Options) { o.MaxMessageBytes = 1024 })
			h.writeRaw(tc.input + probe)
			if tc.stops {
				h.in.Close() // the probe cannot be answered: end the input
			}
			var err error
			select {
			case err = <-h.done:
				h.done <- err
			case <-time.After(waitTimeout):
				t.Fatalf("Serve did not return; messages:\n%s", dump(h.snapshot()))
			}
			h.waitFor("the end of the output", func([]msg) bool { h.mu.Lock(); defer h.mu.Unlock(); return h.closed })
			ms := h.snapshot()
			var got []msg
			answered := false
			for _, m := range ms {
				switch {
				case m.isResponse() && string(m.ID) == "99" && m.Error == nil:
					answered = true
				case m.Error != nil:
					got = append(got, m)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d error responses, want %d:\n%s", len(got), len(tc.want), dump(ms))
			}
			for i, w := range tc.want {
				if int(got[i].Error.Code) != w.code || string(got[i].ID) != w.id || !strings.Contains(got[i].Error.Message, w.text) {
					t.Errorf("error %d = %s, want code %d id %s text %q", i, got[i].raw, w.code, w.id, w.text)
				}
			}
			var fe *FramingError
			switch {
			case tc.stops && (answered || !errors.As(err, &fe)):
				t.Errorf("answered %v, Serve: %v; want the probe unanswered and a FramingError", answered, err)
			case !tc.stops && (!answered || err != nil):
				t.Errorf("answered %v, Serve: %v; want the probe answered and nil", answered, err)
			}
		})
	}
}

// TestTruncatedInput: the input ends inside a header or a body: a -32700
// error, and Serve returns a FramingError; at a message boundary it
// returns nil.
func TestTruncatedInput(t *testing.T) {
	cases := []struct {
		input string
		text  string // "" for a clean end
	}{
		{"", ""},
		{frame(`{"jsonrpc":"2.0","method":"$/setTrace"}`), ""},
		// Blank lines then the end: a clean end.
		{frame(`{"jsonrpc":"2.0","method":"$/setTrace"}`) + "\r\n", ""},
		{frame(`{"jsonrpc":"2.0","method":"$/setTrace"}`) + "\n\r\n\n", ""},
		{"\r\n", ""},
		{"Content-Length: 5", "the input ended inside a header line"},
		{"Content-Length: 5\r\n", "the input ended inside a header block"},
		{"\r\nContent-Length: 5\r\n", "the input ended inside a header block"},
		{"Content-Length: 100\r\n\r\n{\"jsonrpc\":", "the input ended 11 bytes into a message of 100 bytes"},
	}
	for _, tc := range cases {
		out := &syncBuffer{}
		eng, ws := newEngine(t, &scriptModel{})
		err := New(Options{Engine: eng, Workspace: ws}).Serve(context.Background(), strings.NewReader(tc.input), out)
		msgs, ferr := parseFrames([]byte(out.String()))
		if ferr != nil {
			t.Fatalf("%q: output: %v", tc.input, ferr)
		}
		var fe *FramingError
		if tc.text == "" {
			if err != nil || len(msgs) != 0 {
				t.Errorf("%q: Serve %v, output %q", tc.input, err, out.String())
			}
			continue
		}
		if !errors.As(err, &fe) || !strings.Contains(fe.Msg, tc.text) {
			t.Errorf("%q: Serve: %v, want %q", tc.input, err, tc.text)
		}
		if len(msgs) != 1 || msgs[0].Error == nil || msgs[0].Error.Code != -32700 || !strings.Contains(msgs[0].Error.Message, tc.text) {
			t.Errorf("%q: output %q", tc.input, out.String())
		}
	}
}

// parseFrames splits output into messages, strictly: every frame is
// Content-Type (jrpc2's) and Content-Length headers, CRLF, and a JSON-RPC
// 2.0 message of that many bytes.
func parseFrames(out []byte) ([]msg, error) {
	var msgs []msg
	rd := bufio.NewReader(bytes.NewReader(out))
	for {
		line, err := rd.ReadString('\n')
		if err == io.EOF && line == "" {
			return msgs, nil
		}
		if line != "Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n" {
			return msgs, fmt.Errorf("frame %d: header %q", len(msgs), line)
		}
		line, _ = rd.ReadString('\n')
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(line, "Content-Length: "), "\r\n"))
		if err != nil || !strings.HasPrefix(line, "Content-Length: ") {
			return msgs, fmt.Errorf("frame %d: header %q", len(msgs), line)
		}
		if line, _ = rd.ReadString('\n'); line != "\r\n" {
			return msgs, fmt.Errorf("frame %d: %q after the headers", len(msgs), line)
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(rd, body); err != nil {
			return msgs, fmt.Errorf("frame %d: body: %v", len(msgs), err)
		}
		var m msg
		if err := json.Unmarshal(body, &m); err != nil || m.JSONRPC != "2.0" {
			return msgs, fmt.Errorf("frame %d: not JSON-RPC 2.0: %q", len(msgs), body)
		}
		m.raw = string(body)
		msgs = append(msgs, m)
	}
}

// codes are the error codes the server may answer with.
var codes = []int{-32700, -32600, -32601, -32602, -32000, -32001, -32002, -32003, -32004}

// serverMethods are the methods the server may send.
var serverMethods = []string{"$/logMessage", "$/statusUpdate", "$/partialResult", "$/requestToolExecution", "$/taskError"}

// checkOutput checks that out is nothing but well-formed frames of valid
// JSON-RPC messages the server may send.
func checkOutput(t *testing.T, out []byte) []msg {
	t.Helper()
	msgs, err := parseFrames(out)
	if err != nil {
		t.Fatalf("%v\noutput:\n%q", err, out)
	}
	for _, m := range msgs {
		var obj map[string]json.RawMessage
		json.Unmarshal([]byte(m.raw), &obj)
		switch {
		case m.Method != "":
			if !slices.Contains(serverMethods, m.Method) || jsonKind(m.Params) != '{' || (m.Method == "$/requestToolExecution") != (len(m.ID) > 0) {
				t.Fatalf("unexpected server message %s", m.raw)
			}
		case m.Error != nil:
			if _, ok := obj["result"]; ok || !slices.Contains(codes, int(m.Error.Code)) || m.Error.Message == "" {
				t.Fatalf("bad error response %s", m.raw)
			}
			if k := jsonKind(m.ID); k != 'n' && !validID(m.ID) {
				t.Fatalf("bad id %s", m.raw)
			}
		default:
			if _, ok := obj["result"]; !ok || !validID(m.ID) {
				t.Fatalf("bad response %s", m.raw)
			}
		}
	}
	return msgs
}

// anyModel answers every prompt with "ok", except "Use the buffer." which
// calls read_buffer first.
type anyModel struct{}

func (anyModel) ListModels(context.Context) ([]engine.ModelInfo, error) {
	return []engine.ModelInfo{{Name: "test"}}, nil
}

func (anyModel) Embed(context.Context, engine.EmbedRequest) (engine.EmbedResponse, error) {
	return engine.EmbedResponse{}, engine.ErrUnsupported
}

func (anyModel) Chat(ctx context.Context, req engine.ChatRequest, onChunk func(engine.ChatChunk) error) error {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == engine.RoleUser && strings.HasPrefix(last.Content, "Use the buffer.") {
		return onChunk(call("c1", "read_buffer", `{"path":"main.go"}`))
	}
	return onChunk(text("ok"))
}

// syncWriter is a bytes.Buffer safe for concurrent use.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// FuzzLSPInput feeds arbitrary bytes to Serve's input: malformed headers,
// wrong Content-Length, truncated and oversized messages, invalid JSON and
// JSON-RPC. Serve must not panic, must return within 10 s of the end of
// the input (nil or a FramingError), and must write nothing but
// well-formed frames of valid messages with the contract's error codes.
func FuzzLSPInput(f *testing.F) {
	conv := frame(`{"jsonrpc":"2.0","method":"initialize","params":{"initialConfig":{"hostToolTimeoutMs":50},"workspaceRoot":null,"environment":{}}}`) +
		frame(`{"jsonrpc":"2.0","id":1,"method":"executeTask","params":{"taskId":"t1","prompt":"Hi.","context":{"openFiles":["main.go"],"selection":"x"}}}`) +
		frame(`{"jsonrpc":"2.0","id":2,"method":"executeTask","params":{"taskId":"t2","prompt":"Use the buffer.","context":null}}`) +
		frame(`{"jsonrpc":"2.0","id":3,"method":"toolResponse","params":{"toolCallId":"tc_x","result":null,"error":null}}`) +
		frame(`{"jsonrpc":"2.0","method":"updateConfiguration","params":{"updatedConfig":{"model":"script:test"}}}`) +
		frame(`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":1}}`) +
		frame(`{"jsonrpc":"2.0","id":4,"method":"shutdown"}`)
	for _, s := range []string{
		"", conv, probe, conv[:len(conv)/2],
		frame(`{"jsonrpc":`), frame(`42`), frame(`[]`), frame(`[1,{"jsonrpc":"2.0","method":"exit"}]`),
		frame(`{"jsonrpc":"2.0","id":7,"method":1}`), frame(`{"jsonrpc":"2.0","id":{},"method":"x"}`),
		frame(`{"jsonrpc":"2.0","id":12,"result":1}`), frame(`{"jsonrpc":"2.0","id":12,"error":"x"}`),
		"Content-Length 5\r\n\r\nhello", "Content-Length: five\r\n\r\n", "Content-Length: 99999999999999\r\n\r\n{}",
		"Content-Length: -1\r\n\r\n", "Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}", "Content-Length: 5000\r\n\r\n{}",
		"Content-Type: text/plain; charset=latin1\r\nContent-Length: 2\r\n\r\n{}", "Content-Length: 2\n\n{}",
		"X-Pad: " + strings.Repeat("a", 9000) + "\r\n",
	} {
		f.Add([]byte(s))
	}
	eng, ws := newEngine(f, anyModel{})
	f.Fuzz(func(t *testing.T, data []byte) {
		out := &syncWriter{}
		srv := New(Options{Engine: eng, Workspace: ws, MaxMessageBytes: 4096, ShutdownGrace: 5 * time.Second})
		done := make(chan error, 1)
		go func() { done <- srv.Serve(context.Background(), bytes.NewReader(data), out) }()
		var err error
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("Serve did not return for input %q", data)
		}
		var fe *FramingError
		if err != nil && !errors.As(err, &fe) {
			t.Fatalf("Serve: %v", err)
		}
		out.mu.Lock()
		defer out.mu.Unlock()
		checkOutput(t, out.b.Bytes())
	})
}

// TestClassifyDoesNotCopyParams: classify keeps no copy of a message's
// params (or result): a 1 MiB message costs it a few small allocations.
func TestClassifyDoesNotCopyParams(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"executeTask","params":{"taskId":"t","prompt":"` + big + `"}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"content":"` + big + `"}}`,
	} {
		b := []byte(body)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		const n = 5
		for range n {
			if v := classify(b, func(json.RawMessage) bool { return true }); v.action != pass {
				t.Fatalf("verdict %+v", v)
			}
		}
		runtime.ReadMemStats(&after)
		if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 64<<10 {
			t.Errorf("classify allocated %d bytes for a message of %d bytes", per, len(b))
		}
	}
}

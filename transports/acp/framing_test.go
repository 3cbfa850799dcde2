package acp

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// runGuard passes input through guard and returns what reached the SDK
// and what was answered.
func runGuard(t testing.TB, input string, max int) (passed, answered []string) {
	pr, pw := io.Pipe()
	var out bytes.Buffer
	lw := &lineWriter{w: &out}
	done := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(pr)
		done <- b
	}()
	if err := guard(strings.NewReader(input), pw, lw, max); err != nil {
		t.Fatalf("guard: %v", err)
	}
	for _, l := range strings.Split(strings.TrimSuffix(string(<-done), "\n"), "\n") {
		if l != "" {
			passed = append(passed, l)
		}
	}
	for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		if l != "" {
			answered = append(answered, l)
		}
	}
	return passed, answered
}

func TestGuard(t *testing.T) {
	good := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`
	for _, c := range []struct {
		name, input string
		passed      int
		code        int
		id          string
	}{
		{"request", good + "\n", 1, 0, ""},
		{"crlf and blank lines", "\r\n\n" + good + "\r\n  \n", 1, 0, ""},
		{"last line without newline", good, 1, 0, ""},
		{"response", `{"jsonrpc":"2.0","id":3,"result":null}` + "\n", 1, 0, ""},
		{"notification", `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}` + "\n", 1, 0, ""},
		{"not json", "{oops\n", 0, -32700, "null"},
		{"batch", "[" + good + "]\n", 0, -32600, "null"},
		{"string", `"x"` + "\n", 0, -32600, "null"},
		{"old version", `{"jsonrpc":"1.0","id":2,"method":"x"}` + "\n", 0, -32600, "2"},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"x"}` + "\n", 0, -32600, "null"},
		{"empty method", `{"jsonrpc":"2.0","id":"a","method":""}` + "\n", 0, -32600, `"a"`},
		{"scalar params", `{"jsonrpc":"2.0","id":4,"method":"x","params":3}` + "\n", 0, -32600, "4"},
		{"method and result", `{"jsonrpc":"2.0","id":5,"method":"x","result":1}` + "\n", 0, -32600, "5"},
		{"nothing", `{"jsonrpc":"2.0"}` + "\n", 0, -32600, "null"},
		{"result and error", `{"jsonrpc":"2.0","id":6,"result":1,"error":{}}` + "\n", 0, -32600, "null"},
		{"too long", `{"jsonrpc":"2.0","method":"x","params":{"a":"` + strings.Repeat("b", 300) + `"}}` + "\n" + good + "\n", 1, -32600, "null"},
	} {
		t.Run(c.name, func(t *testing.T) {
			passed, answered := runGuard(t, c.input, 200)
			if len(passed) != c.passed {
				t.Errorf("passed %q", passed)
			}
			if c.code == 0 {
				if len(answered) != 0 {
					t.Errorf("answered %q", answered)
				}
				return
			}
			if len(answered) != 1 {
				t.Fatalf("answered %q", answered)
			}
			var e struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(answered[0]), &e); err != nil || e.JSONRPC != "2.0" || e.Error.Code != c.code || string(e.ID) != c.id || e.Error.Message == "" {
				t.Errorf("answer %s (%v)", answered[0], err)
			}
		})
	}
}

// FuzzGuard checks that guard never fails on any input, passes on only
// lines that are one JSON-RPC object, and answers every other non-blank
// line with one valid JSON error response.
func FuzzGuard(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`,
		`{"jsonrpc":"2.0","id":1,"result":{}}`, `[1]`, `{`, `null`, `{"jsonrpc":"2.0","id":null,"method":"x"}`,
		"\xff\xfe", `{"jsonrpc":"2.0","id":1e400,"method":"x"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		line = strings.NewReplacer("\n", " ", "\r", " ").Replace(line)
		passed, answered := runGuard(t, line+"\n", 1024)
		if strings.TrimSpace(line) == "" {
			if len(passed)+len(answered) != 0 {
				t.Fatalf("blank line produced %q %q", passed, answered)
			}
			return
		}
		if len(passed)+len(answered) != 1 {
			t.Fatalf("line %q: passed %q answered %q", line, passed, answered)
		}
		for _, p := range passed {
			var m map[string]json.RawMessage
			if err := json.Unmarshal([]byte(p), &m); err != nil {
				t.Fatalf("passed a line that is not a JSON object: %q", p)
			}
		}
		for _, a := range answered {
			var m map[string]json.RawMessage
			if err := json.Unmarshal([]byte(a), &m); err != nil || m["error"] == nil {
				t.Fatalf("answer is not an error response: %q", a)
			}
		}
	})
}

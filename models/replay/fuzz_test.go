package replay

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func FuzzDecodeStep(f *testing.F) {
	for _, path := range []string{filepath.Join("..", "..", "examples", "replay", "tour.jsonl"), filepath.Join("testdata", "hello.jsonl")} {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		for _, line := range bytes.Split(data, []byte("\n")) {
			f.Add(line)
		}
	}
	for _, s := range []string{
		`{}`, `null`, `[]`, `{"text": "a"} x`, `{"error": {"kind": "invalid", "message": "m"}}`,
		`{"tool_calls": [{"name": "x", "arguments": "raw {"}]}`, `{"text": "{{ .Results }}"}`,
		`{"usage": {"prompt_tokens": 1e3}}`, `{"text": "\ud800"}`, "{\"text\": \"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		st, err := DecodeStep(line)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		out, err := st.MarshalLine()
		if err != nil {
			t.Fatalf("MarshalLine of an accepted step: %v", err)
		}
		if bytes.ContainsRune(out, '\n') {
			t.Fatalf("MarshalLine produced several lines: %q", out)
		}
		again, err := DecodeStep(out)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", out, err)
		}
		out2, err := again.MarshalLine()
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("round trip is not stable:\n%s\n%s (%v)", out, out2, err)
		}
		for _, c := range st.ToolCalls {
			if len(c.args()) == 0 {
				t.Fatalf("call %s replays empty arguments", c.Name)
			}
		}
	})
}

func FuzzSplitPieces(f *testing.F) {
	for _, s := range []string{"", "Hello, world.", "  a\n\nb  ", strings.Repeat("x", 40), "ééééééééé", "\xff\xfe abc"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		pieces := splitPieces(s)
		if got := strings.Join(pieces, ""); got != s {
			t.Fatalf("pieces join to %q, want %q", got, s)
		}
		for _, p := range pieces {
			if p == "" {
				t.Fatal("empty piece")
			}
			if _, n := utf8.DecodeRuneInString(p); len(p) > maxPieceBytes && n != len(p) {
				t.Fatalf("piece %q is %d bytes, over %d", p, len(p), maxPieceBytes)
			}
		}
	})
}

func FuzzEscapeTemplate(f *testing.F) {
	for _, s := range []string{"", "{{", "{{{", "a {{ .X }} b", "}}{{", `{{"{{"}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return // JSON encoding replaces invalid UTF-8; the recorder inherits that
		}
		st := Step{Text: escapeTemplate(s), DoneReason: "stop"}
		line, err := st.MarshalLine()
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeStep(line)
		if err != nil {
			t.Fatalf("escaped text %q does not decode: %v", st.Text, err)
		}
		got, err := back.render(TemplateData{})
		if err != nil || got != s {
			t.Fatalf("escaped %q renders as %q (%v)", s, got, err)
		}
	})
}

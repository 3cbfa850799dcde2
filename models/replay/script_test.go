package replay

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDecodeStepAccepts(t *testing.T) {
	tests := []struct {
		name string
		line string
		want func(t *testing.T, st Step)
	}{
		{"text", `{"text": "Hello."}`, func(t *testing.T, st Step) {
			if st.Text != "Hello." {
				t.Errorf("Text = %q", st.Text)
			}
		}},
		{"tool call without arguments", `{"tool_calls": [{"name": "list_files"}]}`, func(t *testing.T, st Step) {
			if got := string(st.ToolCalls[0].args()); got != "{}" {
				t.Errorf("args = %s, want {}", got)
			}
		}},
		{"null arguments", `{"tool_calls": [{"name": "x", "arguments": null}]}`, func(t *testing.T, st Step) {
			if st.ToolCalls[0].Arguments != nil {
				t.Errorf("Arguments = %s, want nil", st.ToolCalls[0].Arguments)
			}
		}},
		{"arguments compacted", `{"tool_calls": [{"name": "x", "arguments": { "a" : [1, 2] }}]}`, func(t *testing.T, st Step) {
			if got := string(st.ToolCalls[0].Arguments); got != `{"a":[1,2]}` {
				t.Errorf("Arguments = %s", got)
			}
		}},
		{"raw string arguments", `{"tool_calls": [{"name": "x", "arguments": "{\"a\": 1"}]}`, func(t *testing.T, st Step) {
			if got := string(st.ToolCalls[0].args()); got != `{"a": 1` {
				t.Errorf("args = %s", got)
			}
		}},
		{"usage and done reason", `{"text": "a", "usage": {"prompt_tokens": 10, "completion_tokens": 2}, "done_reason": "length"}`, func(t *testing.T, st Step) {
			if st.Usage.PromptTokens != 10 || st.Usage.CompletionTokens != 2 || st.DoneReason != "length" {
				t.Errorf("got %+v %q", st.Usage, st.DoneReason)
			}
		}},
		{"empty reply", `{"done_reason": "stop"}`, nil},
		{"error", `{"error": {"kind": "unavailable", "message": "server down"}, "delay_ms": 5}`, func(t *testing.T, st Step) {
			if st.Error.sentinel() == nil {
				t.Error("no sentinel")
			}
		}},
		{"template", `{"text": "{{ count .Results }} results"}`, func(t *testing.T, st Step) {
			if st.tmpl == nil {
				t.Error("template not parsed")
			}
		}},
		{"trailing spaces and CR", "{\"text\": \"a\"}  \r", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := DecodeStep([]byte(tt.line))
			if err != nil {
				t.Fatalf("DecodeStep: %v", err)
			}
			if tt.want != nil {
				tt.want(t, st)
			}
		})
	}
}

func TestDecodeStepRejects(t *testing.T) {
	tests := []struct {
		line string
		want string // substring of the error
	}{
		{`{"text": "a"`, "not complete JSON"},
		{`{"text": "a"} {"text": "b"}`, "unexpected text after the JSON object"},
		{`[1, 2]`, "must be a JSON object"},
		{`"hello"`, "must be a JSON object"},
		{`null`, "must be a JSON object"},
		{`{}`, "the step is empty"},
		{`{"txt": "a"}`, `unknown field "txt"`},
		{`{"text": 5}`, "field text: got a JSON number, want a string"},
		{`{"tool_calls": {"name": "x"}}`, "field tool_calls: got a JSON object, want an array"},
		{`{"tool_calls": [{"arguments": {}}]}`, "tool_calls[0]: name"},
		{`{"tool_calls": [{"name": "a\u0001b"}]}`, "is not a tool name"},
		{`{"tool_calls": [{"name": "x", "arguments": [1]}]}`, "tool_calls[0] (x): arguments must be a JSON object"},
		{`{"tool_calls": [{"name": "x", "argument": {}}]}`, `unknown field "argument"`},
		{`{"text": "a", "delay_ms": -1}`, "delay_ms is -1"},
		{`{"text": "a", "delay_ms": 60001}`, "delay_ms is 60001"},
		{`{"text": "a", "usage": {"prompt_tokens": -3}}`, "negative count"},
		{`{"text": "a", "done_reason": "all done!"}`, `done_reason "all done!"`},
		{`{"error": {"kind": "boom", "message": "x"}}`, `error.kind is "boom"; it must be one of not_found, unsupported, unavailable, invalid`},
		{`{"error": {"kind": "invalid", "message": " "}}`, "error.message is empty"},
		{`{"error": {"kind": "invalid", "message": "x"}, "text": "a"}`, "cannot also have text"},
		{`{"text": "{{ .Results "}`, "text: template"},
		{`{"text": "{{ nosuchfunc 1 }}"}`, `function "nosuchfunc" not defined`},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			_, err := DecodeStep([]byte(tt.line))
			if err == nil {
				t.Fatalf("DecodeStep accepted %s", tt.line)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestParseScriptNamesFileAndLine(t *testing.T) {
	src := "{\"text\": \"one\"}\n\n   \n{\"text\": \"two\"}\r\n{\"txt\": \"three\"}\n"
	_, err := ParseScript("demo.jsonl", strings.NewReader(src))
	var se *ScriptError
	if !errors.As(err, &se) {
		t.Fatalf("err = %v, want *ScriptError", err)
	}
	if se.Line != 5 || !strings.HasPrefix(err.Error(), "demo.jsonl:5: unknown field \"txt\"") {
		t.Errorf("err = %q (line %d), want demo.jsonl:5: unknown field ...", err, se.Line)
	}

	s, err := ParseScript("ok.jsonl", strings.NewReader(src[:strings.LastIndex(src, "{")]))
	if err != nil {
		t.Fatal(err)
	}
	if got := []int{s.Steps[0].Line, s.Steps[1].Line}; got[0] != 1 || got[1] != 4 {
		t.Errorf("lines = %v, want [1 4]", got)
	}
}

func TestParseScriptEmpty(t *testing.T) {
	_, err := ParseScript("empty.jsonl", strings.NewReader("\n  \n"))
	if err == nil || !strings.Contains(err.Error(), "empty.jsonl: the script has no steps") {
		t.Errorf("err = %v", err)
	}
}

func TestLoadScriptMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.jsonl")
	_, err := LoadScript(path)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("err = %v, want fs.ErrNotExist", err)
	}
	if !strings.HasPrefix(err.Error(), path+": ") {
		t.Errorf("err = %q, want it to start with the path", err)
	}
}

func TestMarshalLineRoundTrip(t *testing.T) {
	line := `{"text":"a <b> & {{\"{{\"}}","tool_calls":[{"id":"c1","name":"x","arguments":{"q":"<&>"}},{"name":"y","arguments":"not json"}],"usage":{"prompt_tokens":3,"completion_tokens":4},"done_reason":"tool_calls","delay_ms":7}`
	st, err := DecodeStep([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.MarshalLine()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != line {
		t.Errorf("MarshalLine =\n%s\nwant\n%s", got, line)
	}
}

func TestTourScriptIsValid(t *testing.T) {
	s, err := LoadScript(filepath.Join("..", "..", "examples", "replay", "tour.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, st := range s.Steps {
		for _, c := range st.ToolCalls {
			names = append(names, c.Name)
		}
	}
	if got, want := strings.Join(names, " "), "update_plan list_files read_file search_text"; got != want {
		t.Errorf("tool calls = %s, want %s", got, want)
	}
	if _, err := os.Stat(filepath.Join("..", "..", "examples", "replay", "README.md")); err != nil {
		t.Errorf("examples/replay has no README: %v", err)
	}
}

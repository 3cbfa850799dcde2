package replay

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

// writeScript writes lines as a script in a temporary directory and
// returns its path.
func writeScript(t *testing.T, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "script.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// chat runs one Chat call and returns the chunks it produced.
func chat(t *testing.T, m engine.Model, model string, msgs ...engine.Message) ([]engine.ChatChunk, error) {
	t.Helper()
	var chunks []engine.ChatChunk
	err := m.Chat(t.Context(), engine.ChatRequest{Model: model, Messages: msgs}, func(c engine.ChatChunk) error {
		chunks = append(chunks, c)
		return nil
	})
	return chunks, err
}

// reply sums chunks up as one assistant message plus usage and done reason.
type reply struct {
	text   string
	pieces int
	calls  []engine.ToolCall
	usage  *engine.Usage
	done   string
}

func summarize(t *testing.T, chunks []engine.ChatChunk) reply {
	t.Helper()
	var r reply
	stage := 0 // 0 text, 1 tool calls, 2 usage, 3 done
	for _, c := range chunks {
		switch {
		case c.Text != "":
			if stage > 0 {
				t.Errorf("text chunk %q after stage %d", c.Text, stage)
			}
			r.text += c.Text
			r.pieces++
		case c.ToolCall != nil:
			if stage > 1 {
				t.Errorf("tool call after stage %d", stage)
			}
			stage = 1
			r.calls = append(r.calls, *c.ToolCall)
		case c.Usage != nil:
			if stage > 1 {
				t.Errorf("usage after stage %d", stage)
			}
			stage = 2
			r.usage = c.Usage
		case c.DoneReason != "":
			if stage != 2 {
				t.Errorf("done reason at stage %d, want after usage", stage)
			}
			stage = 3
			r.done = c.DoneReason
		default:
			t.Errorf("empty chunk")
		}
	}
	if stage != 3 {
		t.Errorf("stream ended at stage %d without a done reason", stage)
	}
	return r
}

func user(s string) engine.Message { return engine.Message{Role: engine.RoleUser, Content: s} }
func assistant(s string) engine.Message {
	return engine.Message{Role: engine.RoleAssistant, Content: s}
}

func TestChatStreamsStep(t *testing.T) {
	path := writeScript(t,
		`{"text": "Let me look around the repository first.", "tool_calls": [{"name": "list_files", "arguments": {"path": "."}}, {"id": "mine", "name": "read_file"}], "usage": {"prompt_tokens": 100, "completion_tokens": 12}}`)
	chunks, err := chat(t, New(), path, user("hi"))
	if err != nil {
		t.Fatal(err)
	}
	r := summarize(t, chunks)
	if r.text != "Let me look around the repository first." {
		t.Errorf("text = %q", r.text)
	}
	if r.pieces != 7 {
		t.Errorf("text came in %d pieces, want 7 (one per word)", r.pieces)
	}
	want := []engine.ToolCall{
		{ID: "call_1_1", Name: "list_files", Args: []byte(`{"path":"."}`)},
		{ID: "mine", Name: "read_file", Args: []byte(`{}`)},
	}
	if len(r.calls) != len(want) {
		t.Fatalf("calls = %+v", r.calls)
	}
	for i := range want {
		if r.calls[i].ID != want[i].ID || r.calls[i].Name != want[i].Name || string(r.calls[i].Args) != string(want[i].Args) {
			t.Errorf("call %d = %+v (args %s), want %+v (args %s)", i, r.calls[i], r.calls[i].Args, want[i], want[i].Args)
		}
	}
	if *r.usage != (engine.Usage{PromptTokens: 100, CompletionTokens: 12}) {
		t.Errorf("usage = %+v", *r.usage)
	}
	if r.done != "tool_calls" {
		t.Errorf("done = %q, want tool_calls", r.done)
	}
}

func TestChatSelectsStepByAssistantMessages(t *testing.T) {
	path := writeScript(t, `{"text": "one"}`, `{"text": "two", "done_reason": "length"}`, `{"text": "three"}`)
	p := New()
	conv := []engine.Message{{Role: engine.RoleSystem, Content: "sys"}, user("a")}
	for i, want := range []string{"one", "two", "three"} {
		chunks, err := chat(t, p, path, conv...)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		r := summarize(t, chunks)
		if r.text != want {
			t.Errorf("call %d: text = %q, want %q", i, r.text, want)
		}
		if wantDone := map[int]string{1: "length"}[i]; (wantDone == "" && r.done != "stop") || (wantDone != "" && r.done != wantDone) {
			t.Errorf("call %d: done = %q", i, r.done)
		}
		conv = append(conv, assistant(r.text), engine.Message{Role: engine.RoleTool, Content: "{}"}, user("more"))
	}

	// A fresh provider (a restarted plugin) resumes from the history.
	chunks, err := chat(t, New(), path, user("a"), assistant("one"), user("b"), assistant("two"), user("c"))
	if err != nil {
		t.Fatal(err)
	}
	if r := summarize(t, chunks); r.text != "three" {
		t.Errorf("resumed text = %q, want three", r.text)
	}

	_, err = chat(t, p, path, conv...)
	if !errors.Is(err, engine.ErrInvalidRequest) {
		t.Fatalf("err = %v, want ErrInvalidRequest", err)
	}
	for _, want := range []string{path, "has 3 responses", "asks for response 4"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestChatErrorStep(t *testing.T) {
	for kind, sentinel := range errorKinds {
		t.Run(kind, func(t *testing.T) {
			path := writeScript(t, `{"error": {"kind": "`+kind+`", "message": "the words of the provider"}}`)
			chunks, err := chat(t, New(), path, user("hi"))
			if len(chunks) != 0 {
				t.Errorf("got %d chunks before the error", len(chunks))
			}
			var me *engine.ModelError
			if !errors.As(err, &me) || !errors.Is(err, sentinel) {
				t.Fatalf("err = %#v, want *engine.ModelError of kind %v", err, sentinel)
			}
			if me.Provider != "replay" || me.Message != "the words of the provider" {
				t.Errorf("err = %+v", me)
			}
		})
	}
}

func TestChatScriptProblems(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte("{\"text\": \"ok\"}\n{\"text\": \"ok\", \"delay\": 3}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		model string
		kind  error
		want  []string
	}{
		{"missing", filepath.Join(dir, "missing.jsonl"), engine.ErrModelNotFound, []string{"missing.jsonl not found", "replay:examples/replay/tour.jsonl"}},
		{"directory", dir, engine.ErrModelNotFound, []string{"is a directory"}},
		{"empty name", "", engine.ErrInvalidRequest, []string{"no script given"}},
		{"invalid", bad, engine.ErrInvalidRequest, []string{bad + `:2: unknown field "delay"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := chat(t, New(), tt.model, user("hi"))
			if !errors.Is(err, tt.kind) {
				t.Fatalf("err = %v, want kind %v", err, tt.kind)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestChatRelativePathUsesWorkingDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "scripts", "a.jsonl"), []byte(`{"text": "from cwd"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	chunks, err := chat(t, New(), "scripts/a.jsonl", user("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if r := summarize(t, chunks); r.text != "from cwd" {
		t.Errorf("text = %q", r.text)
	}
	_, err = chat(t, New(), "scripts/b.jsonl", user("hi"))
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "scripts", "b.jsonl")) {
		t.Errorf("err = %v, want it to name the absolute path it looked at", err)
	}
}

func TestChatReloadsChangedScript(t *testing.T) {
	path := writeScript(t, `{"text": "old"}`)
	p := New()
	chunks, err := chat(t, p, path, user("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if r := summarize(t, chunks); r.text != "old" {
		t.Fatalf("text = %q", r.text)
	}
	if err := os.WriteFile(path, []byte(`{"text": "brand new"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	chunks, err = chat(t, p, path, user("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if r := summarize(t, chunks); r.text != "brand new" {
		t.Errorf("text after edit = %q, want brand new", r.text)
	}
}

func TestChatTemplateSeesCurrentTurnResults(t *testing.T) {
	path := writeScript(t,
		`{"tool_calls": [{"name": "search_text"}]}`,
		`{"tool_calls": [{"name": "list_files"}, {"name": "read_file"}]}`,
		`{"text": "{{ len .Results }} results at step {{ .Step }}; {{ (index .Results 1).total_lines }} lines; {{ count (get (.Result \"list_files\") \"files\") }} files; first {{ get (.Result \"list_files\") \"files\" 0 }}; {{ printf \"%T\" (get (.Result \"read_file\") \"ratio\") }}; raw {{ index .Results 2 }}; none {{ .Result \"search_text\" }}"}`,
		`{"text": "{{ .Result \"read_file\" | json }}"}`,
		`{"text": "{{ (.Result \"read_file\").no_such_field }}"}`)
	conv := []engine.Message{
		user("old turn"),
		assistant(""),
		{Role: engine.RoleTool, ToolName: "search_text", Content: `{"matches": []}`},
		user("new turn"),
		{Role: engine.RoleAssistant, ToolCalls: []engine.ToolCall{{ID: "c1", Name: "list_files"}, {ID: "c2", Name: "read_file"}}},
		{Role: engine.RoleTool, ToolCallID: "c1", Content: `{"files": ["a", "b", "c"]}`},
		{Role: engine.RoleTool, ToolCallID: "c2", ToolName: "read_file", Content: `{"total_lines": 120, "ratio": 0.5}`},
		{Role: engine.RoleTool, ToolName: "other", Content: `not json`},
	}
	chunks, err := chat(t, New(), path, conv...)
	if err != nil {
		t.Fatal(err)
	}
	want := "3 results at step 2; 120 lines; 3 files; first a; float64; raw not json; none <no value>"
	if r := summarize(t, chunks); r.text != want {
		t.Errorf("text =\n%q\nwant\n%q", r.text, want)
	}

	conv = append(conv, assistant("x"))
	chunks, err = chat(t, New(), path, conv...)
	if err != nil {
		t.Fatal(err)
	}
	if r := summarize(t, chunks); r.text != `{"ratio":0.5,"total_lines":120}` {
		t.Errorf("json text = %q", r.text)
	}

	conv = append(conv, assistant("y"))
	_, err = chat(t, New(), path, conv...)
	if !errors.Is(err, engine.ErrInvalidRequest) || !strings.Contains(err.Error(), path+":5: text template:") || !strings.Contains(err.Error(), "no_such_field") {
		t.Errorf("err = %v, want a template error naming %s:5 and the field", err, path)
	}
}

func TestTemplateFuncs(t *testing.T) {
	matches := decodeResult(`{"matches": [{"path": "a.go", "line": 1}, {"path": "b.go", "line": 2}, {"path": "a.go", "line": 9}, {"line": 4}]}`)
	tests := []struct {
		tmpl string
		want string
	}{
		{`{{ count (get . "matches") }}`, "4"},
		{`{{ join (uniq (pluck (get . "matches") "path")) ", " }}`, "a.go, b.go"},
		{`{{ get . "matches" 1 "line" }}`, "2"},
		{`{{ or (get . "matches" 9 "line") "none" }}`, "none"},
		{`{{ or (get . "nope" "deeper") "none" }}`, "none"},
		{`{{ get . "matches" "x" }}`, "<no value>"},
		{`{{ count nil }} {{ count "héllo" }} {{ count 3 }}`, "0 5 0"},
		{`{{ join nil ", " }}|{{ pluck nil "a" | json }}|{{ uniq 7 | json }}`, "|[]|[]"},
		{`{{ json (get . "matches" 3) }}`, `{"line":4}`},
	}
	for _, tt := range tests {
		t.Run(tt.tmpl, func(t *testing.T) {
			st, err := DecodeStep([]byte(`{"text": ` + jsonString(tt.tmpl) + `}`))
			if err != nil {
				t.Fatal(err)
			}
			tm := st.tmpl
			var b strings.Builder
			if err := tm.Execute(&b, matches); err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Errorf("got %q, want %q", b.String(), tt.want)
			}
		})
	}
}

func jsonString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

func TestDecodeResultNumbers(t *testing.T) {
	v := decodeResult(`{"a": 3, "b": 2.5, "c": 1e3, "d": [7, -0.25], "e": 123456789012}`).(map[string]any)
	if v["a"] != 3 || v["b"] != 2.5 || v["c"] != 1000 || v["e"] != 123456789012 {
		t.Errorf("got %#v", v)
	}
	d := v["d"].([]any)
	if d[0] != 7 || d[1] != -0.25 {
		t.Errorf("d = %#v", d)
	}
	if got := decodeResult(`{"a":1} trailing`); got != `{"a":1} trailing` {
		t.Errorf("non-JSON content = %#v, want the string", got)
	}
}

func TestChatEstimatesUsage(t *testing.T) {
	path := writeScript(t, `{"text": "12345678", "tool_calls": [{"name": "ab", "arguments": {"x": 1}}]}`)
	chunks, err := chat(t, New(), path,
		engine.Message{Role: engine.RoleSystem, Content: strings.Repeat("s", 37)},
		user(strings.Repeat("u", 40)))
	if err != nil {
		t.Fatal(err)
	}
	r := summarize(t, chunks)
	// prompt: 77 characters -> 20 tokens; completion: 8 + len("ab") + len(`{"x":1}`) = 17 -> 5 tokens.
	if want := (engine.Usage{PromptTokens: 20, CompletionTokens: 5}); *r.usage != want {
		t.Errorf("usage = %+v, want %+v", *r.usage, want)
	}
}

func TestChatDelayAndCancel(t *testing.T) {
	path := writeScript(t, `{"text": "one two three four five six", "delay_ms": 40}`)
	start := time.Now()
	chunks, err := chat(t, New(), path, user("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if r := summarize(t, chunks); r.pieces != 6 {
		t.Fatalf("pieces = %d", r.pieces)
	}
	if elapsed := time.Since(start); elapsed < 6*40*time.Millisecond {
		t.Errorf("played in %v, want at least 240ms (6 pieces x 40ms)", elapsed)
	}

	ctx, cancel := context.WithCancel(t.Context())
	n := 0
	err = New().Chat(ctx, engine.ChatRequest{Model: path, Messages: []engine.Message{user("hi")}}, func(c engine.ChatChunk) error {
		n++
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if n != 1 {
		t.Errorf("got %d chunks after cancel, want 1", n)
	}
	// A cancel during a pause ends it: with an hour's delay, a Chat that
	// slept it out would hang the test (no bound on how fast it returns,
	// the machine may be loaded).
	slow := writeScript(t, `{"text": "never", "delay_ms": 3600000}`)
	ctx, cancel = context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- New().Chat(ctx, engine.ChatRequest{Model: slow, Messages: []engine.Message{user("hi")}}, func(engine.ChatChunk) error { return nil })
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled during the delay: %v, want context.Canceled", err)
	}

	stop := errors.New("enough")
	n = 0
	err = New().Chat(t.Context(), engine.ChatRequest{Model: writeScript(t, `{"text": "a b c"}`)}, func(engine.ChatChunk) error {
		n++
		return stop
	})
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("err = %v after %d chunks, want the onChunk error after 1", err, n)
	}
}

func TestListModels(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"b.jsonl", "a.jsonl", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(`{"text": "`+name+`"}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub.jsonl"), 0o755); err != nil {
		t.Fatal(err)
	}

	t.Setenv(EnvDir, "")
	p := New()
	got, err := p.ListModels(t.Context())
	if !errors.Is(err, engine.ErrNotConfigured) || !strings.Contains(err.Error(), EnvDir) {
		t.Fatalf("without a dir: %v, %v; want ErrNotConfigured naming %s", got, err, EnvDir)
	}

	t.Setenv(EnvDir, dir)
	p = New()
	got, err = p.ListModels(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != filepath.Join(dir, "a.jsonl") || got[1].Name != filepath.Join(dir, "b.jsonl") {
		t.Fatalf("models = %+v", got)
	}
	if !got[0].HasCapability("completion") || !got[0].HasCapability("tools") || !got[0].HasCapability("embedding") {
		t.Errorf("capabilities = %v", got[0].Capabilities)
	}
	chunks, err := chat(t, p, got[1].Name, user("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if r := summarize(t, chunks); r.text != "b.jsonl" {
		t.Errorf("listed name played %q", r.text)
	}

	if err := p.Configure(t.Context(), map[string]string{"dir": filepath.Join(dir, "missing")}); err != nil {
		t.Fatal(err)
	}
	_, err = p.ListModels(t.Context())
	if !errors.Is(err, engine.ErrModelUnavailable) || !strings.Contains(err.Error(), "missing") {
		t.Errorf("err = %v, want ErrModelUnavailable naming the directory", err)
	}

	if err := p.Configure(t.Context(), map[string]string{"dir": ""}); err != nil {
		t.Fatal(err)
	}
	if got, err := p.ListModels(t.Context()); !errors.Is(err, engine.ErrNotConfigured) {
		t.Errorf("after dir=\"\": %v, %v; want ErrNotConfigured", got, err)
	}
}

// TestListModelsScriptsInUse: the scripts the host says are in use are
// listed by the names it gave (however the path is spelt), beside the
// directory's, once each; a missing one is left out.
func TestListModelsScriptsInUse(t *testing.T) {
	t.Setenv(EnvDir, "")
	dir := t.TempDir()
	t.Chdir(dir)
	os.Mkdir("scripts", 0o755)
	for _, name := range []string{"scripts/tour.jsonl", "other.jsonl"} {
		if err := os.WriteFile(name, []byte(`{"text": "hi"}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := New()
	if err := p.Configure(t.Context(), map[string]string{"scripts": "./other.jsonl\nscripts/tour.jsonl\nmissing.jsonl\n"}); err != nil {
		t.Fatal(err)
	}
	got, err := p.ListModels(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range got {
		names = append(names, m.Name)
		if !m.HasCapability("completion") || !m.HasCapability("tools") || !m.HasCapability("embedding") {
			t.Errorf("%s: capabilities %v", m.Name, m.Capabilities)
		}
	}
	if want := []string{"./other.jsonl", "scripts/tour.jsonl"}; !slices.Equal(names, want) {
		t.Errorf("models %v, want %v", names, want)
	}
	if err := p.Configure(t.Context(), map[string]string{"dir": "scripts"}); err != nil {
		t.Fatal(err)
	}
	got, _ = p.ListModels(t.Context())
	names = names[:0]
	for _, m := range got {
		names = append(names, m.Name)
	}
	if want := []string{"./other.jsonl", "scripts/tour.jsonl"}; !slices.Equal(names, want) {
		t.Errorf("with dir scripts: models %v, want %v (each once)", names, want)
	}
}

func TestConfigureRejectsUnknownKeys(t *testing.T) {
	err := New().Configure(t.Context(), map[string]string{"directory": "x"})
	if err == nil || !strings.Contains(err.Error(), `unknown setting "directory"`) || !strings.Contains(err.Error(), "dir") {
		t.Errorf("err = %v", err)
	}
}

func TestEmbed(t *testing.T) {
	inputs := []string{"open the session store", "the session store opens", "rotate TLS certificates", "", "!!!"}
	res, err := New().Embed(t.Context(), engine.EmbedRequest{Model: "anything", Inputs: inputs})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Vectors) != len(inputs) {
		t.Fatalf("got %d vectors for %d inputs", len(res.Vectors), len(inputs))
	}
	for i, v := range res.Vectors {
		if len(v) != EmbedDimension {
			t.Fatalf("vector %d has %d dimensions", i, len(v))
		}
		norm := dot(v, v)
		if i < 3 && math.Abs(norm-1) > 1e-5 {
			t.Errorf("vector %d has squared norm %v, want 1", i, norm)
		}
		if i >= 3 && norm != 0 {
			t.Errorf("wordless input %q got a non-zero vector", inputs[i])
		}
	}
	if near, far := dot(res.Vectors[0], res.Vectors[1]), dot(res.Vectors[0], res.Vectors[2]); near <= far {
		t.Errorf("similarity of overlapping texts %v <= of unrelated texts %v", near, far)
	}
	again, _ := New().Embed(t.Context(), engine.EmbedRequest{Inputs: inputs[:1]})
	for i := range again.Vectors[0] {
		if again.Vectors[0][i] != res.Vectors[0][i] {
			t.Fatal("Embed is not deterministic")
		}
	}
	if res.PromptTokens != estimateTokens(len(strings.Join(inputs, ""))) {
		t.Errorf("PromptTokens = %d", res.PromptTokens)
	}
}

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func TestSplitPieces(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"Hello, world.", []string{"Hello,", " world."}},
		{"  two  spaces\n\nnext ", []string{"  two", "  spaces", "\n\nnext", " "}},
		{"abcdefghijklmnopqrstuvwxyz", []string{"abcdefghijklmnop", "qrstuvwxyz"}},
		{"ééééééééé", []string{"éééééééé", "é"}},
	}
	for _, tt := range tests {
		got := splitPieces(tt.in)
		if strings.Join(got, "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
			t.Errorf("splitPieces(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

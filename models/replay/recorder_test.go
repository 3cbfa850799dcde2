package replay

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/plexus-agent/plexus/engine"
)

// playConversation drives m through a conversation of len(results)+1
// calls: after each reply with tool calls it appends the reply and one
// tool message per call (content from results), and returns every call's
// chunks.
func playConversation(t *testing.T, m engine.Model, model string, results [][]string) [][]engine.ChatChunk {
	t.Helper()
	conv := []engine.Message{{Role: engine.RoleSystem, Content: "You are a test."}, user("Tour the repo.")}
	var all [][]engine.ChatChunk
	for i := 0; i <= len(results); i++ {
		chunks, err := chat(t, m, model, conv...)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		all = append(all, chunks)
		if i == len(results) {
			break
		}
		r := summarize(t, chunks)
		conv = append(conv, engine.Message{Role: engine.RoleAssistant, Content: r.text, ToolCalls: r.calls})
		for j, c := range r.calls {
			conv = append(conv, engine.Message{Role: engine.RoleTool, ToolCallID: c.ID, ToolName: c.Name, Content: results[i][j]})
		}
	}
	return all
}

func TestRecorderRoundTrip(t *testing.T) {
	source := writeScript(t,
		`{"text": "Planning first. Literal braces: {{\"{{\"}} .Name }} and {{\"{{{\"}}", "tool_calls": [{"name": "update_plan", "arguments": {"steps": [{"description": "look"}]}}], "usage": {"prompt_tokens": 50, "completion_tokens": 9}}`,
		`{"tool_calls": [{"name": "list_files", "arguments": {"path": "."}}, {"id": "rf", "name": "read_file", "arguments": {"path": "README.md"}}], "done_reason": "tool_calls"}`,
		`{"text": "The root has {{ count (get (.Result \"list_files\") \"files\") }} entries and README.md {{ get (.Result \"read_file\") \"total_lines\" }} lines.", "done_reason": "stop"}`)
	results := [][]string{
		{`{"recorded": true, "steps": 1}`},
		{`{"files": ["a", "b", "c", "d"]}`, `{"path": "README.md", "total_lines": 57}`},
	}

	var script bytes.Buffer
	rec := NewRecorder(New(), &script)
	recorded := playConversation(t, rec, source, results)

	if got := summarize(t, recorded[2]).text; got != "The root has 4 entries and README.md 57 lines." {
		t.Fatalf("final text while recording = %q", got)
	}
	if got := summarize(t, recorded[0]).text; !strings.Contains(got, "{{ .Name }} and {{{") {
		t.Fatalf("first text while recording = %q", got)
	}
	if n := strings.Count(script.String(), "\n"); n != 3 {
		t.Fatalf("recorded %d lines, want 3:\n%s", n, script.String())
	}

	path := filepath.Join(t.TempDir(), "recorded.jsonl")
	if err := os.WriteFile(path, script.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	replayed := playConversation(t, New(), path, results)
	for i := range recorded {
		a, b := summarize(t, recorded[i]), summarize(t, replayed[i])
		if !reflect.DeepEqual(a, b) {
			t.Errorf("call %d differs:\nrecorded %+v\nreplayed %+v", i, a, b)
		}
	}

	// The recording is literal: it no longer depends on the tool results.
	other := [][]string{results[0], {`{"files": []}`, `{"total_lines": 1}`}}
	if got := summarize(t, playConversation(t, New(), path, other)[2]).text; got != "The root has 4 entries and README.md 57 lines." {
		t.Errorf("replayed final text = %q, want the recorded one", got)
	}
}

// fakeModel is an engine.Model whose Chat plays fixed chunks and then
// returns err.
type fakeModel struct {
	chunks     []engine.ChatChunk
	err        error
	configured map[string]string
}

func (f *fakeModel) ListModels(context.Context) ([]engine.ModelInfo, error) {
	return []engine.ModelInfo{{Name: "fake"}}, nil
}

func (f *fakeModel) Chat(_ context.Context, _ engine.ChatRequest, onChunk func(engine.ChatChunk) error) error {
	for _, c := range f.chunks {
		if err := onChunk(c); err != nil {
			return err
		}
	}
	return f.err
}

func (f *fakeModel) Embed(context.Context, engine.EmbedRequest) (engine.EmbedResponse, error) {
	return engine.EmbedResponse{Vectors: [][]float32{{1}}}, nil
}

func (f *fakeModel) Configure(_ context.Context, s map[string]string) error {
	f.configured = s
	return nil
}

func TestRecorderKeepsMalformedCalls(t *testing.T) {
	inner := &fakeModel{chunks: []engine.ChatChunk{
		{Text: "calling"},
		{ToolCall: &engine.ToolCall{ID: "a", Name: "read_file", Args: []byte(`{"path": "x"`)}},
		{ToolCall: &engine.ToolCall{ID: "b", Name: "list_files", Args: []byte(`["not", "an", "object"]`)}},
		{ToolCall: &engine.ToolCall{ID: "c", Name: "search_text"}},
		{Usage: &engine.Usage{PromptTokens: 3, CompletionTokens: 1}},
		{Usage: &engine.Usage{PromptTokens: 1, CompletionTokens: 1}},
		{DoneReason: "STOP"},
	}}
	var script bytes.Buffer
	if _, err := chat(t, NewRecorder(inner, &script), "fake", user("hi")); err != nil {
		t.Fatal(err)
	}
	want := `{"text":"calling","tool_calls":[{"id":"a","name":"read_file","arguments":"{\"path\": \"x\""},{"id":"b","name":"list_files","arguments":"[\"not\", \"an\", \"object\"]"},{"id":"c","name":"search_text"}],"usage":{"prompt_tokens":4,"completion_tokens":2},"done_reason":"STOP"}` + "\n"
	if script.String() != want {
		t.Fatalf("recorded\n%s\nwant\n%s", script.String(), want)
	}
	path := filepath.Join(t.TempDir(), "s.jsonl")
	if err := os.WriteFile(path, script.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	chunks, err := chat(t, New(), path, user("hi"))
	if err != nil {
		t.Fatal(err)
	}
	r := summarize(t, chunks)
	if got := []string{string(r.calls[0].Args), string(r.calls[1].Args), string(r.calls[2].Args)}; !reflect.DeepEqual(got, []string{`{"path": "x"`, `["not", "an", "object"]`, `{}`}) {
		t.Errorf("replayed args = %q", got)
	}
}

func TestRecorderSkipsFailedCalls(t *testing.T) {
	boom := &engine.ModelError{Provider: "fake", Kind: engine.ErrModelUnavailable, Message: "down"}
	var script bytes.Buffer
	rec := NewRecorder(&fakeModel{chunks: []engine.ChatChunk{{Text: "partial"}}, err: boom}, &script)
	if _, err := chat(t, rec, "fake", user("hi")); !errors.Is(err, boom) {
		t.Errorf("err = %v, want the inner error unchanged", err)
	}

	stop := errors.New("consumer stopped")
	rec = NewRecorder(&fakeModel{chunks: []engine.ChatChunk{{Text: "a"}, {Text: "b"}}}, &script)
	err := rec.Chat(t.Context(), engine.ChatRequest{}, func(engine.ChatChunk) error { return stop })
	if !errors.Is(err, stop) {
		t.Errorf("err = %v, want the onChunk error", err)
	}
	if script.Len() != 0 {
		t.Errorf("failed calls were recorded: %s", script.String())
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestRecorderReportsWriteErrors(t *testing.T) {
	rec := NewRecorder(&fakeModel{chunks: []engine.ChatChunk{{Text: "a"}}}, failingWriter{})
	_, err := chat(t, rec, "fake", user("hi"))
	if err == nil || !strings.Contains(err.Error(), "write script line: disk full") {
		t.Errorf("err = %v", err)
	}
}

func TestRecorderPassesThrough(t *testing.T) {
	inner := &fakeModel{}
	rec := NewRecorder(inner, &bytes.Buffer{})
	if err := rec.Configure(t.Context(), map[string]string{"base_url": "x"}); err != nil || inner.configured["base_url"] != "x" {
		t.Errorf("Configure: %v, inner got %v", err, inner.configured)
	}
	if got, err := rec.ListModels(t.Context()); err != nil || got[0].Name != "fake" {
		t.Errorf("ListModels = %v, %v", got, err)
	}
	if got, err := rec.Embed(t.Context(), engine.EmbedRequest{}); err != nil || got.Vectors[0][0] != 1 {
		t.Errorf("Embed = %v, %v", got, err)
	}
	// An empty reply is recorded as the default done reason, which replays.
	var script bytes.Buffer
	if _, err := chat(t, NewRecorder(&fakeModel{}, &script), "fake", user("hi")); err != nil {
		t.Fatal(err)
	}
	if script.String() != `{"done_reason":"stop"}`+"\n" {
		t.Errorf("empty reply recorded as %q", script.String())
	}
}

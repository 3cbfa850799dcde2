package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-agent/plexus/engine"
)

// fakeTools answers list_files, read_file and search_text with fixed
// results, or with a tool error when the result is an error.
type fakeTools struct {
	results map[string]any
}

func (f *fakeTools) Tools(context.Context) ([]engine.ToolSpec, error) {
	var specs []engine.ToolSpec
	for _, n := range []string{"list_files", "read_file", "search_text"} {
		specs = append(specs, engine.ToolSpec{Name: n, InputSchema: json.RawMessage(`{"type":"object"}`), Risk: engine.RiskLow, ReadOnly: true})
	}
	return specs, nil
}

func (f *fakeTools) Invoke(_ context.Context, req engine.InvokeRequest, _ func(engine.ToolUpdate)) (engine.ToolResult, error) {
	switch r := f.results[req.Tool].(type) {
	case error:
		return engine.ToolResult{}, r
	case nil:
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeUnknownTool, "no result for %s", req.Tool)
	default:
		return engine.JSONResult(r, req.Tool)
	}
}

// tourWithoutDelays copies examples/replay/tour.jsonl without its delays.
func tourWithoutDelays(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "replay", "tour.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "delay_ms")
		b, _ := json.Marshal(m)
		out.Write(append(b, '\n'))
	}
	path := filepath.Join(t.TempDir(), "tour.jsonl")
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTourThroughEngine(t *testing.T) {
	script := tourWithoutDelays(t)
	manyEntries := []any{}
	for _, n := range []string{".git", ".github", "README.md", "buf.gen.yaml", "buf.yaml", "cmd", "engine", "examples", "go.mod", "go.sum", "models", "plugins", "proto", "tools"} {
		manyEntries = append(manyEntries, map[string]any{"path": n, "type": "dir"})
	}
	tests := []struct {
		name    string
		results map[string]any
		want    []string
	}{
		{
			name: "plain shapes",
			results: map[string]any{
				"list_files": map[string]any{"files": []string{"README.md", "engine", "go.mod", "go.sum", "plugins", "proto"}},
				"read_file":  map[string]any{"path": "README.md", "content": "# Plexus\n", "start_line": 1, "end_line": 40, "total_lines": 87, "truncated": false},
				"search_text": map[string]any{"matches": []map[string]any{
					{"path": "engine/engine.go", "line": 71, "column": 1, "text": "func New(opts Options) (*Engine, error) {"},
					{"path": "engine/session.go", "line": 12, "column": 1, "text": "func NewSession"},
					{"path": "engine/engine.go", "line": 156, "column": 1, "text": "func (e *Engine) NewSession("},
				}, "files_searched": 11, "truncated": false},
			},
			want: []string{
				"- The repository root holds 6 top-level entries: README.md, engine, go.mod, go.sum, plugins, proto.\n",
				"- README.md has 87 lines; I read lines 1 to 40.\n",
				"- `func New` matches 3 lines under engine/ in engine/engine.go, engine/session.go (11 files searched).\n",
			},
		},
		{
			name: "object entries, truncation",
			results: map[string]any{
				"list_files": map[string]any{"files": manyEntries, "truncated": true},
				"read_file":  map[string]any{"path": "README.md", "content": "x", "start_line": 1, "end_line": 12, "total_lines": 12, "truncated": true},
				"search_text": map[string]any{"matches": []map[string]any{
					{"path": "engine/engine.go", "line": 71, "column": 1, "text": "func New("},
				}, "files_searched": 3, "truncated": true},
			},
			want: []string{
				"- The repository root holds 14 top-level entries: .git, .github, README.md, buf.gen.yaml, buf.yaml, cmd, engine, examples, go.mod, go.sum, models, plugins and more (the listing was cut short).\n",
				"- README.md has 12 lines; I read lines 1 to 12 (cut short).\n",
				"- `func New` matches 1 line under engine/ in engine/engine.go (3 files searched); the list was cut short, so there are more.\n",
			},
		},
		{
			name: "other shapes",
			results: map[string]any{
				"list_files":  map[string]any{"entries": []map[string]any{{"name": "a"}, {"name": "b"}}},
				"read_file":   map[string]any{"content": "only content"},
				"search_text": map[string]any{"matches": []any{}},
			},
			want: []string{
				"- The repository root holds 2 top-level entries: a, b.\n",
				"- README.md has an unknown number of lines; I read lines 1 to 40.\n",
				"- `func New` matches 0 lines under engine/.\n",
			},
		},
		{
			name: "tool errors",
			results: map[string]any{
				"list_files":  engine.ToolErrorf(engine.ToolCodePermissionDenied, "denied by policy"),
				"read_file":   engine.ToolErrorf(engine.ToolCodeNotFound, "README.md does not exist"),
				"search_text": engine.ToolErrorf(engine.ToolCodeInvalidInput, "bad pattern"),
			},
			want: []string{
				"- I could not list the repository root: denied by policy\n",
				"- README.md could not be read: README.md does not exist\n",
				"- The search for `func New` failed: bad pattern\n",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := engine.New(engine.Options{
				Models: map[string]engine.Model{"replay": New()},
				Tools:  &fakeTools{results: tt.results},
				Model:  engine.ModelRef{Provider: "replay", Name: script},
			})
			if err != nil {
				t.Fatal(err)
			}
			ws, err := e.OpenWorkspace(filepath.Join("..", ".."))
			if err != nil {
				t.Fatal(err)
			}
			s, err := e.NewSession(ws, "")
			if err != nil {
				t.Fatal(err)
			}
			var plan *engine.PlanEvent
			var completed []string
			var tokens strings.Builder
			res, err := s.Run(t.Context(), engine.TurnInput{Message: "Give me a tour of this repository."}, engine.TurnOptions{
				OnEvent: func(ev engine.Event) {
					switch d := ev.Data.(type) {
					case *engine.PlanEvent:
						plan = d
					case *engine.ToolCallEvent:
						if d.Status == engine.ToolCompleted || d.Status == engine.ToolFailed {
							completed = append(completed, d.Name)
						}
					case *engine.TokenEvent:
						tokens.WriteString(d.Text)
					}
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != engine.TurnCompleted {
				t.Fatalf("turn ended %s: %s", res.Status, res.Error)
			}
			if plan == nil || len(plan.Steps) != 4 {
				t.Errorf("plan = %+v, want 4 steps", plan)
			}
			if got := strings.Join(completed, " "); got != "update_plan list_files read_file search_text" {
				t.Errorf("tool calls = %s", got)
			}
			if res.Metadata.ModelCalls != 4 || res.Metadata.CompletionTokens == 0 {
				t.Errorf("metadata = %+v", res.Metadata)
			}
			for _, w := range tt.want {
				if !strings.Contains(res.Message, w) {
					t.Errorf("final message lacks %q:\n%s", w, res.Message)
				}
			}
			if !strings.HasSuffix(tokens.String(), res.Message) {
				t.Errorf("streamed tokens do not end with the final message")
			}
		})
	}
}

package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/tools/fs"
	"github.com/plexus-agent/plexus/tools/search"
)

// toolsets routes each call to the first toolset that lists the tool, as
// the plugin host does across plugins.
type toolsets []engine.Toolset

func (ts toolsets) Tools(ctx context.Context) ([]engine.ToolSpec, error) {
	var out []engine.ToolSpec
	for _, t := range ts {
		specs, err := t.Tools(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, specs...)
	}
	return out, nil
}

func (ts toolsets) Invoke(ctx context.Context, req engine.InvokeRequest, on func(engine.ToolUpdate)) (engine.ToolResult, error) {
	for _, t := range ts {
		specs, _ := t.Tools(ctx)
		for _, s := range specs {
			if s.Name == req.Tool {
				return t.Invoke(ctx, req, on)
			}
		}
	}
	return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeUnknownTool, "no tool %q", req.Tool)
}

// TestTourOnThisRepository plays examples/replay/tour.jsonl (without its
// delays) through the engine with the real file and search tools
// (tools/fs, tools/search; no index, so search_text walks the files) on
// this repository, and checks that the final message cites the figures of
// the real tool results.
func TestTourOnThisRepository(t *testing.T) {
	root := filepath.Join("..", "..")
	files := fs.New(fs.Options{})
	t.Cleanup(func() { files.Close() })
	tools := toolsets{files, search.New(search.Options{})}
	script := tourWithoutDelays(t)
	e, err := engine.New(engine.Options{
		Models: map[string]engine.Model{"replay": New()},
		Tools:  tools,
		Model:  engine.ModelRef{Provider: "replay", Name: script},
	})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := e.OpenWorkspace(root)
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.NewSession(ws, "")
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]json.RawMessage{}
	res, err := s.Run(t.Context(), engine.TurnInput{Message: "Give me a tour of this repository."}, engine.TurnOptions{
		OnEvent: func(ev engine.Event) {
			if d, ok := ev.Data.(*engine.ToolCallEvent); ok && d.Status == engine.ToolCompleted {
				results[d.Name] = d.Result
			} else if ok && d.Status == engine.ToolFailed {
				results[d.Name], _ = json.Marshal(map[string]string{"error": d.Error})
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != engine.TurnCompleted {
		t.Fatalf("turn ended %s: %s", res.Status, res.Error)
	}
	t.Logf("final message:\n%s", res.Message)

	var list struct {
		Files []string `json:"files"`
		Error string   `json:"error"`
	}
	if err := json.Unmarshal(results["list_files"], &list); err != nil || list.Error != "" || len(list.Files) == 0 {
		t.Fatalf("list_files result %s (%v)", results["list_files"], err)
	}
	want := []string{fmt.Sprintf("The repository root holds %d top-level entries", len(list.Files))}

	var read struct {
		TotalLines int    `json:"total_lines"`
		Error      string `json:"error"`
	}
	if err := json.Unmarshal(results["read_file"], &read); err != nil {
		t.Fatalf("read_file result %s: %v", results["read_file"], err)
	}
	if read.Error != "" {
		want = append(want, "README.md could not be read: "+read.Error) // no README.md yet
	} else {
		want = append(want, fmt.Sprintf("README.md has %d lines", read.TotalLines))
	}

	var search struct {
		Matches []struct {
			Path string `json:"path"`
		} `json:"matches"`
		FilesSearched int `json:"files_searched"`
	}
	if err := json.Unmarshal(results["search_text"], &search); err != nil || len(search.Matches) == 0 {
		t.Fatalf("search_text result %s (%v)", results["search_text"], err)
	}
	lines := "lines"
	if len(search.Matches) == 1 {
		lines = "line"
	}
	want = append(want, fmt.Sprintf("`func New` matches %d %s under engine/ in %s", len(search.Matches), lines, search.Matches[0].Path),
		fmt.Sprintf("(%d files searched)", search.FilesSearched))
	for _, w := range want {
		if !strings.Contains(res.Message, w) {
			t.Errorf("final message lacks %q", w)
		}
	}
}

package ndjson

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/models/replay"
	"github.com/plexus-agent/plexus/tools/fs"
)

// TestReplayAndFileTools runs a turn with the real replay model provider
// and file tools in-process: the script lists the workspace and reads
// notes.txt, then answers citing the file's line count.
func TestReplayAndFileTools(t *testing.T) {
	script, err := filepath.Abs(filepath.Join("testdata", "replay.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	tools := fs.New(fs.Options{})
	t.Cleanup(func() { tools.Close() })
	eng, err := engine.New(engine.Options{
		Models: map[string]engine.Model{replay.ProviderName: replay.New()},
		Tools:  tools,
		Model:  engine.ModelRef{Provider: replay.ProviderName, Name: script},
	})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("remember the milk\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ws, err := eng.OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}

	out := newRecorder()
	start := time.Now()
	in := `{"id":"r1","kind":"user_message","message":"What is in this workspace?"}` + "\n"
	if err := New(Options{Engine: eng, Workspace: ws}).Serve(context.Background(), strings.NewReader(in), out); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	lines := out.snapshot()
	checkContract(t, lines, start)
	rs := parseAll(t, lines)

	var tokens string
	results := map[string]json.RawMessage{}
	var uses []string
	for _, r := range rs {
		switch r.Type {
		case "token":
			tokens += r.Token
		case "tool_use":
			var d toolUseData
			mustUnmarshal(t, r.Data, &d, r.raw)
			uses = append(uses, d.ToolID+" "+d.ToolName)
		case "tool_result":
			var d toolResultData
			mustUnmarshal(t, r.Data, &d, r.raw)
			results[d.ToolName] = d.Result
		}
	}
	if want := []string{"call_ls list_files", "call_rd read_file"}; !slices.Equal(uses, want) {
		t.Errorf("tool_use = %v, want %v", uses, want)
	}
	var list struct {
		Files []string `json:"files"`
	}
	mustUnmarshal(t, results["list_files"], &list, string(results["list_files"]))
	if !slices.Contains(list.Files, "notes.txt") {
		t.Errorf("list_files result %s lacks notes.txt", results["list_files"])
	}
	var read struct {
		Content string `json:"content"`
	}
	mustUnmarshal(t, results["read_file"], &read, string(results["read_file"]))
	if read.Content != "remember the milk\n" {
		t.Errorf("read_file result %s", results["read_file"])
	}
	if want := "Let me look.notes.txt has 1 line."; tokens != want {
		t.Errorf("tokens = %q, want %q", tokens, want)
	}
	if last := rs[len(rs)-1]; last.Type != "done" || last.id() != "r1" {
		t.Errorf("last line %s, want done of r1", last.raw)
	}
}

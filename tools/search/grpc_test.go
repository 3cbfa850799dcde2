package search

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/hashicorp/go-plugin"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/internal/testtree"
	"github.com/plexus-agent/plexus/plugins"
)

// overGRPC returns the toolset as a host sees it: through the plugin SDK's
// gRPC shims (host callbacks included), in process.
func overGRPC(t *testing.T, tools *Tools) engine.Toolset {
	t.Helper()
	client, _ := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{"tool": &plugins.ToolPlugin{Impl: tools}})
	t.Cleanup(func() { client.Close() })
	raw, err := client.Dispense("tool")
	if err != nil {
		t.Fatal(err)
	}
	return raw.(engine.Toolset)
}

// TestOverGRPC runs the tools through the plugin transport with the
// index answering over host callbacks, with an engine that has no index,
// and with no callbacks at all.
func TestOverGRPC(t *testing.T) {
	ws := t.TempDir()
	testtree.Write(t, ws, map[string]string{"engine/engine.go": "package engine\n\nfunc New() {}\n", "README.md": "func New is documented\n"})
	ts := overGRPC(t, newTools(t, Options{}))
	specs, err := ts.Tools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{SearchSymbolsTool, SearchTextTool, VectorSearchTool}) {
		t.Fatalf("tools = %q", names)
	}
	run := func(t *testing.T, host engine.ToolHost, tool, args string) (engine.ToolResult, []string, error) {
		t.Helper()
		var streamed []string
		res, err := ts.Invoke(t.Context(), engine.InvokeRequest{CallID: "c1", Tool: tool, Args: json.RawMessage(args), WorkspaceRoot: ws, Host: host},
			func(u engine.ToolUpdate) {
				if u.Output != nil && u.Output.Stream == MatchStream {
					streamed = append(streamed, u.Output.Text)
				}
			})
		return res, streamed, err
	}

	t.Run("index", func(t *testing.T) {
		m := []engine.TextMatch{{Path: "engine/engine.go", Line: 3, Column: 1, Text: "func New() {}", Before: []string{""}}}
		host := &fakeHost{
			text:    engine.TextResult{Matches: m, FilesSearched: 1},
			symbols: []engine.SymbolHit{{Name: "New", Kind: "function", Path: "engine/engine.go", Language: "go", StartLine: 3, EndLine: 3, Definition: true, Match: "exact", Score: 1}},
		}
		res, streamed, err := run(t, host, SearchTextTool, `{"pattern":"func New","path":"engine","context_lines":1}`)
		if err != nil {
			t.Fatal(err)
		}
		var got TextResult
		if err := json.Unmarshal(res.Content, &got); err != nil || !reflect.DeepEqual(got, TextResult{Matches: m, FilesSearched: 1}) {
			t.Errorf("result %s (%v)", res.Content, err)
		}
		if want := []string{"engine/engine.go:3:1: func New() {}"}; !slices.Equal(streamed, want) {
			t.Errorf("streamed %q, want %q", streamed, want)
		}
		res, _, err = run(t, host, SearchSymbolsTool, `{"query":"New"}`)
		if err != nil || res.Summary != "1 symbol for New (1 exact)" {
			t.Errorf("search_symbols: %v, summary %q", err, res.Summary)
		}
		want := []any{
			engine.TextQuery{Pattern: "func New", Path: "engine", ContextLines: 1, Limit: DefaultTextResults},
			engine.SymbolQuery{Query: "New", Limit: DefaultSymbolResults},
		}
		if !reflect.DeepEqual(host.queries, want) {
			t.Errorf("host got %+v, want %+v", host.queries, want)
		}
	})

	for name, host := range map[string]engine.ToolHost{"no index": noIndexHost(), "no callbacks": nil} {
		t.Run(name, func(t *testing.T) {
			res, streamed, err := run(t, host, SearchTextTool, `{"pattern":"func New"}`)
			if err != nil {
				t.Fatal(err)
			}
			var got TextResult
			if err := json.Unmarshal(res.Content, &got); err != nil || len(got.Matches) != 2 || got.FilesSearched != 2 {
				t.Errorf("fallback result %s (%v)", res.Content, err)
			}
			if want := []string{"README.md:1:1: func New is documented", "engine/engine.go:3:1: func New() {}"}; !slices.Equal(streamed, want) {
				t.Errorf("streamed %q, want %q", streamed, want)
			}
			_, _, err = run(t, host, VectorSearchTool, `{"query":"constructor"}`)
			wantToolError(t, err, engine.ToolCodeFailed, "vector_search is not available")
			if host != nil {
				// The engine's words crossed both boundaries unchanged.
				wantToolError(t, err, engine.ToolCodeFailed, noIndexHost().err.Error())
			}
		})
	}
}

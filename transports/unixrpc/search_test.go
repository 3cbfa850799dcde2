package unixrpc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/index"
	"github.com/plexus-agent/plexus/transports/unixrpc"
)

// searchEnv is a server whose engine has a real code index of a small
// workspace: many.txt holds 2500 matching lines, so that streamed
// matches take several notifications.
func searchEnv(t *testing.T, anyWorkspace bool) (*env, string) {
	t.Helper()
	ctx := context.Background()
	svc, err := index.Open(ctx, index.Options{Path: filepath.Join(t.TempDir(), "index.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	eng, err := engine.New(engine.Options{Searcher: svc})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "calc.go"), []byte("package calc\n\n// Add adds.\nfunc Add(a, b int) int {\n\treturn a + b\n}\n"), 0o644)
	var many strings.Builder
	for i := 0; i < 2500; i++ {
		fmt.Fprintf(&many, "needle %d\n", i)
	}
	os.WriteFile(filepath.Join(root, "many.txt"), []byte(many.String()), 0o644)
	ws, err := eng.OpenWorkspace(root)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := unixrpc.New(unixrpc.Options{Engine: eng, Workspace: ws, Version: "test", AnyWorkspace: anyWorkspace})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{srv: srv, eng: eng, root: ws.Root, sock: filepath.Join(t.TempDir(), "p.sock"), serveCh: make(chan error, 1)}
	ln, err := unixrpc.Listen(e.sock)
	if err != nil {
		t.Fatal(err)
	}
	go func() { e.serveCh <- srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return e, ws.Root
}

func TestSearchTextStreamsEveryMatchBeforeTheResult(t *testing.T) {
	e, _ := searchEnv(t, false)
	c := e.initialized(t)
	id := c.send("search.text", map[string]any{"pattern": "needle", "limit": 0, "stream": true})
	r := c.response(id)
	if r.Error != nil {
		t.Fatalf("search.text: %s", r.raw)
	}
	if got := r.get("match_count"); got != float64(2500) {
		t.Fatalf("match_count %v, want 2500: %s", got, r.raw)
	}
	if r.get("truncated") != false || r.get("matches") != nil {
		t.Fatalf("result %s: want not truncated, matches left out when streamed", r.raw)
	}
	// Every streamed match came before the response, in order.
	var lines []int
	batches := 0
	for _, m := range c.messages() {
		if m.isResponse() && string(m.ID) == id {
			break
		}
		if m.Method != "search.matches" {
			continue
		}
		batches++
		if m.str("request_id") != id {
			t.Fatalf("request_id %q, want %q", m.str("request_id"), id)
		}
		var p struct{ Matches []engine.TextMatch }
		json.Unmarshal(m.Params, &p)
		for _, tm := range p.Matches {
			lines = append(lines, tm.Line)
		}
	}
	if len(lines) != 2500 || batches < 3 {
		t.Fatalf("%d matches in %d notifications before the result, want 2500 in at least 3", len(lines), batches)
	}
	for i, l := range lines {
		if l != i+1 {
			t.Fatalf("match %d is line %d, want %d", i, l, i+1)
		}
	}
}

func TestSearchTextLimitIsHonest(t *testing.T) {
	e, _ := searchEnv(t, false)
	c := e.initialized(t)
	for _, tc := range []struct {
		params    map[string]any
		n         int
		truncated bool
	}{
		{map[string]any{"pattern": "needle"}, 100, true},
		{map[string]any{"pattern": "needle", "limit": 2500}, 2500, false},
		{map[string]any{"pattern": "needle", "limit": 2499}, 2499, true},
		{map[string]any{"pattern": `needle 24\d\d$`, "regex": true, "limit": 0}, 100, false},
		{map[string]any{"pattern": "NEEDLE 249", "case_insensitive": true, "include": "*.txt"}, 11, false},
	} {
		r := c.call("search.text", tc.params)
		var res struct {
			Matches    []engine.TextMatch
			MatchCount int  `json:"match_count"`
			Truncated  bool `json:"truncated"`
		}
		json.Unmarshal(r.Result, &res)
		if r.Error != nil || len(res.Matches) != tc.n || res.MatchCount != tc.n || res.Truncated != tc.truncated {
			t.Errorf("%v: %d matches (count %d), truncated %v; want %d, %v (%.200s)", tc.params, len(res.Matches), res.MatchCount, res.Truncated, tc.n, tc.truncated, r.raw)
		}
	}
}

func TestSearchSymbolsAndErrors(t *testing.T) {
	e, root := searchEnv(t, false)
	c := e.initialized(t)
	r := c.call("search.symbols", map[string]any{"query": "Add"})
	var res struct{ Symbols []engine.SymbolHit }
	json.Unmarshal(r.Result, &res)
	if r.Error != nil || len(res.Symbols) == 0 || res.Symbols[0].Path != "calc.go" {
		t.Fatalf("search.symbols Add: %s", r.raw)
	}
	other := t.TempDir()
	for _, tc := range []struct {
		method string
		params map[string]any
		code   int
		field  string
	}{
		{"search.text", map[string]any{}, -32602, "pattern"},
		{"search.text", map[string]any{"pattern": "a(", "regex": true}, -32602, ""},
		{"search.text", map[string]any{"pattern": "x", "limit": -1}, -32602, "limit"},
		{"search.text", map[string]any{"pattern": "x", "workspace_root": other}, -32602, "workspace_root"},
		{"search.text", map[string]any{"pattern": "x", "workspace_root": "rel/dir"}, -32602, "workspace_root"},
		{"search.symbols", map[string]any{"query": ""}, -32602, "query"},
		{"search.symbols", map[string]any{"query": "Add", "limit": 0}, -32602, "limit"},
	} {
		r := c.call(tc.method, tc.params)
		if errCode(r) != tc.code {
			t.Errorf("%s %v: %s, want code %d", tc.method, tc.params, r.raw, tc.code)
			continue
		}
		if tc.field != "" && !strings.Contains(r.raw, tc.field) {
			t.Errorf("%s %v: %s does not name %s", tc.method, tc.params, r.raw, tc.field)
		}
	}
	// The server's own root, named, is fine.
	if r := c.call("search.text", map[string]any{"pattern": "Add", "workspace_root": root}); r.Error != nil {
		t.Errorf("naming the server's workspace: %s", r.raw)
	}
}

func TestSearchAnyWorkspace(t *testing.T) {
	e, _ := searchEnv(t, true)
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "x.go"), []byte("package x\n\nfunc Elsewhere() {}\n"), 0o644)
	c := e.initialized(t)
	r := c.call("search.symbols", map[string]any{"query": "Elsewhere", "workspace_root": other})
	var res struct{ Symbols []engine.SymbolHit }
	json.Unmarshal(r.Result, &res)
	if r.Error != nil || len(res.Symbols) != 1 || res.Symbols[0].Path != "x.go" {
		t.Fatalf("search.symbols in another workspace: %s", r.raw)
	}
}

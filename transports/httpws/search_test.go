package httpws_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/index"
	"github.com/plexus-agent/plexus/transports/httpws"
)

// newSearchServer serves an engine whose Searcher is a real code index
// of a workspace holding calc.go and many.txt (1500 matching lines).
func newSearchServer(t *testing.T) *testServer {
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
	os.WriteFile(filepath.Join(root, "calc.go"), []byte("package calc\n\nfunc Add(a, b int) int {\n\treturn a + b\n}\n"), 0o644)
	var many strings.Builder
	for i := 0; i < 1500; i++ {
		fmt.Fprintf(&many, "needle %d\n", i)
	}
	os.WriteFile(filepath.Join(root, "many.txt"), []byte(many.String()), 0o644)
	ts := &testServer{eng: eng, root: root, token: "test-token"}
	ts.srv, err = httpws.New(httpws.Options{Engine: eng, Token: ts.token, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go ts.srv.Serve(ln)
	t.Cleanup(func() { ts.srv.Close() })
	ts.url = "http://" + ln.Addr().String()
	rec, err := eng.RegisterWorkspace(ctx, root, "calc")
	if err != nil {
		t.Fatal(err)
	}
	ts.wsID = rec.ID
	return ts
}

func TestSearchEndpoint(t *testing.T) {
	ts := newSearchServer(t)
	path := "/v1/workspaces/" + ts.wsID + "/search"
	for _, tc := range []struct {
		body      string
		status    int
		n         int
		truncated bool
	}{
		{`{"pattern":"needle"}`, 200, 100, true},
		{`{"pattern":"needle","limit":0}`, 200, 1500, false},
		{`{"pattern":"needle 14\\d\\d","regex":true,"limit":1500}`, 200, 100, false},
		{`{"mode":"text","pattern":"ADD(","case_insensitive":true}`, 200, 1, false},
		{`{"pattern":"a(","regex":true}`, 400, 0, false},
		{`{"query":"Add"}`, 400, 0, false},
		{`{"pattern":"x","path":"../out"}`, 400, 0, false},
	} {
		status, out := ts.do(t, "POST", path, tc.body)
		if status != tc.status {
			t.Errorf("%s: %d, want %d (%v)", tc.body, status, tc.status, out)
			continue
		}
		if status != 200 {
			continue
		}
		ms, _ := out["matches"].([]any)
		if len(ms) != tc.n || out["match_count"] != float64(tc.n) || out["truncated"] != tc.truncated {
			t.Errorf("%s: %d matches (count %v), truncated %v; want %d, %v", tc.body, len(ms), out["match_count"], out["truncated"], tc.n, tc.truncated)
		}
	}
	status, out := ts.do(t, "POST", path, `{"mode":"symbols","query":"Add"}`)
	syms, _ := out["symbols"].([]any)
	if status != 200 || len(syms) == 0 || syms[0].(map[string]any)["path"] != "calc.go" {
		t.Errorf("symbols: %d %v", status, out)
	}
	if status, _ := ts.do(t, "POST", "/v1/workspaces/ws_000000000000/search", `{"pattern":"x"}`); status != 404 {
		t.Errorf("unknown workspace: %d, want 404", status)
	}
}

func TestSearchEndpointStreamsNDJSON(t *testing.T) {
	ts := newSearchServer(t)
	req, _ := http.NewRequest("POST", ts.url+"/v1/workspaces/"+ts.wsID+"/search", strings.NewReader(`{"pattern":"needle","limit":0}`))
	req.Header.Set("Authorization", "Bearer "+ts.token)
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	var lines []int
	var done map[string]any
	for sc.Scan() {
		var l struct {
			Match *engine.TextMatch
			Done  map[string]any
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%q: %v", sc.Text(), err)
		}
		if done != nil {
			t.Fatalf("a line after done: %s", sc.Text())
		}
		switch {
		case l.Match != nil:
			lines = append(lines, l.Match.Line)
		case l.Done != nil:
			done = l.Done
		default:
			t.Fatalf("unexpected line %s", sc.Text())
		}
	}
	if len(lines) != 1500 || done == nil || done["match_count"] != float64(1500) || done["truncated"] != false {
		t.Fatalf("%d match lines, done %v", len(lines), done)
	}
	for i, l := range lines {
		if l != i+1 {
			t.Fatalf("line %d is %d", i, l)
		}
	}
}

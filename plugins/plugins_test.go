package plugins_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/plugins"
	"github.com/plexus-agent/plexus/plugins/internal/testtools"
)

// pluginBin is the test plugin binary, built once by TestMain.
var pluginBin string

func TestMain(m *testing.M) {
	if v := os.Getenv(envTestHost); v != "" {
		os.Exit(testHost(v))
	}
	dir, err := os.MkdirTemp("", "plexus-plugins-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pluginBin = filepath.Join(dir, "testplugin")
	out, err := exec.Command("go", "build", "-o", pluginBin, "./internal/testplugin").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build test plugin: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// pluginDir returns a plugin directory holding the test plugin under the
// given file names, each recorded in the directory's lock file.
func pluginDir(t testing.TB, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		if err := os.Symlink(pluginBin, filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	lockFiles(t, dir, names...)
	return dir
}

// lockFiles records the plugin binaries names of dir in its lock file, as
// an install would.
func lockFiles(t testing.TB, dir string, names ...string) {
	t.Helper()
	lock, err := plugins.ReadLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		ref, ok := plugins.ParseBinaryName(n)
		if !ok {
			continue
		}
		sum, err := plugins.FileSHA256(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if err := lock.Put(plugins.LockEntry{Kind: ref.Kind, Name: ref.Name, File: n, SHA256: sum, ProtocolVersions: []int{1}, Source: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := lock.Write(); err != nil {
		t.Fatal(err)
	}
}

// logBuffer is a slog handler target that tests can read safely.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newManager(t testing.TB, opts plugins.Options) *plugins.Manager {
	t.Helper()
	if opts.Dirs == nil {
		opts.Dirs = []string{pluginDir(t, "plexus-tool-test", "plexus-model-test")}
	}
	if opts.MinBackoff == 0 {
		opts.MinBackoff = 10 * time.Millisecond
	}
	m, err := plugins.NewManager(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func invoke(t testing.TB, ts engine.Toolset, tool, args string) (engine.ToolResult, []engine.ToolUpdate, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var updates []engine.ToolUpdate
	res, err := ts.Invoke(ctx, engine.InvokeRequest{CallID: "c1", Tool: tool, Args: json.RawMessage(args), WorkspaceRoot: "/w"},
		func(u engine.ToolUpdate) { updates = append(updates, u) })
	return res, updates, err
}

func pidOf(t testing.TB, ts engine.Toolset) int {
	t.Helper()
	res, _, err := invoke(t, ts, "pid", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	var r struct{ Pid int }
	if err := json.Unmarshal(res.Content, &r); err != nil {
		t.Fatal(err)
	}
	return r.Pid
}

// alive reports whether pid is a live (non-zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && len(b) > i+2 && b[i+2] != 'Z' && b[i+2] != 'X'
}

func waitGone(t testing.TB, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d is still running", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestDiscovery(t *testing.T) {
	dir := pluginDir(t, "plexus-tool-test", "plexus-model-test", "plexus-tool-Bad_Name", "unrelated")
	if err := os.WriteFile(filepath.Join(dir, "plexus-tool-noexec"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	second := pluginDir(t, "plexus-tool-test")
	m := newManager(t, plugins.Options{
		Dirs:     []string{dir, filepath.Join(dir, "missing"), second},
		Builtins: []plugins.Ref{{Kind: "tool", Name: "fs"}},
	})
	var got []string
	for _, p := range m.Plugins() {
		got = append(got, fmt.Sprintf("%s/%s builtin=%v", p.Kind, p.Name, p.Builtin))
	}
	want := []string{"tool/fs builtin=true", "model/test builtin=false", "tool/test builtin=false"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("plugins = %v, want %v", got, want)
	}
	for _, p := range m.Plugins() {
		if p.Name == "test" && p.Kind == "tool" && filepath.Dir(p.Path) != dir {
			t.Errorf("shadowed plugin from %s used; want the first directory %s", p.Path, dir)
		}
	}
}

func TestToolRoundTrip(t *testing.T) {
	ts := newManager(t, plugins.Options{}).Toolset()
	specs, err := ts.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 13 || specs[0].Name != "noop" || specs[0].Risk != engine.RiskLow || !specs[0].ReadOnly {
		t.Fatalf("specs = %+v", specs)
	}
	res, updates, err := invoke(t, ts, "echo", `{"text":"hello"}`)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	if err := json.Unmarshal(res.Content, &got); err != nil {
		t.Fatal(err)
	}
	if got["text"] != "hello" || got["workspace"] != "/w" || got["call_id"] != "c1" || res.Summary != "echoed" {
		t.Errorf("result = %s %q", res.Content, res.Summary)
	}
	if len(updates) != 2 || updates[0].Progress == nil || updates[0].Progress.Message != "echoing" ||
		updates[1].Output == nil || updates[1].Output.Text != "hello" || updates[1].Output.Stream != "stdout" {
		t.Errorf("updates = %+v", updates)
	}
}

func TestToolErrorKeepsCodeAndMessage(t *testing.T) {
	ts := newManager(t, plugins.Options{}).Toolset()
	_, _, err := invoke(t, ts, "fail", `{"code":"not_found","message":"no such file: a.go"}`)
	var te *engine.ToolError
	if !errors.As(err, &te) || te.Code != engine.ToolCodeNotFound || te.Message != "no such file: a.go" {
		t.Fatalf("err = %#v", err)
	}
	if !errors.Is(err, engine.ErrNotFound) {
		t.Error("tool error does not match engine.ErrNotFound")
	}
	_, _, err = invoke(t, ts, "no_such_tool", `{}`)
	if !errors.As(err, &te) || te.Code != engine.ToolCodeUnknownTool {
		t.Fatalf("unknown tool: err = %v", err)
	}
}

func TestCrashDuringCallRestartsPlugin(t *testing.T) {
	logs := &logBuffer{}
	ts := newManager(t, plugins.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))}).Toolset()
	before := pidOf(t, ts)
	_, updates, err := invoke(t, ts, "crash", `{}`)
	var te *engine.ToolError
	if !errors.As(err, &te) || te.Code != engine.ToolCodePluginCrashed || !errors.Is(err, engine.ErrPluginCrashed) {
		t.Fatalf("err = %#v, want a plugin_crashed tool error", err)
	}
	if !strings.Contains(te.Message, `tool plugin "test" exited during crash`) {
		t.Errorf("message = %q", te.Message)
	}
	if len(updates) != 1 || updates[0].Progress == nil {
		t.Errorf("progress before the crash was lost: %+v", updates)
	}
	res, _, err := invoke(t, ts, "echo", `{"text":"again"}`)
	if err != nil {
		t.Fatalf("call after the crash: %v", err)
	}
	if !bytes.Contains(res.Content, []byte("again")) {
		t.Errorf("result = %s", res.Content)
	}
	after := pidOf(t, ts)
	if after == before || after == 0 {
		t.Errorf("pid before %d after %d: want a new process", before, after)
	}
	waitGone(t, before)
	if !strings.Contains(logs.String(), "plugin process died; restarting") {
		t.Errorf("crash not logged:\n%s", logs)
	}
}

func TestCrashedPluginChildrenAreKilled(t *testing.T) {
	ts := newManager(t, plugins.Options{}).Toolset()
	_, updates, err := invoke(t, ts, "spawn_and_crash", `{}`)
	if !errors.Is(err, engine.ErrPluginCrashed) {
		t.Fatalf("err = %v", err)
	}
	if len(updates) != 1 || updates[0].Output == nil {
		t.Fatalf("updates = %+v", updates)
	}
	child, _ := strconv.Atoi(updates[0].Output.Text)
	if child == 0 {
		t.Fatalf("no child pid in %+v", updates)
	}
	waitGone(t, child)
	if _, _, err := invoke(t, ts, "noop", `{}`); err != nil {
		t.Fatal(err)
	}
}

func TestDeadlineReachesPlugin(t *testing.T) {
	ts := newManager(t, plugins.Options{}).Toolset()
	before := pidOf(t, ts)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := ts.Invoke(ctx, engine.InvokeRequest{CallID: "c", Tool: "sleep", Args: json.RawMessage(`{"ms":20000}`)}, func(engine.ToolUpdate) {})
	if err == nil {
		t.Fatal("a 20 s sleep with a 100 ms deadline succeeded")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("call took %s after its deadline", d)
	}
	if errors.Is(err, engine.ErrPluginCrashed) {
		t.Errorf("a deadline was reported as a crash: %v", err)
	}
	if after := pidOf(t, ts); after != before {
		t.Errorf("plugin restarted after a deadline (pid %d -> %d)", before, after)
	}
}

// recordingHost approves every other action and answers searches with
// canned results, recording what it was asked.
type recordingHost struct {
	mu      sync.Mutex
	got     []engine.ActionApproval
	queries []any // each search query, in the order received

	symbols []engine.SymbolHit
	chunks  []engine.ChunkHit
	vectors []engine.ChunkHit
	// streamed are the matches SearchText reports through onMatch; text is
	// its result (whose Matches may differ from streamed).
	streamed []engine.TextMatch
	text     engine.TextResult
	// firstSeen, when set, is closed by the test once the first match has
	// reached it; SearchText waits for that before the second match, so a
	// shim that only delivers matches with the result fails.
	firstSeen chan struct{}
	// errs are the errors of the search methods, by method name; a text
	// search fails after streaming its matches.
	errs map[string]error
}

func (h *recordingHost) RequestApproval(_ context.Context, a engine.ActionApproval) (engine.ApprovalDecision, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.got = append(h.got, a)
	return engine.ApprovalDecision{Approved: len(h.got)%2 == 1, Reason: fmt.Sprintf("answer %d", len(h.got))}, nil
}

func (h *recordingHost) record(q any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.queries = append(h.queries, q)
}

func (h *recordingHost) SearchSymbols(_ context.Context, q engine.SymbolQuery) ([]engine.SymbolHit, error) {
	h.record(q)
	if err := h.errs["SearchSymbols"]; err != nil {
		return nil, err
	}
	return h.symbols, nil
}

func (h *recordingHost) SearchText(ctx context.Context, q engine.TextQuery, onMatch func(engine.TextMatch)) (engine.TextResult, error) {
	h.record(q)
	for i, m := range h.streamed {
		onMatch(m)
		if i == 0 && h.firstSeen != nil {
			select {
			case <-h.firstSeen:
			case <-time.After(10 * time.Second):
				return engine.TextResult{}, errors.New("the first match did not reach the tool while the search ran: matches are not streamed")
			case <-ctx.Done():
				return engine.TextResult{}, ctx.Err()
			}
		}
	}
	if err := h.errs["SearchText"]; err != nil {
		return engine.TextResult{}, err
	}
	return h.text, nil
}

func (h *recordingHost) SearchChunks(_ context.Context, q engine.ChunkQuery) ([]engine.ChunkHit, error) {
	h.record(q)
	if err := h.errs["SearchChunks"]; err != nil {
		return nil, err
	}
	return h.chunks, nil
}

func (h *recordingHost) SearchVectors(_ context.Context, q engine.ChunkQuery) ([]engine.ChunkHit, error) {
	h.record(q)
	if err := h.errs["SearchVectors"]; err != nil {
		return nil, err
	}
	return h.vectors, nil
}

func TestHostCallbackThroughBroker(t *testing.T) {
	ts := newManager(t, plugins.Options{}).Toolset()
	host := &recordingHost{}
	for i, want := range []string{`{"approved":true,"reason":"answer 1"}`, `{"approved":false,"reason":"answer 2"}`} {
		res, err := ts.Invoke(context.Background(), engine.InvokeRequest{
			CallID: fmt.Sprintf("call-%d", i), Tool: "ask", Args: json.RawMessage(`{"text":"main.go"}`), Host: host,
		}, func(engine.ToolUpdate) {})
		if err != nil {
			t.Fatal(err)
		}
		if string(res.Content) != want {
			t.Errorf("call %d: result %s, want %s", i, res.Content, want)
		}
	}
	if len(host.got) != 2 {
		t.Fatalf("host asked %d times, want 2", len(host.got))
	}
	a := host.got[0]
	if a.Action != "overwrite" || a.Description != "overwrite main.go" || a.Preview != "diff of main.go" ||
		a.Risk.Level != engine.RiskHigh || !a.Risk.Reversible || len(a.Risk.Reasons) != 1 {
		t.Errorf("approval request = %+v", a)
	}
	// Without a host the plugin is told there are no callbacks.
	_, _, err := invoke(t, ts, "ask", `{}`)
	if err == nil || !strings.Contains(err.Error(), "no host callbacks") {
		t.Errorf("ask without host: %v", err)
	}
}

// searchQueries sets every field of every query to a value other than its
// zero value, so that a field the shims drop shows.
var searchQueries = testtools.SearchArgs{
	Symbols: &engine.SymbolQuery{Query: "ReadFile", Kind: "function", Path: "tools/fs", IncludeRefs: true, Limit: 7},
	Text: &engine.TextQuery{Pattern: `func (New|Open)\b`, Regex: true, CaseInsensitive: true, Path: "engine",
		Include: "**/*.go", ContextLines: 2, Limit: 40},
	Chunks:  &engine.ChunkQuery{Query: "where are retries configured", Path: "models", Limit: 3},
	Vectors: &engine.ChunkQuery{Query: "parse a gitignore file", Path: "engine/workspace", Limit: 4},
}

// invokeSearch runs the test plugin's search tool with host and returns its
// report and the match outputs it streamed. When host.firstSeen is set,
// it is closed when the first match output arrives.
func invokeSearch(t *testing.T, ts engine.Toolset, host *recordingHost, args testtools.SearchArgs) (testtools.SearchReport, []string) {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var outputs []string
	res, err := ts.Invoke(ctx, engine.InvokeRequest{CallID: "search-1", Tool: "search", Args: raw, WorkspaceRoot: "/w", Host: host},
		func(u engine.ToolUpdate) {
			if u.Output == nil || u.Output.Stream != "match" {
				return
			}
			outputs = append(outputs, u.Output.Text)
			if len(outputs) == 1 && host.firstSeen != nil {
				close(host.firstSeen)
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	var rep testtools.SearchReport
	if err := json.Unmarshal(res.Content, &rep); err != nil {
		t.Fatalf("search report %s: %v", res.Content, err)
	}
	return rep, outputs
}

// textMatches returns n matches with context lines, in file order.
func textMatches(n int) []engine.TextMatch {
	out := make([]engine.TextMatch, n)
	for i := range out {
		out[i] = engine.TextMatch{Path: fmt.Sprintf("engine/f%02d.go", i/3), Line: 10 + i, Column: 1 + i%5,
			Text: fmt.Sprintf("func New%d() *T { // é%d", i, i), Before: []string{"// doc", ""}, After: []string{"\treturn nil"}}
	}
	return out
}

func TestHostSearchThroughBroker(t *testing.T) {
	ts := newManager(t, plugins.Options{}).Toolset()
	matches := textMatches(25)
	host := &recordingHost{
		symbols: []engine.SymbolHit{
			{Name: "ReadFile", Kind: "function", Container: "Tools", Path: "tools/fs/read.go", Language: "go",
				StartLine: 45, EndLine: 97, Definition: true, Match: "exact", Score: 12.625},
			{Name: "readFile", Kind: "method", Path: "tools/fs/fs.go", Language: "go", StartLine: 3, EndLine: 3, Match: "fuzzy", Score: 0.1},
		},
		streamed:  matches,
		text:      engine.TextResult{Matches: matches, FilesSearched: 12, Truncated: true},
		firstSeen: make(chan struct{}),
		chunks: []engine.ChunkHit{{Path: "models/ollama/client.go", StartLine: 1, EndLine: 40, Language: "go",
			Kind: "function", Name: "retry", Score: 3.5, Text: "func retry() {}\n"}},
		vectors: []engine.ChunkHit{{Path: "engine/workspace/ignore.go", StartLine: 31, EndLine: 45, Language: "go", Score: 0.875}},
	}
	rep, outputs := invokeSearch(t, ts, host, searchQueries)

	// The host got every query field for field, in call order.
	want := []any{*searchQueries.Symbols, *searchQueries.Text, *searchQueries.Chunks, *searchQueries.Vectors}
	if !reflect.DeepEqual(host.queries, want) {
		t.Errorf("host got queries\n%+v\nwant\n%+v", host.queries, want)
	}
	if rep.Symbols == nil || rep.Symbols.Error != nil || !reflect.DeepEqual(rep.Symbols.Hits, host.symbols) {
		t.Errorf("symbols = %+v, want %+v", rep.Symbols, host.symbols)
	}
	if rep.Chunks == nil || rep.Chunks.Error != nil || !reflect.DeepEqual(rep.Chunks.Hits, host.chunks) {
		t.Errorf("chunks = %+v, want %+v", rep.Chunks, host.chunks)
	}
	if rep.Vectors == nil || rep.Vectors.Error != nil || !reflect.DeepEqual(rep.Vectors.Hits, host.vectors) {
		t.Errorf("vectors = %+v, want %+v", rep.Vectors, host.vectors)
	}
	if rep.Text == nil {
		t.Fatal("no text search report")
	}
	if e := rep.Text.Error; e != nil {
		t.Fatalf("text search: %q (matches %q)", e.Message, e.Is)
	}
	if !reflect.DeepEqual(rep.Text.Streamed, matches) {
		t.Errorf("streamed matches\n%+v\nwant\n%+v", rep.Text.Streamed, matches)
	}
	if !reflect.DeepEqual(rep.Text.Result, host.text) {
		t.Errorf("text result\n%+v\nwant\n%+v", rep.Text.Result, host.text)
	}
	// Each match reached the caller as an output, in order.
	var wantOut []string
	for _, m := range matches {
		b, _ := json.Marshal(m)
		wantOut = append(wantOut, string(b))
	}
	if !slices.Equal(outputs, wantOut) {
		t.Errorf("match outputs\n%q\nwant\n%q", outputs, wantOut)
	}
}

// TestHostSearchTextFinalList: when the host's final list is not what it
// streamed, the plugin's result is the final list.
func TestHostSearchTextFinalList(t *testing.T) {
	ts := newManager(t, plugins.Options{}).Toolset()
	m := textMatches(3)
	for _, tt := range []struct {
		name           string
		streamed, last []engine.TextMatch
		wantLast       []engine.TextMatch
	}{
		{"reordered and cut", m, []engine.TextMatch{m[2], m[0]}, []engine.TextMatch{m[2], m[0]}},
		{"none streamed", nil, m[:1], m[:1]},
		{"streamed, none kept", m, nil, []engine.TextMatch{}},
		{"nothing", nil, nil, []engine.TextMatch{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			host := &recordingHost{streamed: tt.streamed, text: engine.TextResult{Matches: tt.last, FilesSearched: 3}}
			rep, _ := invokeSearch(t, ts, host, testtools.SearchArgs{Text: &engine.TextQuery{Pattern: "x"}})
			if rep.Text == nil || rep.Text.Error != nil || rep.Text.Result.FilesSearched != 3 {
				t.Fatalf("text = %+v", rep.Text)
			}
			if !reflect.DeepEqual(rep.Text.Result.Matches, tt.wantLast) {
				t.Errorf("result matches %+v, want %+v", rep.Text.Result.Matches, tt.wantLast)
			}
			if len(rep.Text.Streamed) != len(tt.streamed) {
				t.Errorf("streamed %d matches, want %d", len(rep.Text.Streamed), len(tt.streamed))
			}
		})
	}
}

// TestHostSearchErrors: the plugin gets the host's error text verbatim,
// matching the engine sentinel it wrapped.
func TestHostSearchErrors(t *testing.T) {
	ts := newManager(t, plugins.Options{}).Toolset()
	tests := []struct {
		name string
		err  error
		is   []string // the sentinels the plugin's error matches
	}{
		{"unsupported", fmt.Errorf("%w: this engine has no code index; run plexus index, or search with the fs tools", engine.ErrUnsupported), []string{"unsupported"}},
		{"invalid request", fmt.Errorf("%w: pattern %q: error parsing regexp: missing closing ): `a(b`", engine.ErrInvalidRequest, "a(b"), []string{"invalid_request"}},
		{"not found", fmt.Errorf("%w: /w is not an indexed workspace", engine.ErrNotFound), []string{"not_found"}},
		{"timeout", fmt.Errorf("%w: the index is still loading", engine.ErrTimeout), []string{"timeout"}},
		{"tool error", engine.ToolErrorf(engine.ToolCodeInvalidInput, "kind %q is unknown", "fn"), []string{"invalid_request"}},
		{"unclassified", errors.New("index shard 3: checksum mismatch"), []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			streamed := textMatches(2)
			host := &recordingHost{streamed: streamed, errs: map[string]error{
				"SearchSymbols": tt.err, "SearchText": tt.err, "SearchChunks": tt.err, "SearchVectors": tt.err,
			}}
			rep, outputs := invokeSearch(t, ts, host, searchQueries)
			check := func(method string, got *testtools.ErrorReport) {
				t.Helper()
				want := tt.err.Error()
				if got == nil {
					t.Errorf("%s: no error, want %q", method, want)
					return
				}
				if got.Message != want || !slices.Equal(got.Is, tt.is) {
					t.Errorf("%s: error %q matching %q\nwant  %q matching %q", method, got.Message, got.Is, want, tt.is)
				}
			}
			check("SearchSymbols", rep.Symbols.Error)
			check("SearchText", rep.Text.Error)
			check("SearchChunks", rep.Chunks.Error)
			check("SearchVectors", rep.Vectors.Error)
			// Matches streamed before the error still arrived.
			if !reflect.DeepEqual(rep.Text.Streamed, streamed) || len(outputs) != 2 {
				t.Errorf("streamed before the error: %+v (%d outputs)", rep.Text.Streamed, len(outputs))
			}
		})
	}
}

func TestPluginLogsAreRelogged(t *testing.T) {
	logs := &logBuffer{}
	ts := newManager(t, plugins.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))}).Toolset()
	if _, _, err := invoke(t, ts, "log", `{"text":"disk is nearly full"}`); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for !strings.Contains(logs.String(), "disk is nearly full") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	var found bool
	for _, line := range strings.Split(logs.String(), "\n") {
		if !strings.Contains(line, "disk is nearly full") {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		found = rec["level"] == "WARN" && rec["plugin"] == "test" && rec["msg"] == "disk is nearly full" && rec["tool"] == "log"
	}
	if !found {
		t.Fatalf("plugin log not re-logged as a WARN under plugin=test:\n%s", logs)
	}
}

func TestCloseStopsEveryProcess(t *testing.T) {
	m := newManager(t, plugins.Options{})
	pid := pidOf(t, m.Toolset())
	if _, err := m.Models()["test"].ListModels(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
	if _, _, err := invoke(t, m.Toolset(), "noop", `{}`); err == nil {
		t.Error("call after Close succeeded")
	}
}

func TestModelPlugin(t *testing.T) {
	m := newManager(t, plugins.Options{Settings: map[string]map[string]string{"test": {"base_url": "http://x"}}})
	model := m.Models()["test"]
	ctx := context.Background()
	infos, err := model.ListModels(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 || infos[1].Name != "base_url=http://x" || !infos[0].HasCapability("completion") {
		t.Errorf("models = %+v (settings must arrive through Configure)", infos)
	}
	chat := func(msg string) (string, error) {
		var text strings.Builder
		var done string
		err := model.Chat(ctx, engine.ChatRequest{Model: "echo", Messages: []engine.Message{{Role: engine.RoleUser, Content: msg}}},
			func(c engine.ChatChunk) error {
				text.WriteString(c.Text)
				if c.DoneReason != "" {
					done = c.DoneReason
				}
				return nil
			})
		return text.String() + "|" + done, err
	}
	got, err := chat("one two three")
	if err != nil || got != "one two three|stop" {
		t.Errorf("chat = %q, %v", got, err)
	}
	_, err = chat("missing")
	var me *engine.ModelError
	if !errors.As(err, &me) || !errors.Is(err, engine.ErrModelNotFound) || me.Message != `model "echo" not found, try pulling it first` {
		t.Errorf("missing model: %#v", err)
	}
	_, err = chat("crash")
	if !errors.Is(err, engine.ErrPluginCrashed) {
		t.Errorf("crash: %v", err)
	}
	if got, err := chat("still here"); err != nil || got != "still here|stop" {
		t.Errorf("after crash: %q, %v", got, err)
	}
	emb, err := model.Embed(ctx, engine.EmbedRequest{Model: "echo", Inputs: []string{"ab", "abcd"}})
	if err != nil || len(emb.Vectors) != 2 || emb.Vectors[1][0] != 4 {
		t.Errorf("embed = %+v, %v", emb, err)
	}
}

func TestModelConfigureFailureIsAStartError(t *testing.T) {
	m := newManager(t, plugins.Options{Settings: map[string]map[string]string{"test": {"fail": "bad key"}}})
	_, err := m.Models()["test"].ListModels(context.Background())
	if !errors.Is(err, engine.ErrModelUnavailable) || !strings.Contains(err.Error(), "refusing settings: bad key") {
		t.Fatalf("err = %v", err)
	}
}

func TestBrokenPluginLeavesOthersUsable(t *testing.T) {
	dir := pluginDir(t, "plexus-tool-test")
	script := filepath.Join(dir, "plexus-tool-broken")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho 'not a plugin' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	lockFiles(t, dir, "plexus-tool-test", "plexus-tool-broken")
	ts := newManager(t, plugins.Options{Dirs: []string{dir}}).Toolset()
	specs, err := ts.Tools(context.Background())
	if err == nil || !strings.Contains(err.Error(), `start tool plugin "broken"`) {
		t.Errorf("err = %v, want it to name the broken plugin", err)
	}
	if len(specs) != 13 {
		t.Errorf("got %d tools from the working plugin, want 13", len(specs))
	}
	if _, _, err := invoke(t, ts, "noop", `{}`); err != nil {
		t.Error(err)
	}
}

// TestConcurrentCallsDuringCrash runs calls from many goroutines while one
// of them crashes the plugin: every call either succeeds or fails with a
// crash error, and the plugin serves again afterwards.
func TestConcurrentCallsDuringCrash(t *testing.T) {
	ts := newManager(t, plugins.Options{}).Toolset()
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tool := "echo"
			if i == 10 {
				tool = "crash"
			}
			_, _, err := invoke(t, ts, tool, `{"text":"x"}`)
			if err != nil && !errors.Is(err, engine.ErrPluginCrashed) {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("unexpected error: %v", err)
	}
	if _, _, err := invoke(t, ts, "noop", `{}`); err != nil {
		t.Fatal(err)
	}
}

// TestRunByHand checks that a plugin binary run outside Plexus says so.
func TestRunByHand(t *testing.T) {
	cmd := exec.Command(pluginBin)
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !bytes.Contains(out, []byte("plugin")) {
		t.Errorf("running the plugin by hand: %v\n%s", err, out)
	}
}

// TestCloseDoesNotWaitForBackoff crashes a plugin whose restart backoff is
// ten minutes: Close must return without waiting it out (issue 14: `plexus
// run` exited up to 10 s after its turn because Close slept through the
// backoff of a crash-looping plugin).
func TestCloseDoesNotWaitForBackoff(t *testing.T) {
	m, err := plugins.NewManager(plugins.Options{
		Dirs:       []string{pluginDir(t, "plexus-tool-test")},
		MinBackoff: 10 * time.Minute, MaxBackoff: 10 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	// The crash schedules a restart after the backoff.
	if _, _, err := invoke(t, m.Toolset(), "crash", `{}`); !errors.Is(err, engine.ErrPluginCrashed) {
		m.Close()
		t.Fatalf("err = %v, want a crash", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close is still waiting after 30 s: it waits out the restart backoff (10 minutes)")
	}
}

// TestCallsShareALongLivedStream: tool calls go over the plugin's Calls
// stream, one stream reused call after call (issue 16: a stream per call
// cost more than a unary gRPC call); with the Calls stream turned off,
// over Invoke. TestConcurrentCallsDuringCrash runs calls at once.
func TestCallsShareALongLivedStream(t *testing.T) {
	stream := func(ts engine.Toolset) (method, id string) {
		t.Helper()
		res, _, err := invoke(t, ts, "stream", `{}`)
		if err != nil {
			t.Fatal(err)
		}
		var r struct{ Method, Stream string }
		if err := json.Unmarshal(res.Content, &r); err != nil {
			t.Fatal(err)
		}
		return r.Method, r.Stream
	}
	ts := newManager(t, plugins.Options{}).Toolset()
	method, first := stream(ts)
	if method != "/plexus.v1.ToolService/Calls" {
		t.Fatalf("the call arrived on %s, want the Calls stream", method)
	}
	for range 3 {
		if _, id := stream(ts); id != first {
			t.Fatalf("a later call arrived on stream %s, want the first call's %s", id, first)
		}
	}
	m := newManager(t, plugins.Options{})
	plugins.UseInvokePerCall(m)
	if method, _ := stream(m.Toolset()); method != "/plexus.v1.ToolService/Invoke" {
		t.Errorf("with Calls turned off, the call arrived on %s, want Invoke", method)
	}
}

// TestTimeoutsPerPlugin: a plugin's Options.Timeouts entry becomes the
// Timeout of each of its tools, the engine's deadline for their calls
// (issue 20 item 8).
func TestTimeoutsPerPlugin(t *testing.T) {
	ts := newManager(t, plugins.Options{Timeouts: map[string]time.Duration{"test": 3 * time.Second}}).Toolset()
	specs, err := ts.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range specs {
		if s.Timeout != 3*time.Second {
			t.Errorf("%s: Timeout %s, want 3s", s.Name, s.Timeout)
		}
	}
	other := newManager(t, plugins.Options{Timeouts: map[string]time.Duration{"other": time.Second}}).Toolset()
	specs, _ = other.Tools(context.Background())
	if len(specs) == 0 || specs[0].Timeout != 0 {
		t.Errorf("a plugin without an entry: specs %+v, want Timeout 0 (the engine's default)", specs)
	}
}

// TestPluginWithoutCallsUsesInvoke: a plugin built with an SDK from before
// ToolService.Calls answers it Unimplemented; its calls go over Invoke.
func TestPluginWithoutCallsUsesInvoke(t *testing.T) {
	ts := newManager(t, plugins.Options{Dirs: []string{pluginDir(t, "plexus-tool-oldsdk")}}).Toolset()
	for range 2 {
		res, _, err := invoke(t, ts, "stream", `{}`)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(res.Content, []byte(`"method":"/plexus.v1.ToolService/Invoke"`)) {
			t.Fatalf("result %s, want the call on Invoke", res.Content)
		}
	}
}

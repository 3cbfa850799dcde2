package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/plugins/mcp"
)

// These tests run the real third-party servers from npm, installed by
// npm ci --prefix plugins/mcp/testdata/npm, with node and no network.

// requireNodeEnv, set to 1 (CI sets it), makes the tests with npm servers
// fail instead of skip when node or the npm install is missing.
const requireNodeEnv = "PLEXUS_REQUIRE_NODE"

// npmServer returns node and the entry script of the npm package
// @modelcontextprotocol/server-NAME, skipping the test (failing it with
// PLEXUS_REQUIRE_NODE=1) when either is missing.
func npmServer(t testing.TB, name string) (node, script string) {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("testdata", "npm", "node_modules", "@modelcontextprotocol", "server-"+name, "dist", "index.js"))
	if err != nil {
		t.Fatal(err)
	}
	node, err = exec.LookPath("node")
	missing := ""
	if err != nil {
		missing = "node is not on PATH"
	} else if _, err := os.Stat(script); err != nil {
		missing = fmt.Sprintf("%s is missing (run npm ci --prefix plugins/mcp/testdata/npm)", script)
	}
	if missing != "" {
		if os.Getenv(requireNodeEnv) == "1" {
			t.Fatalf("%s, and %s=1", missing, requireNodeEnv)
		}
		t.Skipf("%s; set %s=1 to make this a failure", missing, requireNodeEnv)
	}
	return node, script
}

// testLogger logs to t.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// npmToolset is a Toolset over server-filesystem (on dir) as "fs" and
// server-everything as "every", both over stdio.
func npmToolset(t *testing.T, dir string, opts mcp.Options) *mcp.Toolset {
	t.Helper()
	node, fsScript := npmServer(t, "filesystem")
	_, everyScript := npmServer(t, "everything")
	cfg := &mcp.Config{Servers: map[string]mcp.ServerConfig{
		"fs":    {Command: node, Args: []string{fsScript, dir}},
		"every": {Command: node, Args: []string{everyScript, "stdio"}},
	}}
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	ts := mcp.New(cfg, opts)
	t.Cleanup(func() { ts.Close() })
	return ts
}

func specsByName(specs []engine.ToolSpec) map[string]engine.ToolSpec {
	m := map[string]engine.ToolSpec{}
	for _, s := range specs {
		m[s.Name] = s
	}
	return m
}

func invoke(t *testing.T, ts engine.Toolset, tool, args string) (engine.ToolResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return ts.Invoke(ctx, engine.InvokeRequest{CallID: "c1", Tool: tool, Args: json.RawMessage(args)}, func(engine.ToolUpdate) {})
}

func TestNPMServersListAndCall(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello from the workspace\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := npmToolset(t, dir, mcp.Options{})
	specs, err := ts.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	byName := specsByName(specs)

	// Annotation mapping, on the servers' own annotations.
	for _, c := range []struct {
		name          string
		readOnly      bool
		needsApproval bool
		risk          engine.RiskLevel
	}{
		{"fs__read_text_file", true, false, engine.RiskLow},      // readOnlyHint, closed world
		{"fs__write_file", false, true, engine.RiskHigh},         // destructiveHint true
		{"fs__create_directory", false, true, engine.RiskMedium}, // destructiveHint false, closed world
		{"every__get-sum", true, false, engine.RiskLow},          // readOnlyHint
		{"every__trigger-long-running-operation", true, false, engine.RiskLow},
	} {
		got, ok := byName[c.name]
		if !ok {
			t.Errorf("no tool %s in %v", c.name, keys(byName))
			continue
		}
		if got.ReadOnly != c.readOnly || got.NeedsApproval != c.needsApproval || got.Risk != c.risk {
			t.Errorf("%s: read-only %v, approval %v, risk %s; want %v, %v, %s", c.name, got.ReadOnly, got.NeedsApproval, got.Risk, c.readOnly, c.needsApproval, c.risk)
		}
		var schema map[string]any
		if err := json.Unmarshal(got.InputSchema, &schema); err != nil || schema["type"] != "object" {
			t.Errorf("%s: input schema %s", c.name, got.InputSchema)
		}
		if got.Description == "" {
			t.Errorf("%s: no description", c.name)
		}
	}

	res, err := invoke(t, ts, "fs__read_text_file", `{"path":"hello.txt"}`)
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ Text string }
	json.Unmarshal(res.Content, &out)
	if out.Text != "hello from the workspace\n" && out.Text != "hello from the workspace" {
		t.Errorf("read_text_file: %s", res.Content)
	}

	res, err = invoke(t, ts, "every__get-sum", `{"a":2,"b":40}`)
	if err != nil {
		t.Fatal(err)
	}
	if json.Unmarshal(res.Content, &out); !strings.Contains(out.Text, "42") || !strings.Contains(res.Summary, "42") {
		t.Errorf("get-sum: %s (summary %q)", res.Content, res.Summary)
	}

	// structuredContent is kept as JSON.
	res, err = invoke(t, ts, "every__get-structured-content", `{"location":"New York"}`)
	if err != nil {
		t.Fatal(err)
	}
	var structured struct {
		Structured map[string]any `json:"structured"`
	}
	if json.Unmarshal(res.Content, &structured); structured.Structured["temperature"] == nil {
		t.Errorf("get-structured-content: %s", res.Content)
	}

	// An image is summarised, not handed over.
	res, err = invoke(t, ts, "every__get-tiny-image", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res.Content), `"type":"image","mime_type":"image/png","bytes":`) {
		t.Errorf("get-tiny-image: %s", res.Content)
	}

	// An error result (a path outside the allowed directory) is a
	// *engine.ToolError with the server's words.
	_, err = invoke(t, ts, "fs__read_text_file", `{"path":"/etc/hostname"}`)
	var te *engine.ToolError
	if !errors.As(err, &te) || te.Code != engine.ToolCodeFailed || !strings.Contains(te.Message, "outside allowed directories") {
		t.Errorf("read outside: %v", err)
	}
	// Bad arguments.
	_, err = invoke(t, ts, "every__get-sum", `{"a":"x"}`)
	if !errors.As(err, &te) {
		t.Errorf("bad args: %v", err)
	}
	// An unknown name.
	_, err = invoke(t, ts, "fs__nope", `{}`)
	if !errors.Is(err, engine.ErrUnknownTool) {
		t.Errorf("unknown tool: %v", err)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestProgressAndTimeout runs server-everything's long-running operation:
// its progress notifications reach onUpdate, and a call that outlives the
// server's timeout ends with a timeout error while the server stays
// usable.
func TestProgressAndTimeout(t *testing.T) {
	node, script := npmServer(t, "everything")
	cfg := &mcp.Config{Servers: map[string]mcp.ServerConfig{
		"every": {Command: node, Args: []string{script}, Timeout: 1500 * time.Millisecond},
	}}
	ts := mcp.New(cfg, mcp.Options{Logger: testLogger(t)})
	defer ts.Close()
	ctx := context.Background()

	var mu sync.Mutex
	var updates []engine.ToolUpdate
	onUpdate := func(u engine.ToolUpdate) { mu.Lock(); updates = append(updates, u); mu.Unlock() }
	res, err := ts.Invoke(ctx, engine.InvokeRequest{Tool: "every__trigger-long-running-operation", Args: json.RawMessage(`{"duration":0.6,"steps":3}`)}, onUpdate)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	// The SDK hands notifications over apart from responses, so the last
	// may arrive after the call returned (and is dropped).
	if len(updates) < 2 {
		t.Errorf("%d updates, want 2 or 3", len(updates))
	}
	for i, u := range updates {
		if p := u.Progress; p == nil || p.Percentage == nil || *p.Percentage != float64(100*(i+1)/3) && *p.Percentage != 100*float64(i+1)/3 {
			t.Errorf("update %d: %+v", i, u.Progress)
		}
	}
	mu.Unlock()
	if !strings.Contains(res.Summary, "completed") {
		t.Errorf("summary %q", res.Summary)
	}

	start := time.Now()
	_, err = ts.Invoke(ctx, engine.InvokeRequest{Tool: "every__trigger-long-running-operation", Args: json.RawMessage(`{"duration":5,"steps":5}`)}, onUpdate)
	if !errors.Is(err, engine.ErrTimeout) || !strings.Contains(err.Error(), "1.5s") {
		t.Errorf("slow call: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the timeout took %s", d)
	}
	// The caller's deadline wins when it is shorter.
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = ts.Invoke(cctx, engine.InvokeRequest{Tool: "every__trigger-long-running-operation", Args: json.RawMessage(`{"duration":5,"steps":5}`)}, onUpdate)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("call past the caller's deadline: %v", err)
	}
	if _, err := ts.Invoke(ctx, engine.InvokeRequest{Tool: "every__echo", Args: json.RawMessage(`{"message":"still here"}`)}, onUpdate); err != nil {
		t.Errorf("after timeouts: %v", err)
	}
}

// TestKilledServerRestarts kills server-everything's process: the call in
// flight fails with ErrPluginCrashed, the next call reconnects to a new
// process, and Close leaves no process of either behind.
func TestKilledServerRestarts(t *testing.T) {
	ts := npmToolset(t, t.TempDir(), mcp.Options{})
	ctx := context.Background()
	if _, err := ts.Tools(ctx); err != nil {
		t.Fatal(err)
	}
	pid := serverPid(t, ts, "every")

	errc := make(chan error, 1)
	go func() {
		_, err := ts.Invoke(ctx, engine.InvokeRequest{Tool: "every__trigger-long-running-operation", Args: json.RawMessage(`{"duration":10,"steps":10}`)}, func(engine.ToolUpdate) {})
		errc <- err
	}()
	time.Sleep(300 * time.Millisecond)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, engine.ErrPluginCrashed) {
			t.Fatalf("call during the crash: %v", err)
		}
		t.Logf("call during the crash: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not end after the server was killed")
	}
	res, err := invoke(t, ts, "every__echo", `{"message":"again"}`)
	if err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if !strings.Contains(string(res.Content), "Echo: again") {
		t.Errorf("echo: %s", res.Content)
	}
	pid2 := serverPid(t, ts, "every")
	if pid2 == pid || pid2 == 0 {
		t.Errorf("pid %d after restart, was %d", pid2, pid)
	}
	fsPid := serverPid(t, ts, "fs")
	ts.Close()
	for _, p := range []int{pid2, fsPid} {
		if alive(p) {
			t.Errorf("process %d still running after Close", p)
		}
	}
}

func serverPid(t *testing.T, ts *mcp.Toolset, name string) int {
	t.Helper()
	for _, s := range ts.Describe(context.Background()) {
		if s.Name == name {
			if s.Err != nil {
				t.Fatal(s.Err)
			}
			return s.Pid
		}
	}
	t.Fatalf("no server %s", name)
	return 0
}

// alive reports whether pid is a live (not zombie) process, waiting a
// little for it to go.
func alive(pid int) bool {
	for i := 0; i < 50; i++ {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false
		}
		if i := strings.LastIndexByte(string(b), ')'); i > 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X') {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// TestStartFailures: a server that cannot start is reported with what to
// fix, and the other servers' tools stay available.
func TestStartFailures(t *testing.T) {
	node, script := npmServer(t, "everything")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedURL := "http://" + ln.Addr().String() + "/mcp"
	ln.Close()
	cfg := &mcp.Config{Servers: map[string]mcp.ServerConfig{
		"every":   {Command: node, Args: []string{script}},
		"missing": {Command: "plexus-no-such-mcp-server"},
		"exits":   {Command: node, Args: []string{"-e", `console.error("cannot open the database: EACCES"); process.exit(3)`}},
		"refused": {URL: closedURL},
	}}
	ts := mcp.New(cfg, mcp.Options{Logger: testLogger(t), StartTimeout: 10 * time.Second})
	defer ts.Close()
	specs, err := ts.Tools(context.Background())
	if _, ok := specsByName(specs)["every__echo"]; !ok {
		t.Errorf("every's tools missing: %v", specs)
	}
	msg := fmt.Sprint(err)
	for _, want := range []string{
		`start MCP server "missing" (stdio plexus-no-such-mcp-server): command "plexus-no-such-mcp-server" not found`,
		`start MCP server "exits"`, "cannot open the database: EACCES",
		`start MCP server "refused" (http ` + closedURL + `)`, "connection refused",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	// A call to a failed server's tool says why.
	if _, err := invoke(t, ts, "every__echo", `{"message":"x"}`); err != nil {
		t.Errorf("every: %v", err)
	}
}

// TestStreamableHTTP runs server-everything in its streamable HTTP mode
// and calls it over HTTP, with a configured header.
func TestStreamableHTTP(t *testing.T) {
	node, script := npmServer(t, "everything")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	start := func() *exec.Cmd {
		cmd := exec.Command(node, script, "streamableHttp")
		cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		waitListening(t, port)
		return cmd
	}
	cmd := start()

	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	ts := mcp.New(&mcp.Config{Servers: map[string]mcp.ServerConfig{
		"web": {URL: url, Headers: map[string]string{"X-Plexus-Test": "1"}},
	}}, mcp.Options{Logger: testLogger(t)})
	defer ts.Close()
	st := ts.Describe(context.Background())
	if st[0].Err != nil || st[0].Transport != "http" || st[0].Target != url {
		t.Fatalf("describe: %+v", st[0])
	}
	res, err := invoke(t, ts, "web__get-sum", `{"a":1,"b":2}`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Summary, "3") {
		t.Errorf("get-sum over HTTP: %s", res.Content)
	}
	var mu sync.Mutex
	n := 0
	_, err = ts.Invoke(context.Background(), engine.InvokeRequest{Tool: "web__trigger-long-running-operation", Args: json.RawMessage(`{"duration":0.4,"steps":2}`)},
		func(engine.ToolUpdate) { mu.Lock(); n++; mu.Unlock() })
	// The last notification may come after the response (the SDK
	// dispatches them separately); updates after the call are dropped.
	if err != nil || n < 1 {
		t.Errorf("progress over HTTP: %d updates, %v", n, err)
	}

	// The server dies during a call: that call fails with
	// ErrPluginCrashed; once the server is back, the next call opens a
	// new session.
	errc := make(chan error, 1)
	go func() {
		_, err := ts.Invoke(context.Background(), engine.InvokeRequest{Tool: "web__trigger-long-running-operation", Args: json.RawMessage(`{"duration":10,"steps":10}`)}, func(engine.ToolUpdate) {})
		errc <- err
	}()
	time.Sleep(300 * time.Millisecond)
	cmd.Process.Kill()
	cmd.Wait()
	if err := <-errc; !errors.Is(err, engine.ErrPluginCrashed) {
		t.Errorf("call during the server's death: %v", err)
	} else {
		t.Logf("call during the server's death: %v", err)
	}
	start()
	if res, err := invoke(t, ts, "web__echo", `{"message":"back"}`); err != nil || !strings.Contains(res.Summary, "back") {
		t.Errorf("call on a new session: %v %v", res, err)
	}
}

func waitListening(t *testing.T, port int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("nothing listens on port %d", port)
}

// TestCloseKillsProcessGroup: a server started through a shell leaves a
// child that ignores the end of stdin (as npx's children may); Close
// kills it too.
func TestCloseKillsProcessGroup(t *testing.T) {
	node, script := npmServer(t, "everything")
	ts := mcp.New(&mcp.Config{Servers: map[string]mcp.ServerConfig{
		"every": {Command: "sh", Args: []string{"-c", `sleep 300 & "$0" "$1"`, node, script}},
	}}, mcp.Options{Logger: testLogger(t), TerminateTimeout: 500 * time.Millisecond})
	defer ts.Close()
	pgid := serverPid(t, ts, "every")
	members := groupMembers(pgid)
	if len(members) < 3 { // sh, sleep, node
		t.Fatalf("process group %d has %v", pgid, members)
	}
	ts.Close()
	for _, p := range members {
		if alive(p) {
			t.Errorf("process %d of the server's group still running after Close", p)
		}
	}
}

// groupMembers lists the live processes of process group pgid.
func groupMembers(pgid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		var pid int
		fmt.Sscan(e.Name(), &pid)
		if len(fields) > 2 && fields[2] == fmt.Sprint(pgid) && fields[0] != "Z" {
			out = append(out, pid)
		}
	}
	return out
}

// TestServerEnvironment checks a stdio server gets the plugin
// environment: a secret of the host is withheld, a name Options.Env
// allows passes, and the server's "env" is added.
func TestServerEnvironment(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-host-secret")
	t.Setenv("PLEXUS_TEST_ALLOWED", "passed")
	t.Setenv("SERVER_TOKEN", "tok-123")
	node, script := npmServer(t, "everything")
	ts := mcp.New(&mcp.Config{Servers: map[string]mcp.ServerConfig{
		"every": {Command: node, Args: []string{script, "stdio"}, Env: map[string]string{"FROM_CONFIG": "given", "API_TOKEN": "Bearer ${env:SERVER_TOKEN}"}},
	}}, mcp.Options{Logger: testLogger(t), Env: []string{"PLEXUS_TEST_*"}})
	t.Cleanup(func() { ts.Close() })
	res, err := invoke(t, ts, "every__get-env", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	got := string(res.Content)
	for _, want := range []string{"PLEXUS_TEST_ALLOWED", "passed", "FROM_CONFIG", "given", "PATH", "Bearer tok-123"} {
		if !strings.Contains(got, want) {
			t.Errorf("the server's environment lacks %s: %.400s", want, got)
		}
	}
	if strings.Contains(got, "sk-host-secret") || strings.Contains(got, "OPENAI_API_KEY") || strings.Contains(got, "SERVER_TOKEN") {
		t.Errorf("the host's API key reached the MCP server: %.400s", got)
	}
}

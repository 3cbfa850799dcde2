package unixrpc_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/patch"
	"github.com/plexus-agent/plexus/engine/policy"
	"github.com/plexus-agent/plexus/engine/store"
	"github.com/plexus-agent/plexus/internal/scripttest"
	fstools "github.com/plexus-agent/plexus/tools/fs"
	"github.com/plexus-agent/plexus/transports/unixrpc"
)

// waitTimeout bounds every wait of the tests. Only a hang may reach it:
// on a loaded 2-core machine under the race detector, a 10 MB message
// alone can take over 20 s to go through, and a test that fails because
// the machine is slow says nothing about the code.
const waitTimeout = 2 * time.Minute

// step is one scripted model reply: chunks of text (delay apart), then
// tool calls. gate, when set, holds the reply (after the chunks) until it
// is closed or the call's context ends; err ends the call with an error.
type step struct {
	chunks []string
	delay  time.Duration
	calls  []engine.ToolCall
	gate   chan struct{}
	err    error
	// emitted, when set, is closed once the chunks have been handed over.
	emitted chan struct{}
}

type callT = engine.ToolCall

func mustWorkspace(t testing.TB, e *env) *engine.Workspace {
	t.Helper()
	ws, err := e.eng.OpenWorkspace(e.root)
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

func callOf(id, name, args string) engine.ToolCall {
	return engine.ToolCall{ID: id, Name: name, Args: json.RawMessage(args)}
}

// scriptModel plays replies by the first line of the turn's user
// message: the k-th model call of a turn gets script[line][k].
type scriptModel struct {
	scripttest.Base
	mu     sync.Mutex
	script map[string][]step
	users  []string
	// turns holds, for each turn, the user messages its first call saw
	// (the history's and its own).
	turns [][]string
}

func (m *scriptModel) set(prompt string, steps ...step) {
	m.mu.Lock()
	m.script[prompt] = steps
	m.mu.Unlock()
}

func (m *scriptModel) Chat(ctx context.Context, req engine.ChatRequest, onChunk func(engine.ChatChunk) error) error {
	u, k, err := scripttest.Position(req)
	if err != nil {
		return err
	}
	content := req.Messages[u].Content
	prompt, _, _ := strings.Cut(content, "\n")
	m.mu.Lock()
	if k == 0 {
		m.users = append(m.users, content)
		var seen []string
		for _, msg := range req.Messages {
			if msg.Role == engine.RoleUser {
				seen = append(seen, msg.Content)
			}
		}
		m.turns = append(m.turns, seen)
	}
	steps := m.script[prompt]
	m.mu.Unlock()
	if k >= len(steps) {
		return &engine.ModelError{Provider: "script", Message: fmt.Sprintf("no step %d scripted for %q", k, prompt)}
	}
	st := steps[k]
	for i, c := range st.chunks {
		if i > 0 && st.delay > 0 {
			select {
			case <-time.After(st.delay):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err := onChunk(engine.ChatChunk{Text: c}); err != nil {
			return err
		}
	}
	if st.emitted != nil {
		close(st.emitted)
	}
	if st.gate != nil {
		select {
		case <-st.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if st.err != nil {
		return st.err
	}
	for _, c := range st.calls {
		if err := onChunk(engine.ChatChunk{ToolCall: &c}); err != nil {
			return err
		}
	}
	return nil
}

func (m *scriptModel) turnHistories() [][]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([][]string(nil), m.turns...)
}

func (m *scriptModel) userMessages() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.users...)
}

// testTools adds to the file tools file_read, which needs approval and
// reports 50% progress halfway, and fail_tool, which always fails.
type testTools struct{ engine.Toolset }

func (tt testTools) Tools(ctx context.Context) ([]engine.ToolSpec, error) {
	specs, err := tt.Toolset.Tools(ctx)
	schema := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)
	return append(specs,
		engine.ToolSpec{Name: "file_read", Description: "Read a file (asks first).", InputSchema: schema, Risk: engine.RiskLow, ReadOnly: true, NeedsApproval: true},
		engine.ToolSpec{Name: "fail_tool", Description: "Always fails.", InputSchema: json.RawMessage(`{"type":"object"}`), Risk: engine.RiskLow, ReadOnly: true},
	), err
}

func (tt testTools) Invoke(ctx context.Context, req engine.InvokeRequest, onUpdate func(engine.ToolUpdate)) (engine.ToolResult, error) {
	switch req.Tool {
	case "file_read":
		var a struct{ Path string }
		json.Unmarshal(req.Args, &a)
		half := 50.0
		onUpdate(engine.ToolUpdate{Progress: &engine.ToolProgress{Message: "reading " + a.Path, Percentage: &half}})
		data, err := os.ReadFile(filepath.Join(req.WorkspaceRoot, filepath.Clean("/"+a.Path)))
		if err != nil {
			return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeNotFound, "%v", err)
		}
		return engine.JSONResult(map[string]any{"path": a.Path, "content": string(data)}, "read "+a.Path)
	case "fail_tool":
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeFailed, "fail_tool failed as it always does")
	}
	return tt.Toolset.Invoke(ctx, req, onUpdate)
}

// env is an in-process server on a real Unix socket, with a real store,
// patcher, policy and file tools.
type env struct {
	srv     *unixrpc.Server
	eng     *engine.Engine
	model   *scriptModel
	root    string
	sock    string
	tmp     string // a directory session files may use
	serveCh chan error
}

func newEnv(t testing.TB, opts ...func(*unixrpc.Options)) *env {
	t.Helper()
	return newEnvCfg(t, false, opts...)
}

// newMemEnv is newEnv with an engine that keeps sessions in memory only
// (no SQLite appends per event), for the benchmarks.
func newMemEnv(t testing.TB, opts ...func(*unixrpc.Options)) *env {
	t.Helper()
	return newEnvCfg(t, true, opts...)
}

func newEnvCfg(t testing.TB, memory bool, opts ...func(*unixrpc.Options)) *env {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(context.Background(), filepath.Join(dir, "plexus.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	model := &scriptModel{script: map[string][]step{}}
	fsTools := fstools.New(fstools.Options{})
	t.Cleanup(func() { fsTools.Close() })
	eo := engine.Options{
		Models: map[string]engine.Model{"script": model}, Model: engine.ModelRef{Provider: "script", Name: "test"},
		Tools: testTools{fsTools}, Patcher: patch.NewPatcher(), Patches: st,
		Gatekeeper: policy.NewGatekeeper(st), Sessions: st, Workspaces: st,
	}
	if memory {
		eo.Sessions, eo.Workspaces = nil, nil
	}
	eng, err := engine.New(eo)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "calc.go"), []byte("package calc\n\nfunc Add(a, b int) int {\n\treturn a - b\n}\n"), 0o644)
	ws, err := eng.OpenWorkspace(root)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{eng: eng, model: model, root: ws.Root, tmp: t.TempDir(), serveCh: make(chan error, 1)}
	o := unixrpc.Options{Engine: eng, Workspace: ws, SessionDir: filepath.Join(dir, "sessions"),
		SessionRoots: []string{e.tmp}, Version: "test"}
	for _, f := range opts {
		f(&o)
	}
	e.srv, err = unixrpc.New(o)
	if err != nil {
		t.Fatal(err)
	}
	e.sock = filepath.Join(t.TempDir(), "p.sock")
	ln, err := unixrpc.Listen(e.sock)
	if err != nil {
		t.Fatal(err)
	}
	go func() { e.serveCh <- e.srv.Serve(ln) }()
	t.Cleanup(func() { e.srv.Close() })
	return e
}

// msg is one message the client received.
type msg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
	raw string
}

func (m msg) isResponse() bool { return m.Method == "" }

// param decodes the params (or result) member at a dotted path.
func (m msg) get(path string) any {
	var v any
	src := m.Params
	if m.isResponse() {
		src = m.Result
	}
	json.Unmarshal(src, &v)
	for _, k := range strings.Split(path, ".") {
		if k == "" {
			continue
		}
		obj, _ := v.(map[string]any)
		v = obj[k]
	}
	return v
}

func (m msg) str(path string) string { s, _ := m.get(path).(string); return s }

// client is a line-oriented JSON-RPC client on a raw socket connection.
// Every received message is kept in order in log.
type client struct {
	t    testing.TB
	nc   net.Conn
	wmu  sync.Mutex
	next int

	mu      sync.Mutex
	log     []msg
	closed  bool
	readErr error
	wake    chan struct{}
	pos     int // waitFor's cursor into log
}

func (e *env) dial(t testing.TB) *client {
	t.Helper()
	nc, err := net.Dial("unix", e.sock)
	if err != nil {
		t.Fatal(err)
	}
	c := &client{t: t, nc: nc, wake: make(chan struct{}, 1)}
	t.Cleanup(func() { nc.Close() })
	go c.read()
	return c
}

func (c *client) read() {
	r := bufio.NewReaderSize(c.nc, 1<<16)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			var m msg
			if jerr := json.Unmarshal(line, &m); jerr != nil {
				c.t.Errorf("server sent a line that is not JSON: %v: %q", jerr, line)
			}
			m.raw = string(line)
			c.mu.Lock()
			c.log = append(c.log, m)
			c.mu.Unlock()
			c.signal()
		}
		if err != nil {
			c.mu.Lock()
			c.closed, c.readErr = true, err
			c.mu.Unlock()
			c.signal()
			return
		}
	}
}

func (c *client) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *client) writeRaw(data string) {
	c.t.Helper()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.nc.SetWriteDeadline(time.Now().Add(waitTimeout))
	if _, err := c.nc.Write([]byte(data)); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// send sends a request and returns its id.
func (c *client) send(method string, params any) string {
	c.t.Helper()
	c.wmu.Lock()
	c.next++
	id := fmt.Sprint(c.next)
	c.wmu.Unlock()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.next, "method": method, "params": params})
	c.writeRaw(string(b) + "\n")
	return id
}

func (c *client) notify(method string, params any) {
	c.t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
	c.writeRaw(string(b) + "\n")
}

// await waits until pred holds for a message at index >= from and returns
// it with its index.
func (c *client) await(from int, what string, pred func(msg) bool) (msg, int) {
	c.t.Helper()
	deadline := time.After(waitTimeout)
	for {
		c.mu.Lock()
		for i := from; i < len(c.log); i++ {
			if pred(c.log[i]) {
				m := c.log[i]
				c.mu.Unlock()
				return m, i
			}
		}
		closed, rerr := c.closed, c.readErr
		n := len(c.log)
		c.mu.Unlock()
		if closed {
			c.t.Fatalf("waiting for %s: connection closed (%v); got %s", what, rerr, c.summary(n))
		}
		select {
		case <-c.wake:
		case <-deadline:
			c.t.Fatalf("waiting for %s: timed out; got %s", what, c.summary(n))
		}
	}
}

// response waits for the response with id (anywhere in the log).
func (c *client) response(id string) msg {
	c.t.Helper()
	m, _ := c.await(0, "the response to "+id, func(m msg) bool { return m.isResponse() && string(m.ID) == id })
	return m
}

// call sends a request and waits for its response.
func (c *client) call(method string, params any) msg {
	c.t.Helper()
	return c.response(c.send(method, params))
}

// waitFor waits for the next notification of method (after the cursor)
// for which pred holds, and moves the cursor past it.
func (c *client) waitFor(method string, pred func(msg) bool) msg {
	c.t.Helper()
	m, i := c.await(c.pos, method, func(m msg) bool { return m.Method == method && (pred == nil || pred(m)) })
	c.pos = i + 1
	return m
}

func (c *client) messages() []msg {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]msg(nil), c.log...)
}

func (c *client) summary(n int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for i, m := range c.log[:n] {
		if i > 0 {
			b.WriteString(" ")
		}
		if m.isResponse() {
			if m.Error != nil {
				fmt.Fprintf(&b, "[%s error %d]", m.ID, m.Error.Code)
			} else {
				fmt.Fprintf(&b, "[%s result]", m.ID)
			}
		} else {
			b.WriteString(m.Method)
		}
	}
	return b.String()
}

// waitClosed waits until the server closes the connection.
func (c *client) waitClosed() {
	c.t.Helper()
	deadline := time.After(waitTimeout)
	for {
		c.mu.Lock()
		closed := c.closed
		c.mu.Unlock()
		if closed {
			return
		}
		select {
		case <-c.wake:
		case <-deadline:
			c.t.Fatal("the server did not close the connection")
		}
	}
}

var initParams = map[string]any{
	"protocol_version": "1.0.0",
	"client_info":      map[string]any{"name": "openagent-terminal", "version": "0.1.0"},
	"terminal_size":    map[string]any{"cols": 80, "rows": 24, "pixel_width": 800, "pixel_height": 600},
	"capabilities":     []string{"streaming", "blocks", "syntax_highlighting", "tool_approval", "session_persistence"},
	"config":           map[string]any{"theme": "monokai", "font_size": 14},
}

// initialized dials and completes the handshake.
func (e *env) initialized(t testing.TB) *client {
	t.Helper()
	c := e.dial(t)
	r := c.call("initialize", initParams)
	if r.Error != nil || r.str("status") != "ready" {
		t.Fatalf("initialize: %s", r.raw)
	}
	return c
}

// errCode returns a response's error code (0 for a result).
func errCode(m msg) int {
	if m.Error == nil {
		return 0
	}
	return m.Error.Code
}

// tokensOf returns the text a query streamed, from stream.token and
// stream.tokens, checking that the indexes run 0, 1, 2, ...
func tokensOf(t testing.TB, msgs []msg, queryID string) []string {
	t.Helper()
	var out []string
	for _, m := range msgs {
		switch {
		case m.Method == "stream.token" && m.str("query_id") == queryID:
			if idx := int(m.get("index").(float64)); idx != len(out) {
				t.Errorf("token index %d, want %d", idx, len(out))
			}
			out = append(out, m.str("token"))
		case m.Method == "stream.tokens" && m.str("query_id") == queryID:
			for _, tk := range m.get("tokens").([]any) {
				o := tk.(map[string]any)
				if idx := int(o["index"].(float64)); idx != len(out) {
					t.Errorf("batched token index %d, want %d", idx, len(out))
				}
				out = append(out, o["token"].(string))
			}
		}
	}
	return out
}

// expect is one message an ordered flow expects.
type expect struct {
	what  string
	match func(msg) bool
}

func resp(id string, pred func(msg) bool) expect {
	return expect{"response " + id, func(m msg) bool { return m.isResponse() && string(m.ID) == id && (pred == nil || pred(m)) }}
}

func note(method string, pred func(msg) bool) expect {
	return expect{method, func(m msg) bool { return m.Method == method && (pred == nil || pred(m)) }}
}

// checkOrder checks that want occur in msgs in this order (other
// messages may come between them).
func checkOrder(t testing.TB, msgs []msg, want ...expect) {
	t.Helper()
	i := 0
	for _, w := range want {
		for i < len(msgs) && !w.match(msgs[i]) {
			i++
		}
		if i == len(msgs) {
			var got []string
			for _, m := range msgs {
				if m.isResponse() {
					got = append(got, "response "+string(m.ID))
				} else {
					got = append(got, m.Method)
				}
			}
			t.Fatalf("%s not found in order; got %s", w.what, strings.Join(got, ", "))
		}
		i++
	}
}

// rawConn is a client without a reading goroutine, for slow readers and
// benchmarks.
type rawConn struct {
	nc net.Conn
	r  *bufio.Reader
}

func dialRaw(t testing.TB, sock string) *rawConn {
	t.Helper()
	nc, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{nc: nc, r: bufio.NewReaderSize(nc, 1<<16)}
}

func (c *rawConn) write(t testing.TB, line string) {
	t.Helper()
	if _, err := c.nc.Write([]byte(line + "\n")); err != nil {
		t.Fatal(err)
	}
}

func (c *rawConn) read(t testing.TB) msg {
	t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(waitTimeout))
	line, err := c.r.ReadBytes('\n')
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	var m msg
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("not JSON: %q", line)
	}
	m.raw = string(line)
	return m
}

func (c *rawConn) call(t testing.TB, line string) msg {
	t.Helper()
	c.write(t, line)
	for {
		if m := c.read(t); m.isResponse() {
			return m
		}
	}
}

// logHook is a slog.Handler that discards records and closes ch at the
// first record whose message starts with prefix: a test waits on it for
// something the server only logs.
type logHook struct {
	prefix string
	once   *sync.Once
	ch     chan struct{}
}

func logSignal(prefix string) logHook {
	return logHook{prefix: prefix, once: new(sync.Once), ch: make(chan struct{})}
}

func (h logHook) Enabled(context.Context, slog.Level) bool { return true }
func (h logHook) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h logHook) WithGroup(string) slog.Handler            { return h }

func (h logHook) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.prefix) {
		h.once.Do(func() { close(h.ch) })
	}
	return nil
}

// wait waits for the record (at most waitTimeout).
func (h logHook) wait(t testing.TB) {
	t.Helper()
	select {
	case <-h.ch:
	case <-time.After(waitTimeout):
		t.Fatalf("the server never logged %q", h.prefix)
	}
}

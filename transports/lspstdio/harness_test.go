package lspstdio

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creachadair/jrpc2"
	"github.com/creachadair/jrpc2/channel"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/internal/scripttest"
)

// waitTimeout bounds every wait in these tests.
const waitTimeout = 15 * time.Second

// reply is one scripted model reply: chunks streamed in order, then err.
type reply struct {
	chunks []engine.ChatChunk
	err    error
}

func text(s string) engine.ChatChunk { return engine.ChatChunk{Text: s} }

func call(id, name, args string) engine.ChatChunk {
	return engine.ChatChunk{ToolCall: &engine.ToolCall{ID: id, Name: name, Args: json.RawMessage(args)}}
}

// scriptModel is an engine.Model that plays a fixed script. The prompt of
// a turn is the first paragraph of its user message; replies[prompt][k]
// is the reply to the turn's k-th model call.
type scriptModel struct {
	scripttest.Base
	replies map[string][]reply
	// gates, when set for a prompt, hold every model call of that prompt
	// until the channel is closed (or the turn is cancelled).
	gates map[string]chan struct{}
	// entered receives the prompt of every model call as it starts.
	entered chan string

	mu   sync.Mutex
	reqs []engine.ChatRequest
}

var _ engine.Model = (*scriptModel)(nil)

func (m *scriptModel) Chat(ctx context.Context, req engine.ChatRequest, onChunk func(engine.ChatChunk) error) error {
	u, step, err := scripttest.Position(req)
	if err != nil {
		return err
	}
	prompt, _, _ := strings.Cut(req.Messages[u].Content, "\n\n")
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	if m.entered != nil {
		select {
		case m.entered <- prompt:
		default:
		}
	}
	if g := m.gates[prompt]; g != nil {
		select {
		case <-g:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	script := m.replies[prompt]
	if step >= len(script) {
		return &engine.ModelError{Provider: "script", Message: fmt.Sprintf("no reply %d scripted for %q", step, prompt)}
	}
	for _, c := range script[step].chunks {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := onChunk(c); err != nil {
			return err
		}
	}
	return script[step].err
}

func (m *scriptModel) requests() []engine.ChatRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.reqs)
}

// toolMessages returns the tool results the model was sent in its last
// request for prompt.
func (m *scriptModel) toolMessages(prompt string) []string {
	var last *engine.ChatRequest
	for _, r := range m.requests() {
		for _, msg := range r.Messages {
			if msg.Role == engine.RoleUser && strings.HasPrefix(msg.Content, prompt) {
				r := r
				last = &r
			}
		}
	}
	if last == nil {
		return nil
	}
	var out []string
	for _, msg := range last.Messages {
		if msg.Role == engine.RoleTool {
			out = append(out, msg.Content)
		}
	}
	return out
}

// waitEntered waits until the model has started a call for prompt.
func (m *scriptModel) waitEntered(t *testing.T, prompt string) {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		select {
		case p := <-m.entered:
			if p == prompt {
				return
			}
		case <-deadline:
			t.Fatalf("the model was not called for %q", prompt)
		}
	}
}

// testTools is an engine.Toolset: list_files (read-only) and write_file
// (needs approval).
type testTools struct{}

func (testTools) Tools(context.Context) ([]engine.ToolSpec, error) {
	obj := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)
	return []engine.ToolSpec{
		{Name: "list_files", Description: "List files.", InputSchema: obj, Risk: engine.RiskLow, ReadOnly: true},
		{Name: "write_file", Description: "Write a file.", InputSchema: obj, Risk: engine.RiskMedium, NeedsApproval: true},
	}, nil
}

func (testTools) Invoke(_ context.Context, req engine.InvokeRequest, onUpdate func(engine.ToolUpdate)) (engine.ToolResult, error) {
	switch req.Tool {
	case "list_files":
		pct := 50.0
		onUpdate(engine.ToolUpdate{Progress: &engine.ToolProgress{Message: "listing", Percentage: &pct}})
		return engine.JSONResult(map[string]any{"files": []string{"main.go", "notes.txt"}}, "2 files")
	case "write_file":
		return engine.JSONResult(map[string]any{"written": true}, "wrote the file")
	}
	return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeUnknownTool, "no tool %s", req.Tool)
}

// newEngine returns an engine over model and testTools, and a workspace
// holding main.go.
func newEngine(t testing.TB, model engine.Model) (*engine.Engine, *engine.Workspace) {
	t.Helper()
	return newEngineWith(t, model, nil)
}

// newEngineWith is newEngine with engine options adjusted by adjust.
func newEngineWith(t testing.TB, model engine.Model, adjust func(*engine.Options)) (*engine.Engine, *engine.Workspace) {
	t.Helper()
	opts := engine.Options{
		Models: map[string]engine.Model{"script": model},
		Tools:  testTools{},
		Model:  engine.ModelRef{Provider: "script", Name: "test"},
	}
	if adjust != nil {
		adjust(&opts)
	}
	eng, err := engine.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ws, err := eng.OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	return eng, ws
}

// msg is one message as the client reads it.
type msg struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *jrpc2.Error    `json:"error,omitempty"`
	raw     string
}

func (m msg) isResponse() bool { return m.Method == "" }

func (m msg) param(key string) string {
	var p map[string]any
	json.Unmarshal(m.Params, &p)
	s, _ := p[key].(string)
	return s
}

// client is a wire-level JSON-RPC client over jrpc2's LSP framing: it
// records every message in arrival order (what vscode-jsonrpc sees) and
// answers the server's requests with onRequest.
type client struct {
	t  testing.TB
	ch channel.Channel
	in *io.PipeWriter // the server's input

	mu      sync.Mutex
	msgs    []msg
	closed  bool
	changed chan struct{}
	nextID  int
	// onRequest answers a server request: a result, or a non-nil error.
	// answer false sends nothing.
	onRequest func(m msg) (result any, err *jrpc2.Error, answer bool)
}

// harness runs Serve over pipes.
type harness struct {
	*client
	model *scriptModel
	eng   *engine.Engine
	ws    *engine.Workspace
	logs  *syncBuffer
	// raw is every byte Serve wrote.
	raw  *syncWriter
	done chan error
}

// teeWriter writes to w and records in raw.
type teeWriter struct {
	w   io.Writer
	raw *syncWriter
}

func (t teeWriter) Write(p []byte) (int, error) {
	t.raw.Write(p)
	return t.w.Write(p)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs Serve on pipes with opts adjusted by adjust.
func start(t *testing.T, model *scriptModel, adjust func(*Options)) *harness {
	t.Helper()
	return startWith(t, model, nil, adjust)
}

// startWith is start with the engine's options adjusted by engAdjust.
func startWith(t *testing.T, model *scriptModel, engAdjust func(*engine.Options), adjust func(*Options)) *harness {
	t.Helper()
	if model.entered == nil {
		model.entered = make(chan string, 64)
	}
	eng, ws := newEngineWith(t, model, engAdjust)
	h := &harness{model: model, eng: eng, ws: ws, logs: &syncBuffer{}, raw: &syncWriter{}, done: make(chan error, 1)}
	o := Options{Engine: eng, Workspace: ws, Logger: slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if adjust != nil {
		adjust(&o)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		err := New(o).Serve(ctx, inR, teeWriter{outW, h.raw})
		outW.Close() // the client sees the end
		h.done <- err
	}()
	h.client = newClient(t, outR, inW)
	t.Cleanup(func() {
		cancel()
		inW.Close()
		select {
		case err := <-h.done:
			h.done <- err
		case <-time.After(waitTimeout):
			t.Errorf("Serve did not return")
		}
		if t.Failed() {
			t.Logf("server logs:\n%s", h.logs.String())
		}
	})
	return h
}

func newClient(t testing.TB, r io.Reader, w *io.PipeWriter) *client {
	c := &client{t: t, ch: channel.LSP(r, w), in: w, changed: make(chan struct{})}
	go c.read()
	return c
}

func (c *client) read() {
	for {
		b, err := c.ch.Recv()
		if err != nil {
			c.mu.Lock()
			c.closed = true
			close(c.changed)
			c.changed = make(chan struct{})
			c.mu.Unlock()
			return
		}
		var m msg
		if err := json.Unmarshal(b, &m); err != nil || m.JSONRPC != "2.0" {
			c.t.Errorf("the server sent a message that is not JSON-RPC 2.0: %q", b)
		}
		m.raw = string(b)
		c.mu.Lock()
		c.msgs = append(c.msgs, m)
		close(c.changed)
		c.changed = make(chan struct{})
		handler := c.onRequest
		c.mu.Unlock()
		if m.Method != "" && len(m.ID) > 0 && handler != nil {
			go func() {
				res, jerr, answer := handler(m)
				if !answer {
					return
				}
				out := map[string]any{"jsonrpc": "2.0", "id": m.ID}
				if jerr != nil {
					out["error"] = jerr
				} else {
					out["result"] = res
				}
				c.send(out)
			}()
		}
	}
}

func (c *client) setHandler(f func(m msg) (any, *jrpc2.Error, bool)) {
	c.mu.Lock()
	c.onRequest = f
	c.mu.Unlock()
}

func (c *client) send(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(b)
}

func (c *client) sendRaw(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ch.Send(b); err != nil && !errors.Is(err, io.ErrClosedPipe) {
		c.t.Errorf("send: %v", err) // a closed pipe: the test is ending
	}
}

// writeRaw writes bytes to the server's input as they are (no framing).
func (c *client) writeRaw(s string) {
	done := make(chan error, 1)
	go func() {
		_, err := io.WriteString(c.in, s)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			c.t.Errorf("write raw input: %v", err)
		}
	case <-time.After(waitTimeout):
		c.t.Fatalf("the server did not read the input")
	}
}

// request sends a request and returns its id.
func (c *client) request(method string, params any) string {
	c.mu.Lock()
	c.nextID++
	id := fmt.Sprint(c.nextID)
	c.mu.Unlock()
	c.send(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": method, "params": params})
	return id
}

func (c *client) notification(method string, params any) {
	m := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		m["params"] = params
	}
	c.send(m)
}

func (c *client) snapshot() []msg {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.msgs)
}

// waitFor waits until cond holds for the messages so far and returns
// them.
func (c *client) waitFor(what string, cond func([]msg) bool) []msg {
	c.t.Helper()
	deadline := time.After(waitTimeout)
	for {
		c.mu.Lock()
		ms, changed, closed := slices.Clone(c.msgs), c.changed, c.closed
		c.mu.Unlock()
		if cond(ms) {
			return ms
		}
		if closed {
			c.t.Fatalf("the connection closed while waiting for %s; messages:\n%s", what, dump(ms))
		}
		select {
		case <-changed:
		case <-deadline:
			c.t.Fatalf("timed out waiting for %s; messages:\n%s", what, dump(ms))
		}
	}
}

// response waits for the response to request id.
func (c *client) response(id string) msg {
	c.t.Helper()
	var out msg
	c.waitFor("the response to "+id, func(ms []msg) bool {
		for _, m := range ms {
			if m.isResponse() && string(m.ID) == id {
				out = m
				return true
			}
		}
		return false
	})
	return out
}

// result waits for the response to request id and decodes its result
// into v; an error response fails the test.
func (c *client) result(id string, v any) {
	c.t.Helper()
	m := c.response(id)
	if m.Error != nil {
		c.t.Fatalf("request %s failed: %v", id, m.Error)
	}
	if v != nil {
		if err := json.Unmarshal(m.Result, v); err != nil {
			c.t.Fatalf("decode the result of %s: %v: %s", id, err, m.Result)
		}
	}
}

// errorOf waits for the response to request id and returns its error
// (failing when it has none).
func (c *client) errorOf(id string) *jrpc2.Error {
	c.t.Helper()
	m := c.response(id)
	if m.Error == nil {
		c.t.Fatalf("request %s succeeded, want an error: %s", id, m.raw)
	}
	return m.Error
}

func dump(ms []msg) string {
	var b strings.Builder
	for _, m := range ms {
		b.WriteString(m.raw)
		b.WriteString("\n")
	}
	return b.String()
}

func methodIs(method string) func(msg) bool { return func(m msg) bool { return m.Method == method } }

func filter(ms []msg, keep func(msg) bool) []msg {
	var out []msg
	for _, m := range ms {
		if keep(m) {
			out = append(out, m)
		}
	}
	return out
}

func has(method string, pred func(msg) bool) func([]msg) bool {
	return func(ms []msg) bool {
		for _, m := range ms {
			if m.Method == method && (pred == nil || pred(m)) {
				return true
			}
		}
		return false
	}
}

// rawOutput returns every byte Serve wrote so far.
func (h *harness) rawOutput() []byte {
	h.raw.mu.Lock()
	defer h.raw.mu.Unlock()
	return bytes.Clone(h.raw.b.Bytes())
}

// initialize sends initialize as a notification with initialConfig cfg.
func (h *harness) initialize(cfg map[string]any) {
	h.t.Helper()
	h.notification("initialize", map[string]any{"initialConfig": cfg, "workspaceRoot": h.ws.Root, "environment": map[string]any{"vscodeVersion": "1.99.0"}})
}

// task sends executeTask and returns its request id.
func (h *harness) task(taskID, prompt string, ctx map[string]any) string {
	p := map[string]any{"taskId": taskID, "prompt": prompt}
	if ctx != nil {
		p["context"] = ctx
	}
	return h.request("executeTask", p)
}

// taskResult waits for the result of request id.
func (h *harness) taskResult(id string) taskResult {
	h.t.Helper()
	var r taskResult
	h.result(id, &r)
	return r
}

// partials returns the content of the $/partialResult notifications of
// task taskID and type typ, concatenated.
func partials(ms []msg, taskID, typ string) string {
	var b strings.Builder
	for _, m := range ms {
		if m.Method == "$/partialResult" && m.param("taskId") == taskID && m.param("type") == typ {
			b.WriteString(m.param("content"))
		}
	}
	return b.String()
}

// keysOf returns the sorted keys of a JSON object.
func keysOf(t testing.TB, raw json.RawMessage) string {
	t.Helper()
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatalf("not an object: %s", raw)
	}
	var ks []string
	for k := range obj {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return strings.Join(ks, ",")
}

// waitLog waits until the server's logs contain text.
func (h *harness) waitLog(text string) {
	h.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !strings.Contains(h.logs.String(), text) {
		if time.Now().After(deadline) {
			h.t.Fatalf("the logs never said %q", text)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// errorMessages returns the error responses among ms.
func errorMessages(ms []msg) []msg {
	return filter(ms, func(m msg) bool { return m.Error != nil })
}

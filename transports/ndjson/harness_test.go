package ndjson

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

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
// a turn is the first paragraph of its user message (attachments follow
// after a blank line); replies[prompt][k] is the reply to the turn's k-th
// model call.
type scriptModel struct {
	scripttest.Base
	replies map[string][]reply
	// gates, when set for a prompt, hold every model call of that prompt
	// until the channel is closed (or the turn is cancelled).
	gates map[string]chan struct{}
	// entered receives the prompt of every model call as it starts.
	entered chan string

	mu    sync.Mutex
	users []string // full user message contents seen, in call order
}

var _ engine.Model = (*scriptModel)(nil)

func (m *scriptModel) Chat(ctx context.Context, req engine.ChatRequest, onChunk func(engine.ChatChunk) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	u, step, err := scripttest.Position(req)
	if err != nil {
		return err
	}
	prompt, _, _ := strings.Cut(req.Messages[u].Content, "\n\n")
	m.mu.Lock()
	m.users = append(m.users, req.Messages[u].Content)
	m.mu.Unlock()
	if m.entered != nil {
		select {
		case m.entered <- prompt:
		case <-ctx.Done():
			return ctx.Err()
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
		if err := onChunk(c); err != nil {
			return err
		}
	}
	return script[step].err
}

func (m *scriptModel) seenUsers() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.users)
}

// waitEntered waits until the model has started a call for each prompt.
func (m *scriptModel) waitEntered(t *testing.T, prompts ...string) {
	t.Helper()
	want := map[string]bool{}
	for _, p := range prompts {
		want[p] = true
	}
	deadline := time.After(waitTimeout)
	for len(want) > 0 {
		select {
		case p := <-m.entered:
			delete(want, p)
		case <-deadline:
			t.Fatalf("the model was not called for %v", want)
		}
	}
}

// testTools is an engine.Toolset: list_files and read_file (read-only) and
// write_file (needs approval).
type testTools struct{}

var _ engine.Toolset = testTools{}

func (testTools) Tools(context.Context) ([]engine.ToolSpec, error) {
	obj := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)
	return []engine.ToolSpec{
		{Name: "list_files", Description: "List files.", InputSchema: obj, Risk: engine.RiskLow, ReadOnly: true},
		{Name: "read_file", Description: "Read a file.", InputSchema: obj, Risk: engine.RiskLow, ReadOnly: true},
		{Name: "write_file", Description: "Write a file.", InputSchema: obj, Risk: engine.RiskMedium, NeedsApproval: true},
	}, nil
}

func (testTools) Invoke(_ context.Context, req engine.InvokeRequest, onUpdate func(engine.ToolUpdate)) (engine.ToolResult, error) {
	var args struct {
		Path string `json:"path"`
	}
	if err := json.Unmarshal(req.Args, &args); err != nil {
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: %v", req.Tool, err)
	}
	switch req.Tool {
	case "list_files":
		onUpdate(engine.ToolUpdate{Progress: &engine.ToolProgress{Message: "listing " + args.Path}})
		return engine.JSONResult(map[string]any{"files": []string{"index.ts", "app.tsx"}}, "2 files")
	case "read_file":
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeNotFound, "%s does not exist", args.Path)
	case "write_file":
		return engine.JSONResult(map[string]any{"written": args.Path, "files_modified": []string{args.Path}}, "wrote "+args.Path)
	}
	return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeUnknownTool, "no tool %s", req.Tool)
}

// standardScript is the model script of the golden transcripts.
func standardScript() map[string][]reply {
	return map[string][]reply{
		"List the files in src.": {
			{chunks: []engine.ChatChunk{text("Let me "), text("look."), call("call_1", "list_files", `{"path":"src"}`),
				{Usage: &engine.Usage{PromptTokens: 12, CompletionTokens: 5}}, {DoneReason: "tool_calls"}}},
			{chunks: []engine.ChatChunk{text("src holds "), text("index.ts and app.tsx."), {DoneReason: "stop"}}},
		},
		"Write a file.": {
			{chunks: []engine.ChatChunk{text("Writing."), call("call_2", "write_file", `{"path":"out.txt"}`)}},
			{chunks: []engine.ChatChunk{text("Finished.")}},
		},
		"Read a missing file.": {
			{chunks: []engine.ChatChunk{call("call_3", "read_file", `{"path":"src/missing.ts"}`)}},
			{chunks: []engine.ChatChunk{text("It does not exist.")}},
		},
		"Call a tool that does not exist.": {
			{chunks: []engine.ChatChunk{call("call_4", "frobnicate", `{"level":3}`)}},
			{chunks: []engine.ChatChunk{text("There is no such tool.")}},
		},
		"Plan it.": {
			{chunks: []engine.ChatChunk{call("call_5", "update_plan", `{"steps":[{"description":"Read main.go","files_involved":["main.go"]}]}`)}},
			{chunks: []engine.ChatChunk{text("Planned.")}},
		},
		"Fail.": {
			{err: &engine.ModelError{Provider: "script", Kind: engine.ErrModelUnavailable, Message: "connection refused"}},
		},
		"Hello": {
			{chunks: []engine.ChatChunk{text("Hi.")}},
		},
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
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

// recorder is the output of a Serve call. It checks that every Write is
// exactly one line and lets a test wait for lines.
type recorder struct {
	mu      sync.Mutex
	lines   []string
	bad     []string // writes that were not exactly one line
	changed chan struct{}
	failAt  int // when > 0, the failAt-th write fails
	writes  int
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes++
	if r.failAt > 0 && r.writes >= r.failAt {
		return 0, io.ErrClosedPipe
	}
	s := string(p)
	if !strings.HasSuffix(s, "\n") || strings.Count(s, "\n") != 1 {
		r.bad = append(r.bad, s)
	}
	r.lines = append(r.lines, strings.TrimSuffix(s, "\n"))
	close(r.changed)
	r.changed = make(chan struct{})
	return len(p), nil
}

func (r *recorder) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.lines)
}

// waitFor waits until cond holds for the lines written so far and returns
// them.
func (r *recorder) waitFor(t *testing.T, what string, cond func([]resp) bool) []resp {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		r.mu.Lock()
		lines, changed := slices.Clone(r.lines), r.changed
		r.mu.Unlock()
		rs := parseAll(t, lines)
		if cond(rs) {
			return rs
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("timed out waiting for %s; output so far:\n%s", what, strings.Join(lines, "\n"))
		}
	}
}

// resp is an output line decoded loosely, for assertions.
type resp struct {
	Type      string          `json:"type"`
	ID        *string         `json:"id"`
	Token     string          `json:"token"`
	Error     string          `json:"error"`
	Data      json.RawMessage `json:"data"`
	Timestamp int64           `json:"timestamp"`
	raw       string
}

func (r resp) id() string {
	if r.ID == nil {
		return ""
	}
	return *r.ID
}

func parseAll(t *testing.T, lines []string) []resp {
	t.Helper()
	out := make([]resp, 0, len(lines))
	for _, l := range lines {
		var r resp
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("output line is not JSON: %v\n%s", err, l)
		}
		r.raw = l
		out = append(out, r)
	}
	return out
}

// terminalOf returns the terminal response of request id, if written.
func terminalOf(rs []resp, id string) (resp, bool) {
	for _, r := range rs {
		if r.id() == id && (r.Type == "done" || r.Type == "error" || r.Type == "status") {
			return r, true
		}
	}
	return resp{}, false
}

func hasTerminal(ids ...string) func([]resp) bool {
	return func(rs []resp) bool {
		for _, id := range ids {
			if _, ok := terminalOf(rs, id); !ok {
				return false
			}
		}
		return true
	}
}

func indexOf(rs []resp, id, typ string) int {
	for i, r := range rs {
		if r.id() == id && r.Type == typ {
			return i
		}
	}
	return -1
}

// harness runs Serve over a pipe.
type harness struct {
	model  *scriptModel
	eng    *engine.Engine
	ws     *engine.Workspace
	srv    *Server
	out    *recorder
	logs   *syncBuffer
	in     *io.PipeWriter
	inR    *io.PipeReader
	cancel context.CancelFunc
	done   chan error
	start  time.Time
}

// newEngine returns an engine over model and testTools and a workspace in
// a temporary directory holding notes.txt.
func newEngine(t *testing.T, model *scriptModel) (*engine.Engine, *engine.Workspace) {
	t.Helper()
	eng, err := engine.New(engine.Options{
		Models: map[string]engine.Model{"script": model},
		Tools:  testTools{},
		Model:  engine.ModelRef{Provider: "script", Name: "test"},
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
	return eng, ws
}

// startServe starts Serve on a pipe; opts may adjust the Options.
func startServe(t *testing.T, model *scriptModel, opts func(*Options)) *harness {
	t.Helper()
	if model.entered == nil {
		model.entered = make(chan string, 64)
	}
	eng, ws := newEngine(t, model)
	h := &harness{model: model, eng: eng, ws: ws, out: newRecorder(), logs: &syncBuffer{}, done: make(chan error, 1), start: time.Now()}
	o := Options{Engine: eng, Workspace: ws, Logger: slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if opts != nil {
		opts(&o)
	}
	h.srv = New(o)
	h.inR, h.in = io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- h.srv.Serve(ctx, h.inR, h.out) }()
	t.Cleanup(func() {
		cancel()
		h.inR.CloseWithError(io.ErrClosedPipe)
		select {
		case <-h.done:
		case <-time.After(waitTimeout):
			t.Errorf("Serve did not return after cancel")
		}
	})
	h.out.waitFor(t, "ready", func(rs []resp) bool { return len(rs) > 0 })
	return h
}

// send writes request lines to Serve's input.
func (h *harness) send(t *testing.T, lines ...string) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		var err error
		for _, l := range lines {
			if _, err = io.WriteString(h.in, l+"\n"); err != nil {
				break
			}
		}
		errc <- err
	}()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("write request: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("Serve did not read the requests")
	}
}

// wait waits for Serve to return.
func (h *harness) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-h.done:
		h.done <- err // for the cleanup
		return err
	case <-time.After(waitTimeout):
		t.Fatalf("Serve did not return")
		return nil
	}
}

// checkContract checks every output line against protocols/ndjson-stdio.md
// field for field, and the stream rules: ready first and once, exactly one
// terminal response per request id and nothing after it, every tool_result
// after a tool_use of the same toolId, timestamps non-decreasing and
// current. exempt lists ids allowed more than one terminal; "" (the id of
// errors answering requests without one) always is.
func checkContract(t *testing.T, lines []string, start time.Time, exempt ...string) {
	t.Helper()
	exempt = append(exempt, "")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], `{"type":"ready",`) {
		t.Fatalf("the first line is not ready: %q", lines)
	}
	terminal := map[string]int{}
	tools := map[string]map[string]int{} // request id → toolId → tool_use count - tool_result count
	var last int64
	for i, l := range lines {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(l), &obj); err != nil {
			t.Fatalf("line %d is not a JSON object: %v: %s", i+1, err, l)
		}
		typ := str(t, obj, "type", l)
		want := map[string][]string{
			"ready":       {"type", "version", "capabilities", "timestamp"},
			"token":       {"type", "id", "token", "timestamp"},
			"tool_use":    {"type", "id", "data", "timestamp"},
			"tool_result": {"type", "id", "data", "timestamp"},
			"done":        {"type", "id", "timestamp"},
			"error":       {"type", "id", "error", "timestamp"},
			"status":      {"type", "id", "data", "timestamp"},
		}[typ]
		if want == nil {
			t.Fatalf("line %d has unknown type %q: %s", i+1, typ, l)
		}
		keysEqual(t, obj, want, l)
		var ts int64
		if err := json.Unmarshal(obj["timestamp"], &ts); err != nil {
			t.Fatalf("timestamp is not an integer: %s", l)
		}
		if ts < start.Add(-time.Second).UnixMilli() || ts > time.Now().Add(time.Second).UnixMilli() || ts < last {
			t.Errorf("line %d: timestamp %d out of range or decreasing (previous %d): %s", i+1, ts, last, l)
		}
		last = ts
		if typ == "ready" {
			if i != 0 {
				t.Errorf("ready again at line %d", i+1)
			}
			if v := str(t, obj, "version", l); v != ProtocolVersion {
				t.Errorf("ready version = %q, want %q", v, ProtocolVersion)
			}
			var caps []string
			if err := json.Unmarshal(obj["capabilities"], &caps); err != nil || !slices.Equal(caps, []string{"streaming", "tools", "attachments"}) {
				t.Errorf("ready capabilities = %s", obj["capabilities"])
			}
			continue
		}
		id := str(t, obj, "id", l)
		if terminal[id] > 0 && !slices.Contains(exempt, id) {
			t.Errorf("line %d follows the terminal response of %q: %s", i+1, id, l)
		}
		switch typ {
		case "token":
			str(t, obj, "token", l)
		case "error":
			if str(t, obj, "error", l) == "" {
				t.Errorf("empty error text: %s", l)
			}
			terminal[id]++
		case "done":
			terminal[id]++
		case "status":
			var d map[string]json.RawMessage
			mustUnmarshal(t, obj["data"], &d, l)
			keysEqual(t, d, []string{"state", "conversationLength", "uptime"}, l)
			if s := str(t, d, "state", l); s != "idle" && s != "busy" {
				t.Errorf("status state %q: %s", s, l)
			}
			var n, up int64
			mustUnmarshal(t, d["conversationLength"], &n, l)
			mustUnmarshal(t, d["uptime"], &up, l)
			if n < 0 || up < 0 {
				t.Errorf("negative status numbers: %s", l)
			}
			terminal[id]++
		case "tool_use", "tool_result":
			var d map[string]json.RawMessage
			mustUnmarshal(t, obj["data"], &d, l)
			payload := "input"
			if typ == "tool_result" {
				payload = "result"
			}
			keysEqual(t, d, []string{"toolId", "toolName", payload}, l)
			toolID := str(t, d, "toolId", l)
			if toolID == "" || str(t, d, "toolName", l) == "" {
				t.Errorf("empty toolId or toolName: %s", l)
			}
			if tools[id] == nil {
				tools[id] = map[string]int{}
			}
			if typ == "tool_use" {
				if tools[id][toolID] != 0 {
					t.Errorf("second tool_use for %s: %s", toolID, l)
				}
				tools[id][toolID]++
			} else {
				if tools[id][toolID] != 1 {
					t.Errorf("tool_result without a tool_use before it: %s", l)
				}
				tools[id][toolID]--
			}
		}
	}
	for id, n := range terminal {
		if n > 1 && !slices.Contains(exempt, id) {
			t.Errorf("request %q has %d terminal responses", id, n)
		}
	}
	for id, calls := range tools {
		for toolID, n := range calls {
			if n != 0 {
				t.Errorf("request %q: tool_use %s has no tool_result", id, toolID)
			}
		}
	}
}

func keysEqual(t *testing.T, obj map[string]json.RawMessage, want []string, line string) {
	t.Helper()
	got := make([]string, 0, len(obj))
	for k := range obj {
		got = append(got, k)
	}
	sort.Strings(got)
	w := slices.Clone(want)
	sort.Strings(w)
	if !slices.Equal(got, w) {
		t.Errorf("fields = %v, want %v: %s", got, w, line)
	}
}

func str(t *testing.T, obj map[string]json.RawMessage, key, line string) string {
	t.Helper()
	var s string
	raw, ok := obj[key]
	if !ok || jsonKind(raw) != "string" || json.Unmarshal(raw, &s) != nil {
		t.Errorf("%s is not a string: %s", key, line)
	}
	return s
}

func mustUnmarshal(t *testing.T, raw json.RawMessage, v any, line string) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Errorf("decode %s: %v: %s", raw, err, line)
	}
}

// Package testtools holds the tool and model implementations of the test
// plugin (plugins/internal/testplugin): behaviours the plugin host must
// survive (crashes, children left behind, slow calls, callbacks, logs) and
// a tool that reports what the host's search callbacks answered.
// The benchmarks also call them in-process as the peer of a call through
// the plugin boundary.
package testtools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/plexus-agent/plexus/engine"
)

// Tools is the test tool set.
type Tools struct {
	Log *slog.Logger
}

var _ engine.Toolset = (*Tools)(nil)

func spec(name string, readOnly bool) engine.ToolSpec {
	return engine.ToolSpec{
		Name: name, Description: "test tool " + name,
		InputSchema: json.RawMessage(`{"type":"object"}`), Risk: engine.RiskLow, ReadOnly: readOnly,
	}
}

// Tools lists noop, echo, sleep, crash, spawn_and_crash, ask, fail, pid,
// log, search, env, daemon and stream.
func (t *Tools) Tools(context.Context) ([]engine.ToolSpec, error) {
	return []engine.ToolSpec{
		spec("noop", true), spec("echo", true), spec("sleep", true), spec("crash", true),
		spec("spawn_and_crash", false), spec("ask", false), spec("fail", true), spec("pid", true), spec("log", true),
		spec("search", true), spec("env", true), spec("daemon", false), spec("stream", true),
	}, nil
}

// Invoke runs one test tool.
func (t *Tools) Invoke(ctx context.Context, req engine.InvokeRequest, onUpdate func(engine.ToolUpdate)) (engine.ToolResult, error) {
	if req.Tool == "search" {
		return search(ctx, req, onUpdate)
	}
	var args struct {
		Ms      int    `json:"ms"`
		Text    string `json:"text"`
		Code    string `json:"code"`
		Message string `json:"message"`
		FIFO    string `json:"fifo"`
	}
	_ = json.Unmarshal(req.Args, &args)
	switch req.Tool {
	case "noop":
		return engine.ToolResult{Content: json.RawMessage(`{}`)}, nil
	case "echo":
		onUpdate(engine.ToolUpdate{Progress: &engine.ToolProgress{Message: "echoing"}})
		onUpdate(engine.ToolUpdate{Output: &engine.ToolOutput{Stream: "stdout", Text: args.Text}})
		return engine.JSONResult(map[string]any{"text": args.Text, "workspace": req.WorkspaceRoot, "call_id": req.CallID}, "echoed")
	case "sleep":
		select {
		case <-time.After(time.Duration(args.Ms) * time.Millisecond):
			return engine.JSONResult(map[string]int{"slept_ms": args.Ms}, "slept")
		case <-ctx.Done():
			return engine.ToolResult{}, ctx.Err()
		}
	case "crash":
		onUpdate(engine.ToolUpdate{Progress: &engine.ToolProgress{Message: "about to crash"}})
		time.Sleep(50 * time.Millisecond) // let the progress event reach the host
		os.Exit(3)
	case "spawn_and_crash":
		// A child in its own process group, as a tool running a command
		// would start it; the plugin then dies without stopping it.
		cmd := exec.Command("sleep", "300")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return engine.ToolResult{}, err
		}
		onUpdate(engine.ToolUpdate{Output: &engine.ToolOutput{Stream: "pid", Text: strconv.Itoa(HostPid(cmd.Process.Pid))}})
		time.Sleep(50 * time.Millisecond)
		os.Exit(4)
	case "stream":
		// The gRPC method and stream the call arrived on.
		return engine.JSONResult(map[string]string{"method": methodOf(ctx), "stream": streamOf(ctx)}, "stream")
	case "daemon":
		// A daemon that leaves the plugin's process group and session and
		// is orphaned (setsid in a subshell that exits), holding the FIFO
		// open for writing: its reader sees EOF when it is gone.
		cmd := exec.Command("sh", "-c", `(setsid sleep 300 3>"$1" </dev/null >/dev/null 2>&1 &)`, "sh", args.FIFO)
		if out, err := cmd.CombinedOutput(); err != nil {
			return engine.ToolResult{}, fmt.Errorf("start the daemon: %v: %s", err, out)
		}
		return engine.JSONResult(map[string]bool{"started": true}, "daemon started")
	case "ask":
		if req.Host == nil {
			return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeFailed, "no host callbacks offered")
		}
		dec, err := req.Host.RequestApproval(ctx, engine.ActionApproval{
			Action: "overwrite", Description: "overwrite " + args.Text, Preview: "diff of " + args.Text,
			Risk: engine.Risk{Level: engine.RiskHigh, Reasons: []string{"test"}, Reversible: true},
		})
		if err != nil {
			return engine.ToolResult{}, err
		}
		return engine.JSONResult(dec, "asked")
	case "fail":
		return engine.ToolResult{}, &engine.ToolError{Code: engine.ToolErrorCode(args.Code), Message: args.Message}
	case "pid":
		return engine.JSONResult(map[string]int{"pid": HostPid(os.Getpid())}, "pid")
	case "env":
		// The plugin process's environment, and where its socket is.
		return engine.JSONResult(map[string]any{"env": os.Environ(), "socket_dir": os.Getenv("PLUGIN_UNIX_SOCKET_DIR")}, "env")
	case "log":
		if t.Log != nil {
			t.Log.Warn(args.Text, "tool", "log")
		}
		return engine.JSONResult(map[string]bool{"logged": true}, "logged")
	}
	return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeUnknownTool, "no tool %q", req.Tool)
}

// SearchArgs are the arguments of the search tool: each query that is set
// is sent to the host's search method of that name.
type SearchArgs struct {
	Symbols *engine.SymbolQuery `json:"symbols,omitempty"`
	Text    *engine.TextQuery   `json:"text,omitempty"`
	Chunks  *engine.ChunkQuery  `json:"chunks,omitempty"`
	Vectors *engine.ChunkQuery  `json:"vectors,omitempty"`
}

// SearchReport is the search tool's result: what each host search method
// answered, for the queries that were set.
type SearchReport struct {
	Symbols *SymbolsReport `json:"symbols,omitempty"`
	Text    *TextReport    `json:"text,omitempty"`
	Chunks  *ChunksReport  `json:"chunks,omitempty"`
	Vectors *ChunksReport  `json:"vectors,omitempty"`
}

// SymbolsReport is what SearchSymbols answered.
type SymbolsReport struct {
	Hits  []engine.SymbolHit `json:"hits"`
	Error *ErrorReport       `json:"error,omitempty"`
}

// TextReport is what SearchText answered: the matches passed to onMatch,
// in order, and the result.
type TextReport struct {
	Streamed []engine.TextMatch `json:"streamed"`
	Result   engine.TextResult  `json:"result"`
	Error    *ErrorReport       `json:"error,omitempty"`
}

// ChunksReport is what SearchChunks or SearchVectors answered.
type ChunksReport struct {
	Hits  []engine.ChunkHit `json:"hits"`
	Error *ErrorReport      `json:"error,omitempty"`
}

// ErrorReport describes an error a host callback returned, as the plugin
// sees it: its text and the engine sentinels it matches with errors.Is.
type ErrorReport struct {
	Message string   `json:"message"`
	Is      []string `json:"is"`
}

// sentinels are the errors an ErrorReport checks, by name.
var sentinels = []struct {
	name string
	err  error
}{
	{"unsupported", engine.ErrUnsupported},
	{"invalid_request", engine.ErrInvalidRequest},
	{"not_found", engine.ErrNotFound},
	{"permission_denied", engine.ErrPermissionDenied},
	{"timeout", engine.ErrTimeout},
	{"canceled", context.Canceled},
}

func report(err error) *ErrorReport {
	if err == nil {
		return nil
	}
	r := &ErrorReport{Message: err.Error(), Is: []string{}}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			r.Is = append(r.Is, s.name)
		}
	}
	return r
}

// search calls the host's search methods for the queries in the
// arguments and reports their answers. Each text match is also sent as a
// ToolOutput on stream "match" (its JSON) as soon as it arrives.
func search(ctx context.Context, req engine.InvokeRequest, onUpdate func(engine.ToolUpdate)) (engine.ToolResult, error) {
	if req.Host == nil {
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeFailed, "no host callbacks offered")
	}
	var args SearchArgs
	if err := json.Unmarshal(req.Args, &args); err != nil {
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeInvalidInput, "search arguments: %v", err)
	}
	var out SearchReport
	if q := args.Symbols; q != nil {
		hits, err := req.Host.SearchSymbols(ctx, *q)
		out.Symbols = &SymbolsReport{Hits: hits, Error: report(err)}
	}
	if q := args.Text; q != nil {
		r := &TextReport{Streamed: []engine.TextMatch{}}
		res, err := req.Host.SearchText(ctx, *q, func(m engine.TextMatch) {
			r.Streamed = append(r.Streamed, m)
			b, _ := json.Marshal(m)
			onUpdate(engine.ToolUpdate{Output: &engine.ToolOutput{Stream: "match", Text: string(b)}})
		})
		r.Result, r.Error = res, report(err)
		out.Text = r
	}
	if q := args.Chunks; q != nil {
		hits, err := req.Host.SearchChunks(ctx, *q)
		out.Chunks = &ChunksReport{Hits: hits, Error: report(err)}
	}
	if q := args.Vectors; q != nil {
		hits, err := req.Host.SearchVectors(ctx, *q)
		out.Vectors = &ChunksReport{Hits: hits, Error: report(err)}
	}
	return engine.JSONResult(out, "searched")
}

// Model is the test model provider. Its reply to a user message "crash"
// is to exit; to "missing" it reports an unknown model; otherwise it
// streams the words of the message back, then usage and "stop".
type Model struct {
	settings map[string]string
}

var _ engine.Model = (*Model)(nil)

// Configure stores settings; ListModels reports them as model names
// ("key=value") so tests can see them arrive.
func (m *Model) Configure(_ context.Context, s map[string]string) error {
	if s["fail"] != "" {
		return fmt.Errorf("refusing settings: %s", s["fail"])
	}
	m.settings = s
	return nil
}

// ListModels lists one model per setting.
func (m *Model) ListModels(context.Context) ([]engine.ModelInfo, error) {
	out := []engine.ModelInfo{{Name: "echo", Capabilities: []string{"completion"}}}
	for k, v := range m.settings {
		out = append(out, engine.ModelInfo{Name: k + "=" + v})
	}
	return out, nil
}

// Chat echoes the last user message word by word.
func (m *Model) Chat(ctx context.Context, req engine.ChatRequest, onChunk func(engine.ChatChunk) error) error {
	last := ""
	for _, msg := range req.Messages {
		if msg.Role == engine.RoleUser {
			last = msg.Content
		}
	}
	switch last {
	case "crash":
		os.Exit(5)
	case "missing":
		return &engine.ModelError{Kind: engine.ErrModelNotFound, Message: fmt.Sprintf("model %q not found, try pulling it first", req.Model)}
	}
	for _, w := range strings.SplitAfter(last, " ") {
		if err := onChunk(engine.ChatChunk{Text: w}); err != nil {
			return err
		}
	}
	if err := onChunk(engine.ChatChunk{Usage: &engine.Usage{PromptTokens: 3, CompletionTokens: int64(len(strings.Fields(last)))}}); err != nil {
		return err
	}
	return onChunk(engine.ChatChunk{DoneReason: "stop"})
}

// Embed returns the length of each input as a one-dimensional vector.
func (m *Model) Embed(_ context.Context, req engine.EmbedRequest) (engine.EmbedResponse, error) {
	out := engine.EmbedResponse{}
	for _, in := range req.Inputs {
		out.Vectors = append(out.Vectors, []float32{float32(len(in))})
	}
	return out, nil
}

// HostPid translates pid, a process of this PID namespace (this process or
// one of its children), to its pid in the host's: a plugin contained in a
// PID namespace is pid 1 there, while the host and /proc (still the
// host's) number it otherwise. The same pid outside a namespace.
func HostPid(pid int) int {
	self, err := os.Readlink("/proc/self") // the host's number: /proc is the host's
	if err != nil {
		return pid
	}
	if pid == os.Getpid() {
		n, _ := strconv.Atoi(self)
		return n
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		var ppid string
		var nspid []string
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "PPid:"); ok {
				ppid = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
				nspid = strings.Fields(v)
			}
		}
		if ppid == self && len(nspid) > 0 && nspid[len(nspid)-1] == strconv.Itoa(pid) {
			n, _ := strconv.Atoi(e.Name())
			return n
		}
	}
	return pid
}

// methodOf is the full gRPC method a call arrived on ("" in-process).
func methodOf(ctx context.Context) string {
	m, _ := grpc.Method(ctx)
	return m
}

// streamOf identifies the gRPC stream a call arrived on ("" in-process).
func streamOf(ctx context.Context) string {
	if st := grpc.ServerTransportStreamFromContext(ctx); st != nil {
		return fmt.Sprintf("%p", st)
	}
	return ""
}

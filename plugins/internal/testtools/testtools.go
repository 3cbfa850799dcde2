// Package testtools holds the tool and model implementations of the test
// plugin (plugins/internal/testplugin): behaviours the plugin host must
// survive (crashes, children left behind, slow calls, callbacks, logs).
// The benchmarks also call them in-process as the peer of a call through
// the plugin boundary.
package testtools

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

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

// Tools lists noop, echo, sleep, crash, spawn_and_crash, ask, fail, pid and
// log.
func (t *Tools) Tools(context.Context) ([]engine.ToolSpec, error) {
	return []engine.ToolSpec{
		spec("noop", true), spec("echo", true), spec("sleep", true), spec("crash", true),
		spec("spawn_and_crash", false), spec("ask", false), spec("fail", true), spec("pid", true), spec("log", true),
	}, nil
}

// Invoke runs one test tool.
func (t *Tools) Invoke(ctx context.Context, req engine.InvokeRequest, onUpdate func(engine.ToolUpdate)) (engine.ToolResult, error) {
	var args struct {
		Ms      int    `json:"ms"`
		Text    string `json:"text"`
		Code    string `json:"code"`
		Message string `json:"message"`
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
		onUpdate(engine.ToolUpdate{Output: &engine.ToolOutput{Stream: "pid", Text: strconv.Itoa(cmd.Process.Pid)}})
		time.Sleep(50 * time.Millisecond)
		os.Exit(4)
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
		return engine.JSONResult(map[string]int{"pid": os.Getpid()}, "pid")
	case "log":
		if t.Log != nil {
			t.Log.Warn(args.Text, "tool", "log")
		}
		return engine.JSONResult(map[string]bool{"logged": true}, "logged")
	}
	return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeUnknownTool, "no tool %q", req.Tool)
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

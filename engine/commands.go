package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"
)

// Command execution modes (CommandSettings.Mode).
const (
	CommandModeServer = "server_runner"
	CommandModeLocal  = "local_terminal"
)

// CommandRequestEvent asks the client to run a command (local_terminal
// mode); its result comes back through the Host's CommandRunner.
type CommandRequestEvent struct {
	Request CommandRequest `json:"request"`
}

// EventKind implements EventData.
func (*CommandRequestEvent) EventKind() string { return "command_request" }

// commandSettings is the workspace's command settings; the default runs
// commands in the engine's sandbox without network.
func (t *turn) commandSettings(ctx context.Context) CommandSettings {
	if g := t.e.opts.Gatekeeper; g != nil {
		if cs, err := g.CommandSettings(ctx, t.s.workspace.ID); err == nil {
			return cs
		}
	}
	return CommandSettings{Mode: CommandModeServer}
}

// runOnClient hands a command to the client and waits for its result.
func (t *turn) runOnClient(ctx context.Context, runner CommandRunner, req CommandRequest) (ToolResult, error) {
	t.emit(&CommandRequestEvent{Request: req})
	start := time.Now()
	res, err := runner.RunCommand(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return ToolResult{}, ctx.Err()
		}
		return ToolResult{}, ToolErrorf(ToolCodeFailed, "the client could not run %q: %v", req.Command, err)
	}
	if res.Duration == 0 {
		res.Duration = time.Since(start)
	}
	return JSONResult(map[string]any{
		"command": req.Command, "exit_code": res.ExitCode, "stdout": res.Stdout, "stderr": res.Stderr,
		"duration_ms": res.Duration.Milliseconds(), "ran_in": "the client's terminal",
	}, fmt.Sprintf("exit %d in %s (client terminal)", res.ExitCode, res.Duration.Round(time.Millisecond)))
}

// commandDir is the directory a command call runs in: its "cwd" argument
// inside root (cleaned lexically, so it cannot climb out), or root.
func commandDir(root string, args json.RawMessage) string {
	var a struct {
		Cwd string `json:"cwd"`
	}
	if json.Unmarshal(args, &a) != nil || a.Cwd == "" {
		return root
	}
	return filepath.Join(root, filepath.Clean("/"+filepath.FromSlash(a.Cwd)))
}

// withPatch adds what became of an edit call's proposal to its result.
func withPatch(content string, outcome any) string {
	var m map[string]any
	if json.Unmarshal([]byte(content), &m) != nil || m == nil {
		m = map[string]any{"result": json.RawMessage(content)}
	}
	if _, isErr := m["error"]; isErr {
		return content // the call failed; it proposed nothing
	}
	m["patch"] = outcome
	b, err := json.Marshal(m)
	if err != nil {
		return content
	}
	return string(b)
}

package engine

import (
	"context"
	"encoding/json"
	"time"
)

// ActionKind names what a policy decision is about.
type ActionKind string

// Action kinds.
const (
	ActionToolCall   ActionKind = "tool_call"
	ActionPatchApply ActionKind = "patch_apply"
	ActionCommand    ActionKind = "command"
)

// ActionRequest describes an action for a policy decision.
type ActionRequest struct {
	Kind ActionKind `json:"kind"`
	Tool string     `json:"tool"`
	// Spec is the tool's spec (read-only, needs approval, risk).
	Spec ToolSpec `json:"-"`
	// Paths are the workspace-relative paths the action touches.
	Paths []string `json:"paths,omitempty"`
	// Deletes are the workspace-relative paths the action deletes (also
	// in Paths).
	Deletes []string `json:"deletes,omitempty"`
	// Command is the command line, for commands.
	Command string          `json:"command,omitempty"`
	Args    json.RawMessage `json:"args,omitempty"`
}

// Verdict values.
const (
	VerdictAllow = "allow"
	VerdictAsk   = "ask"
	VerdictDeny  = "deny"
)

// Verdict is a policy decision: allow, ask or deny, why, and the risk.
type Verdict struct {
	Action string `json:"action"`
	Reason string `json:"reason"`
	Risk   Risk   `json:"risk"`
}

// CommandSettings is how a workspace runs commands.
type CommandSettings struct {
	// Mode is "server_runner" (the engine runs commands in its sandbox) or
	// "local_terminal" (the client runs them, when its Host can).
	Mode string `json:"mode"`
	// AllowNetwork lets server_runner commands open network connections.
	AllowNetwork bool `json:"allow_network"`
	// Env names environment variables server_runner commands inherit on
	// top of the command tool's own allow-list.
	Env []string `json:"env,omitempty"`
}

// Gatekeeper is the per-workspace policy (engine/policy implements it with
// a stored JSON document). Deny always wins.
type Gatekeeper interface {
	Decide(ctx context.Context, workspaceID string, req ActionRequest) (Verdict, error)
	// Remember persists a decision as a rule: for exactly this action, or
	// with similar, for actions like it.
	Remember(ctx context.Context, workspaceID string, req ActionRequest, allow, similar bool) error
	CommandSettings(ctx context.Context, workspaceID string) (CommandSettings, error)
	// Policy and SetPolicy read and replace the policy document (JSON);
	// SetPolicy validates it (ErrInvalidRequest naming the field).
	Policy(ctx context.Context, workspaceID string) (json.RawMessage, error)
	SetPolicy(ctx context.Context, workspaceID string, doc json.RawMessage) error
}

// DecisionRecord is one decision for the receipt log.
type DecisionRecord struct {
	// Kind is "approval", "denial", "patch_apply", "patch_undo" or
	// "command".
	Kind string
	// Actor is who or what decided: "user", "policy", "approve-all",
	// "client".
	Actor     string
	Workspace string
	Session   string
	Turn      string
	Tool      string
	Args      json.RawMessage
	DiffHash  string
	ExitCode  *int
	Reason    string
	Time      time.Time
}

// Recorder appends decision receipts to a tamper-evident log
// (engine/receipts implements it). A failure to record is reported as a
// recoverable error; the action itself is not undone.
type Recorder interface {
	Record(ctx context.Context, r DecisionRecord) error
}

// CommandRequest is a command the engine asks a client to run
// (local_terminal mode).
type CommandRequest struct {
	// ID is "cmd_" and hex digits.
	ID         string            `json:"command_id"`
	Command    string            `json:"command"`
	WorkingDir string            `json:"working_directory"`
	Env        map[string]string `json:"environment,omitempty"`
	Reason     string            `json:"reason,omitempty"`
}

// CommandResult is what a client reports after running a command.
type CommandResult struct {
	ExitCode int           `json:"exit_code"`
	Stdout   string        `json:"stdout"`
	Stderr   string        `json:"stderr"`
	Duration time.Duration `json:"duration_ns"`
}

// CommandRunner is implemented by a Host that runs commands itself (the
// VS Code terminal): in local_terminal mode the engine hands it command
// tool calls instead of running them.
type CommandRunner interface {
	RunCommand(ctx context.Context, req CommandRequest) (CommandResult, error)
}

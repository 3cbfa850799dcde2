package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Toolset is the set of tools a turn may call. Implementations must be safe
// for concurrent use.
type Toolset interface {
	// Tools lists the available tools.
	Tools(ctx context.Context) ([]ToolSpec, error)
	// Invoke runs one tool call. onUpdate (never nil) receives progress and
	// output while the call runs, from the calling goroutine or another one,
	// never concurrently. A failed call returns a *ToolError.
	Invoke(ctx context.Context, req InvokeRequest, onUpdate func(ToolUpdate)) (ToolResult, error)
}

// RiskLevel grades an action as protocols/jsonrpc-unix-socket.md does.
type RiskLevel string

// Risk levels.
const (
	// RiskLow: read-only, local.
	RiskLow RiskLevel = "low"
	// RiskMedium: modifies files, reversible.
	RiskMedium RiskLevel = "medium"
	// RiskHigh: system changes, network access.
	RiskHigh RiskLevel = "high"
	// RiskCritical: irreversible or dangerous.
	RiskCritical RiskLevel = "critical"
)

// ToolSpec describes one tool.
type ToolSpec struct {
	// Name is unique across loaded tools, snake_case.
	Name        string `json:"name"`
	Description string `json:"description"`
	// InputSchema is the JSON Schema (draft 2020-12) of the input object.
	InputSchema json.RawMessage `json:"input_schema"`
	Risk        RiskLevel       `json:"risk_level"`
	// ReadOnly tools never change files, processes or the network.
	ReadOnly bool `json:"read_only"`
	// NeedsApproval tools run only after the user approves each call.
	NeedsApproval bool `json:"needs_approval"`
	// Kind is ToolKindEdit for tools that propose FileEdits instead of
	// writing, ToolKindCommand for tools that run their "command"
	// argument in a shell, "" otherwise.
	Kind string `json:"kind,omitempty"`
	// Timeout is the deadline of one call of the tool, set by the tool's
	// source (a plugin or MCP server configured with its own); 0 means
	// Options.ToolTimeout.
	Timeout time.Duration `json:"timeout_ns,omitempty"`
}

// Tool kinds.
const (
	ToolKindEdit    = "edit"
	ToolKindCommand = "command"
)

// InvokeRequest is one tool call as a Toolset receives it.
type InvokeRequest struct {
	CallID string
	Tool   string
	// Args is the JSON input object.
	Args json.RawMessage
	// WorkspaceRoot is the absolute path the call is confined to.
	WorkspaceRoot string
	// Host answers callbacks the tool makes while it runs; nil when none.
	Host ToolHost
	// Overlay holds the pending content of files edited earlier in the
	// same model response, by workspace-relative path; tools that read
	// files must prefer it to the disk.
	Overlay map[string]OverlayFile
	// Settings are per-call settings from the host, never the model. The
	// engine sets, for command tools run by the engine, "sandbox.network"
	// ("allow" or "deny") and "env.allow" (comma-separated variable names)
	// from the workspace's CommandSettings.
	Settings map[string]string
}

// OverlayFile is the pending content of one file; Deleted when the pending
// change deletes it.
type OverlayFile struct {
	Content []byte
	Deleted bool
}

// ToolHost is what a running tool call may ask of the engine: approvals,
// and searches of the call's workspace index (so built-in and third-party
// tools share one index). The search methods behave as Searcher's, for the
// call's workspace; they return ErrUnsupported when the engine has no
// index.
type ToolHost interface {
	// RequestApproval asks the user to approve an action the tool found it
	// must take. It blocks until an answer or ctx ends.
	RequestApproval(ctx context.Context, req ActionApproval) (ApprovalDecision, error)
	SearchSymbols(ctx context.Context, q SymbolQuery) ([]SymbolHit, error)
	SearchText(ctx context.Context, q TextQuery, onMatch func(TextMatch)) (TextResult, error)
	SearchChunks(ctx context.Context, q ChunkQuery) ([]ChunkHit, error)
	SearchVectors(ctx context.Context, q ChunkQuery) ([]ChunkHit, error)
}

// ActionApproval is an approval a running tool asks for.
type ActionApproval struct {
	Action      string
	Description string
	Risk        Risk
	Preview     string
}

// ToolUpdate is progress or output of a running call; one field is set.
type ToolUpdate struct {
	Progress *ToolProgress `json:"progress,omitempty"`
	Output   *ToolOutput   `json:"output,omitempty"`
}

// ToolProgress reports how far a call has come.
type ToolProgress struct {
	Message string `json:"message"`
	// Percentage in [0, 100]; nil when the tool cannot tell.
	Percentage *float64 `json:"percentage,omitempty"`
}

// ToolOutput is a chunk of incremental output.
type ToolOutput struct {
	// Stream names the channel: "stdout", "stderr", "match", ...
	Stream string `json:"stream"`
	Text   string `json:"text"`
}

// ToolResult is a successful call's outcome.
type ToolResult struct {
	// Content is the result as a JSON value; the model sees it.
	Content json.RawMessage `json:"result"`
	// Summary is one line for people.
	Summary string `json:"summary"`
	// Edits are the file changes an edit tool proposes.
	Edits []FileEdit `json:"-"`
}

// JSONResult marshals v into a ToolResult with the given summary.
func JSONResult(v any, summary string) (ToolResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return ToolResult{}, fmt.Errorf("encode tool result: %w", err)
	}
	return ToolResult{Content: b, Summary: summary}, nil
}

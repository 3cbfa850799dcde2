package engine

import (
	"context"
	"encoding/json"
)

// Host is the front-end a turn runs for. The engine asks it for things only
// a person (or the client program) can give. Each transport implements it;
// a transport that cannot ask passes a nil Host, and calls that need
// approval are then denied unless TurnOptions.ApproveAll is set.
type Host interface {
	// RequestApproval asks to approve one action and blocks until the
	// answer or ctx ends (ctx carries the turn's cancellation).
	RequestApproval(ctx context.Context, req ApprovalRequest) (ApprovalDecision, error)
}

// ApprovalRequest asks to approve one tool call (or an action a running
// tool discovered it must take).
type ApprovalRequest struct {
	// ID identifies the request ("apr_..."); answers refer to it.
	ID     string `json:"id"`
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Description is one sentence for the user.
	Description string          `json:"description"`
	Args        json.RawMessage `json:"args"`
	Risk        Risk            `json:"risk"`
	// Preview of the effect (a command line, a diff); nil when none.
	Preview *Preview `json:"preview,omitempty"`
	// PatchSet is set when the approval is for applying a patch set; the
	// answer may then approve all of it, some files or some hunks.
	PatchSet *PatchSet `json:"patch_set,omitempty"`
	// Command is set when the approval is for a command.
	Command *CommandRequest `json:"command,omitempty"`
}

// Risk is a risk assessment as protocols/jsonrpc-unix-socket.md words it.
type Risk struct {
	Level      RiskLevel `json:"level"`
	Reasons    []string  `json:"reasons"`
	Reversible bool      `json:"reversible"`
}

// Preview shows what an action will do. Type is "command", "diff" or
// "text".
type Preview struct {
	Type    string `json:"type"`
	Content string `json:"content"`
}

// ApprovalDecision is the answer to an ApprovalRequest.
type ApprovalDecision struct {
	Approved bool `json:"approved"`
	// Reason is shown to the model when the call is denied.
	Reason string `json:"reason,omitempty"`
	// Scope is "all" (the default), "file" or "hunk" for a patch set;
	// Files and Hunks then say what was approved.
	Scope string           `json:"scope,omitempty"`
	Files []string         `json:"files,omitempty"`
	Hunks map[string][]int `json:"hunks,omitempty"`
	// Remember persists the decision as a policy rule for this action;
	// ApplyToSimilar for actions like it.
	Remember       bool `json:"remember_choice,omitempty"`
	ApplyToSimilar bool `json:"apply_to_similar,omitempty"`
	// Actor says who answered ("user", "client"); default "user".
	Actor string `json:"actor,omitempty"`
}

// ClientToolHost is implemented by a Host whose client runs tools of its
// own (the VS Code host's $/requestToolExecution: reading an unsaved
// buffer, applying an edit in the editor, running in its terminal). The
// engine offers ClientTools to the model beside its own tools (an engine
// tool of the same name wins), judges their calls by policy and approval
// like any other call (by each spec's ReadOnly, NeedsApproval and Risk),
// and hands the approved ones to InvokeClientTool with the tool deadline
// (Options.ToolTimeout). A failed call returns a *ToolError (its code and
// message reach the model) or any error.
type ClientToolHost interface {
	ClientTools() []ToolSpec
	InvokeClientTool(ctx context.Context, call ToolCall) (ToolResult, error)
}

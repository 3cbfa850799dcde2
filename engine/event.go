package engine

import (
	"encoding/json"
	"time"
)

// Event is one entry of a session's ordered event stream. Seq starts at 1
// and increases by one per event across all turns of the session, so a
// consumer can detect gaps and resume.
type Event struct {
	Seq       uint64    `json:"seq"`
	SessionID string    `json:"session_id"`
	TurnID    string    `json:"turn_id"`
	Time      time.Time `json:"time"`
	Data      EventData `json:"data"`
}

// EventData is the payload of an Event: one of *ThinkingEvent, *PlanEvent,
// *RetrievalEvent, *TokenEvent, *ToolCallEvent, *ApprovalEvent,
// *ErrorEvent, *FinalEvent.
// Front-ends type-switch on it.
type EventData interface {
	// EventKind is the payload's stable name ("thinking", "plan", ...).
	EventKind() string
}

// Phase is what the agent is doing, for thinking indicators.
type Phase string

// Phases.
const (
	PhaseAnalyzing  Phase = "analyzing"
	PhasePlanning   Phase = "planning"
	PhaseRetrieving Phase = "retrieving"
	PhaseGenerating Phase = "generating"
	PhaseExecuting  Phase = "executing"
)

// ThinkingEvent says what the agent is doing now.
type ThinkingEvent struct {
	Phase   Phase  `json:"phase"`
	Message string `json:"message"`
}

// PlanEvent is the model's current plan, published through update_plan.
type PlanEvent struct {
	Steps     []PlanStep `json:"steps"`
	Rationale string     `json:"rationale,omitempty"`
}

// PlanStep is one numbered step of a plan.
type PlanStep struct {
	Number        int      `json:"step_number"`
	Description   string   `json:"description"`
	FilesInvolved []string `json:"files_involved,omitempty"`
	// Status is where the step stands ("" when the model did not say).
	Status StepStatus `json:"status,omitempty"`
}

// StepStatus is the state of a plan step, as the model reports it through
// update_plan (the states of Codex CLI's update_plan tool).
type StepStatus string

// Plan step states.
const (
	StepPending    StepStatus = "pending"
	StepInProgress StepStatus = "in_progress"
	StepCompleted  StepStatus = "completed"
)

// TokenEvent is the next piece of assistant text.
type TokenEvent struct {
	Text string `json:"text"`
	// Step is the model call of the turn (from 0) that streamed the text:
	// each call writes one assistant message, so a token of a new step
	// starts a new message. The turn's final message is its last step's
	// text.
	Step int `json:"step,omitempty"`
}

// ToolStatus is the state of a tool call.
type ToolStatus string

// Tool call states. A call goes started → running* → completed | failed;
// it goes straight to denied when policy or the user refuses it, and
// straight to failed when it cannot start (unknown tool, arguments that are
// not JSON).
const (
	ToolStarted   ToolStatus = "started"
	ToolRunning   ToolStatus = "running"
	ToolCompleted ToolStatus = "completed"
	ToolFailed    ToolStatus = "failed"
	ToolDenied    ToolStatus = "denied"
)

// ToolCallEvent reports a tool call's progress. Args is set on every event;
// Update on running events; Result and Summary on completed; Error (and
// ErrorCode) on failed and denied.
type ToolCallEvent struct {
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Args      json.RawMessage `json:"args"`
	Status    ToolStatus      `json:"status"`
	Update    *ToolUpdate     `json:"update,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Summary   string          `json:"summary,omitempty"`
	Error     string          `json:"error,omitempty"`
	ErrorCode ToolErrorCode   `json:"error_code,omitempty"`
	// Duration of the call, set when it ends.
	Duration time.Duration `json:"duration_ns,omitempty"`
	// Remaining is, on running events of a tool run by the engine, the time
	// left before the call's deadline (ToolSpec.Timeout, else
	// Options.ToolTimeout) when the event was emitted.
	Remaining time.Duration `json:"remaining_ns,omitempty"`
}

// ApprovalEvent is emitted just before the engine asks the Host to approve
// a call, so every front-end can show the request.
type ApprovalEvent struct {
	Request ApprovalRequest `json:"request"`
}

// ErrorCode classifies an ErrorEvent; the names follow the WebSocket
// contract's server.error codes.
type ErrorCode string

// Error codes.
const (
	CodeModelError      ErrorCode = "MODEL_ERROR"
	CodeToolError       ErrorCode = "TOOL_ERROR"
	CodePolicyViolation ErrorCode = "POLICY_VIOLATION"
	CodeCancelled       ErrorCode = "CANCELLED"
	CodeTimeout         ErrorCode = "TIMEOUT"
	CodeInternal        ErrorCode = "INTERNAL"
	CodeRetrievalFailed ErrorCode = "RETRIEVAL_FAILED"
)

// ErrorEvent reports an error. Recoverable errors (a failed tool call, a
// denied approval) do not end the turn; the last unrecoverable one explains
// a turn that ends with status error.
type ErrorEvent struct {
	Code        ErrorCode      `json:"code"`
	Message     string         `json:"message"`
	Recoverable bool           `json:"recoverable"`
	Details     map[string]any `json:"details,omitempty"`
}

// TurnStatus is how a turn ended.
type TurnStatus string

// Turn statuses.
const (
	TurnCompleted TurnStatus = "completed"
	TurnError     TurnStatus = "error"
	TurnCancelled TurnStatus = "cancelled"
	TurnTimeout   TurnStatus = "timeout"
)

// FinalEvent ends every turn, exactly once.
type FinalEvent struct {
	Status TurnStatus `json:"status"`
	// Message is the assistant's final answer (empty unless completed).
	Message string `json:"message"`
	// Error explains a status other than completed.
	Error    string       `json:"error,omitempty"`
	Metadata TurnMetadata `json:"metadata"`
}

// TurnMetadata summarises a turn.
type TurnMetadata struct {
	// Model is PROVIDER:MODEL.
	Model            string `json:"model"`
	PromptTokens     int64  `json:"prompt_tokens"`
	CompletionTokens int64  `json:"completion_tokens"`
	// TokensUsed is PromptTokens + CompletionTokens.
	TokensUsed int64 `json:"tokens_used"`
	// ModelCalls counts Chat calls in the turn.
	ModelCalls int `json:"model_calls"`
	// ToolsUsed lists each tool name called, in first-call order.
	ToolsUsed []string `json:"tools_used"`
	// ToolCalls counts tool calls, denied ones included.
	ToolCalls int `json:"tool_calls"`
	// RetrievedSnippets counts the code snippets retrieval packed into the
	// model's context.
	RetrievedSnippets int `json:"retrieved_snippets"`
	// FilesModified lists workspace-relative paths tools reported writing.
	FilesModified []string      `json:"files_modified"`
	Duration      time.Duration `json:"duration_ns"`
}

// EventKind implementations.
func (*ThinkingEvent) EventKind() string { return "thinking" }
func (*PlanEvent) EventKind() string     { return "plan" }
func (*TokenEvent) EventKind() string    { return "token" }
func (*ToolCallEvent) EventKind() string { return "tool_call" }
func (*ApprovalEvent) EventKind() string { return "approval_request" }
func (*ErrorEvent) EventKind() string    { return "error" }
func (*FinalEvent) EventKind() string    { return "final" }

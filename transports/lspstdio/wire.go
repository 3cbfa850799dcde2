package lspstdio

import (
	"encoding/json"

	"github.com/creachadair/jrpc2"
)

// Error codes of the contract (protocols/jsonrpc-stdio-lsp-framing.md,
// section 6). The standard JSON-RPC codes (-32700 parse error, -32600
// invalid request, -32601 method not found, -32602 invalid params) are used
// for protocol-level problems.
const (
	// CodeInitError answers a failed initialize, and a request that needs
	// an initialized backend (executeTask, updateConfiguration) before
	// initialize succeeded.
	CodeInitError jrpc2.Code = -32000
	// CodeTaskError answers an executeTask that could not be run: the turn
	// did not start, the queue is full, the backend is shutting down. A
	// task that ran and failed answers with the result {status: "error"}.
	CodeTaskError jrpc2.Code = -32001
	// CodeConfigError answers an updateConfiguration whose updatedConfig
	// is invalid.
	CodeConfigError jrpc2.Code = -32002
	// CodeToolError is what the host reports in toolResponse's error (or
	// the error of its response to $/requestToolExecution) when a
	// host-side tool failed.
	CodeToolError jrpc2.Code = -32003
	// CodeContextError answers an executeTask whose context is malformed
	// or names a path outside the workspace.
	CodeContextError jrpc2.Code = -32004
)

// Method names, client to server.
const (
	methodInitialize   = "initialize"
	methodExecuteTask  = "executeTask"
	methodUpdateConfig = "updateConfiguration"
	methodToolResponse = "toolResponse"
	methodShutdown     = "shutdown"
	// methodExit is LSP's exit notification, accepted as shutdown.
	methodExit = "exit"
	// methodCancelRequest is the LSP/vscode-jsonrpc cancellation
	// notification ({id}), sent when a CancellationToken fires.
	methodCancelRequest = "$/cancelRequest"
)

// Method names, server to client.
const (
	methodLogMessage    = "$/logMessage"
	methodStatusUpdate  = "$/statusUpdate"
	methodPartialResult = "$/partialResult"
	methodRequestTool   = "$/requestToolExecution"
	methodTaskError     = "$/taskError"
)

// ApproveToolName is the reserved toolName of the $/requestToolExecution
// requests that ask the host to approve an action (see the package doc).
const ApproveToolName = "approve"

// Partial result types ($/partialResult's type).
const (
	partialThought = "thought"
	partialCode    = "code"
	partialText    = "text"
)

// Log message types ($/logMessage's type).
const (
	logInfo  = "info"
	logWarn  = "warn"
	logError = "error"
)

// Task statuses (executeTask's result status).
const (
	statusCompleted = "completed"
	statusError     = "error"
)

type initializeParams struct {
	InitialConfig json.RawMessage `json:"initialConfig"`
	WorkspaceRoot *string         `json:"workspaceRoot"`
	Environment   json.RawMessage `json:"environment"`
}

// initializeResult answers initialize sent as a request.
type initializeResult struct {
	ServerInfo    serverInfo `json:"serverInfo"`
	WorkspaceRoot string     `json:"workspaceRoot"`
	// Model is PROVIDER:MODEL, "" when none is chosen yet.
	Model string `json:"model"`
	// HostTools names the host tools offered to the model.
	HostTools []string `json:"hostTools"`
}

type serverInfo struct {
	Name string `json:"name"`
	// Protocol names the contract this server speaks.
	Protocol string `json:"protocol"`
}

type updateConfigParams struct {
	UpdatedConfig json.RawMessage `json:"updatedConfig"`
}

type executeTaskParams struct {
	TaskID  string       `json:"taskId"`
	Prompt  string       `json:"prompt"`
	Context contextParam `json:"context"`
}

// contextParam is executeTask's context, decoded where it lies in the
// params (no copy of its text is kept): kind is its first byte (0 when
// absent), tc the context when it is an object, err why it could not be
// decoded.
type contextParam struct {
	kind byte
	tc   taskContext
	err  error
}

func (c *contextParam) UnmarshalJSON(data []byte) error {
	*c = contextParam{kind: jsonKind(data)}
	if c.kind == '{' {
		c.err = json.Unmarshal(data, &c.tc)
	}
	return nil
}

// taskContext is executeTask's context. Every member may be null or left
// out.
type taskContext struct {
	ActiveEditorContent *string  `json:"activeEditorContent"`
	ActiveEditorPath    *string  `json:"activeEditorPath"`
	Selection           *string  `json:"selection"`
	OpenFiles           []string `json:"openFiles"`
	RelevantFiles       []string `json:"relevantFiles"`
}

// taskResult is executeTask's result. Metadata is an addition to the
// contract's {status, message}.
type taskResult struct {
	Status   string        `json:"status"`
	Message  string        `json:"message,omitempty"`
	Metadata *taskMetadata `json:"metadata,omitempty"`
}

type taskMetadata struct {
	Model            string   `json:"model"`
	PromptTokens     int64    `json:"promptTokens"`
	CompletionTokens int64    `json:"completionTokens"`
	TokensUsed       int64    `json:"tokensUsed"`
	ModelCalls       int      `json:"modelCalls"`
	ToolsUsed        []string `json:"toolsUsed"`
	FilesModified    []string `json:"filesModified"`
	DurationMS       int64    `json:"durationMs"`
}

type toolResponseParams struct {
	ToolCallID string          `json:"toolCallId"`
	Result     json.RawMessage `json:"result"`
	Error      json.RawMessage `json:"error"`
}

type cancelParams struct {
	ID json.RawMessage `json:"id"`
}

type logMessage struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

type statusUpdate struct {
	Message string `json:"message"`
	// Progress is a percentage in [0, 100]; nil when unknown.
	Progress *float64 `json:"progress,omitempty"`
}

type partialResult struct {
	TaskID  string `json:"taskId"`
	Content string `json:"content"`
	Type    string `json:"type"`
}

type taskError struct {
	TaskID  string         `json:"taskId"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

// requestToolParams are $/requestToolExecution's params. TaskID is an
// addition to the contract's {toolCallId, toolName, toolInput}.
type requestToolParams struct {
	ToolCallID string          `json:"toolCallId"`
	ToolName   string          `json:"toolName"`
	ToolInput  json.RawMessage `json:"toolInput"`
	TaskID     string          `json:"taskId,omitempty"`
}

// approvalInput is the toolInput of an approve request.
type approvalInput struct {
	RequestID   string          `json:"requestId"`
	ToolCallID  string          `json:"callId"`
	Tool        string          `json:"tool"`
	Description string          `json:"description"`
	Args        json.RawMessage `json:"args"`
	Risk        approvalRisk    `json:"risk"`
	Preview     *approvalText   `json:"preview,omitempty"`
	PatchSet    *approvalPatch  `json:"patchSet,omitempty"`
	Command     *approvalCmd    `json:"command,omitempty"`
}

type approvalRisk struct {
	Level      string   `json:"level"`
	Reasons    []string `json:"reasons"`
	Reversible bool     `json:"reversible"`
}

type approvalText struct {
	Type    string `json:"type"`
	Content string `json:"content"`
}

type approvalPatch struct {
	ID        string         `json:"id"`
	Rationale string         `json:"rationale,omitempty"`
	Files     []approvalFile `json:"files"`
	Criteria  []string       `json:"acceptanceCriteria,omitempty"`
}

type approvalFile struct {
	Path string `json:"path"`
	Op   string `json:"op"`
	Diff string `json:"diff"`
	// Hunks counts the file's hunks; an answer may approve some of them
	// by index.
	Hunks int `json:"hunks"`
}

type approvalCmd struct {
	Command          string `json:"command"`
	WorkingDirectory string `json:"workingDirectory"`
}

// approvalAnswer is the result the host answers an approve request with.
type approvalAnswer struct {
	Approved       *bool            `json:"approved"`
	Reason         string           `json:"reason"`
	Scope          string           `json:"scope"`
	Files          []string         `json:"files"`
	Hunks          map[string][]int `json:"hunks"`
	Remember       bool             `json:"remember"`
	ApplyToSimilar bool             `json:"applyToSimilar"`
}

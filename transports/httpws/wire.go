package httpws

import (
	"encoding/json"

	"github.com/plexus-agent/plexus/engine"
)

// Client message types (protocols/http-websocket-sessions.md).
const (
	typeClientHello      = "client.hello"
	typeUserMessage      = "client.user_message"
	typeContextUpdate    = "client.context_update"
	typeApprovalResponse = "client.approval_response"
	typePatchApplyResult = "client.patch_apply_result"
	typeCommandResult    = "client.command_result"
	typeCancel           = "client.cancel"
	typeFileChanges      = "client.file_changes"
	typeServerHello      = "server.hello"
	typeThinking         = "assistant.thinking"
	typePlan             = "agent.plan"
	typeRetrieveStatus   = "agent.retrieve.status"
	typeToolExecute      = "tool.execute"
	typePatchProposed    = "patch.proposed"
	typeToolApproval     = "tool.request_approval"
	typeCommandApproval  = "command.request_approval"
	typeToken            = "assistant.token"
	typeMessageFinal     = "assistant.message_final"
	typeServerError      = "server.error"
	typeSessionState     = "session.state"
	typeApprovalResolved = "approval.resolved"
	typePatchResult      = "patch.result"
	typeIndexUpdated     = "index.updated"
)

// envelope is the part of every client message read first.
type envelope struct {
	Type string `json:"type"`
}

// clientHello is client.hello.
type clientHello struct {
	Type       string     `json:"type"`
	ClientInfo clientInfo `json:"client_info"`
}

type clientInfo struct {
	Name         string   `json:"name"`
	Version      string   `json:"version"`
	Capabilities []string `json:"capabilities"`
}

// Client capabilities this server acts on (beyond the contract's example
// list, which it accepts and ignores).
const (
	// capTerminalExec: the client runs commands in its terminal
	// (local_terminal mode) and answers with client.command_result.
	capTerminalExec = "terminal_exec"
	// capPatchApply: the client applies approved patches itself and
	// answers with one client.patch_apply_result per file.
	capPatchApply = "patch_apply"
)

// userMessage is client.user_message.
type userMessage struct {
	Type    string              `json:"type"`
	Message string              `json:"message"`
	Context *engine.TurnContext `json:"context,omitempty"`
}

// contextUpdate is client.context_update.
type contextUpdate struct {
	Type    string              `json:"type"`
	Updates *engine.TurnContext `json:"updates"`
}

// approvalResponse is client.approval_response. FilePath names the file
// for scope "file"; for scope "hunk" FilePath and Hunks (0-based indexes
// into patch.proposed's hunks, an extension) say which hunks.
type approvalResponse struct {
	Type      string `json:"type"`
	RequestID string `json:"request_id"`
	Approved  bool   `json:"approved"`
	Scope     string `json:"scope,omitempty"`
	FilePath  string `json:"file_path,omitempty"`
	// Extensions: more files or hunks in one answer, a reason, and
	// remembering the choice as a policy rule.
	FilePaths      []string         `json:"file_paths,omitempty"`
	Hunks          []int            `json:"hunks,omitempty"`
	HunksByFile    map[string][]int `json:"hunks_by_file,omitempty"`
	Reason         string           `json:"reason,omitempty"`
	RememberChoice bool             `json:"remember_choice,omitempty"`
	ApplyToSimilar bool             `json:"apply_to_similar,omitempty"`
}

// patchApplyResult is client.patch_apply_result.
type patchApplyResult struct {
	Type        string      `json:"type"`
	PatchID     string      `json:"patch_id"`
	FilePath    string      `json:"file_path"`
	Success     bool        `json:"success"`
	Error       *applyError `json:"error"`
	AppliedHash string      `json:"applied_hash,omitempty"`
}

type applyError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
}

// commandResult is client.command_result.
type commandResult struct {
	Type       string `json:"type"`
	CommandID  string `json:"command_id"`
	Command    string `json:"command"`
	ExitCode   int    `json:"exit_code"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	DurationMS int64  `json:"duration_ms"`
}

// cancel is client.cancel.
type cancel struct {
	Type   string `json:"type"`
	Reason string `json:"reason,omitempty"`
}

// fileChanges is client.file_changes.
type fileChanges struct {
	Type    string       `json:"type"`
	Changes []fileChange `json:"changes"`
}

// fileChange is one entry of client.file_changes.
type fileChange struct {
	Type        string `json:"type"`
	FilePath    string `json:"file_path"`
	ContentHash string `json:"content_hash,omitempty"`
	Timestamp   string `json:"timestamp,omitempty"`
}

// Server messages. Every one carries Seq: the event's sequence number
// for messages made from an engine event, else the number of the last
// event sent on this connection (so the highest seq a client has seen is
// always the right resume point), and TurnID where a turn is concerned.

type header struct {
	Type string `json:"type"`
	Seq  uint64 `json:"seq"`
	// TurnID is set on messages of a turn.
	TurnID string `json:"turn_id,omitempty"`
}

type serverHello struct {
	header
	ServerInfo serverInfo `json:"server_info"`
	SessionID  string     `json:"session_id"`
}

type serverInfo struct {
	Version      string    `json:"version"`
	Model        modelInfo `json:"model"`
	Capabilities []string  `json:"capabilities"`
}

type modelInfo struct {
	Provider     string   `json:"provider"`
	ModelName    string   `json:"model_name"`
	Capabilities []string `json:"capabilities"`
}

type thinking struct {
	header
	Phase   string `json:"phase"`
	Message string `json:"message"`
}

type plan struct {
	header
	Steps     []planStep `json:"steps"`
	Rationale string     `json:"rationale"`
}

// planStep is one step of agent.plan; files_involved is always an array
// (empty when the step names no file), as the contract shows it.
type planStep struct {
	Number        int               `json:"step_number"`
	Description   string            `json:"description"`
	FilesInvolved []string          `json:"files_involved"`
	Status        engine.StepStatus `json:"status,omitempty"`
}

type retrieveStatus struct {
	header
	Stage        string `json:"stage"`
	ResultsCount int    `json:"results_count"`
	Message      string `json:"message"`
}

type toolExecute struct {
	header
	CallID   string          `json:"call_id"`
	ToolName string          `json:"tool_name"`
	Args     json.RawMessage `json:"args"`
	Status   string          `json:"status"`
	Result   any             `json:"result,omitempty"`
	// Progress is set on updates of a running call (status "started").
	Progress *engine.ToolUpdate `json:"progress,omitempty"`
}

type patchProposed struct {
	header
	PatchID            string        `json:"patch_id"`
	PatchSetID         string        `json:"patch_set_id"`
	FilePath           string        `json:"file_path"`
	Op                 string        `json:"op"`
	BaseHash           string        `json:"base_hash"`
	NewHash            string        `json:"new_hash"`
	Diff               string        `json:"diff"`
	Rationale          string        `json:"rationale"`
	AcceptanceCriteria []string      `json:"acceptance_criteria"`
	RequiresApproval   bool          `json:"requires_approval"`
	Hunks              []engine.Hunk `json:"hunks"`
}

type toolApproval struct {
	header
	RequestID   string          `json:"request_id"`
	ToolName    string          `json:"tool_name"`
	Args        json.RawMessage `json:"args"`
	RiskLevel   string          `json:"risk_level"`
	Description string          `json:"description"`
	Reasons     []string        `json:"risk_reasons"`
	Reversible  bool            `json:"reversible"`
	// PatchSetID and PatchIDs are set when the approval is for patches.
	PatchSetID string   `json:"patch_set_id,omitempty"`
	PatchIDs   []string `json:"patch_ids,omitempty"`
}

type commandApproval struct {
	header
	CommandID        string            `json:"command_id"`
	RequestID        string            `json:"request_id,omitempty"`
	Command          string            `json:"command"`
	WorkingDirectory string            `json:"working_directory"`
	Environment      map[string]string `json:"environment"`
	RequiresApproval bool              `json:"requires_approval"`
	Reason           string            `json:"reason"`
	RiskLevel        string            `json:"risk_level,omitempty"`
}

// assistant.token is encoded by mapper.tokenMessage: type, seq, turn_id,
// token and cumulative_text.

type messageFinal struct {
	header
	Message  string        `json:"message"`
	Metadata finalMetadata `json:"metadata"`
}

type finalMetadata struct {
	TokensUsed    int64    `json:"tokens_used"`
	FilesModified int      `json:"files_modified"`
	ToolsUsed     []string `json:"tools_used"`
	Success       bool     `json:"success"`
	// Extensions.
	Status           string   `json:"status"`
	Error            string   `json:"error,omitempty"`
	Model            string   `json:"model"`
	PromptTokens     int64    `json:"prompt_tokens"`
	CompletionTokens int64    `json:"completion_tokens"`
	FilesChanged     []string `json:"files_changed"`
	DurationMS       int64    `json:"duration_ms"`
}

type serverError struct {
	header
	Error errorBody `json:"error"`
}

type errorBody struct {
	Code        string         `json:"code"`
	Message     string         `json:"message"`
	Details     map[string]any `json:"details,omitempty"`
	Recoverable bool           `json:"recoverable"`
}

type sessionState struct {
	header
	State engine.SessionState `json:"state"`
}

// approvalResolved (an extension) tells every client watching the session
// that an approval request was answered, so they close its prompt.
type approvalResolved struct {
	header
	RequestID string `json:"request_id"`
	Approved  bool   `json:"approved"`
	Scope     string `json:"scope,omitempty"`
	Actor     string `json:"actor"`
	Reason    string `json:"reason,omitempty"`
}

// patchResult (an extension) says what became of a proposed patch set.
type patchResult struct {
	header
	PatchSetID    string   `json:"patch_set_id"`
	Status        string   `json:"status"`
	AppliedFiles  []string `json:"applied_files"`
	RejectedFiles []string `json:"rejected_files"`
	AppliedID     string   `json:"applied_id,omitempty"`
	ClientSide    bool     `json:"client_side"`
	Reason        string   `json:"reason,omitempty"`
}

// indexUpdated (an extension) answers client.file_changes.
type indexUpdated struct {
	header
	Changes int `json:"changes"`
	Stats   any `json:"stats"`
}

package unixrpc

import (
	"encoding/json"

	"github.com/creachadair/jrpc2"
)

// Methods (client to server).
const (
	methodInitialize    = "initialize"
	methodQuery         = "agent.query"
	methodCancel        = "agent.cancel"
	methodApprove       = "tool.approve"
	methodContextUpdate = "context.update"
	methodSessionSave   = "session.save"
	methodSessionLoad   = "session.load"
)

// Notifications (server to client).
const (
	methodToken      = "stream.token"
	methodTokens     = "stream.tokens"
	methodBlock      = "stream.block"
	methodComplete   = "stream.complete"
	methodError      = "stream.error"
	methodApproval   = "tool.request_approval"
	methodProgress   = "tool.progress"
	methodToolDone   = "tool.complete"
	methodThinking   = "agent.thinking"
	methodSuggestion = "suggestion.inline"
)

// Capabilities the server announces; capabilities a client may announce
// that change what it is sent.
const (
	capStreaming      = "streaming"
	capBlocks         = "blocks"
	capToolApproval   = "tool_approval"
	capSessionPersist = "session_persistence"
	capToolExecution  = "tool_execution"
	capContextAware   = "context_aware"
	capCancellation   = "cancellation"
	capBatching       = "batching"
	capInlineSuggest  = "inline_suggestions"
)

// serverCapabilities are initialize's capabilities.
var serverCapabilities = []string{
	capStreaming, capBlocks, capToolExecution, capToolApproval, capContextAware,
	capSessionPersist, capCancellation, capBatching, capInlineSuggest,
}

type clientInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

type termSize struct {
	Cols        int `json:"cols"`
	Rows        int `json:"rows"`
	PixelWidth  int `json:"pixel_width,omitempty"`
	PixelHeight int `json:"pixel_height,omitempty"`
}

type initializeParams struct {
	ProtocolVersion string          `json:"protocol_version"`
	ClientInfo      *clientInfo     `json:"client_info"`
	TerminalSize    *termSize       `json:"terminal_size"`
	Capabilities    *[]string       `json:"capabilities"`
	Config          json.RawMessage `json:"config"`
}

type serverInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

type modelEntry struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Loaded bool   `json:"loaded"`
	// Current marks the model queries use unless they name another.
	Current bool `json:"current,omitempty"`
}

type limits struct {
	MaxMessageBytes      int `json:"max_message_bytes"`
	MaxRequestsPerSecond int `json:"max_requests_per_second"`
	MaxConcurrentQueries int `json:"max_concurrent_queries"`
}

type initializeResult struct {
	Status          string       `json:"status"`
	ProtocolVersion string       `json:"protocol_version"`
	ServerInfo      serverInfo   `json:"server_info"`
	Capabilities    []string     `json:"capabilities"`
	Models          []modelEntry `json:"models"`
	Limits          limits       `json:"limits"`
}

// recentCommand is one entry of context.recent_commands.
type recentCommand struct {
	Command   string `json:"command"`
	ExitCode  *int   `json:"exit_code,omitempty"`
	Timestamp int64  `json:"timestamp,omitempty"`
}

// termContext is the terminal context: agent.query's context and
// context.update's params (the latter may carry every member too).
type termContext struct {
	Cwd            string            `json:"cwd,omitempty"`
	Shell          string            `json:"shell,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	RecentCommands []recentCommand   `json:"recent_commands,omitempty"`
	RecentOutput   *string           `json:"recent_output,omitempty"`
	OpenFiles      []string          `json:"open_files,omitempty"`
	TerminalSize   *termSize         `json:"terminal_size,omitempty"`
}

// merge applies an update: members present replace the old ones.
func (c *termContext) merge(u *termContext) {
	if u == nil {
		return
	}
	if u.Cwd != "" {
		c.Cwd = u.Cwd
	}
	if u.Shell != "" {
		c.Shell = u.Shell
	}
	if u.Env != nil {
		c.Env = u.Env
	}
	if u.RecentCommands != nil {
		c.RecentCommands = u.RecentCommands
	}
	if u.RecentOutput != nil {
		c.RecentOutput = u.RecentOutput
	}
	if u.OpenFiles != nil {
		c.OpenFiles = u.OpenFiles
	}
	if u.TerminalSize != nil {
		c.TerminalSize = u.TerminalSize
	}
}

type queryOptions struct {
	Stream          *bool    `json:"stream"`
	MaxTokens       *int     `json:"max_tokens"`
	Temperature     *float64 `json:"temperature"`
	ToolsEnabled    *bool    `json:"tools_enabled"`
	RequireApproval *bool    `json:"require_approval"`
	// Model (beyond the contract) is PROVIDER:MODEL for this query.
	Model string `json:"model"`
}

type queryParams struct {
	Message *string       `json:"message"`
	Context *termContext  `json:"context"`
	Options *queryOptions `json:"options"`
}

type queryResult struct {
	QueryID string `json:"query_id"`
	Status  string `json:"status"`
}

type cancelParams struct {
	QueryID string `json:"query_id"`
}

type cancelResult struct {
	Cancelled bool   `json:"cancelled"`
	QueryID   string `json:"query_id"`
	// Reason says why nothing was cancelled.
	Reason string `json:"reason,omitempty"`
}

type approveOptions struct {
	RememberChoice bool `json:"remember_choice"`
	ApplyToSimilar bool `json:"apply_to_similar"`
}

type approveParams struct {
	ExecutionID string          `json:"execution_id"`
	Approved    *bool           `json:"approved"`
	Options     *approveOptions `json:"options"`
	// Reason (beyond the contract) is shown to the model on a rejection.
	Reason string `json:"reason"`
}

type approveResult struct {
	Status      string `json:"status"`
	ExecutionID string `json:"execution_id"`
}

type saveParams struct {
	Path           string `json:"path"`
	IncludeHistory *bool  `json:"include_history"`
	IncludeBlocks  *bool  `json:"include_blocks"`
}

type saveResult struct {
	Saved bool   `json:"saved"`
	Path  string `json:"path"`
	Size  int64  `json:"size"`
}

type loadParams struct {
	Path string `json:"path"`
}

type loadedSession struct {
	ID            string `json:"id"`
	Created       int64  `json:"created"`
	BlocksCount   int    `json:"blocks_count"`
	MessagesCount int    `json:"messages_count"`
	// SourceID (beyond the contract) is the id of the session the file
	// was saved from.
	SourceID string `json:"source_id"`
}

type loadResult struct {
	Loaded  bool          `json:"loaded"`
	Session loadedSession `json:"session"`
}

type tokenMeta struct {
	Type string `json:"type"`
}

type tokenParams struct {
	QueryID  string    `json:"query_id"`
	Token    string    `json:"token"`
	Index    int       `json:"index"`
	Metadata tokenMeta `json:"metadata"`
}

type batchedToken struct {
	Token string `json:"token"`
	Index int    `json:"index"`
}

type tokensParams struct {
	QueryID string         `json:"query_id"`
	Tokens  []batchedToken `json:"tokens"`
}

type annotation struct {
	Line    int    `json:"line"`
	Type    string `json:"type"`
	Message string `json:"message"`
}

// Block types.
const (
	blockText        = "text"
	blockCode        = "code"
	blockDiff        = "diff"
	blockError       = "error"
	blockToolOutput  = "tool_output"
	blockInteractive = "interactive"
)

type block struct {
	Type        string         `json:"type"`
	Language    string         `json:"language,omitempty"`
	Content     string         `json:"content"`
	Metadata    map[string]any `json:"metadata,omitempty"`
	Annotations []annotation   `json:"annotations,omitempty"`
}

type blockParams struct {
	QueryID string `json:"query_id"`
	BlockID string `json:"block_id"`
	Block   block  `json:"block"`
}

type completeMeta struct {
	TotalTokens      int64    `json:"total_tokens"`
	TokensPerSecond  float64  `json:"tokens_per_second"`
	ToolsExecuted    []string `json:"tools_executed"`
	ModelUsed        string   `json:"model_used"`
	DurationMS       int64    `json:"duration_ms"`
	PromptTokens     int64    `json:"prompt_tokens"`
	CompletionTokens int64    `json:"completion_tokens"`
	FilesModified    []string `json:"files_modified"`
	Error            string   `json:"error,omitempty"`
}

type completeParams struct {
	QueryID  string       `json:"query_id"`
	Status   string       `json:"status"`
	Metadata completeMeta `json:"metadata"`
}

type streamError struct {
	Code    jrpc2.Code `json:"code"`
	Message string     `json:"message"`
	Details string     `json:"details,omitempty"`
}

type streamErrorParams struct {
	QueryID string      `json:"query_id"`
	Error   streamError `json:"error"`
}

type toolInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Category    string `json:"category"`
}

type preview struct {
	Type    string `json:"type"`
	Content string `json:"content"`
	// Truncated (beyond the contract) marks a preview cut to fit the
	// message limit.
	Truncated bool `json:"truncated,omitempty"`
}

type riskAssessment struct {
	Level      string   `json:"level"`
	Reasons    []string `json:"reasons"`
	Reversible bool     `json:"reversible"`
}

type approvalParams struct {
	ExecutionID    string          `json:"execution_id"`
	QueryID        string          `json:"query_id"`
	Tool           toolInfo        `json:"tool"`
	Arguments      json.RawMessage `json:"arguments"`
	Preview        *preview        `json:"preview,omitempty"`
	RiskAssessment riskAssessment  `json:"risk_assessment"`
	Timeout        int             `json:"timeout"`
}

type progress struct {
	Percentage *float64 `json:"percentage,omitempty"`
	Status     string   `json:"status"`
	Message    string   `json:"message"`
	// Output (beyond the contract) is a chunk of the tool's output.
	Output *toolOutput `json:"output,omitempty"`
}

type toolOutput struct {
	Stream string `json:"stream"`
	Text   string `json:"text"`
}

type progressParams struct {
	ExecutionID string   `json:"execution_id"`
	QueryID     string   `json:"query_id"`
	Progress    progress `json:"progress"`
}

type toolResult struct {
	Output        string       `json:"output"`
	FilesModified []string     `json:"files_modified"`
	DurationMS    int64        `json:"duration_ms"`
	Summary       string       `json:"summary,omitempty"`
	Error         *streamError `json:"error,omitempty"`
}

type toolCompleteParams struct {
	ExecutionID string     `json:"execution_id"`
	QueryID     string     `json:"query_id"`
	Status      string     `json:"status"`
	Result      toolResult `json:"result"`
}

type thinkingParams struct {
	QueryID string `json:"query_id"`
	Phase   string `json:"phase"`
	Message string `json:"message"`
}

type suggestionParams struct {
	Suggestion string  `json:"suggestion"`
	Confidence float64 `json:"confidence"`
	Source     string  `json:"source"`
	Context    string  `json:"context"`
}

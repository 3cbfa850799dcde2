package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Model is one model provider as the engine sees it. Implementations must be
// safe for concurrent use. Errors should be *ModelError (or wrap one of the
// sentinels) so front-ends can classify them.
type Model interface {
	// ListModels lists the models the provider can serve now.
	ListModels(ctx context.Context) ([]ModelInfo, error)
	// Chat runs one model call, calling onChunk for each piece of the
	// streamed reply in order. A non-nil error from onChunk stops the call
	// and is returned. Chat returns when the reply is complete.
	Chat(ctx context.Context, req ChatRequest, onChunk func(ChatChunk) error) error
	// Embed returns one vector per input, in input order.
	Embed(ctx context.Context, req EmbedRequest) (EmbedResponse, error)
}

// ModelInfo describes one model of a provider.
type ModelInfo struct {
	Name string `json:"name"`
	// Capabilities as the provider reports them ("completion", "tools",
	// "embedding", "vision"); empty when it does not say.
	Capabilities []string `json:"capabilities,omitempty"`
	// ContextLength in tokens; 0 when unknown.
	ContextLength int64  `json:"context_length,omitempty"`
	Family        string `json:"family,omitempty"`
	ParameterSize string `json:"parameter_size,omitempty"`
	// SizeBytes of the weights; 0 when unknown.
	SizeBytes int64 `json:"size_bytes,omitempty"`
	// Loaded is true when the model is in memory now.
	Loaded bool `json:"loaded,omitempty"`
}

// HasCapability reports whether the provider listed c for the model.
func (m ModelInfo) HasCapability(c string) bool {
	for _, have := range m.Capabilities {
		if have == c {
			return true
		}
	}
	return false
}

// ModelRef names a model as PROVIDER:MODEL, for example "ollama:qwen2.5:7b"
// (the provider is everything before the first colon).
type ModelRef struct {
	Provider string `json:"provider"`
	Name     string `json:"model_name"`
}

// ParseModelRef parses "PROVIDER:MODEL". Both parts must be non-empty.
func ParseModelRef(s string) (ModelRef, error) {
	provider, name, ok := strings.Cut(s, ":")
	if !ok || provider == "" || name == "" {
		return ModelRef{}, fmt.Errorf("%w: model %q is not PROVIDER:MODEL (for example ollama:qwen2.5-coder:7b or replay:examples/replay/tour.jsonl)", ErrInvalidRequest, s)
	}
	return ModelRef{Provider: provider, Name: name}, nil
}

func (r ModelRef) String() string { return r.Provider + ":" + r.Name }

// IsZero reports whether r names nothing.
func (r ModelRef) IsZero() bool { return r.Provider == "" && r.Name == "" }

// Role is the author of a chat message.
type Role string

// Roles.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one message of a conversation.
type Message struct {
	Role    Role   `json:"role"`
	Content string `json:"content"`
	// ToolCalls made by an assistant message.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID and ToolName identify the call a tool message answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	ToolName   string `json:"tool_name,omitempty"`
}

// ToolCall is a complete tool call chosen by the model. Args is the JSON
// input object.
type ToolCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"arguments"`
}

// ChatRequest is one model call.
type ChatRequest struct {
	Model    string
	Messages []Message
	Tools    []ToolSpec
	Options  ChatOptions
}

// ChatOptions are sampling and runtime options; a nil pointer or zero value
// means the provider's default.
type ChatOptions struct {
	Temperature *float64
	TopP        *float64
	// MaxTokens caps generated tokens.
	MaxTokens int
	// NumCtx is the context window in tokens (Ollama's num_ctx).
	NumCtx int
	Seed   *int64
	// KeepAlive is how long the provider keeps the model loaded (Ollama).
	KeepAlive time.Duration
	Stop      []string
	// Format is a JSON Schema the reply must match, for providers with
	// constrained decoding (Ollama's format, OpenAI's response_format);
	// nil means free text.
	Format json.RawMessage
}

// ChatChunk is one piece of a streamed reply; exactly one field is set.
type ChatChunk struct {
	// Text is the next piece of generated text.
	Text string
	// ToolCall is a complete tool call.
	ToolCall *ToolCall
	// Usage counts the call's tokens.
	Usage *Usage
	// DoneReason ends the reply: "stop", "length", "tool_calls", ...
	DoneReason string
}

// Usage counts tokens.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
}

// EmbedRequest is a batch of inputs for one model.
type EmbedRequest struct {
	Model  string
	Inputs []string
}

// EmbedResponse holds one vector per input, in input order.
type EmbedResponse struct {
	Vectors [][]float32
	// PromptTokens as the provider counted them; 0 when unknown.
	PromptTokens int64
}

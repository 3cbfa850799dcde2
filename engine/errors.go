package engine

import (
	"errors"
	"fmt"
)

// Sentinel errors. Adapters wrap them (or return the typed errors below,
// which match them through errors.Is) so that each front-end can map engine
// errors to its own wire codes.
var (
	// ErrModelNotFound: the provider does not have the requested model.
	ErrModelNotFound = errors.New("model not found")
	// ErrModelUnavailable: the provider's server cannot be reached.
	ErrModelUnavailable = errors.New("model provider unavailable")
	// ErrNotConfigured: the provider lacks the configuration it needs
	// (credentials, a server address) and did not contact anything; its
	// message says what to set. Listings skip such a provider and report
	// it as "not configured" rather than as a failure.
	ErrNotConfigured = errors.New("not configured")
	// ErrUnsupported: a capability the request needs is missing: the
	// model cannot call tools or embed, the engine has no index.
	ErrUnsupported = errors.New("not supported")
	// ErrInvalidRequest: the request was malformed.
	ErrInvalidRequest = errors.New("invalid request")
	// ErrUnknownProvider: no model plugin of that provider name is loaded.
	ErrUnknownProvider = errors.New("unknown model provider")
	// ErrPluginCrashed: the plugin process serving the call died during it.
	ErrPluginCrashed = errors.New("plugin crashed")
	// ErrUnknownTool: no loaded tool has that name.
	ErrUnknownTool = errors.New("unknown tool")
	// ErrPermissionDenied: policy, the user or path confinement refused.
	ErrPermissionDenied = errors.New("permission denied")
	// ErrNotFound: a session, workspace or file does not exist.
	ErrNotFound = errors.New("not found")
	// ErrTimeout: a deadline passed.
	ErrTimeout = errors.New("timed out")
	// ErrConflict: a file changed since a patch was proposed (or applied,
	// for an undo); the change was not made.
	ErrConflict = errors.New("conflict")
)

// ModelError is an error reported by a model provider. Message is the
// provider's own words (for example Ollama's `model "x" not found, try
// pulling it first`) and is shown to the user verbatim. Kind is one of the
// sentinels above (or nil when unclassified); errors.Is(err, Kind) holds.
type ModelError struct {
	Provider string
	Kind     error
	Message  string
}

func (e *ModelError) Error() string {
	if e.Provider == "" {
		return e.Message
	}
	return fmt.Sprintf("%s: %s", e.Provider, e.Message)
}

// Is reports whether target is e's Kind.
func (e *ModelError) Is(target error) bool { return e.Kind != nil && target == e.Kind }

// ToolErrorCode classifies a failed tool call; the values mirror the plugin
// contract's ToolErrorCode.
type ToolErrorCode string

// Tool error codes.
const (
	ToolCodeInvalidInput     ToolErrorCode = "invalid_input"
	ToolCodeNotFound         ToolErrorCode = "not_found"
	ToolCodePermissionDenied ToolErrorCode = "permission_denied"
	ToolCodeTimeout          ToolErrorCode = "timeout"
	ToolCodeCancelled        ToolErrorCode = "cancelled"
	ToolCodeFailed           ToolErrorCode = "failed"
	ToolCodeUnknownTool      ToolErrorCode = "unknown_tool"
	ToolCodePluginCrashed    ToolErrorCode = "plugin_crashed"
)

// ToolError is a failed tool call. Tools return it from Invoke; the engine
// hands Message to the model so it can correct itself.
type ToolError struct {
	Code    ToolErrorCode
	Message string
}

func (e *ToolError) Error() string { return e.Message }

// Is matches the sentinel that corresponds to e.Code.
func (e *ToolError) Is(target error) bool {
	switch e.Code {
	case ToolCodeNotFound:
		return target == ErrNotFound
	case ToolCodePermissionDenied:
		return target == ErrPermissionDenied
	case ToolCodeTimeout:
		return target == ErrTimeout
	case ToolCodeUnknownTool:
		return target == ErrUnknownTool
	case ToolCodePluginCrashed:
		return target == ErrPluginCrashed
	case ToolCodeInvalidInput:
		return target == ErrInvalidRequest
	}
	return false
}

// ToolErrorf returns a *ToolError with a formatted message.
func ToolErrorf(code ToolErrorCode, format string, args ...any) *ToolError {
	return &ToolError{Code: code, Message: fmt.Sprintf(format, args...)}
}

package unixrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/creachadair/jrpc2"

	"github.com/plexus-agent/plexus/engine"
)

// Error codes of the contract's table. Every error response and every
// stream.error carries one of these; no other code is ever sent.
const (
	CodeParseError       jrpc2.Code = -32700 // invalid JSON
	CodeInvalidRequest   jrpc2.Code = -32600 // invalid JSON-RPC
	CodeMethodNotFound   jrpc2.Code = -32601 // method doesn't exist
	CodeInvalidParams    jrpc2.Code = -32602 // invalid method parameters
	CodeInternalError    jrpc2.Code = -32603 // internal server error
	CodeAgentError       jrpc2.Code = -32000 // agent processing failed
	CodeModelError       jrpc2.Code = -32001 // LLM inference failed
	CodeToolError        jrpc2.Code = -32002 // tool execution failed
	CodeTimeout          jrpc2.Code = -32003 // operation timed out
	CodeCancelled        jrpc2.Code = -32004 // operation was cancelled
	CodePermissionDenied jrpc2.Code = -32005 // operation not permitted
)

// codeText is the table's Message and Description of each code. Error
// responses' messages start with the Message ("Invalid params: ...");
// stream.error's message is the Description, as the contract's example
// shows ("Agent processing failed"), with the particulars in details.
var codeText = map[jrpc2.Code][2]string{
	CodeParseError:       {"Parse error", "Invalid JSON"},
	CodeInvalidRequest:   {"Invalid Request", "Invalid JSON-RPC"},
	CodeMethodNotFound:   {"Method not found", "Method doesn't exist"},
	CodeInvalidParams:    {"Invalid params", "Invalid method parameters"},
	CodeInternalError:    {"Internal error", "Internal server error"},
	CodeAgentError:       {"Agent error", "Agent processing failed"},
	CodeModelError:       {"Model error", "LLM inference failed"},
	CodeToolError:        {"Tool error", "Tool execution failed"},
	CodeTimeout:          {"Timeout", "Operation timed out"},
	CodeCancelled:        {"Cancelled", "Operation was cancelled"},
	CodePermissionDenied: {"Permission denied", "Operation not permitted"},
}

// Reasons in the data of error responses, so that a client can tell apart
// errors that share a code.
const (
	reasonRateLimited     = "rate_limited"
	reasonTooManyQueries  = "too_many_queries"
	reasonTooLarge        = "message_too_large"
	reasonBatch           = "batch_not_supported"
	reasonNotInitialized  = "not_initialized"
	reasonInitialized     = "already_initialized"
	reasonVersion         = "unsupported_protocol_version"
	reasonShuttingDown    = "shutting_down"
	reasonBusy            = "busy"
	reasonInvalidPath     = "invalid_path"
	reasonPathNotAllowed  = "path_not_allowed"
	reasonCorrupt         = "corrupt_session_file"
	reasonNotSessionFile  = "not_a_session_file"
	reasonDuplicateID     = "duplicate_id"
	reasonWorkspace       = "workspace_mismatch"
	reasonUnknownApproval = "unknown_execution"
	reasonAnswered        = "already_answered"
)

// rpcError returns an error response body: the table's message for code,
// then detail; data (may be nil) is marshalled into the error's data.
func rpcError(code jrpc2.Code, detail string, data any) *jrpc2.Error {
	msg := codeText[code][0]
	if detail != "" {
		msg += ": " + detail
	}
	e := &jrpc2.Error{Code: code, Message: msg}
	if data != nil {
		if b, err := json.Marshal(data); err == nil {
			e.Data = b
		}
	}
	return e
}

// reasonData is the data of an error response: {"reason": reason} plus
// more members.
func reasonData(reason string, kv ...any) map[string]any {
	m := map[string]any{"reason": reason}
	for i := 0; i+1 < len(kv); i += 2 {
		m[fmt.Sprint(kv[i])] = kv[i+1]
	}
	return m
}

// engineCode maps an error returned by an engine call onto the table.
func engineCode(err error) jrpc2.Code {
	var me *engine.ModelError
	var te *engine.ToolError
	switch {
	case errors.Is(err, context.Canceled):
		return CodeCancelled
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, engine.ErrTimeout):
		return CodeTimeout
	case errors.Is(err, engine.ErrPermissionDenied):
		return CodePermissionDenied
	case errors.As(err, &me), errors.Is(err, engine.ErrModelNotFound), errors.Is(err, engine.ErrModelUnavailable),
		errors.Is(err, engine.ErrUnknownProvider):
		return CodeModelError
	case errors.As(err, &te), errors.Is(err, engine.ErrUnknownTool), errors.Is(err, engine.ErrPluginCrashed):
		return CodeToolError
	case errors.Is(err, engine.ErrInvalidRequest), errors.Is(err, engine.ErrNotFound):
		return CodeInvalidParams
	}
	return CodeAgentError
}

// eventCode maps the code of an engine ErrorEvent onto the table.
func eventCode(c engine.ErrorCode) jrpc2.Code {
	switch c {
	case engine.CodeModelError:
		return CodeModelError
	case engine.CodeToolError:
		return CodeToolError
	case engine.CodeTimeout:
		return CodeTimeout
	case engine.CodeCancelled:
		return CodeCancelled
	case engine.CodePolicyViolation:
		return CodePermissionDenied
	}
	return CodeAgentError
}

// toolErrorCode maps a failed or denied tool call onto the table.
func toolErrorCode(d *engine.ToolCallEvent) jrpc2.Code {
	switch {
	case d.Status == engine.ToolDenied, d.ErrorCode == engine.ToolCodePermissionDenied:
		return CodePermissionDenied
	case d.ErrorCode == engine.ToolCodeTimeout:
		return CodeTimeout
	case d.ErrorCode == engine.ToolCodeCancelled:
		return CodeCancelled
	}
	return CodeToolError
}

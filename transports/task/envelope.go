package task

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Error codes of the contract's error envelope (error.code).
const (
	CodeInvalidRequest     = "INVALID_REQUEST"
	CodeMissingField       = "MISSING_FIELD"
	CodeTaskProcessing     = "TASK_PROCESSING_ERROR"
	CodeReceiptGeneration  = "RECEIPT_GENERATION_ERROR"
	CodePolicy             = "POLICY_ERROR"
	CodeServiceUnavailable = "SERVICE_UNAVAILABLE"
	CodeTimeout            = "TIMEOUT"
	CodeUnknown            = "UNKNOWN_ERROR"
)

// Messages of the error envelope that the contract's examples fix.
const (
	msgValidation  = "Request body validation failed"
	msgMissing     = "Required field missing in request"
	msgProcessing  = "Failed to process task"
	msgReceipt     = "Failed to generate receipt"
	msgUnavailable = "Plexus is not available"
	msgTimeout     = "Request processing timeout"
)

// ErrorEnvelope is the body of every error response: {"error": {...}}.
type ErrorEnvelope struct {
	Error *Error `json:"error"`
}

// Error is the error member of an ErrorEnvelope. Code is one of the Code
// constants; Message is a sentence for people; Details, when present, is
// an object whose members depend on the code (see the package
// documentation): {field, reason} for INVALID_REQUEST and MISSING_FIELD,
// {taskId, reason} for TASK_PROCESSING_ERROR and RECEIPT_GENERATION_ERROR,
// {taskId, timeoutMs} for TIMEOUT, {reason} for SERVICE_UNAVAILABLE.
// Status is the HTTP status the error is sent with; it is not part of the
// body.
type Error struct {
	Status  int            `json:"-"`
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

// Error returns "CODE: message".
func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// fieldError returns an error whose details are {field, reason}, the form
// of every refusal of a request's content.
func fieldError(status int, code, message, field, reason string) *Error {
	return &Error{Status: status, Code: code, Message: message,
		Details: map[string]any{"field": field, "reason": reason}}
}

// invalid is a 400 INVALID_REQUEST "Request body validation failed" about
// field.
func invalid(field, reason string) *Error {
	return fieldError(http.StatusBadRequest, CodeInvalidRequest, msgValidation, field, reason)
}

// missing is a 400 MISSING_FIELD about field, a member of task.data that
// the task's type requires.
func missing(field, taskType string) *Error {
	return fieldError(http.StatusBadRequest, CodeMissingField, msgMissing, field,
		"Field is required for task type "+taskType)
}

// unavailable is a 503 SERVICE_UNAVAILABLE with details {reason}.
func unavailable(reason string) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: CodeServiceUnavailable,
		Message: msgUnavailable, Details: map[string]any{"reason": reason}}
}

// writeJSON sends v as the JSON body of a response with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		// Only a result holding something encoding/json cannot encode
		// gets here; the wire types hold none.
		status = http.StatusInternalServerError
		body, _ = json.Marshal(ErrorEnvelope{&Error{Code: CodeUnknown, Message: "Failed to encode the response: " + err.Error()}})
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}

// writeError sends e in its envelope with e.Status.
func writeError(w http.ResponseWriter, e *Error) {
	writeJSON(w, e.Status, ErrorEnvelope{Error: e})
}

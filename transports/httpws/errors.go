package httpws

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/plexus-agent/plexus/engine"
)

// Error codes of REST error bodies and server.error messages beyond the
// engine's (engine.ErrorCode).
const (
	codeUnauthorized     = "UNAUTHORIZED"
	codeInvalidRequest   = "INVALID_REQUEST"
	codeInvalidMessage   = "INVALID_MESSAGE"
	codeNotFound         = "NOT_FOUND"
	codeMethodNotAllowed = "METHOD_NOT_ALLOWED"
	codeConflict         = "CONFLICT"
	codeSessionBusy      = "SESSION_BUSY"
	codeTooLarge         = "PAYLOAD_TOO_LARGE"
	codeModelError       = "MODEL_ERROR"
	codeModelUnavailable = "MODEL_UNAVAILABLE"
	codeInternal         = "INTERNAL"
	codeIndexFailed      = "INDEX_FAILED"
)

// errorResponse is the body of every REST error.
type errorResponse struct {
	Error restError `json:"error"`
}

type restError struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string, details map[string]any) {
	writeJSON(w, status, errorResponse{Error: restError{Code: code, Message: msg, Details: details}})
}

// engineStatus maps an engine error to an HTTP status and error code.
func engineStatus(err error) (int, string) {
	var me *engine.ModelError
	switch {
	case errors.Is(err, engine.ErrNotFound):
		return http.StatusNotFound, codeNotFound
	case errors.Is(err, engine.ErrInvalidRequest):
		return http.StatusBadRequest, codeInvalidRequest
	case errors.Is(err, engine.ErrConflict):
		return http.StatusConflict, codeConflict
	case errors.Is(err, engine.ErrUnknownProvider), errors.Is(err, engine.ErrModelNotFound):
		return http.StatusBadRequest, codeModelError
	case errors.Is(err, engine.ErrModelUnavailable):
		return http.StatusServiceUnavailable, codeModelUnavailable
	case errors.As(err, &me):
		return http.StatusBadGateway, codeModelError
	case errors.Is(err, engine.ErrUnsupported):
		return http.StatusNotImplemented, codeInternal
	}
	return http.StatusInternalServerError, codeInternal
}

func writeEngineError(w http.ResponseWriter, err error) {
	status, code := engineStatus(err)
	writeError(w, status, code, err.Error(), nil)
}

package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"

	oai "github.com/sashabaranov/go-openai"

	"github.com/plexus-agent/plexus/engine"
)

// maxBodyInMessage caps how much of a non-JSON error body a message
// quotes.
const maxBodyInMessage = 300

// classify turns an error of the client library into an engine error; op
// ("chat", "embed", "list models") names the call in messages.
func (c conn) classify(ctx context.Context, op string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	me := &engine.ModelError{Provider: ProviderName}

	var reqErr *oai.RequestError
	var apiErr *oai.APIError
	var urlErr *url.Error
	status, hasBody := 0, false
	switch {
	case errors.As(err, &reqErr) && reqErr.HTTPStatusCode != 0:
		status = reqErr.HTTPStatusCode
		me.Message, hasBody = bodyMessage(reqErr.Body)
		if !hasBody {
			body := strings.TrimSpace(string(reqErr.Body))
			if len(body) > maxBodyInMessage {
				body = body[:maxBodyInMessage] + "…"
			}
			if body == "" {
				body = http.StatusText(status)
			}
			me.Message = fmt.Sprintf("HTTP %d: %s", status, body)
		}
	case errors.As(err, &apiErr):
		status, hasBody = apiErr.HTTPStatusCode, true
		me.Message = apiErr.Message
		if code, ok := apiErr.Code.(string); ok && code == "model_not_found" {
			me.Kind = engine.ErrModelNotFound
			return me
		}
		if me.Message == "" && status != 0 {
			me.Message = fmt.Sprintf("HTTP %d %s", status, http.StatusText(status))
		} else if me.Message == "" {
			me.Message = "the server reported an error without a message"
		}
	case errors.As(err, &urlErr):
		me.Kind = engine.ErrModelUnavailable
		reason := urlErr.Err.Error()
		if errors.Is(err, syscall.ECONNREFUSED) {
			reason = "connection refused"
		} else if dnsErr := (*net.DNSError)(nil); errors.As(err, &dnsErr) {
			reason = "cannot resolve host " + dnsErr.Name
		}
		me.Message = fmt.Sprintf("cannot reach the OpenAI-compatible server at %s (%s); start the server, or point Plexus at the right one with %s or --openai-base-url",
			c.baseURL, reason, EnvBaseURL)
		return me
	default:
		// The connection broke during the stream, or the client library
		// refused the request itself.
		var netErr net.Error
		if errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF) {
			me.Kind = engine.ErrModelUnavailable
			me.Message = fmt.Sprintf("the connection to %s broke during %s: %v", c.baseURL, op, err)
			return me
		}
		me.Message = err.Error()
		if errors.Is(err, oai.ErrReasoningModelMaxTokensDeprecated) || errors.Is(err, oai.ErrReasoningModelLimitationsOther) ||
			errors.Is(err, oai.ErrReasoningSamplingUnsupported) || errors.Is(err, oai.ErrReasoningToolsRequireResponses) ||
			errors.Is(err, oai.ErrChatCompletionInvalidModel) {
			me.Kind = engine.ErrInvalidRequest
		}
		return me
	}

	lower := strings.ToLower(me.Message)
	switch {
	case status == http.StatusUnauthorized:
		if c.hasKey {
			me.Message = fmt.Sprintf("%s (the server at %s refused the API key; check %s or --openai-api-key)", me.Message, c.baseURL, EnvAPIKey)
		} else {
			me.Message = fmt.Sprintf("%s (no API key is set for %s; set %s or pass --openai-api-key)", me.Message, c.baseURL, EnvAPIKey)
		}
	case status == http.StatusNotFound && hasBody:
		me.Kind = engine.ErrModelNotFound
	case status == http.StatusNotFound:
		me.Kind = engine.ErrModelUnavailable
		me.Message = fmt.Sprintf("%s: %s for %s at %s; check the base URL (OpenAI-compatible servers usually serve under /v1, for example http://127.0.0.1:11434/v1) and set it with %s or --openai-base-url",
			me.Message, "no such endpoint", op, c.baseURL, EnvBaseURL)
	case status == http.StatusNotImplemented:
		me.Kind = engine.ErrUnsupported
	case status == http.StatusBadRequest && unsupported(lower):
		me.Kind = engine.ErrUnsupported
	case status == http.StatusBadRequest || status == http.StatusUnprocessableEntity:
		me.Kind = engine.ErrInvalidRequest
	case status == http.StatusBadGateway || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout:
		me.Kind = engine.ErrModelUnavailable
	}
	return me
}

// unsupported reports whether a 400 message says the model or server lacks
// what the request needs: Ollama's "... does not support tools", vLLM's
// "auto tool choice requires --enable-auto-tool-choice ...", llama.cpp's
// "tools param requires --jinja flag".
func unsupported(lower string) bool {
	if strings.Contains(lower, "does not support") || strings.Contains(lower, "not supported") {
		return true
	}
	return strings.Contains(lower, "tool") &&
		(strings.Contains(lower, "enable-auto-tool-choice") || strings.Contains(lower, "tool-call-parser") || strings.Contains(lower, "--jinja"))
}

// bodyMessage finds the server's message in a JSON error body the client
// library did not parse: {"error": "..."}, {"error": {"message": "..."}},
// {"message": "..."} (vLLM) or {"detail": ...} (FastAPI servers).
func bodyMessage(body []byte) (string, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return "", false
	}
	for _, key := range []string{"error", "message", "detail"} {
		raw, ok := m[key]
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal(raw, &s) == nil && s != "" {
			return s, true
		}
		var obj struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(raw, &obj) == nil && obj.Message != "" {
			return obj.Message, true
		}
		if len(raw) > 0 && string(raw) != "null" && string(raw) != `""` {
			return string(raw), true
		}
	}
	return "", false
}

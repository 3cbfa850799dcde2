package ollama

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"

	"github.com/ollama/ollama/api"

	"github.com/plexus-agent/plexus/engine"
)

// modelError returns a *engine.ModelError of this provider.
func modelError(kind error, format string, args ...any) *engine.ModelError {
	return &engine.ModelError{Provider: ProviderName, Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// invalidf reports a request this package cannot translate for Ollama.
func invalidf(format string, args ...any) *engine.ModelError {
	return modelError(engine.ErrInvalidRequest, format, args...)
}

// classify turns an error of the api client talking to base into a
// *engine.ModelError carrying Ollama's own words. Errors of ctx (cancelled,
// deadline) are returned as they are.
func classify(ctx context.Context, base *url.URL, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return err
	}

	var status api.StatusError
	if errors.As(err, &status) {
		msg := status.ErrorMessage
		if msg == "" {
			msg = status.Status
		}
		if msg == "" {
			msg = fmt.Sprintf("HTTP %d %s from %s", status.StatusCode, http.StatusText(status.StatusCode), base)
		}
		return &engine.ModelError{Provider: ProviderName, Kind: kindOf(status.StatusCode, msg), Message: msg}
	}
	var auth api.AuthorizationError
	if errors.As(err, &auth) {
		msg := fmt.Sprintf("%s (HTTP %d from %s)", auth.Error(), auth.StatusCode, base)
		if auth.SigninURL != "" {
			msg += "; sign in at " + auth.SigninURL
		}
		return modelError(nil, "%s", msg)
	}

	if unreachable(err) {
		return modelError(engine.ErrModelUnavailable,
			"no Ollama server is reachable at %s (%s); start one with \"ollama serve\", or point --ollama-host / OLLAMA_HOST at a running server",
			base, netCause(err))
	}
	if cutOff(err) {
		return modelError(engine.ErrModelUnavailable, "the Ollama server at %s closed the connection during the call (%s)", base, netCause(err))
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return modelError(engine.ErrModelUnavailable, "calling the Ollama server at %s: %s", base, netCause(err))
	}
	// An {"error": "..."} line in the middle of a stream, or a reply that
	// is not Ollama's JSON.
	msg := err.Error()
	return &engine.ModelError{Provider: ProviderName, Kind: kindOf(0, msg), Message: msg}
}

// kindOf classifies an Ollama error message and its HTTP status (0 when
// the error came inside a stream).
func kindOf(status int, msg string) error {
	lower := strings.ToLower(msg)
	switch {
	case strings.Contains(lower, "does not support"):
		// `"x" does not support tools`, `... does not support chat`,
		// `this model does not support embeddings`.
		return engine.ErrUnsupported
	case (status == http.StatusNotFound || status == 0) && strings.Contains(lower, "model") && strings.Contains(lower, "not found"):
		// `model "x" not found, try pulling it first`; /api/embed of
		// Ollama 0.6.5 says `model 'x' not found`.
		return engine.ErrModelNotFound
	case status == http.StatusBadRequest:
		return engine.ErrInvalidRequest
	case status == http.StatusServiceUnavailable:
		// `server busy, please try again.  maximum pending requests exceeded`
		return engine.ErrModelUnavailable
	}
	return nil
}

// unreachable reports whether err means no server answered at all: the
// connection was refused, timed out or the name did not resolve.
func unreachable(err error) bool {
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return true
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH)
}

// cutOff reports whether the connection broke after it was made.
func cutOff(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// netCause returns the innermost useful text of a transport error: the
// *net.OpError ("dial tcp 127.0.0.1:1: connect: connection refused") rather
// than the *url.Error around it, which repeats the method and URL.
func netCause(err error) string {
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return opErr.Error()
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return dnsErr.Error()
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return urlErr.Err.Error()
	}
	return err.Error()
}

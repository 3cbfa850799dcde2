// Package scripttest holds what the transports' scripted test models
// share: a model that lists one model and embeds nothing, and the position
// of a model call within its turn. Each transport's tests script replies
// their own way on top of it.
package scripttest

import (
	"context"
	"errors"

	"github.com/plexus-agent/plexus/engine"
)

// Base implements engine.Model's ListModels (one model, "test", with
// completion and tools) and Embed (unsupported); embed it and add Chat.
type Base struct{}

// ListModels lists the model "test".
func (Base) ListModels(context.Context) ([]engine.ModelInfo, error) {
	return []engine.ModelInfo{{Name: "test", Capabilities: []string{"completion", "tools"}}}, nil
}

// Embed fails with ErrUnsupported.
func (Base) Embed(context.Context, engine.EmbedRequest) (engine.EmbedResponse, error) {
	return engine.EmbedResponse{}, &engine.ModelError{Provider: "script", Kind: engine.ErrUnsupported, Message: "no embeddings"}
}

// ErrNoUser is returned by Position for a request without a user message.
var ErrNoUser = errors.New("script: no user message in the request")

// Position returns the index in req.Messages of the turn's user message
// (the last one) and the 0-based number of this call within the turn (the
// assistant messages after it). Errors: ErrNoUser.
func Position(req engine.ChatRequest) (user, step int, err error) {
	user = -1
	for i, msg := range req.Messages {
		if msg.Role == engine.RoleUser {
			user = i
		}
	}
	if user < 0 {
		return -1, 0, ErrNoUser
	}
	for _, msg := range req.Messages[user+1:] {
		if msg.Role == engine.RoleAssistant {
			step++
		}
	}
	return user, step, nil
}

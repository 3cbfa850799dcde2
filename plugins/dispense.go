package plugins

import (
	"context"
	"fmt"

	"github.com/plexus-agent/plexus/engine"
)

// ConfigurableModel is an engine.Model whose settings can be applied, as
// the host does after every start of a model plugin.
type ConfigurableModel interface {
	engine.Model
	Configurer
}

// Dispensed turns what go-plugin's Dispense returned for a Plexus plugin
// into the interface the engine uses: an engine.Toolset for a tool plugin,
// a ConfigurableModel for a model plugin (its errors are *engine.ModelError
// values with Provider name, as the Manager returns them). It is for
// harnesses that launch or connect to a plugin themselves, such as
// plugins/plugintest; the Manager adds supervision and restarts on top of
// the same adapters. Error: raw is not a Plexus plugin client.
func Dispensed(raw any, name string) (any, error) {
	switch c := raw.(type) {
	case *toolClient:
		return c, nil
	case *modelClient:
		return &directModel{c: c, name: name}, nil
	}
	return nil, fmt.Errorf("%T is not a Plexus plugin client", raw)
}

// directModel is a model plugin's client with the host's error
// classification and no supervision.
type directModel struct {
	c    *modelClient
	name string
}

func (m *directModel) Configure(ctx context.Context, settings map[string]string) error {
	return modelErrorFromStatus(ctx, m.name, m.c.Configure(ctx, settings))
}

func (m *directModel) ListModels(ctx context.Context) ([]engine.ModelInfo, error) {
	out, err := m.c.ListModels(ctx)
	return out, modelErrorFromStatus(ctx, m.name, err)
}

// Chat returns an error of onChunk as it is.
func (m *directModel) Chat(ctx context.Context, req engine.ChatRequest, onChunk func(engine.ChatChunk) error) error {
	var cbErr error
	err := m.c.Chat(ctx, req, func(c engine.ChatChunk) error {
		cbErr = onChunk(c)
		return cbErr
	})
	if cbErr != nil {
		return cbErr
	}
	return modelErrorFromStatus(ctx, m.name, err)
}

func (m *directModel) Embed(ctx context.Context, req engine.EmbedRequest) (engine.EmbedResponse, error) {
	out, err := m.c.Embed(ctx, req)
	return out, modelErrorFromStatus(ctx, m.name, err)
}

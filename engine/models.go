package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Capabilities a provider may list for a model (ModelInfo.Capabilities).
// The first three are Ollama's names, which Plexus uses for every
// provider.
const (
	// CapabilityCompletion: the model chats (generates text).
	CapabilityCompletion = "completion"
	// CapabilityTools: the model calls tools natively.
	CapabilityTools = "tools"
	// CapabilityEmbedding: the model embeds text.
	CapabilityEmbedding = "embedding"
	// CapabilityConstrainedTools: the model has no native tool calling,
	// but its provider makes its tool calls through grammar-constrained
	// decoding (the Ollama provider does, see models/ollama), so a turn
	// can use it.
	CapabilityConstrainedTools = "constrained_tools"
)

// Model purposes, as CheckModel takes them.
var (
	// ForChat is what a turn needs of its model: it chats and calls
	// tools (natively or through constrained decoding).
	ForChat = []string{CapabilityCompletion, CapabilityTools}
	// ForEmbedding is what vector search needs of its embedding model.
	ForEmbedding = []string{CapabilityEmbedding}
)

// ProviderModels is one provider's answer to AllModels.
type ProviderModels struct {
	Provider string
	Models   []ModelInfo
	// Err is why the provider could not list its models: its plugin did
	// not start, its server is down, or (ErrNotConfigured, see
	// NotConfigured) it lacks the configuration it needs and was not
	// asked anything beyond that.
	Err error
}

// NotConfigured reports whether the provider was skipped because it lacks
// configuration (credentials, a server address): Err is ErrNotConfigured,
// whose message says what to set. Front-ends report such a provider as
// "not configured", apart from the providers that failed.
func (p ProviderModels) NotConfigured() bool { return errors.Is(p.Err, ErrNotConfigured) }

// AllModels lists the models of the named providers (every loaded
// provider when none is named), asking them concurrently, in the order
// given (provider name order when none is named). Models is never nil when
// Err is nil. A provider that fails has its error in Err (ErrUnknownProvider
// for a name not loaded, ErrNotConfigured for one that lacks
// configuration); the others are still listed. Every front-end lists
// models through it, so all of them show the same models with the same
// capabilities.
func (e *Engine) AllModels(ctx context.Context, providers ...string) []ProviderModels {
	if len(providers) == 0 {
		providers = e.Providers()
	}
	out := make([]ProviderModels, len(providers))
	var wg sync.WaitGroup
	for i, name := range providers {
		out[i].Provider = name
		m, err := e.provider(name)
		if err != nil {
			out[i].Err = err
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i].Models, out[i].Err = m.ListModels(ctx)
			if out[i].Err == nil && out[i].Models == nil {
				out[i].Models = []ModelInfo{}
			}
		}()
	}
	wg.Wait()
	return out
}

// DescribeModel returns what ref's provider lists about the model: its
// capabilities, context length and the rest, as AllModels shows them.
// Errors: those of CheckModel, without the capability check.
func (e *Engine) DescribeModel(ctx context.Context, ref ModelRef) (ModelInfo, error) {
	return e.CheckModel(ctx, ref, nil)
}

// CheckModel checks that ref's provider is loaded, that it lists the
// model, and that the model has every capability in need (ForChat,
// ForEmbedding). A model whose provider reports no capabilities at all
// (OpenAI-compatible servers do not) passes the capability check; its
// first call tells. It returns the model's description.
//
// Errors: ErrUnknownProvider; a *ModelError of kind ErrModelNotFound when
// the provider does not list the model; of kind ErrUnsupported, naming the
// missing capability, what the model has, and what to do, when it lacks
// one; the provider's own error when it cannot list its models
// (ErrNotConfigured when it lacks the configuration to be asked).
func (e *Engine) CheckModel(ctx context.Context, ref ModelRef, need []string) (ModelInfo, error) {
	m, err := e.provider(ref.Provider)
	if err != nil {
		return ModelInfo{}, err
	}
	infos, err := m.ListModels(ctx)
	if err != nil {
		return ModelInfo{}, err
	}
	i := slices.IndexFunc(infos, func(i ModelInfo) bool { return i.Name == ref.Name })
	if i < 0 {
		return ModelInfo{}, &ModelError{Provider: ref.Provider, Kind: ErrModelNotFound,
			Message: fmt.Sprintf("model %q is not among the %d models the provider lists (plexus models %s lists them)", ref.Name, len(infos), ref.Provider)}
	}
	info := infos[i]
	if len(info.Capabilities) == 0 {
		return info, nil
	}
	for _, c := range need {
		if info.HasCapability(c) || (c == CapabilityTools && info.HasCapability(CapabilityConstrainedTools)) {
			continue
		}
		return info, &ModelError{Provider: ref.Provider, Kind: ErrUnsupported, Message: fmt.Sprintf(
			"model %s cannot %s: it lists %s; choose a model with the %q capability (plexus models lists each model's capabilities)",
			ref, capabilityVerb(c), strings.Join(info.Capabilities, ", "), c)}
	}
	return info, nil
}

func capabilityVerb(c string) string {
	switch c {
	case CapabilityCompletion:
		return "chat"
	case CapabilityTools:
		return "call tools, which every turn offers"
	case CapabilityEmbedding:
		return "embed text for vector search"
	}
	return "do " + c
}

// SessionModelStore is implemented by a SessionStore that keeps each
// session's own model choice (Session.SetModel) across restarts.
type SessionModelStore interface {
	// SetSessionModel records the session's model; a zero ref clears it.
	// Errors: ErrNotFound when the session is not stored.
	SetSessionModel(ctx context.Context, sessionID string, ref ModelRef) error
}

// Model returns the model the session's next turn uses (unless its
// TurnInput names one): the session's own choice, else the engine's
// current model.
func (s *Session) Model() ModelRef {
	s.mu.Lock()
	ref := s.model
	s.mu.Unlock()
	if ref.IsZero() {
		return s.engine.CurrentModel()
	}
	return ref
}

// SetModel switches the model of this session's later turns, without
// affecting other sessions or a turn already running; a zero ref goes
// back to the engine's current model. The model is checked first with
// CheckModel(ctx, ref, ForChat), whose errors SetModel returns. When the
// session store implements SessionModelStore the choice is stored, so it
// survives a restart; a store error is returned wrapped (ErrNotFound when
// the session was deleted meanwhile) and changes nothing.
func (s *Session) SetModel(ctx context.Context, ref ModelRef) error {
	if !ref.IsZero() {
		if _, err := s.engine.CheckModel(ctx, ref, ForChat); err != nil {
			return err
		}
	}
	// Store and memory change together, so concurrent switches leave both
	// with the same last choice.
	s.modelMu.Lock()
	defer s.modelMu.Unlock()
	if st, ok := s.engine.opts.Sessions.(SessionModelStore); ok {
		if err := st.SetSessionModel(ctx, s.id, ref); err != nil {
			return fmt.Errorf("store the model of session %s: %w", s.id, err)
		}
	}
	s.mu.Lock()
	s.model = ref
	s.mu.Unlock()
	return nil
}

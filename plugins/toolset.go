package plugins

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/plexus-agent/plexus/engine"
)

// Toolset is an engine.Toolset over every tool plugin of a Manager. Tools
// starts all tool plugins (concurrently) and lists their tools; Invoke
// routes a call by tool name to its plugin. When two plugins offer the same
// tool name, the first (built-ins come first) wins and the clash is logged.
type Toolset struct {
	m *Manager

	mu     sync.Mutex
	routes map[string]*process
}

var _ engine.Toolset = (*Toolset)(nil)

// Tools starts every tool plugin that is not running and lists their tools,
// each with its plugin's Options.Timeouts entry as its Timeout. Plugins
// that fail to start are left out; their errors are joined into the
// returned error, alongside the tools that are available.
func (t *Toolset) Tools(ctx context.Context) ([]engine.ToolSpec, error) {
	procs := t.m.byKind(KindTool)
	specs := make([][]engine.ToolSpec, len(procs))
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := p.get(ctx); err != nil {
				errs[i] = err
				return
			}
			p.mu.Lock()
			specs[i] = p.specs
			p.mu.Unlock()
			if d := t.m.opts.Timeouts[p.info.Name]; d > 0 {
				specs[i] = slices.Clone(specs[i])
				for j := range specs[i] {
					specs[i][j].Timeout = d
				}
			}
		}()
	}
	wg.Wait()

	routes := map[string]*process{}
	var out []engine.ToolSpec
	for i, p := range procs {
		for _, s := range specs[i] {
			if prev, ok := routes[s.Name]; ok {
				t.m.log.Warn("tool name offered by two plugins; the first is used", "tool", s.Name, "used", prev.info.Name, "ignored", p.info.Name)
				continue
			}
			routes[s.Name] = p
			out = append(out, s)
		}
	}
	t.mu.Lock()
	t.routes = routes
	t.mu.Unlock()
	return out, errors.Join(errs...)
}

// Invoke runs a call in the plugin that offers req.Tool. A plugin that dies
// during the call yields a *engine.ToolError with code plugin_crashed; the
// plugin restarts in the background.
func (t *Toolset) Invoke(ctx context.Context, req engine.InvokeRequest, onUpdate func(engine.ToolUpdate)) (engine.ToolResult, error) {
	p, err := t.route(ctx, req.Tool)
	if err != nil {
		return engine.ToolResult{}, err
	}
	var res engine.ToolResult
	err = p.call(ctx, req.Tool, func(raw any) error {
		var err error
		res, err = raw.(*toolClient).Invoke(ctx, req, onUpdate)
		return err
	})
	if err == nil {
		return res, nil
	}
	var ce *crashError
	if errors.As(err, &ce) {
		return engine.ToolResult{}, &engine.ToolError{Code: engine.ToolCodePluginCrashed, Message: ce.Error()}
	}
	var te *engine.ToolError
	if errors.As(err, &te) || ctx.Err() != nil {
		return engine.ToolResult{}, err
	}
	return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeFailed, "tool plugin %q: %v", p.info.Name, err)
}

func (t *Toolset) route(ctx context.Context, tool string) (*process, error) {
	t.mu.Lock()
	p, ok := t.routes[tool]
	known := t.routes != nil
	t.mu.Unlock()
	if ok {
		return p, nil
	}
	if !known {
		_, err := t.Tools(ctx)
		t.mu.Lock()
		p, ok = t.routes[tool]
		t.mu.Unlock()
		if ok {
			return p, nil
		}
		if err != nil {
			return nil, engine.ToolErrorf(engine.ToolCodeUnknownTool, "no tool %q is available: %v", tool, err)
		}
	}
	return nil, engine.ToolErrorf(engine.ToolCodeUnknownTool, "no loaded tool plugin offers %q", tool)
}

// Model is an engine.Model over one supervised model plugin.
type Model struct {
	p *process
}

var _ engine.Model = (*Model)(nil)

func (m *Model) modelErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var ce *crashError
	if errors.As(err, &ce) {
		return &engine.ModelError{Provider: m.p.info.Name, Kind: engine.ErrPluginCrashed, Message: ce.Error()}
	}
	if errors.Is(err, errClosed) {
		return err
	}
	var me *engine.ModelError
	if errors.As(err, &me) {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if isStartError(err) {
		return &engine.ModelError{Provider: m.p.info.Name, Kind: engine.ErrModelUnavailable, Message: err.Error()}
	}
	return modelErrorFromStatus(ctx, m.p.info.Name, err)
}

// ListModels lists the provider's models.
func (m *Model) ListModels(ctx context.Context) ([]engine.ModelInfo, error) {
	var out []engine.ModelInfo
	err := m.p.call(ctx, "ListModels", func(raw any) error {
		var err error
		out, err = raw.(*modelClient).ListModels(ctx)
		return err
	})
	return out, m.modelErr(ctx, err)
}

// Chat runs one model call. A plugin that dies during it yields a
// *engine.ModelError matching engine.ErrPluginCrashed.
func (m *Model) Chat(ctx context.Context, req engine.ChatRequest, onChunk func(engine.ChatChunk) error) error {
	err := m.p.call(ctx, "Chat", func(raw any) error {
		return raw.(*modelClient).Chat(ctx, req, onChunk)
	})
	return m.modelErr(ctx, err)
}

// Embed embeds a batch of inputs.
func (m *Model) Embed(ctx context.Context, req engine.EmbedRequest) (engine.EmbedResponse, error) {
	var out engine.EmbedResponse
	err := m.p.call(ctx, "Embed", func(raw any) error {
		var err error
		out, err = raw.(*modelClient).Embed(ctx, req)
		return err
	})
	return out, m.modelErr(ctx, err)
}

// isStartError reports whether err came from starting the process rather
// than from a call.
func isStartError(err error) bool {
	var se *startError
	return errors.As(err, &se)
}

// startError wraps a failed plugin start.
type startError struct{ err error }

func (e *startError) Error() string { return e.err.Error() }
func (e *startError) Unwrap() error { return e.err }

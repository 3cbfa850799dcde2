package plugins

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/plexus-agent/plexus/engine"
)

// Union is one engine.Toolset over several (the tool plugins, the MCP
// servers), so that the engine, which takes one Toolset, sees all their
// tools. Safe for concurrent use.
type Union struct {
	sets []engine.Toolset

	mu     sync.Mutex
	routes map[string]engine.Toolset // by tool name; nil until listed
}

var _ engine.Toolset = (*Union)(nil)

// NewUnion returns the union of sets; nil entries are skipped. Earlier
// sets win name clashes.
func NewUnion(sets ...engine.Toolset) *Union {
	u := &Union{}
	for _, s := range sets {
		if s != nil {
			u.sets = append(u.sets, s)
		}
	}
	return u
}

// Tools lists every set's tools (the sets concurrently), in set order. A
// name offered by two sets is kept for the first and reported in the
// error; the sets' own errors are joined into it too, alongside the tools
// that are available.
func (u *Union) Tools(ctx context.Context) ([]engine.ToolSpec, error) {
	specs := make([][]engine.ToolSpec, len(u.sets))
	errs := make([]error, len(u.sets))
	var wg sync.WaitGroup
	for i, s := range u.sets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			specs[i], errs[i] = s.Tools(ctx)
		}()
	}
	wg.Wait()
	routes := map[string]engine.Toolset{}
	var out []engine.ToolSpec
	for i, list := range specs {
		for _, sp := range list {
			if _, ok := routes[sp.Name]; ok {
				errs = append(errs, fmt.Errorf("two tool sources offer a tool named %q; the second (source %d) is left out", sp.Name, i+1))
				continue
			}
			routes[sp.Name] = u.sets[i]
			out = append(out, sp)
		}
	}
	u.mu.Lock()
	u.routes = routes
	u.mu.Unlock()
	return out, errors.Join(errs...)
}

// Invoke runs the call in the set that offered req.Tool at the last
// listing (listing first if there was none).
func (u *Union) Invoke(ctx context.Context, req engine.InvokeRequest, onUpdate func(engine.ToolUpdate)) (engine.ToolResult, error) {
	u.mu.Lock()
	s, ok := u.routes[req.Tool]
	listed := u.routes != nil
	u.mu.Unlock()
	if !ok && !listed {
		_, err := u.Tools(ctx)
		u.mu.Lock()
		s, ok = u.routes[req.Tool]
		u.mu.Unlock()
		if !ok && err != nil {
			return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeUnknownTool, "no tool %q is available: %v", req.Tool, err)
		}
	}
	if !ok {
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeUnknownTool, "no loaded tool source offers %q", req.Tool)
	}
	return s.Invoke(ctx, req, onUpdate)
}

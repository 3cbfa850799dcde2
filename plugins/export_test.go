package plugins

import (
	"context"
	"fmt"
)

// PingTool returns go-plugin's Ping (a unary gRPC health check) over the
// live connection of m's tool plugin name, starting the plugin: the floor
// a tool call is compared with in BenchmarkToolCall.
func PingTool(ctx context.Context, m *Manager, name string) (func() error, error) {
	for _, p := range m.byKind(KindTool) {
		if p.info.Name != name {
			continue
		}
		if _, _, err := p.get(ctx); err != nil {
			return nil, err
		}
		p.mu.Lock()
		rpc := p.rpc
		p.mu.Unlock()
		return rpc.Ping, nil
	}
	return nil, fmt.Errorf("no tool plugin %q", name)
}

// UseInvokePerCall makes m's tool plugins run each call on a stream of its
// own (Invoke), as before the Calls stream existed, for comparison.
func UseInvokePerCall(m *Manager) {
	for _, p := range m.byKind(KindTool) {
		p.opts.invokePerCall = true
	}
}

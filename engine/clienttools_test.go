package engine_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/plexus-agent/plexus/engine"
)

// clientHost runs the client tools read_buffer and show_diff; read
// (also an engine tool) is offered too but must not shadow the engine's.
type clientHost struct {
	fakeHost
	calls []engine.ToolCall
}

func (h *clientHost) ClientTools() []engine.ToolSpec {
	schema := json.RawMessage(`{"type":"object"}`)
	return []engine.ToolSpec{
		{Name: "read_buffer", Description: "Read an editor buffer.", InputSchema: schema, Risk: engine.RiskLow, ReadOnly: true},
		{Name: "show_diff", Description: "Show a diff.", InputSchema: schema, Risk: engine.RiskMedium, NeedsApproval: true},
		{Name: "read", Description: "shadowed", InputSchema: schema, ReadOnly: true},
	}
}

func (h *clientHost) InvokeClientTool(_ context.Context, call engine.ToolCall) (engine.ToolResult, error) {
	h.calls = append(h.calls, call)
	if call.Name == "show_diff" {
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeFailed, "the editor closed the diff")
	}
	return engine.JSONResult(map[string]any{"text": "unsaved buffer text"}, "buffer read")
}

func TestClientTools(t *testing.T) {
	f := newFixture(t, engine.Options{},
		step{calls: []engine.ToolCall{
			call("c1", "read_buffer", `{"path":"a.go"}`),
			call("c2", "show_diff", `{}`),
			call("c3", "read", `{"path":"a.go"}`),
		}},
		step{text: "done"})
	host := &clientHost{fakeHost: fakeHost{approve: true}}
	res, _ := f.run(t, context.Background(), "look", engine.TurnOptions{Host: host})
	if res.Status != engine.TurnCompleted {
		t.Fatalf("turn %+v", res)
	}
	// The model was offered the client tools (the engine's read once).
	var names []string
	for _, sp := range f.model.requests()[0].Tools {
		names = append(names, sp.Name)
	}
	if !slices.Contains(names, "read_buffer") || !slices.Contains(names, "show_diff") || strings.Count(strings.Join(names, " "), "read ") > 1 {
		t.Errorf("tools offered %v", names)
	}
	// Only the client tools went to the host; show_diff (NeedsApproval)
	// was asked about first; the engine's read ran in the engine.
	if len(host.calls) != 2 || host.calls[0].Name != "read_buffer" || host.calls[1].Name != "show_diff" {
		t.Errorf("client calls %v", host.calls)
	}
	if len(host.asked) != 1 || host.asked[0].Tool != "show_diff" {
		t.Errorf("approvals asked %v", host.asked)
	}
	if !slices.Contains(f.tools.invoked, "read") {
		t.Errorf("the engine's read did not run: %v", f.tools.invoked)
	}
	msgs := f.model.requests()[1].Messages
	var tool []string
	for _, m := range msgs {
		if m.Role == engine.RoleTool {
			tool = append(tool, m.Content)
		}
	}
	if len(tool) != 3 || !strings.Contains(tool[0], "unsaved buffer text") || !strings.Contains(tool[1], "the editor closed the diff") {
		t.Errorf("tool results %q", tool)
	}
}

package plugins_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/plugins"
)

// namedTools offers tools by name and answers each call with its own
// label.
type namedTools struct {
	label string
	names []string
	err   error
}

func (n namedTools) Tools(context.Context) ([]engine.ToolSpec, error) {
	var out []engine.ToolSpec
	for _, name := range n.names {
		out = append(out, engine.ToolSpec{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)})
	}
	return out, n.err
}

func (n namedTools) Invoke(_ context.Context, req engine.InvokeRequest, _ func(engine.ToolUpdate)) (engine.ToolResult, error) {
	return engine.ToolResult{Summary: n.label + ":" + req.Tool}, nil
}

func TestUnion(t *testing.T) {
	ctx := context.Background()
	u := plugins.NewUnion(
		namedTools{label: "plugins", names: []string{"read_file", "fs__x"}},
		nil,
		namedTools{label: "mcp", names: []string{"fs__x", "fs__y"}, err: errors.New("MCP server \"web\" failed")},
	)
	// Invoke before any listing lists first.
	res, err := u.Invoke(ctx, engine.InvokeRequest{Tool: "fs__y"}, func(engine.ToolUpdate) {})
	if err != nil || res.Summary != "mcp:fs__y" {
		t.Fatalf("fs__y: %v %v", res, err)
	}
	specs, err := u.Tools(ctx)
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, ","); got != "read_file,fs__x,fs__y" {
		t.Errorf("tools %s", got)
	}
	if msg := err.Error(); !strings.Contains(msg, `"web" failed`) || !strings.Contains(msg, `two tool sources offer a tool named "fs__x"`) {
		t.Errorf("error %q", msg)
	}
	if res, _ := u.Invoke(ctx, engine.InvokeRequest{Tool: "fs__x"}, func(engine.ToolUpdate) {}); res.Summary != "plugins:fs__x" {
		t.Errorf("fs__x went to %q; the first source wins", res.Summary)
	}
	if _, err := u.Invoke(ctx, engine.InvokeRequest{Tool: "nope"}, func(engine.ToolUpdate) {}); !errors.Is(err, engine.ErrUnknownTool) {
		t.Errorf("unknown: %v", err)
	}
}

package shell

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/plugins"
)

// overGRPC returns the toolset as a host sees it: through the plugin SDK's
// gRPC shims, in process.
func overGRPC(t *testing.T, tools *Tools) engine.Toolset {
	t.Helper()
	client, _ := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{"tool": &plugins.ToolPlugin{Impl: tools}})
	t.Cleanup(func() { client.Close() })
	raw, err := client.Dispense("tool")
	if err != nil {
		t.Fatal(err)
	}
	return raw.(engine.Toolset)
}

// TestOverGRPC checks run_command through the plugin transport: the spec,
// streamed output, the result, error codes, and the caller's deadline
// reaching the plugin so that a command that would outlive it still
// returns its output.
func TestOverGRPC(t *testing.T) {
	ts := overGRPC(t, newTools())
	ws := t.TempDir()

	specs, err := ts.Tools(t.Context())
	if err != nil || len(specs) != 1 || specs[0].Name != ToolName || !specs[0].NeedsApproval || specs[0].Risk != engine.RiskHigh {
		t.Fatalf("Tools = %+v, %v", specs, err)
	}

	var updates []chunk
	res, err := ts.Invoke(t.Context(), engine.InvokeRequest{Tool: ToolName, WorkspaceRoot: ws,
		Args: json.RawMessage(args(`echo out; echo err >&2; exit 4`))},
		func(u engine.ToolUpdate) { updates = append(updates, chunk{u.Output.Stream, u.Output.Text}) })
	if err != nil {
		t.Fatal(err)
	}
	var r Result
	if err := json.Unmarshal(res.Content, &r); err != nil {
		t.Fatal(err)
	}
	if r.ExitCode != 4 || r.Stdout != "out\n" || r.Stderr != "err\n" || !strings.HasPrefix(res.Summary, "exit 4 in ") {
		t.Errorf("result %+v, summary %q", r, res.Summary)
	}
	// The two streams are read concurrently, so only each stream's own
	// order is defined.
	got := map[string]string{}
	for _, u := range updates {
		got[u.stream] += u.text
	}
	if len(got) != 2 || got["stdout"] != "out\n" || got["stderr"] != "err\n" {
		t.Errorf("updates %q", updates)
	}

	_, err = ts.Invoke(t.Context(), engine.InvokeRequest{Tool: ToolName, WorkspaceRoot: ws,
		Args: json.RawMessage(args("true", `, "cwd": "../.."`))}, func(engine.ToolUpdate) {})
	if got := toolCode(err); got != engine.ToolCodePermissionDenied {
		t.Errorf("cwd ../..: err = %v (code %q), want permission_denied", err, got)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 2500*time.Millisecond)
	defer cancel()
	res, err = ts.Invoke(ctx, engine.InvokeRequest{Tool: ToolName, WorkspaceRoot: ws,
		Args: json.RawMessage(args(`echo $$; sleep 30`))}, func(engine.ToolUpdate) {})
	if err != nil {
		t.Fatalf("command past the caller's deadline: %v, want a timed-out result", err)
	}
	r = Result{}
	if err := json.Unmarshal(res.Content, &r); err != nil {
		t.Fatal(err)
	}
	if !r.TimedOut {
		t.Errorf("result %+v, want timed_out", r)
	}
	assertStopped(t, pids(t, r.Stdout)[0], nil)
}

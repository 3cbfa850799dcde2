package mcp_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/plugins"
	"github.com/plexus-agent/plexus/plugins/mcp"
)

// buildCmd builds the Go command pkg (a path relative to this package)
// into a temporary directory as name.
func buildCmd(b testing.TB, pkg, name string) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), name)
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		b.Fatalf("build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// BenchmarkNoopRoundTrip measures one no-op tool call through
// engine.Toolset.Invoke, side by side: through go-plugin (the test tool
// plugin's "noop": gRPC over a Unix socket to a plugin process) and
// through an MCP stdio server (internal/noopserver's "noop": JSON-RPC
// over pipes to a go-sdk server process). Both servers are Go binaries,
// so the difference is the protocol and transport.
func BenchmarkNoopRoundTrip(b *testing.B) {
	ctx := context.Background()
	noUpdate := func(engine.ToolUpdate) {}
	run := func(b *testing.B, ts engine.Toolset, tool string) {
		if _, err := ts.Tools(ctx); err != nil {
			b.Fatal(err)
		}
		req := engine.InvokeRequest{CallID: "c", Tool: tool, Args: json.RawMessage(`{}`), WorkspaceRoot: "/w"}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if _, err := ts.Invoke(ctx, req, noUpdate); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("go-plugin", func(b *testing.B) {
		dir := b.TempDir()
		bin := buildCmd(b, "../internal/testplugin", "testplugin")
		// Installed as a user would, so the host checks its SHA-256 before
		// launching it, as it does every third-party plugin.
		if _, err := plugins.Install(ctx, plugins.InstallOptions{Source: bin, Name: "plexus-tool-test", Dir: dir}); err != nil {
			b.Fatal(err)
		}
		m, err := plugins.NewManager(plugins.Options{Dirs: []string{dir}})
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		run(b, m.Toolset(), "noop")
	})
	b.Run("mcp-stdio", func(b *testing.B) {
		bin := buildCmd(b, "./internal/noopserver", "noopserver")
		ts := mcp.New(&mcp.Config{Servers: map[string]mcp.ServerConfig{"bench": {Command: bin}}}, mcp.Options{})
		defer ts.Close()
		run(b, ts, "bench__noop")
	})
}

package mcp_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

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
// plugin's "noop": gRPC over a Unix socket to a plugin process, on its
// Calls stream) and through an MCP stdio server (internal/noopserver's
// "noop": JSON-RPC over pipes to a go-sdk server process). Both servers
// are Go binaries, so the difference is the protocol and transport.
// "paired" times one call of each and one unary gRPC ping (go-plugin's
// health check, to another process of the test plugin) in turn per
// iteration, and reports their medians and the ratios go-plugin/mcp and
// mcp/ping.
//
// go test -run '^$' -bench NoopRoundTrip -count 6 ./plugins/mcp/
func BenchmarkNoopRoundTrip(b *testing.B) {
	ctx := context.Background()
	noUpdate := func(engine.ToolUpdate) {}
	call := func(b *testing.B, ts engine.Toolset, tool string) {
		req := engine.InvokeRequest{CallID: "c", Tool: tool, Args: json.RawMessage(`{}`), WorkspaceRoot: "/w"}
		if _, err := ts.Invoke(ctx, req, noUpdate); err != nil {
			b.Fatal(err)
		}
	}
	run := func(b *testing.B, ts engine.Toolset, tool string) {
		if _, err := ts.Tools(ctx); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			call(b, ts, tool)
		}
	}
	goPlugin := func(b *testing.B) (*plugins.Manager, string) {
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
		b.Cleanup(func() { m.Close() })
		return m, bin
	}
	mcpServer := func(b *testing.B) *mcp.Toolset {
		bin := buildCmd(b, "./internal/noopserver", "noopserver")
		ts := mcp.New(&mcp.Config{Servers: map[string]mcp.ServerConfig{"bench": {Command: bin}}}, mcp.Options{})
		b.Cleanup(func() { ts.Close() })
		return ts
	}
	b.Run("go-plugin", func(b *testing.B) {
		m, _ := goPlugin(b)
		run(b, m.Toolset(), "noop")
	})
	b.Run("mcp-stdio", func(b *testing.B) { run(b, mcpServer(b), "bench__noop") })
	b.Run("paired", func(b *testing.B) {
		m, bin := goPlugin(b)
		ts, ms := m.Toolset(), mcpServer(b)
		call(b, ts, "noop")
		call(b, ms, "bench__noop")
		client := plugin.NewClient(&plugin.ClientConfig{
			HandshakeConfig:  plugins.Handshake,
			VersionedPlugins: map[int]plugin.PluginSet{plugins.ProtocolVersion: {plugins.KindTool: &plugins.ToolPlugin{}}},
			Cmd:              exec.Command(bin),
			AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
			Logger:           hclog.NewNullLogger(),
		})
		b.Cleanup(client.Kill)
		rpc, err := client.Client()
		if err != nil {
			b.Fatal(err)
		}
		var gp, mc, pg []time.Duration
		b.ResetTimer()
		for b.Loop() {
			t := time.Now()
			call(b, ts, "noop")
			gp = append(gp, time.Since(t))
			t = time.Now()
			call(b, ms, "bench__noop")
			mc = append(mc, time.Since(t))
			t = time.Now()
			if err := rpc.Ping(); err != nil {
				b.Fatal(err)
			}
			pg = append(pg, time.Since(t))
		}
		g, c, p := median(gp), median(mc), median(pg)
		b.ReportMetric(float64(g)/1e3, "goplugin-µs")
		b.ReportMetric(float64(c)/1e3, "mcp-µs")
		b.ReportMetric(float64(p)/1e3, "ping-µs")
		b.ReportMetric(float64(g)/float64(c), "goplugin/mcp")
		b.ReportMetric(float64(c)/float64(p), "mcp/ping")
	})
}

// median of ds (which it sorts); 0 for none.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

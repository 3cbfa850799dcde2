package plugins_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/plugins"
	"github.com/plexus-agent/plexus/plugins/internal/testtools"
)

// BenchmarkToolCall measures one no-op tool call: through the plugin
// boundary (engine.Toolset → gRPC over a Unix socket → plugin process →
// result) and, as the peer, the same tool called in-process. The ratio of
// the two is the cost of the boundary.
func BenchmarkToolCall(b *testing.B) {
	req := engine.InvokeRequest{CallID: "c", Tool: "noop", Args: json.RawMessage(`{}`), WorkspaceRoot: "/w"}
	noUpdate := func(engine.ToolUpdate) {}
	run := func(b *testing.B, ts engine.Toolset) {
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if _, err := ts.Invoke(ctx, req, noUpdate); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("plugin", func(b *testing.B) {
		ts := newManager(b, plugins.Options{}).Toolset()
		if _, err := ts.Tools(context.Background()); err != nil {
			b.Fatal(err)
		}
		run(b, ts)
	})
	b.Run("in-process", func(b *testing.B) { run(b, &testtools.Tools{}) })
	// The floor: go-plugin's health check, a unary gRPC call on the same
	// kind of connection to the same plugin binary.
	b.Run("grpc-ping", func(b *testing.B) {
		client := plugin.NewClient(&plugin.ClientConfig{
			HandshakeConfig:  plugins.Handshake,
			VersionedPlugins: map[int]plugin.PluginSet{plugins.ProtocolVersion: {plugins.KindTool: &plugins.ToolPlugin{}}},
			Cmd:              exec.Command(pluginBin),
			AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
			Logger:           hclog.NewNullLogger(),
		})
		defer client.Kill()
		rpc, err := client.Client()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if err := rpc.Ping(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkColdStart measures starting a tool plugin until it can take
// calls (fork/exec, go-plugin handshake, gRPC connection, Describe) and, as
// the peer, a plain fork/exec/wait of the same binary that prints a line
// and exits.
func BenchmarkColdStart(b *testing.B) {
	b.Run("plugin", func(b *testing.B) {
		dir := pluginDir(b, "plexus-tool-test")
		for b.Loop() {
			m, err := plugins.NewManager(plugins.Options{Dirs: []string{dir}})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := m.Toolset().Tools(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			m.Close()
			b.StartTimer()
		}
	})
	b.Run("exec", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command(pluginBin, "version").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

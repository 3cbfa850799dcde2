package plugins_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

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

// BenchmarkColdStart measures starting a third-party tool plugin until its
// first call has returned, as a new plexus process does (a new Manager,
// fork/exec, go-plugin handshake, gRPC connection, Describe, one no-op
// call), and, as the peer, a plain fork/exec/wait of the same binary that
// prints a line and exits. "plugin" shares a VerifiedCache across
// iterations, as plexus processes share DATA_DIR/plugins-verified.json, so
// the binary is verified by its file identity; "plugin-hashing" has none,
// so every start hashes the binary (20 MB), as every launch did before.
func BenchmarkColdStart(b *testing.B) {
	noop := engine.InvokeRequest{CallID: "c", Tool: "noop", Args: json.RawMessage(`{}`)}
	start := func(b *testing.B, opts plugins.Options) {
		m, err := plugins.NewManager(opts)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := m.Toolset().Invoke(context.Background(), noop, func(engine.ToolUpdate) {}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		m.Close()
		b.StartTimer()
	}
	b.Run("plugin", func(b *testing.B) {
		opts := plugins.Options{Dirs: []string{pluginDir(b, "plexus-tool-test")}, VerifiedCache: filepath.Join(b.TempDir(), "verified.json")}
		// The identity of a binary changed in the last 2 s is not
		// recorded (see plugins/doc.go); then one start records it.
		if fi, err := os.Stat(pluginBin); err == nil {
			time.Sleep(time.Until(time.Unix(fi.Sys().(*syscall.Stat_t).Ctim.Unix()).Add(2100 * time.Millisecond)))
		}
		start(b, opts)
		b.ResetTimer()
		for b.Loop() {
			start(b, opts)
		}
	})
	b.Run("plugin-hashing", func(b *testing.B) {
		opts := plugins.Options{Dirs: []string{pluginDir(b, "plexus-tool-test")}}
		for b.Loop() {
			start(b, opts)
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

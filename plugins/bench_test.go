package plugins_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/plugins"
	"github.com/plexus-agent/plexus/plugins/internal/testtools"
)

// BenchmarkToolCall measures one no-op tool call of a third-party tool
// plugin through engine.Toolset (gRPC over a Unix socket to the plugin
// process and back), against the floor of a unary gRPC call, go-plugin's
// Ping (a health check), on the same connection:
//
//   - calls-stream: the call on the plugin's long-lived Calls stream;
//   - invoke-per-call: the call on a stream of its own, as before Calls;
//   - grpc-ping: the unary ping alone;
//   - in-process: the tool called directly, no boundary at all;
//   - paired: each iteration times one call of each kind and one ping, in
//     turn, so that the machine's noise hits all three alike, and reports
//     their medians (call-µs, invoke-µs, ping-µs) and the ratios
//     call/ping and invoke/ping.
//
// go test -run '^$' -bench ToolCall -count 6 ./plugins/
func BenchmarkToolCall(b *testing.B) {
	req := engine.InvokeRequest{CallID: "c", Tool: "noop", Args: json.RawMessage(`{}`), WorkspaceRoot: "/w"}
	noUpdate := func(engine.ToolUpdate) {}
	ctx := context.Background()
	started := func(b *testing.B, perCall bool) (*plugins.Manager, func() error) {
		m := newManager(b, plugins.Options{Dirs: []string{pluginDir(b, "plexus-tool-test")}})
		if perCall {
			plugins.UseInvokePerCall(m)
		}
		ping, err := plugins.PingTool(ctx, m, "test")
		if err != nil {
			b.Fatal(err)
		}
		return m, ping
	}
	call := func(b *testing.B, ts engine.Toolset) {
		if _, err := ts.Invoke(ctx, req, noUpdate); err != nil {
			b.Fatal(err)
		}
	}
	run := func(b *testing.B, ts engine.Toolset) {
		call(b, ts) // warm
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			call(b, ts)
		}
	}
	b.Run("calls-stream", func(b *testing.B) {
		m, _ := started(b, false)
		run(b, m.Toolset())
	})
	b.Run("invoke-per-call", func(b *testing.B) {
		m, _ := started(b, true)
		run(b, m.Toolset())
	})
	b.Run("grpc-ping", func(b *testing.B) {
		_, ping := started(b, false)
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if err := ping(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("in-process", func(b *testing.B) { run(b, &testtools.Tools{}) })
	b.Run("paired", func(b *testing.B) {
		m, ping := started(b, false)
		legacy, _ := started(b, true)
		ts, lts := m.Toolset(), legacy.Toolset()
		call(b, ts)
		call(b, lts)
		var calls, invokes, pings []time.Duration
		b.ResetTimer()
		for b.Loop() {
			t := time.Now()
			call(b, ts)
			calls = append(calls, time.Since(t))
			t = time.Now()
			call(b, lts)
			invokes = append(invokes, time.Since(t))
			t = time.Now()
			if err := ping(); err != nil {
				b.Fatal(err)
			}
			pings = append(pings, time.Since(t))
		}
		c, i, p := median(calls), median(invokes), median(pings)
		b.ReportMetric(float64(c)/1e3, "call-µs")
		b.ReportMetric(float64(i)/1e3, "invoke-µs")
		b.ReportMetric(float64(p)/1e3, "ping-µs")
		b.ReportMetric(float64(c)/float64(p), "call/ping")
		b.ReportMetric(float64(i)/float64(p), "invoke/ping")
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

// Package plugintest tests Plexus plugins over the real plugin protocol,
// for plugin authors and for Plexus itself.
//
//   - StartTool and StartModel serve an implementation inside the test
//     process over a real gRPC connection on a Unix socket (go-plugin's
//     TestPluginGRPCConn, with the GRPCBroker that carries host
//     callbacks), and return what the engine would see: an
//     engine.Toolset, or a plugins.ConfigurableModel. Arguments, results,
//     errors, progress and streaming all cross the wire, so a value that
//     does not survive encoding fails the test as it would fail in Plexus.
//   - Conformance (and Check, its non-testing form) launches a plugin
//     binary as Plexus does and checks the contract every plugin must
//     keep: the handshake, nothing written to stdout, a valid description,
//     typed errors for unknown tools and bad arguments, concurrent calls,
//     and a prompt exit when the host stops it.
//
// A plugin author's tests, with the SDK of package plugins, from
// examples/plexus-tool-loc/main_test.go:
//
//	func TestToolOverGRPC(t *testing.T) {
//		impl, err := plugins.NewToolset(plugins.NewTool(countLines{}))
//		if err != nil {
//			t.Fatal(err)
//		}
//		ts := plugintest.StartTool(t, impl)
//		...
//	}
//
//	func TestConformance(t *testing.T) {
//		...
//		bin := filepath.Join(t.TempDir(), "plexus-tool-loc")
//		if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
//			t.Fatalf("go build: %v\n%s", err, out)
//		}
//		r := plugintest.Conformance(t, bin)
//		...
//	}
package plugintest

import (
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/plugins"
)

// StartTool serves impl as a tool plugin over real gRPC inside the test
// and returns the host's engine.Toolset for it. Host callbacks given in
// an InvokeRequest's Host reach the tool as in Plexus. Everything stops at
// the end of the test.
func StartTool(t testing.TB, impl engine.Toolset) engine.Toolset {
	t.Helper()
	return start(t, plugins.KindTool, &plugins.ToolPlugin{Impl: impl}).(engine.Toolset)
}

// StartModel serves impl as a model plugin over real gRPC inside the test
// and returns the host's view of it, whose errors are *engine.ModelError
// values with Provider "test" as Plexus sees them. Configure reaches impl
// when it implements plugins.Configurer.
func StartModel(t testing.TB, impl engine.Model) plugins.ConfigurableModel {
	t.Helper()
	return start(t, plugins.KindModel, &plugins.ModelPlugin{Impl: impl}).(plugins.ConfigurableModel)
}

func start(t testing.TB, kind string, p plugin.Plugin) any {
	t.Helper()
	client, server := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{kind: p})
	t.Cleanup(func() {
		// Close asks the server to shut down, as the host does; stopping
		// it here at the same time would race with that (in go-plugin), so
		// it is stopped here only if it has not stopped after a while.
		client.Close()
		select {
		case <-server.DoneCh:
		case <-time.After(5 * time.Second):
			server.Stop()
		}
	})
	raw, err := client.Dispense(kind)
	if err != nil {
		t.Fatalf("dispense the %s plugin: %v", kind, err)
	}
	view, err := plugins.Dispensed(raw, "test")
	if err != nil {
		t.Fatal(err)
	}
	return view
}

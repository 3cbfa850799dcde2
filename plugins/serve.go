package plugins

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/plexus-agent/plexus/engine"
)

// ServeTool serves impl as a tool plugin on go-plugin's gRPC transport and
// returns when the host closes the connection. Call it from main. Run by
// hand (not by a Plexus host), it prints that it is a plugin and exits 1.
// With the argument --debug (DebugFlag) it serves in debug mode instead:
// see serveDebug.
func ServeTool(impl engine.Toolset) {
	serve(KindTool, map[int]plugin.PluginSet{ProtocolVersion: {KindTool: &ToolPlugin{Impl: impl}}})
}

// ServeModel serves impl as a model plugin. If impl implements Configurer,
// the host's settings reach it before any other call. --debug works as for
// ServeTool.
func ServeModel(impl engine.Model) {
	serve(KindModel, map[int]plugin.PluginSet{ProtocolVersion: {KindModel: &ModelPlugin{Impl: impl}}})
}

// serve serves the one kind in sets (a plugin registers only the gRPC
// service of its kind, so a host asking it for the other kind gets
// Unimplemented rather than a nil implementation).
func serve(kind string, sets map[int]plugin.PluginSet) {
	cfg := &plugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: sets,
		GRPCServer:       plugin.DefaultGRPCServer,
		Logger: hclog.New(&hclog.LoggerOptions{
			Level: hclog.Debug, Output: os.Stderr, JSONFormat: true,
		}),
	}
	if slices.Contains(os.Args[1:], DebugFlag) {
		os.Exit(serveDebug(kind, cfg))
	}
	plugin.Serve(cfg)
}

// serveDebug serves cfg in go-plugin's reattach (test) mode, for running a
// plugin under a debugger: it listens on a Unix socket, prints one line
// PLEXUS_REATTACH_PLUGINS='{"KIND/NAME":{...}}' on stdout (and how to use
// it on stderr), and serves host after host until SIGINT or SIGTERM. It
// returns the exit code.
func serveDebug(kind string, cfg *plugin.ServeConfig) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	reattach := make(chan *plugin.ReattachConfig, 1)
	closed := make(chan struct{})
	cfg.Test = &plugin.ServeTestConfig{Context: ctx, ReattachConfigCh: reattach, CloseCh: closed}
	go plugin.Serve(cfg)
	select {
	case rc := <-reattach:
		ref := debugServeRef(kind, os.Args)
		line := FormatReattach(map[Ref]ReattachConfig{ref: {
			Protocol:        string(rc.Protocol),
			ProtocolVersion: rc.ProtocolVersion,
			Pid:             rc.Pid,
			Addr:            ReattachAddr{Network: rc.Addr.Network(), Address: rc.Addr.String()},
		}}) + "\n"
		os.Stdout.WriteString(line)
		fmt.Fprintf(os.Stderr, "%s plugin %q is serving in debug mode (pid %d) until interrupted.\n"+
			"Run plexus with the line above in its environment (export it, or prefix the command with it);\n"+
			"plexus then attaches to this process instead of launching the plugin, and leaves it running.\n",
			ref.Kind, ref.Name, rc.Pid)
	case <-closed:
		fmt.Fprintln(os.Stderr, "plugin: debug mode: the plugin server did not start (see the log above)")
		return 1
	}
	<-closed
	return 0
}

// Logger returns the logger a plugin should use: JSON lines on stderr in
// the shape go-plugin parses, so the host re-logs them under the plugin's
// name at their level. Never log to stdout in a plugin.
func Logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) > 0 {
				return a
			}
			switch a.Key {
			case slog.TimeKey:
				return slog.String("@timestamp", a.Value.Time().Format("2006-01-02T15:04:05.000000Z07:00"))
			case slog.LevelKey:
				return slog.String("@level", strings.ToLower(a.Value.Any().(slog.Level).String()))
			case slog.MessageKey:
				return slog.String("@message", a.Value.String())
			}
			return a
		},
	}))
}

package plugins

import (
	"log/slog"
	"os"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/plexus-agent/plexus/engine"
)

// ServeTool serves impl as a tool plugin on go-plugin's gRPC transport and
// returns when the host closes the connection. Call it from main. Run by
// hand (not by a Plexus host), it prints that it is a plugin and exits 1.
func ServeTool(impl engine.Toolset) {
	serve(pluginSets(&ToolPlugin{Impl: impl}, nil))
}

// ServeModel serves impl as a model plugin. If impl implements Configurer,
// the host's settings reach it before any other call.
func ServeModel(impl engine.Model) {
	serve(pluginSets(nil, &ModelPlugin{Impl: impl}))
}

func serve(sets map[int]plugin.PluginSet) {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: sets,
		GRPCServer:       plugin.DefaultGRPCServer,
		Logger: hclog.New(&hclog.LoggerOptions{
			Level: hclog.Debug, Output: os.Stderr, JSONFormat: true,
		}),
	})
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

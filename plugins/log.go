package plugins

import (
	"context"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// hclogSlog is an hclog.Logger that writes to a *slog.Logger, so go-plugin's
// own logs and the plugin stderr lines it re-logs end up in the engine's
// one log, under the plugin's name (attribute "plugin").
type hclogSlog struct {
	l       *slog.Logger
	name    string
	implied []any
	// fixedName makes Named and ResetNamed keep the name: go-plugin names
	// its stderr logger after the executable ("plexus" for every built-in),
	// and the plugin's own name is more useful.
	fixedName bool
}

var _ hclog.Logger = (*hclogSlog)(nil)

// newPluginLogger returns the hclog.Logger given to go-plugin for plugin
// name.
func newPluginLogger(l *slog.Logger, name string) hclog.Logger {
	return &hclogSlog{l: l.With("plugin", name), name: name, fixedName: true}
}

const slogTrace = slog.LevelDebug - 4

func toSlog(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return slogTrace
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

func (h *hclogSlog) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off {
		return
	}
	h.l.Log(context.Background(), toSlog(level), msg, append(append([]any{}, h.implied...), args...)...)
}

func (h *hclogSlog) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *hclogSlog) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *hclogSlog) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hclogSlog) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hclogSlog) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *hclogSlog) enabled(l slog.Level) bool { return h.l.Enabled(context.Background(), l) }
func (h *hclogSlog) IsTrace() bool             { return h.enabled(slogTrace) }
func (h *hclogSlog) IsDebug() bool             { return h.enabled(slog.LevelDebug) }
func (h *hclogSlog) IsInfo() bool              { return h.enabled(slog.LevelInfo) }
func (h *hclogSlog) IsWarn() bool              { return h.enabled(slog.LevelWarn) }
func (h *hclogSlog) IsError() bool             { return h.enabled(slog.LevelError) }

func (h *hclogSlog) ImpliedArgs() []any { return h.implied }

func (h *hclogSlog) With(args ...any) hclog.Logger {
	c := *h
	c.implied = append(append([]any{}, h.implied...), args...)
	return &c
}

func (h *hclogSlog) Name() string { return h.name }

func (h *hclogSlog) Named(name string) hclog.Logger {
	if h.fixedName {
		return h
	}
	c := *h
	if c.name != "" {
		name = c.name + "." + name
	}
	c.name = name
	return &c
}

func (h *hclogSlog) ResetNamed(name string) hclog.Logger {
	if h.fixedName {
		return h
	}
	c := *h
	c.name = name
	return &c
}

// SetLevel is a no-op: the slog handler decides what is written.
func (h *hclogSlog) SetLevel(hclog.Level) {}

// GetLevel reports the lowest level the slog handler writes.
func (h *hclogSlog) GetLevel() hclog.Level {
	switch {
	case h.IsTrace():
		return hclog.Trace
	case h.IsDebug():
		return hclog.Debug
	case h.IsInfo():
		return hclog.Info
	case h.IsWarn():
		return hclog.Warn
	case h.IsError():
		return hclog.Error
	}
	return hclog.Off
}

func (h *hclogSlog) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}

func (h *hclogSlog) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		h.Info(string(trimNewline(p)))
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func trimNewline(p []byte) []byte {
	for len(p) > 0 && (p[len(p)-1] == '\n' || p[len(p)-1] == '\r') {
		p = p[:len(p)-1]
	}
	return p
}

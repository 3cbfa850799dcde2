package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/plexus-agent/plexus/engine"
)

// Options configure a Toolset. Zero values mean defaults.
type Options struct {
	// Logger receives the toolset's logs and each stdio server's stderr
	// lines (attribute mcp_server); nil discards them.
	Logger *slog.Logger
	// CallTimeout bounds a tool call of a server without its own
	// "timeout" (default 60 s). A call never outlives its context.
	CallTimeout time.Duration
	// StartTimeout bounds connecting to a server: starting a stdio
	// server, the initialize handshake and the first tools/list (default
	// 60 s, for npx's first download).
	StartTimeout time.Duration
	// TerminateTimeout is how long Close waits for a stdio server to exit
	// after closing its stdin, and again after SIGTERM, before SIGKILL
	// (default 2 s).
	TerminateTimeout time.Duration
	// MinBackoff and MaxBackoff bound the delay before reconnecting after
	// consecutive failures (defaults 100 ms and 10 s; it doubles per
	// consecutive failure).
	MinBackoff, MaxBackoff time.Duration
	// HealthyAfter is how long a connection must last for the failure
	// count to reset (default 30 s).
	HealthyAfter time.Duration
	// ClientVersion is the version in the client info sent to servers
	// (default "dev").
	ClientVersion string
	// Env names the host environment variables a stdio server gets on
	// top of plugins.DefaultEnv (entries ending in "*" are prefixes); the
	// rest of the host's environment, API keys included, is withheld, as
	// from plugins. A server's "env" in the config is always added.
	Env []string
}

// Toolset is an engine.Toolset over the tools of configured MCP servers.
// Servers start on first use, concurrently. Safe for concurrent use;
// Close stops every server.
type Toolset struct {
	log     *slog.Logger
	opts    Options
	servers []*server // by name

	mu     sync.Mutex
	routes map[string]route // by engine tool name; nil until the first listing
}

// route is where an engine tool name leads.
type route struct {
	s    *server
	tool string // the MCP tool name
}

var _ engine.Toolset = (*Toolset)(nil)

// New returns a Toolset over cfg's servers (nil or empty means none); it
// starts none.
func New(cfg *Config, opts Options) *Toolset {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 60 * time.Second
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 60 * time.Second
	}
	if opts.TerminateTimeout <= 0 {
		opts.TerminateTimeout = 2 * time.Second
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 100 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 10 * time.Second
	}
	if opts.HealthyAfter <= 0 {
		opts.HealthyAfter = 30 * time.Second
	}
	if opts.ClientVersion == "" {
		opts.ClientVersion = "dev"
	}
	t := &Toolset{log: opts.Logger, opts: opts}
	if cfg != nil {
		for _, name := range slices.Sorted(maps.Keys(cfg.Servers)) {
			t.servers = append(t.servers, newServer(name, cfg.Servers[name], &t.opts))
		}
	}
	return t
}

// ServerStatus is one configured server and what it offers.
type ServerStatus struct {
	Name string
	// Transport is TransportStdio or TransportHTTP; Target the command
	// line or URL.
	Transport, Target string
	// Tools are the server's tools as the engine sees them.
	Tools []engine.ToolSpec
	// Pid is a running stdio server's pid, 0 otherwise.
	Pid int
	// Version is the connected server's name and version as it gave them
	// when the session began ("secure-filesystem-server 0.2.0"), with
	// control characters and runs of white space made single spaces and
	// cut to 80 bytes (it is the server's text); "" when not connected.
	Version string
	// Err is why the server could not be started or listed.
	Err error
}

// Describe connects to every server (concurrently) and reports, for each
// (by name), its tools or why it failed.
func (t *Toolset) Describe(ctx context.Context) []ServerStatus {
	lists := t.list(ctx)
	out := make([]ServerStatus, len(t.servers))
	for i, s := range t.servers {
		out[i] = ServerStatus{Name: s.name, Transport: s.cfg.Transport(), Target: s.cfg.Target(), Tools: lists[i].specs, Err: lists[i].err}
		s.mu.Lock()
		out[i].Pid = s.pid
		if s.sess != nil {
			if r := s.sess.InitializeResult(); r != nil && r.ServerInfo != nil {
				out[i].Version = printable(r.ServerInfo.Name+" "+r.ServerInfo.Version, 80)
			}
		}
		s.mu.Unlock()
	}
	return out
}

type listing struct {
	specs []engine.ToolSpec
	names []string // MCP names, parallel to specs
	err   error
}

// list lists every server's tools concurrently.
func (t *Toolset) list(ctx context.Context) []listing {
	out := make([]listing, len(t.servers))
	var wg sync.WaitGroup
	for i, s := range t.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tools, err := s.listTools(ctx)
			out[i].err = err
			for _, tool := range tools {
				spec := toolSpec(ToolName(s.name, tool.Name), tool)
				spec.Timeout = s.callTimeout()
				out[i].specs = append(out[i].specs, spec)
				out[i].names = append(out[i].names, tool.Name)
			}
		}()
	}
	wg.Wait()
	return out
}

// Tools connects to every server not connected yet and lists their tools,
// named SERVER__TOOL (see ToolName). Servers that fail are left out; their
// errors are joined into the returned error, alongside the tools that are
// available. Two tools that end up with one name (possible only through
// the hash suffix) are reported in the error, and the first is kept.
func (t *Toolset) Tools(ctx context.Context) ([]engine.ToolSpec, error) {
	lists := t.list(ctx)
	routes := map[string]route{}
	var out []engine.ToolSpec
	var errs []error
	for i, s := range t.servers {
		if lists[i].err != nil {
			errs = append(errs, lists[i].err)
		}
		for j, spec := range lists[i].specs {
			if prev, ok := routes[spec.Name]; ok {
				errs = append(errs, fmt.Errorf("MCP tool %q of server %q and tool %q of server %q have the same name %s; the second is left out",
					prev.tool, prev.s.name, lists[i].names[j], s.name, spec.Name))
				continue
			}
			routes[spec.Name] = route{s, lists[i].names[j]}
			out = append(out, spec)
		}
	}
	t.mu.Lock()
	t.routes = routes
	t.mu.Unlock()
	return out, errors.Join(errs...)
}

// Invoke calls the MCP tool behind req.Tool. Failures are *engine.ToolError:
// an isError result (code failed, the tool's text), a timeout (code
// timeout), a server that died or lost its session during the call (code
// plugin_crashed, matching engine.ErrPluginCrashed; the next call
// reconnects), a server that cannot start (code failed). When ctx ends,
// the MCP request is cancelled and ctx's error returned.
func (t *Toolset) Invoke(ctx context.Context, req engine.InvokeRequest, onUpdate func(engine.ToolUpdate)) (engine.ToolResult, error) {
	r, err := t.route(ctx, req.Tool)
	if err != nil {
		return engine.ToolResult{}, err
	}
	return r.s.call(ctx, r.tool, req.Args, onUpdate)
}

func (t *Toolset) route(ctx context.Context, name string) (route, error) {
	t.mu.Lock()
	r, ok := t.routes[name]
	known := t.routes != nil
	t.mu.Unlock()
	if ok {
		return r, nil
	}
	if !known {
		_, err := t.Tools(ctx)
		t.mu.Lock()
		r, ok = t.routes[name]
		t.mu.Unlock()
		if ok {
			return r, nil
		}
		if err != nil {
			return route{}, engine.ToolErrorf(engine.ToolCodeUnknownTool, "no MCP tool %q is available: %v", name, err)
		}
	}
	return route{}, engine.ToolErrorf(engine.ToolCodeUnknownTool, "no configured MCP server offers %q", name)
}

// Close stops every server (see Options.TerminateTimeout) and waits for
// them. Calls made afterwards fail.
func (t *Toolset) Close() error {
	var wg sync.WaitGroup
	for _, s := range t.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.close()
		}()
	}
	wg.Wait()
	return nil
}

// Servers lists the configured server names, sorted.
func (t *Toolset) Servers() []string {
	names := make([]string, len(t.servers))
	for i, s := range t.servers {
		names[i] = s.name
	}
	sort.Strings(names)
	return names
}

// printable makes text from a server safe to print in a table: control
// characters and runs of white space become one space, and the result is
// cut to at most max bytes (on a rune boundary).
func printable(s string, max int) string {
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

package main

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/plugins"
	"github.com/plexus-agent/plexus/plugins/mcp"
)

// Tool-call deadlines: --tool-timeout for every tool, --plugin-timeout
// NAME=DURATION for the tools of one tool plugin or MCP server (an MCP
// server's own "timeout" in the configuration file applies unless the
// flag names it).

// defaultToolTimeout is --tool-timeout's default: long enough for any
// file, search or network tool, short enough that a hung third-party tool
// does not hold a turn for long.
const defaultToolTimeout = 2 * time.Minute

// builtinTimeouts are the deadlines of built-in plugins that need more
// than --tool-timeout: the shell tool's run_command lets a command run up
// to 600 s and stops it itself, returning its partial output, so its
// deadline is above that (engine.DefaultToolTimeout, 11 minutes).
var builtinTimeouts = map[string]time.Duration{"shell": engine.DefaultToolTimeout}

// envToolTimeout is --tool-timeout's variable.
const envToolTimeout = "PLEXUS_TOOL_TIMEOUT"

// timeoutFlags are the raw deadline flags.
type timeoutFlags struct {
	tool    string
	plugins map[string]string
}

func (f *timeoutFlags) register(pf *pflag.FlagSet) {
	pf.StringVar(&f.tool, "tool-timeout", "", fmt.Sprintf("deadline of one tool call, e.g. 90s or 5m (default $%s, else %s; the shell tool's run_command: %s)", envToolTimeout, defaultToolTimeout, builtinTimeouts["shell"]))
	pf.StringToStringVar(&f.plugins, "plugin-timeout", nil, `deadline of one call of the tools of a tool plugin or MCP server, NAME=DURATION, repeatable (e.g. --plugin-timeout loc=30s,github=5m); it overrides --tool-timeout and an MCP server's "timeout"`)
}

// toolTimeouts are the parsed deadlines.
type toolTimeouts struct {
	global    time.Duration            // --tool-timeout
	perPlugin map[string]time.Duration // --plugin-timeout
}

// parse reads the flags (and $PLEXUS_TOOL_TIMEOUT); a malformed or
// non-positive duration is a usage error.
func (f *timeoutFlags) parse() (toolTimeouts, error) {
	parse := func(what, s string) (time.Duration, error) {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return 0, usageErr("%s %q: want a positive duration such as 90s, 5m or 1h", what, s)
		}
		return d, nil
	}
	tt := toolTimeouts{global: defaultToolTimeout, perPlugin: map[string]time.Duration{}}
	s, what := f.tool, "--tool-timeout"
	if s == "" {
		s, what = os.Getenv(envToolTimeout), "$"+envToolTimeout
	}
	if s != "" {
		d, err := parse(what, s)
		if err != nil {
			return tt, err
		}
		tt.global = d
	}
	for name, v := range f.plugins {
		d, err := parse("--plugin-timeout "+name, v)
		if err != nil {
			return tt, err
		}
		tt.perPlugin[name] = d
	}
	return tt, nil
}

// forPlugins is plugins.Options.Timeouts: the built-in defaults, then
// --plugin-timeout.
func (tt toolTimeouts) forPlugins() map[string]time.Duration {
	out := map[string]time.Duration{}
	for name, d := range builtinTimeouts {
		out[name] = d
	}
	for name, d := range tt.perPlugin {
		out[name] = d
	}
	return out
}

// applyToMCP sets the "timeout" of the MCP servers --plugin-timeout names,
// and checks that every name it gives is a tool plugin of infos or an MCP
// server of cfg.
func (tt toolTimeouts) applyToMCP(cfg *mcp.Config, infos []plugins.Info) error {
	var toolPlugins []string
	for _, in := range infos {
		if in.Kind == plugins.KindTool {
			toolPlugins = append(toolPlugins, in.Name)
		}
	}
	var servers []string
	if cfg != nil {
		for name := range cfg.Servers {
			servers = append(servers, name)
		}
	}
	sort.Strings(servers)
	for name, d := range tt.perPlugin {
		s, isServer := mcp.ServerConfig{}, false
		if cfg != nil {
			s, isServer = cfg.Servers[name]
		}
		if isServer {
			s.Timeout = d
			cfg.Servers[name] = s
			continue
		}
		if !slices.Contains(toolPlugins, name) {
			return usageErr("--plugin-timeout %s: no tool plugin or MCP server is named %q (tool plugins: %s; MCP servers: %s)",
				name, name, strings.Join(toolPlugins, ", "), orNone(servers))
		}
	}
	return nil
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

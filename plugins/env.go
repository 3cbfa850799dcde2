package plugins

import (
	"os"
	"slices"
	"strings"
)

// DefaultEnv returns the host environment variables every plugin process
// inherits; every other variable of the host is dropped (go-plugin's
// SkipHostEnv), so secrets in the engine's environment (API keys, tokens,
// SSH_AUTH_SOCK, cloud credentials) do not reach third-party code. An entry
// ending in "*" allows every name with that prefix. Options.Env adds names
// for every plugin and Options.PluginEnv for one plugin. go-plugin adds its
// own handshake variables (PLEXUS_PLUGIN, PLUGIN_*). The slice is a copy.
func DefaultEnv() []string { return slices.Clone(defaultEnv) }

// defaultEnv is DefaultEnv's list.
var defaultEnv = []string{
	// What every program expects.
	"PATH", "HOME", "USER", "LOGNAME", "TZ", "TMPDIR",
	// Locale.
	"LANG", "LANGUAGE", "LC_*",
	// XDG base directories and the runtime directory.
	"XDG_*",
	// Network plugins behind a proxy or a private CA (paths, not secrets;
	// a proxy URL may hold credentials, which the user set for every
	// program anyway).
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
	"http_proxy", "https_proxy", "no_proxy", "all_proxy",
	"SSL_CERT_FILE", "SSL_CERT_DIR",
}

// envAllow is a compiled allow-list: names, and prefixes from entries
// ending in "*". A lone "*" allows everything.
type envAllow struct {
	names    map[string]bool
	prefixes []string
}

func newEnvAllow(lists ...[]string) envAllow {
	a := envAllow{names: map[string]bool{}}
	for _, l := range lists {
		for _, e := range l {
			if p, ok := strings.CutSuffix(e, "*"); ok {
				a.prefixes = append(a.prefixes, p)
			} else if e != "" {
				a.names[e] = true
			}
		}
	}
	return a
}

func (a envAllow) allows(name string) bool {
	if a.names[name] {
		return true
	}
	for _, p := range a.prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// filter returns the entries of environ (NAME=VALUE, as os.Environ) whose
// names are allowed, in order.
func (a envAllow) filter(environ []string) []string {
	out := []string{}
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if ok && name != "" && a.allows(name) {
			out = append(out, kv)
		}
	}
	return out
}

// FilterEnv returns the entries of environ (NAME=VALUE, as os.Environ)
// that DefaultEnv or one of the extra lists allows, in order; an entry of a
// list ending in "*" allows every name with that prefix. Tool sources that
// start processes of their own (MCP stdio servers) use it to give them the
// environment plugins get.
func FilterEnv(environ []string, extra ...[]string) []string {
	return newEnvAllow(append([][]string{defaultEnv}, extra...)...).filter(environ)
}

// pluginEnv is the environment of the plugin ref's process: the host's
// variables that DefaultEnv, opts.Env or opts.PluginEnv[ref] allow.
func pluginEnv(opts *Options, ref Ref) []string {
	return newEnvAllow(defaultEnv, opts.Env, opts.PluginEnv[ref]).filter(os.Environ())
}

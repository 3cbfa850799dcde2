package shell

import (
	"os"
	"slices"
	"strings"
)

// DefaultEnvAllow returns the environment variables a command inherits from
// the plugin process; every other variable is dropped, so the engine's
// secrets (OPENAI_API_KEY, tokens, SSH_AUTH_SOCK, cloud credentials) never
// reach it. An entry ending in "*" allows every name with that prefix.
// Options.EnvAllow adds to this list. Whatever the list says, TMPDIR is set
// to the command's private temporary directory and PWD to its working
// directory. The slice is a copy the caller may change.
func DefaultEnvAllow() []string { return slices.Clone(defaultEnvAllow) }

// defaultEnvAllow is DefaultEnvAllow's list, each group with the reason it
// is needed.
var defaultEnvAllow = []string{
	// The basics every program expects.
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TZ",
	// Locale: message language, character set, collation.
	"LANG", "LANGUAGE", "LC_*",
	// XDG base directories: where tools find their configuration, caches
	// and data when they are not in the default places under HOME.
	"XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME",
	"XDG_CONFIG_DIRS", "XDG_DATA_DIRS",
	// Shared libraries of toolchains installed outside the system
	// directories (conda, Nix, /opt); without it their binaries do not start.
	"LD_LIBRARY_PATH",
	// C and C++ builds (cgo, make, cmake, pip wheels).
	"CC", "CXX", "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "PKG_CONFIG_PATH",
	// Go: toolchain, caches, build flags and module resolution. Module
	// credentials belong in .netrc or GOAUTH, which is not passed.
	"GOROOT", "GOPATH", "GOBIN", "GOCACHE", "GOMODCACHE", "GOENV", "GOFLAGS",
	"GOTOOLCHAIN", "GOPROXY", "GOPRIVATE", "GONOPROXY", "GONOSUMDB", "GOSUMDB",
	"GOINSECURE", "CGO_ENABLED",
	// Rust, Java, Python and Node: where their toolchains and
	// environments are installed.
	"CARGO_HOME", "RUSTUP_HOME", "RUSTUP_TOOLCHAIN", "JAVA_HOME",
	"VIRTUAL_ENV", "CONDA_PREFIX", "PYENV_ROOT", "NVM_DIR",
	// CA certificate files (paths, not secrets) for TLS clients behind
	// corporate proxies: OpenSSL, Python requests, curl, Node, git.
	"SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
	"NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO",
}

// proxyEnv lists the proxy variables, passed only when the command may use
// the network: without network access they are of no use, and a proxy URL
// can carry credentials.
var proxyEnv = []string{
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
	"http_proxy", "https_proxy", "no_proxy", "all_proxy",
}

// envFilter decides which inherited variables a command gets.
type envFilter struct {
	names    map[string]bool
	prefixes []string
}

// newEnvFilter allows defaultEnvAllow, extra (names, or prefixes ending in
// "*") and, when network is true, the proxy variables.
func newEnvFilter(extra []string, network bool) envFilter {
	f := envFilter{names: map[string]bool{}}
	add := func(entries []string) {
		for _, e := range entries {
			if p, ok := strings.CutSuffix(e, "*"); ok {
				f.prefixes = append(f.prefixes, p)
			} else if e != "" {
				f.names[e] = true
			}
		}
	}
	add(defaultEnvAllow)
	add(extra)
	if network {
		add(proxyEnv)
	}
	return f
}

// allows reports whether a variable called name is passed on.
func (f envFilter) allows(name string) bool {
	if f.names[name] {
		return true
	}
	for _, p := range f.prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// build returns the environment of a command from environ (as
// os.Environ returns it): the allowed variables (the last one wins when a
// name repeats), then PWD=dir and TMPDIR=tmp. names lists the variable
// names of env, sorted.
func (f envFilter) build(environ []string, dir, tmp string) (env, names []string) {
	vals := map[string]string{}
	for _, kv := range environ {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || name == "" || !f.allows(name) {
			continue
		}
		vals[name] = val
	}
	vals["PWD"] = dir
	vals["TMPDIR"] = tmp
	for name := range vals {
		names = append(names, name)
	}
	slices.Sort(names)
	env = make([]string, 0, len(names))
	for _, name := range names {
		env = append(env, name+"="+vals[name])
	}
	return env, names
}

// commandEnv is build applied to the plugin's own environment.
func (f envFilter) commandEnv(dir, tmp string) (env, names []string) {
	return f.build(os.Environ(), dir, tmp)
}

package plugins

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"

	"github.com/hashicorp/go-plugin"
)

// EnvReattach is the environment variable through which the host is told
// to attach to plugins already running in debug mode instead of launching
// them: a JSON object mapping "KIND/NAME" to a ReattachConfig, as a plugin
// started with --debug prints it.
const EnvReattach = "PLEXUS_REATTACH_PLUGINS"

// DebugFlag, as a plugin binary's argument (or `plexus plugin serve KIND
// NAME --debug` for a built-in), makes it serve in debug mode: it prints
// a PLEXUS_REATTACH_PLUGINS line on stdout and serves until interrupted.
const DebugFlag = "--debug"

// ReattachConfig is where a plugin in debug mode listens.
type ReattachConfig struct {
	Protocol        string       `json:"protocol"`         // "grpc"
	ProtocolVersion int          `json:"protocol_version"` // the plugin protocol version it serves
	Pid             int          `json:"pid"`
	Addr            ReattachAddr `json:"addr"`
}

// ReattachAddr is a listening address: network "unix" and a socket path,
// or "tcp" and host:port.
type ReattachAddr struct {
	Network string `json:"network"`
	Address string `json:"address"`
}

// ParseReattach decodes the value of PLEXUS_REATTACH_PLUGINS: a JSON
// object of "KIND/NAME" keys. It fails, naming the key, on anything
// malformed: bad JSON, an unknown kind, an invalid name, a protocol other
// than grpc, a protocol version this build does not speak, a pid below 1 or
// an empty address.
func ParseReattach(s string) (map[Ref]ReattachConfig, error) {
	var raw map[string]ReattachConfig
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return nil, fmt.Errorf("%s is not a JSON object of \"KIND/NAME\": {protocol, protocol_version, pid, addr}: %w", EnvReattach, err)
	}
	out := make(map[Ref]ReattachConfig, len(raw))
	for key, rc := range raw {
		kind, name, found := strings.Cut(key, "/")
		ref := Ref{Kind: kind, Name: name}
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%s: %q: %s", EnvReattach, key, fmt.Sprintf(format, args...))
		}
		switch {
		case !found || kind != KindTool && kind != KindModel:
			return nil, bad("want KIND/NAME with KIND tool or model")
		case !pluginName.MatchString(name):
			return nil, bad("name %q: want lower-case letters, digits, '-' and '_'", name)
		case rc.Protocol != string(plugin.ProtocolGRPC):
			return nil, bad("protocol %q: want %q", rc.Protocol, plugin.ProtocolGRPC)
		case rc.ProtocolVersion != ProtocolVersion:
			return nil, bad("protocol_version %d: this plexus speaks %d", rc.ProtocolVersion, ProtocolVersion)
		case rc.Pid < 1:
			return nil, bad("pid %d: want the plugin's process id", rc.Pid)
		case rc.Addr.Network != "unix" && rc.Addr.Network != "tcp" || rc.Addr.Address == "":
			return nil, bad("addr %+v: want network unix or tcp and an address", rc.Addr)
		}
		out[ref] = rc
	}
	return out, nil
}

// ReattachFromEnv parses $PLEXUS_REATTACH_PLUGINS; unset or empty is an
// empty map.
func ReattachFromEnv() (map[Ref]ReattachConfig, error) {
	s := os.Getenv(EnvReattach)
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	return ParseReattach(s)
}

// FormatReattach is the shell line a plugin in debug mode prints:
// PLEXUS_REATTACH_PLUGINS='{"KIND/NAME":{...}}', ready to paste into the
// shell that runs plexus (the JSON holds no single quote).
func FormatReattach(cfgs map[Ref]ReattachConfig) string {
	raw := make(map[string]ReattachConfig, len(cfgs))
	for ref, rc := range cfgs {
		raw[ref.Kind+"/"+ref.Name] = rc
	}
	b, _ := json.Marshal(raw) // map keys are sorted
	return EnvReattach + "='" + strings.ReplaceAll(string(b), "'", `\u0027`) + "'"
}

// goPlugin converts rc for go-plugin: test mode, so that the host never
// kills the debugged process.
func (rc ReattachConfig) goPlugin() (*plugin.ReattachConfig, error) {
	var addr net.Addr
	switch rc.Addr.Network {
	case "unix":
		addr = &net.UnixAddr{Net: "unix", Name: rc.Addr.Address}
	default:
		a, err := net.ResolveTCPAddr("tcp", rc.Addr.Address)
		if err != nil {
			return nil, err
		}
		addr = a
	}
	return &plugin.ReattachConfig{
		Protocol:        plugin.Protocol(rc.Protocol),
		ProtocolVersion: rc.ProtocolVersion,
		Addr:            addr,
		Pid:             rc.Pid,
		Test:            true,
	}, nil
}

// debugServeRef guesses which plugin this process serves, for the key of
// the line it prints in debug mode: plexus-KIND-NAME from its file name,
// else `... serve KIND NAME` from its arguments (the built-ins), else the
// file name under kind.
func debugServeRef(kind string, args []string) Ref {
	if len(args) > 0 {
		base := args[0]
		if i := strings.LastIndexByte(base, '/'); i >= 0 {
			base = base[i+1:]
		}
		if ref, ok := parseBinaryName(base); ok && ref.Kind == kind {
			return ref
		}
		if i := slices.Index(args, "serve"); i >= 0 && i+2 < len(args) && args[i+1] == kind && pluginName.MatchString(args[i+2]) {
			return Ref{Kind: kind, Name: args[i+2]}
		}
		name := strings.ToLower(strings.TrimPrefix(base, "plexus-"+kind+"-"))
		if pluginName.MatchString(name) {
			return Ref{Kind: kind, Name: name}
		}
	}
	return Ref{Kind: kind, Name: "plugin"}
}

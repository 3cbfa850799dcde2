// Package shell is the built-in tool plugin that runs shell commands in the
// workspace. It provides one tool, run_command:
//
//	{"command": "go test ./...", "cwd": "server", "timeout_seconds": 120, "max_output_bytes": 65536}
//
// The command runs as Options.Shell -c command (default /bin/sh) with stdin
// connected to /dev/null, in a directory inside the workspace (cwd is
// resolved with workspace.Root.Resolve, so `..`, absolute paths outside the
// workspace and symlinks leading out are refused). run_command is risk high
// and needs approval for every call.
//
// # Sandbox
//
// On Linux the command runs sandboxed (see SandboxMode for how the sandbox
// is chosen; on other systems it runs unconfined, with a warning). It may read and execute files everywhere, but write,
// create, remove and rename only inside the workspace, its private TMPDIR
// and Options.WritableDirs (device nodes not even there), and write to
// /dev/null, /dev/zero and /dev/full. Unless Options.AllowNetwork, it
// cannot connect to or listen on TCP ports, nor create any socket but Unix
// and netlink ones (so no UDP, Multipath TCP or raw sockets either).
//
// With Landlock, the shell plugin re-executes its own binary as `plexus
// plugin sandbox-exec` (SandboxMain), which confines itself with Landlock,
// a seccomp filter for the network and, when run as root, a smaller
// capability bounding set, and then executes the shell in its place: the
// command keeps the launcher's process ID and process group, and everything
// it starts stays confined. Landlock also keeps it from tracing processes
// outside the sandbox (ptrace, /proc/PID/mem) and, from ABI 6, from
// signalling them or connecting to abstract Unix sockets they listen on.
// Bubblewrap (bwrap) gives the same file rules with a read-only bind mount
// of /, its own network namespace, a PID namespace that hides every
// process outside, and no capabilities.
//
// What the sandbox does not do: keep secrets from being read. Files the
// user can read (~/.ssh, ~/.netrc, cloud credentials) are readable, and
// under Landlock so are other processes' command lines in /proc (their
// environments are not: reading /proc/PID/environ needs ptrace access,
// which Landlock denies towards processes outside the sandbox; bubblewrap
// hides the processes altogether). It does not restrict
// connecting to Unix sockets that have a path (the Docker socket, an SSH
// agent) before Landlock ABI 9, and does not stop a command from changing
// files inside the workspace that run later outside the sandbox
// (.git/hooks, .git/config, Makefiles). Result.Sandbox names the sandbox
// that applied ("landlock abi 7: filesystem and network", "bubblewrap",
// "none: REASON"); when protections are missing, a warning is streamed as
// a ToolProgress update before the command starts.
//
// The host can change two things per call through
// engine.InvokeRequest.Settings (the engine fills them from the
// workspace policy's commands section; the model cannot): SettingNetwork
// ("sandbox.network": "allow" or "deny") overrides Options.AllowNetwork,
// and SettingEnv ("env.allow": "NAME,NAME") passes more variables.
//
// # Environment
//
// The command does not inherit the plugin's whole environment: only the
// variables DefaultEnvAllow and Options.EnvAllow name (and the proxy
// variables when the network is allowed), plus PWD set to the working
// directory and TMPDIR set to a directory created for this command alone
// (mode 0700, in Options.TempDir) and removed with everything in it after
// the command's processes are gone. Result.Env lists the variable names.
//
// # Output and processes
//
// stdout and stderr stream to the caller as they arrive, as ToolUpdate
// outputs on the streams "stdout" and "stderr". Every chunk is valid UTF-8
// (a rune split across reads is held back until it is complete; invalid
// bytes become U+FFFD), and the chunks of a stream concatenate to exactly
// the text in the result. Each stream keeps its first max_output_bytes
// bytes; the rest is read and counted but neither streamed nor returned.
//
// The command runs in its own process group, inside the plugin's session
// (which the plugin host starts without a controlling terminal, and reaps
// after a plugin crash). When it times out, when the
// caller's context ends, and when its shell exits while processes it put in
// the background are still running, the whole group gets SIGTERM, then
// SIGKILL after Options.KillGrace, and the call returns only when no process
// of the group is left running. A process that leaves the group (setsid,
// a daemon that double-forks into a new session) escapes this; if it keeps
// the output pipes open, the call stops reading after KillGrace and returns
// what it has. The shell itself gets SIGKILL if the plugin process dies.
//
// A command that runs to completion is a successful call whatever its exit
// code; so is a timeout, which returns the output so far with
// "timed_out": true (see Result). When the caller's context has a deadline
// nearer than the command's time limit, the limit is shortened to leave
// KillGrace plus one second to stop the command and return its output. A
// cancelled call returns a *engine.ToolError with code cancelled (timeout
// when the context's deadline passed first) after stopping the group.
package shell

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/workspace"
	"github.com/plexus-agent/plexus/plugins"
)

// ToolName is the name of the one tool this package provides.
const ToolName = "run_command"

// Defaults for Options fields left zero.
const (
	// DefaultShell runs commands as DefaultShell -c command.
	DefaultShell = "/bin/sh"
	// DefaultTimeout is how long a command may run when the call gives no
	// timeout_seconds.
	DefaultTimeout = 60 * time.Second
	// DefaultMaxTimeout is the largest timeout_seconds a call may ask for.
	DefaultMaxTimeout = 600 * time.Second
	// DefaultOutputBytes is the per-stream output cap, in bytes, when the
	// call gives no max_output_bytes. 16 KiB per stream keeps a full
	// result (both streams and the fields) well inside the engine's
	// default 64 KiB tool-result budget and a local model's context.
	DefaultOutputBytes = 16 << 10
	// DefaultMaxOutputBytes is the largest max_output_bytes a call may ask
	// for, in bytes.
	DefaultMaxOutputBytes = 4 << 20
	// DefaultKillGrace is how long a process group has between SIGTERM and
	// SIGKILL.
	DefaultKillGrace = 2 * time.Second
)

// maxCommandBytes is the longest command accepted: Linux refuses a single
// argv string of MAX_ARG_STRLEN (32 pages, 131072 bytes) or more.
const maxCommandBytes = 128<<10 - 1

// Options configure Tools. The zero value of every field means its default.
type Options struct {
	// Shell is the shell binary (a path, or a name looked up in PATH);
	// commands run as Shell -c command. Default DefaultShell.
	Shell string
	// Timeout is the time limit of a call that gives no timeout_seconds,
	// in whole seconds (rounded down, at least 1s). Default
	// DefaultTimeout; capped at MaxTimeout.
	Timeout time.Duration
	// MaxTimeout is the largest time limit a call may ask for, in whole
	// seconds (rounded down, at least 1s). Default DefaultMaxTimeout.
	MaxTimeout time.Duration
	// OutputBytes is the per-stream output cap of a call that gives no
	// max_output_bytes. Default DefaultOutputBytes; capped at
	// MaxOutputBytes.
	OutputBytes int
	// MaxOutputBytes is the largest max_output_bytes a call may ask for.
	// Default DefaultMaxOutputBytes.
	MaxOutputBytes int
	// KillGrace is the time between SIGTERM and SIGKILL when a process
	// group is stopped, and how long output is still read after the
	// command's processes are gone. Default DefaultKillGrace.
	KillGrace time.Duration
	// Sandbox chooses how commands are confined; see SandboxMode. The
	// zero value, SandboxAuto, uses the best the system offers;
	// SandboxNone turns the sandbox off.
	Sandbox SandboxMode
	// AllowNetwork lets commands use the network: no network rules, no
	// seccomp filter, no network namespace, and the proxy variables
	// (HTTP_PROXY and the like) pass. Default false.
	AllowNetwork bool
	// WritableDirs are absolute directories that commands may write
	// below besides the workspace and their TMPDIR, for example the Go
	// build cache (go env GOCACHE), which go build and go test need, or
	// /dev/shm for Python's multiprocessing. Missing ones are skipped; a
	// relative one makes every call fail. Default none.
	WritableDirs []string
	// EnvAllow names environment variables commands inherit besides
	// DefaultEnvAllow: names, or prefixes ending in "*" ("NPM_CONFIG_*").
	EnvAllow []string
	// TempDir is the directory in which each command's private TMPDIR is
	// created. Default os.TempDir() of the plugin process.
	TempDir string
	// Launcher is the command line, before the launcher's own arguments,
	// that runs SandboxMain. Default: this binary (os.Executable()) with
	// the arguments "plugin sandbox-exec", as the plexus binary provides
	// it; a program that embeds the shell toolset dispatches its own
	// command line to SandboxMain and names it here.
	Launcher []string
	// Bwrap is the bubblewrap binary, a path or a name looked up in PATH.
	// Default "bwrap".
	Bwrap string
	// Logger receives one debug line per command and, when New is called,
	// which sandbox applies; nil discards.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Shell == "" {
		o.Shell = DefaultShell
	}
	if o.MaxTimeout <= 0 {
		o.MaxTimeout = DefaultMaxTimeout
	}
	o.MaxTimeout = max(o.MaxTimeout.Truncate(time.Second), time.Second)
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	o.Timeout = min(max(o.Timeout.Truncate(time.Second), time.Second), o.MaxTimeout)
	if o.MaxOutputBytes <= 0 {
		o.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if o.OutputBytes <= 0 {
		o.OutputBytes = DefaultOutputBytes
	}
	o.OutputBytes = min(o.OutputBytes, o.MaxOutputBytes)
	if o.KillGrace <= 0 {
		o.KillGrace = DefaultKillGrace
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Tools is the shell toolset: an engine.Toolset with the single tool
// run_command. It holds no per-call state and is safe for concurrent use;
// concurrent calls run concurrent commands.
type Tools struct {
	opts Options
	spec engine.ToolSpec
	// plans are the sandboxes of commands without ([0]) and with ([1])
	// network access; sandbox is the one Options.AllowNetwork chooses.
	plans   [2]sandboxPlan
	sandbox sandboxPlan
}

// Per-call settings (engine.InvokeRequest.Settings) that run_command
// reads. They come from the host, never from the model: the engine sets
// them from the workspace policy's commands section.
const (
	// SettingNetwork is "allow" or "deny": whether this command may use
	// the network, overriding Options.AllowNetwork.
	SettingNetwork = "sandbox.network"
	// SettingEnv is a comma-separated list of environment variable names
	// this command inherits on top of DefaultEnvAllow and
	// Options.EnvAllow.
	SettingEnv = "env.allow"
)

var _ engine.Toolset = (*Tools)(nil)

// New returns the shell toolset configured by opts. It checks once what
// the system offers for sandboxing (the Landlock ABI, seccomp, and, only
// when Landlock cannot do the job, a trial run of bubblewrap) and decides
// the sandbox of every command.
func New(opts Options) *Tools {
	opts = opts.withDefaults()
	t := &Tools{opts: opts}
	probe := probeSandbox(opts)
	bwrap := sync.OnceValues(func() (string, string) { return findBwrap(opts.Bwrap) })
	for i, network := range []bool{false, true} {
		o := opts
		o.AllowNetwork = network
		t.plans[i] = chooseSandbox(o, probe, bwrap)
	}
	t.sandbox = t.plans[b2i(opts.AllowNetwork)]
	t.spec = toolSpec(opts, t.sandbox)
	switch {
	case t.sandbox.err != "":
		opts.Logger.Error("run_command cannot run commands", "error", t.sandbox.err)
	case t.sandbox.warning != "":
		opts.Logger.Warn("run_command sandbox is incomplete", "sandbox", t.sandbox.desc, "warning", t.sandbox.warning)
	default:
		opts.Logger.Info("run_command sandbox", "sandbox", t.sandbox.desc)
	}
	return t
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// callSettings returns the sandbox plan and environment filter of a call
// with the per-call settings (SettingNetwork, SettingEnv); a setting with
// a value other than those documented is an error naming it.
func (t *Tools) callSettings(settings map[string]string) (sandboxPlan, envFilter, error) {
	network := t.opts.AllowNetwork
	switch v := settings[SettingNetwork]; v {
	case "":
	case "allow":
		network = true
	case "deny":
		network = false
	default:
		return sandboxPlan{}, envFilter{}, engine.ToolErrorf(engine.ToolCodeInvalidInput, "the host's setting %s=%q is neither \"allow\" nor \"deny\"", SettingNetwork, v)
	}
	extra := slices.Clone(t.opts.EnvAllow)
	if v := settings[SettingEnv]; v != "" {
		for name := range strings.SplitSeq(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				extra = append(extra, name)
			}
		}
	}
	return t.plans[b2i(network)], newEnvFilter(extra, network), nil
}

// probeSandbox checks what the system offers for the sandbox of o.
func probeSandbox(o Options) sandboxProbe {
	var p sandboxProbe
	p.landlockABI, p.landlockWhy = landlockABI()
	p.seccomp, p.seccompWhy = seccompAvailable()
	if len(o.Launcher) > 0 {
		p.launcher = slices.Clone(o.Launcher)
	} else {
		p.launcher, p.launcherWhy = defaultLauncher()
	}
	return p
}

// Serve serves the shell toolset as a tool plugin over go-plugin's gRPC
// transport and returns when the host closes the connection. It logs to
// stderr as plugins.Logger does.
//
// Commands may also write to the Go build cache (DefaultWritableDirs), so
// that go build and go test work in the sandbox.
func Serve() {
	plugins.ServeTool(New(Options{Logger: plugins.Logger(), WritableDirs: DefaultWritableDirs()}))
}

// DefaultWritableDirs returns the directories besides the workspace that
// the plugin's commands may write to: the Go build cache ($GOCACHE, or
// go-build in the user cache directory, as cmd/go chooses it), which
// go build and go test need. A GOCACHE of "off" or a relative path adds
// nothing. The cache is shared with builds outside the sandbox; cmd/go
// checks its entries by content hash.
func DefaultWritableDirs() []string {
	if c := os.Getenv("GOCACHE"); c != "" {
		if c == "off" || !filepath.IsAbs(c) {
			return nil
		}
		return []string{c}
	}
	if d, err := os.UserCacheDir(); err == nil {
		return []string{filepath.Join(d, "go-build")}
	}
	return nil
}

// Tools returns the spec of run_command: risk high, not read-only, needs
// approval, with a JSON Schema (draft 2020-12) input schema whose limits are
// those of the Options.
func (t *Tools) Tools(context.Context) ([]engine.ToolSpec, error) {
	return []engine.ToolSpec{t.spec}, nil
}

// Invoke runs one run_command call (see the package doc). Errors are
// *engine.ToolError: invalid_input for arguments that do not match the
// schema (the message names the field), permission_denied for a cwd outside
// the workspace, not_found for a cwd or workspace that does not exist,
// unknown_tool for a name other than run_command, cancelled (or timeout
// when ctx's deadline passed) after ctx ended and the command was stopped,
// and failed when the command could not be started or stopped.
// On success the content is a Result.
func (t *Tools) Invoke(ctx context.Context, req engine.InvokeRequest, onUpdate func(engine.ToolUpdate)) (engine.ToolResult, error) {
	if req.Tool != ToolName {
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeUnknownTool, "the shell plugin has no tool %q; it provides %s", req.Tool, ToolName)
	}
	in, err := t.decodeInput(req.Args)
	if err != nil {
		return engine.ToolResult{}, err
	}
	root, dir, rel, err := resolveCwd(req.WorkspaceRoot, in.Cwd)
	if err != nil {
		return engine.ToolResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeCancelled, "%s was cancelled before the command started: %v", ToolName, err)
	}
	plan, env, err := t.callSettings(req.Settings)
	if err != nil {
		return engine.ToolResult{}, err
	}
	res, err := t.run(ctx, in, plan, env, root, dir, rel, onUpdate)
	if err != nil {
		return engine.ToolResult{}, err
	}
	return engine.JSONResult(res, res.summary())
}

// resolveCwd confines cwd to the workspace root and checks that it is an
// existing directory. It returns the workspace root and the absolute
// directory to run in, both with symlinks resolved, and the directory's
// workspace-relative form ("." for the root).
func resolveCwd(wsRoot, cwd string) (root, dir, rel string, err error) {
	if wsRoot == "" {
		return "", "", "", engine.ToolErrorf(engine.ToolCodeFailed, "%s was called without a workspace root; open a workspace first", ToolName)
	}
	ws, err := workspace.Open(wsRoot)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", "", "", engine.ToolErrorf(engine.ToolCodeNotFound, "the workspace root does not exist: %v", err)
		}
		return "", "", "", engine.ToolErrorf(engine.ToolCodeFailed, "cannot open the workspace root: %v", err)
	}
	defer ws.Close()
	// Real resolves symlinks inside the workspace (os.Root refuses
	// absolute ones even when they point inside), so a cwd reached through
	// such a link works; rel stays as the model named it.
	real, err := ws.Real(cwd)
	if err == nil {
		rel, err = ws.Resolve(cwd)
	}
	if err != nil {
		switch {
		case errors.Is(err, engine.ErrPermissionDenied):
			return "", "", "", engine.ToolErrorf(engine.ToolCodePermissionDenied, "cwd: %v; give a directory relative to the workspace root, or omit cwd to run in the root", err)
		case errors.Is(err, engine.ErrInvalidRequest):
			return "", "", "", engine.ToolErrorf(engine.ToolCodeInvalidInput, "cwd: %v", err)
		case errors.Is(err, fs.ErrNotExist):
			return "", "", "", engine.ToolErrorf(engine.ToolCodeNotFound, "cwd: %v; create it first or omit cwd to run in the workspace root", err)
		}
		return "", "", "", engine.ToolErrorf(engine.ToolCodeFailed, "cwd: %v", err)
	}
	fi, err := ws.FS().Stat(real)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", "", "", engine.ToolErrorf(engine.ToolCodeNotFound, "cwd %q does not exist in the workspace; create it first or omit cwd to run in the workspace root", cwd)
	case err != nil:
		return "", "", "", engine.ToolErrorf(engine.ToolCodeFailed, "cwd %q: %v", cwd, err)
	case !fi.IsDir():
		return "", "", "", engine.ToolErrorf(engine.ToolCodeInvalidInput, "cwd %q is a file, not a directory; give the directory to run in", cwd)
	}
	return ws.Dir(), filepath.Join(ws.Dir(), real), filepath.ToSlash(rel), nil
}

// ctxError is the error of a call whose ctx ended (with err) elapsed after
// its command started.
func ctxError(err error, elapsed time.Duration) *engine.ToolError {
	if errors.Is(err, context.DeadlineExceeded) {
		return engine.ToolErrorf(engine.ToolCodeTimeout, "the deadline for this %s call passed after %s; the command and every process it started were stopped", ToolName, formatDuration(elapsed))
	}
	return engine.ToolErrorf(engine.ToolCodeCancelled, "%s was cancelled after %s; the command and every process it started were stopped", ToolName, formatDuration(elapsed))
}

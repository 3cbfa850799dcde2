// Package shell is the built-in tool plugin that runs shell commands in the
// workspace. It provides one tool, run_command:
//
//	{"command": "go test ./...", "cwd": "server", "timeout_seconds": 120, "max_output_bytes": 65536}
//
// The command runs as Options.Shell -c command (default /bin/sh) with stdin
// connected to /dev/null, in a directory inside the workspace (cwd is
// resolved with workspace.Root.Resolve, so `..`, absolute paths outside the
// workspace and symlinks leading out are refused). Only the starting
// directory is confined: the command itself can read and write whatever the
// user running Plexus can, which is why run_command is risk high and needs
// approval for every call.
//
// stdout and stderr stream to the caller as they arrive, as ToolUpdate
// outputs on the streams "stdout" and "stderr". Every chunk is valid UTF-8
// (a rune split across reads is held back until it is complete; invalid
// bytes become U+FFFD), and the chunks of a stream concatenate to exactly
// the text in the result. Each stream keeps its first max_output_bytes
// bytes; the rest is read and counted but neither streamed nor returned.
//
// The command runs in its own process group. When it times out, when the
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
//
// The environment is inherited from the plugin process unchanged (with PWD
// set to the working directory). A scrubbed allow-list of variables will
// replace this in a later change.
package shell

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"path/filepath"
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
	// Logger receives one debug line per command; nil discards.
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
}

var _ engine.Toolset = (*Tools)(nil)

// New returns the shell toolset configured by opts.
func New(opts Options) *Tools {
	opts = opts.withDefaults()
	return &Tools{opts: opts, spec: toolSpec(opts)}
}

// Serve serves the shell toolset as a tool plugin over go-plugin's gRPC
// transport and returns when the host closes the connection. It logs to
// stderr as plugins.Logger does.
func Serve() {
	plugins.ServeTool(New(Options{Logger: plugins.Logger()}))
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
	dir, rel, err := resolveCwd(req.WorkspaceRoot, in.Cwd)
	if err != nil {
		return engine.ToolResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeCancelled, "%s was cancelled before the command started: %v", ToolName, err)
	}
	res, err := t.run(ctx, in, dir, rel, onUpdate)
	if err != nil {
		return engine.ToolResult{}, err
	}
	return engine.JSONResult(res, res.summary())
}

// resolveCwd confines cwd to the workspace root and checks that it is an
// existing directory. It returns the absolute directory to run in and its
// workspace-relative form ("." for the root).
func resolveCwd(root, cwd string) (dir, rel string, err error) {
	if root == "" {
		return "", "", engine.ToolErrorf(engine.ToolCodeFailed, "%s was called without a workspace root; open a workspace first", ToolName)
	}
	ws, err := workspace.Open(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", "", engine.ToolErrorf(engine.ToolCodeNotFound, "the workspace root does not exist: %v", err)
		}
		return "", "", engine.ToolErrorf(engine.ToolCodeFailed, "cannot open the workspace root: %v", err)
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
			return "", "", engine.ToolErrorf(engine.ToolCodePermissionDenied, "cwd: %v; give a directory relative to the workspace root, or omit cwd to run in the root", err)
		case errors.Is(err, engine.ErrInvalidRequest):
			return "", "", engine.ToolErrorf(engine.ToolCodeInvalidInput, "cwd: %v", err)
		case errors.Is(err, fs.ErrNotExist):
			return "", "", engine.ToolErrorf(engine.ToolCodeNotFound, "cwd: %v; create it first or omit cwd to run in the workspace root", err)
		}
		return "", "", engine.ToolErrorf(engine.ToolCodeFailed, "cwd: %v", err)
	}
	fi, err := ws.FS().Stat(real)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", "", engine.ToolErrorf(engine.ToolCodeNotFound, "cwd %q does not exist in the workspace; create it first or omit cwd to run in the workspace root", cwd)
	case err != nil:
		return "", "", engine.ToolErrorf(engine.ToolCodeFailed, "cwd %q: %v", cwd, err)
	case !fi.IsDir():
		return "", "", engine.ToolErrorf(engine.ToolCodeInvalidInput, "cwd %q is a file, not a directory; give the directory to run in", cwd)
	}
	return filepath.Join(ws.Dir(), real), filepath.ToSlash(rel), nil
}

// ctxError is the error of a call whose ctx ended (with err) elapsed after
// its command started.
func ctxError(err error, elapsed time.Duration) *engine.ToolError {
	if errors.Is(err, context.DeadlineExceeded) {
		return engine.ToolErrorf(engine.ToolCodeTimeout, "the deadline for this %s call passed after %s; the command and every process it started were stopped", ToolName, formatDuration(elapsed))
	}
	return engine.ToolErrorf(engine.ToolCodeCancelled, "%s was cancelled after %s; the command and every process it started were stopped", ToolName, formatDuration(elapsed))
}

package shell

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

// Result is the content of a successful run_command call, encoded as JSON.
// The short fields come before the output so that a caller that cuts a long
// result keeps them.
type Result struct {
	// Command is the command as given.
	Command string `json:"command"`
	// Cwd is the directory the command ran in, relative to the workspace
	// root ("." for the root), with forward slashes.
	Cwd string `json:"cwd"`
	// ExitCode is the shell's exit status (0 to 255). When a signal killed
	// the shell it is 128 plus the signal number, as shells report it, and
	// Signal names the signal.
	ExitCode int `json:"exit_code"`
	// Signal names the signal that killed the shell ("SIGTERM",
	// "SIGKILL"); empty when the shell exited by itself.
	Signal string `json:"signal,omitempty"`
	// TimedOut is true when the time limit ended the command; the output is
	// what it wrote until then.
	TimedOut bool `json:"timed_out"`
	// TimeoutSeconds is the time limit that applied, in seconds. It is less
	// than the timeout_seconds asked for when the caller's own deadline was
	// nearer: the command is then stopped early enough to return its
	// output in time.
	TimeoutSeconds float64 `json:"timeout_seconds"`
	// DurationMS is how long the command ran, in milliseconds, until its
	// shell exited or, after a timeout, until its processes were stopped.
	DurationMS int64 `json:"duration_ms"`
	// BackgroundStopped is true when processes the command left running
	// after its shell exited were stopped.
	BackgroundStopped bool `json:"background_stopped,omitempty"`
	// OutputIncomplete is true when a process outside the command's
	// process group (started with setsid, or a daemon) kept the output
	// open, so reading stopped Options.KillGrace after the command ended.
	OutputIncomplete bool `json:"output_incomplete,omitempty"`
	// Sandbox names the confinement that applied: "landlock abi N: WHAT"
	// (WHAT is "filesystem and network", or "filesystem; network
	// allowed", or less on old kernels), "bubblewrap", "bubblewrap;
	// network allowed", or "none: REASON".
	Sandbox string `json:"sandbox"`
	// Env lists the names (not the values) of the environment variables
	// the command got, sorted.
	Env []string `json:"env"`
	// StdoutTruncatedBytes is the number of stdout bytes dropped past
	// max_output_bytes.
	StdoutTruncatedBytes int64 `json:"stdout_truncated_bytes"`
	// StderrTruncatedBytes is the number of stderr bytes dropped past
	// max_output_bytes.
	StderrTruncatedBytes int64 `json:"stderr_truncated_bytes"`
	// Stdout is the kept standard output, valid UTF-8 (invalid bytes are
	// replaced with U+FFFD).
	Stdout string `json:"stdout"`
	// Stderr is the kept standard error, valid UTF-8.
	Stderr string `json:"stderr"`

	lines int64 // lines of output, dropped ones included
}

const (
	// resultReserve is the time, beyond KillGrace, kept before the caller's
	// deadline to stop the command and hand back its result.
	resultReserve = time.Second
	// killWait bounds the wait for processes to go after SIGKILL; only a
	// process stuck in the kernel takes longer.
	killWait = 5 * time.Second
	// pollInterval is how often a stopping process group is checked.
	pollInterval = 20 * time.Millisecond
)

// run runs in.Command in dir (rel is its workspace-relative form) in the
// sandbox plan for the workspace root, with the inherited environment
// envf allows, and streams its output to onUpdate.
func (t *Tools) run(ctx context.Context, in input, plan sandboxPlan, envf envFilter, root, dir, rel string, onUpdate func(engine.ToolUpdate)) (*Result, error) {
	if plan.err != "" {
		return nil, engine.ToolErrorf(engine.ToolCodeFailed, "%s cannot run commands: %s", ToolName, plan.err)
	}
	shell, err := exec.LookPath(t.opts.Shell)
	if err == nil && !filepath.IsAbs(shell) {
		shell, err = filepath.Abs(shell)
	}
	if err != nil {
		return nil, engine.ToolErrorf(engine.ToolCodeFailed, "could not start the shell %s: %v; check that it exists and is executable", t.opts.Shell, err)
	}
	tmp, err := makeTempDir(t.opts.TempDir)
	if err != nil {
		return nil, engine.ToolErrorf(engine.ToolCodeFailed, "could not create the command's temporary directory: %v", err)
	}
	// Runs last, when the command's processes are gone.
	defer func() {
		if err := removeTree(tmp); err != nil {
			t.opts.Logger.Warn("run_command could not remove the command's temporary directory", "dir", tmp, "error", err)
		}
	}()
	env, envNames := envf.commandEnv(dir, tmp)

	grace := t.opts.KillGrace
	timeout := in.Timeout
	if dl, ok := ctx.Deadline(); ok {
		// A timed-out result with the output so far is worth more to the
		// model than a bare deadline error from the caller.
		if left := time.Until(dl) - grace - resultReserve; left > 0 && left < timeout {
			timeout = left
		}
	}

	// Our own pipes rather than exec's copying goroutines: Wait then
	// returns as soon as the shell exits, so processes it left behind can
	// be stopped at once instead of holding the output open.
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, engine.ToolErrorf(engine.ToolCodeFailed, "could not create the output pipe: %v", err)
	}
	defer outR.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		outW.Close()
		return nil, engine.ToolErrorf(engine.ToolCodeFailed, "could not create the output pipe: %v", err)
	}
	defer errR.Close()

	argv := plan.argv(root, dir, tmp, shell, in.Command)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin = nil // /dev/null
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.SysProcAttr = sysProcAttr()
	// The Landlock launcher writes why it failed to file descriptor 3;
	// a successful exec of the shell closes it.
	var status chan string
	var statusW *os.File
	if plan.kind == kindLandlock {
		var statusR *os.File
		if statusR, statusW, err = os.Pipe(); err != nil {
			return nil, engine.ToolErrorf(engine.ToolCodeFailed, "could not create the sandbox status pipe: %v", err)
		}
		defer statusR.Close()
		cmd.ExtraFiles = []*os.File{statusW}
		status = make(chan string, 1)
		go func() {
			b, _ := io.ReadAll(io.LimitReader(statusR, 4<<10))
			status <- string(b)
		}()
	}

	var emitMu sync.Mutex // onUpdate is never called concurrently
	emit := func(stream, text string) {
		emitMu.Lock()
		defer emitMu.Unlock()
		onUpdate(engine.ToolUpdate{Output: &engine.ToolOutput{Stream: stream, Text: text}})
	}
	stdout := newCapture("stdout", in.OutputBytes, emit)
	stderr := newCapture("stderr", in.OutputBytes, emit)
	if w := plan.warning; w != "" {
		onUpdate(engine.ToolUpdate{Progress: &engine.ToolProgress{Message: w}})
	}

	start := time.Now()
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if statusW != nil {
		statusW.Close()
	}
	if err != nil {
		return nil, engine.ToolErrorf(engine.ToolCodeFailed, "could not start %s: %v; check that it exists and is executable", argv[0], err)
	}
	pgid := cmd.Process.Pid // Setpgid: the command leads a new group

	var readers sync.WaitGroup
	readers.Go(func() { stdout.readFrom(outR) })
	readers.Go(func() { stderr.readFrom(errR) })
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var waitErr error
	exited, timedOut := false, false
	select {
	case waitErr = <-waited:
		exited = true
	case <-timer.C:
		timedOut = true
	case <-ctx.Done():
	}
	elapsed := time.Since(start)

	res := &Result{Command: in.Command, Cwd: rel, TimedOut: timedOut, TimeoutSeconds: timeout.Seconds()}
	if exited {
		res.BackgroundStopped = stopGroup(pgid, grace)
	} else {
		stopGroup(pgid, grace)
		select {
		case waitErr = <-waited:
		case <-time.After(killWait):
			outR.Close()
			errR.Close()
			readers.Wait()
			return nil, engine.ToolErrorf(engine.ToolCodeFailed,
				"the command's shell (process %d) did not exit %s after SIGKILL; it is probably stuck in the kernel (for example on a hung network filesystem)",
				pgid, killWait)
		}
		elapsed = time.Since(start)
	}

	// The group is gone; its pipe ends are closed. Only a process that
	// left the group can still hold them open.
	drained := make(chan struct{})
	go func() { readers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(grace):
		res.OutputIncomplete = true
		outR.Close()
		errR.Close()
		<-drained
	}

	if !exited && !timedOut {
		t.opts.Logger.Debug("run_command cancelled", "command", in.Command, "cwd", rel, "duration", elapsed)
		return nil, ctxError(ctx.Err(), elapsed)
	}
	if exited && status != nil {
		// The launcher has exited, so its end of the pipe is closed.
		if msg := <-status; msg != "" {
			return nil, engine.ToolErrorf(engine.ToolCodeFailed, "the sandbox launcher failed, so the command did not run: %s", msg)
		}
	}

	code, sig, err := exitStatus(waitErr)
	if err != nil {
		return nil, engine.ToolErrorf(engine.ToolCodeFailed, "waiting for the command failed: %v", err)
	}
	res.ExitCode, res.Signal = code, sig
	res.Sandbox, res.Env = plan.desc, envNames
	res.DurationMS = elapsed.Milliseconds()
	res.Stdout, res.Stderr = stdout.text(), stderr.text()
	res.StdoutTruncatedBytes, res.StderrTruncatedBytes = stdout.dropped, stderr.dropped
	res.lines = stdout.lineCount() + stderr.lineCount()
	t.opts.Logger.Debug("run_command finished", "command", in.Command, "cwd", rel,
		"exit_code", code, "signal", sig, "timed_out", timedOut, "duration", elapsed)
	return res, nil
}

// exitStatus turns the error of exec.Cmd.Wait into an exit code and, when a
// signal killed the process, the signal's name. err is returned when the
// process could not be waited for at all.
func exitStatus(waitErr error) (code int, signal string, err error) {
	if waitErr == nil {
		return 0, "", nil
	}
	var ee *exec.ExitError
	if !errors.As(waitErr, &ee) {
		return 0, "", waitErr
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), signalName(ws.Signal()), nil
	}
	return ee.ExitCode(), "", nil
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
	syscall.SIGILL: "SIGILL", syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT",
	syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
	syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
	syscall.SIGXCPU: "SIGXCPU", syscall.SIGXFSZ: "SIGXFSZ", syscall.SIGSYS: "SIGSYS",
}

// signalName is the conventional name of sig ("SIGKILL"), or "signal N".
func signalName(sig syscall.Signal) string {
	if name, ok := signalNames[sig]; ok {
		return name
	}
	return fmt.Sprintf("signal %d", int(sig))
}

// stopGroup ends the processes of group pgid that are still running:
// SIGTERM (and SIGCONT, so stopped processes see it), up to grace for them
// to exit, then SIGKILL and up to killWait for them to go. It reports
// whether any process was still running.
func stopGroup(pgid int, grace time.Duration) bool {
	if !groupAlive(pgid) {
		return false
	}
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	_ = syscall.Kill(-pgid, syscall.SIGCONT)
	if waitGroupGone(pgid, grace) {
		return true
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	waitGroupGone(pgid, killWait)
	return true
}

// waitGroupGone polls until no process of group pgid is running or d has
// passed, and reports which.
func waitGroupGone(pgid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if !groupAlive(pgid) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pollInterval)
	}
}

// summary is the one human line of a result, such as "exit 0 in 1.2s,
// 3 lines of output" or "timed out after 60s, no output".
func (r *Result) summary() string {
	var b strings.Builder
	dur := time.Duration(r.DurationMS) * time.Millisecond
	switch {
	case r.TimedOut:
		fmt.Fprintf(&b, "timed out after %s", formatDuration(time.Duration(r.TimeoutSeconds*float64(time.Second))))
	case r.Signal != "":
		fmt.Fprintf(&b, "killed by %s after %s", r.Signal, formatDuration(dur))
	default:
		fmt.Fprintf(&b, "exit %d in %s", r.ExitCode, formatDuration(dur))
	}
	switch r.lines {
	case 0:
		b.WriteString(", no output")
	case 1:
		b.WriteString(", 1 line of output")
	default:
		fmt.Fprintf(&b, ", %d lines of output", r.lines)
	}
	if dropped := r.StdoutTruncatedBytes + r.StderrTruncatedBytes; dropped > 0 {
		fmt.Fprintf(&b, " (%s past the limit dropped)", formatBytes(dropped))
	}
	if r.BackgroundStopped {
		b.WriteString("; background processes stopped")
	}
	if r.OutputIncomplete {
		b.WriteString("; output incomplete (a detached process kept it open)")
	}
	if strings.HasPrefix(r.Sandbox, string(kindNone)+":") {
		b.WriteString("; not sandboxed")
	}
	return b.String()
}

// formatDuration renders d for people: "35ms", "1.2s", "60s", "10m0s".
func formatDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < 120*time.Second:
		return fmt.Sprintf("%ds", int64(d.Round(time.Second)/time.Second))
	}
	return d.Round(time.Second).String()
}

// formatBytes renders n bytes for people: "512 bytes", "1.5 KiB", "3.0 MiB".
func formatBytes(n int64) string {
	switch {
	case n == 1:
		return "1 byte"
	case n < 1<<10:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

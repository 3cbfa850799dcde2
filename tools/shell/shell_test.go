package shell

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/plexus-agent/plexus/engine"
)

// testGrace is the SIGTERM-to-SIGKILL grace the tests use, short to keep
// them fast.
const testGrace = 300 * time.Millisecond

// call is the outcome of one Invoke.
type call struct {
	res      Result
	summary  string
	updates  []chunk  // the outputs
	progress []string // the progress messages
	// progressFirst is true when every progress message came before the
	// first output.
	progressFirst bool
	err           error
	elapsed       time.Duration
	returned      time.Time
	first         time.Time // when the first output arrived
}

// streamed concatenates the updates of one stream.
func (c call) streamed(stream string) string {
	var b strings.Builder
	for _, u := range c.updates {
		if u.stream == stream {
			b.WriteString(u.text)
		}
	}
	return b.String()
}

func invoke(ctx context.Context, t *testing.T, tools *Tools, root, args string) call {
	t.Helper()
	return invokeWith(ctx, t, tools, root, args, nil)
}

// invokeWith is invoke with the host's per-call settings.
func invokeWith(ctx context.Context, t *testing.T, tools *Tools, root, args string, settings map[string]string) call {
	t.Helper()
	var (
		c   call
		mu  sync.Mutex
		in  bool // an onUpdate is running
		bad string
	)
	start := time.Now()
	c.progressFirst = true
	res, err := tools.Invoke(ctx, engine.InvokeRequest{CallID: "c1", Tool: ToolName, Args: json.RawMessage(args), WorkspaceRoot: root, Settings: settings},
		func(u engine.ToolUpdate) {
			mu.Lock()
			if in {
				bad = "onUpdate called concurrently"
			}
			in = true
			mu.Unlock()
			defer func() { mu.Lock(); in = false; mu.Unlock() }()
			if p := u.Progress; p != nil && u.Output == nil {
				if p.Message == "" || p.Percentage != nil {
					bad = fmt.Sprintf("progress %+v is not a message", p)
				}
				mu.Lock()
				c.progress = append(c.progress, p.Message)
				c.progressFirst = c.progressFirst && len(c.updates) == 0
				mu.Unlock()
				return
			}
			switch {
			case u.Output == nil || u.Progress != nil:
				bad = fmt.Sprintf("update %+v is neither one output nor one progress message", u)
			case !utf8.ValidString(u.Output.Text):
				bad = fmt.Sprintf("chunk %q is not valid UTF-8", u.Output.Text)
			case u.Output.Text == "":
				bad = "empty chunk"
			}
			mu.Lock()
			if c.first.IsZero() {
				c.first = time.Now()
			}
			c.updates = append(c.updates, chunk{u.Output.Stream, u.Output.Text})
			mu.Unlock()
		})
	c.returned = time.Now()
	c.elapsed = c.returned.Sub(start)
	mu.Lock()
	defer mu.Unlock()
	if bad != "" {
		t.Error(bad)
	}
	c.err = err
	if err == nil {
		c.summary = res.Summary
		if err := json.Unmarshal(res.Content, &c.res); err != nil {
			t.Fatalf("result %s: %v", res.Content, err)
		}
		if got := c.streamed("stdout"); got != c.res.Stdout {
			t.Errorf("streamed stdout %q != result stdout %q", got, c.res.Stdout)
		}
		if got := c.streamed("stderr"); got != c.res.Stderr {
			t.Errorf("streamed stderr %q != result stderr %q", got, c.res.Stderr)
		}
	}
	return c
}

func args(command string, extra ...string) string {
	b, _ := json.Marshal(command)
	return `{"command": ` + string(b) + strings.Join(extra, "") + `}`
}

func toolCode(err error) engine.ToolErrorCode {
	var te *engine.ToolError
	if errors.As(err, &te) {
		return te.Code
	}
	return ""
}

// processState returns the state letter of a process from /proc ('R',
// 'S', 'Z', ...) and its process group, or ok false when it is gone.
func processState(pid int) (state byte, pgrp int, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndex(s, ")")+1:])
	pgrp, _ = strconv.Atoi(f[2])
	return f[0][0], pgrp, true
}

// running reports whether pid exists and is not a zombie.
func running(pid int) bool {
	state, _, ok := processState(pid)
	return ok && state != 'Z' && state != 'X'
}

// groupMembers lists the running (non-zombie) processes of group pgid.
func groupMembers(t *testing.T, pgid int) []int {
	t.Helper()
	if errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) {
		return nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("read /proc: %v", err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if state, pgrp, ok := processState(pid); ok && pgrp == pgid && state != 'Z' && state != 'X' {
			pids = append(pids, pid)
		}
	}
	return pids
}

// pids parses the whole-number lines of out.
func pids(t *testing.T, out string) []int {
	t.Helper()
	var ps []int
	for line := range strings.Lines(out) {
		n, err := strconv.Atoi(strings.TrimSpace(line))
		if err != nil {
			t.Fatalf("line %q of %q is not a pid", line, out)
		}
		ps = append(ps, n)
	}
	return ps
}

// assertStopped checks that no process of group pgid and none of the pids
// is running.
func assertStopped(t *testing.T, pgid int, others []int) {
	t.Helper()
	if m := groupMembers(t, pgid); len(m) > 0 {
		t.Errorf("processes %v of group %d are still running", m, pgid)
		for _, p := range m {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
	for _, p := range others {
		if running(p) {
			t.Errorf("process %d is still running", p)
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
}

func newTools() *Tools { return New(Options{KillGrace: testGrace}) }

func TestExitCodes(t *testing.T) {
	tests := []struct {
		command    string
		wantCode   int
		wantSignal string
		wantStderr string
	}{
		{"true", 0, "", ""},
		{"false", 1, "", ""},
		{"exit 3", 3, "", ""},
		{"exit 255", 255, "", ""},
		{"echo oops >&2; exit 2", 2, "", "oops\n"},
		{"kill -KILL $$", 137, "SIGKILL", ""},
		{"kill -TERM $$", 143, "SIGTERM", ""},
		{"plexus_no_such_command_xyz", 127, "", "not found"},
	}
	ws := t.TempDir()
	for _, tt := range tests {
		t.Run(tt.command, func(t *testing.T) {
			c := invoke(t.Context(), t, newTools(), ws, args(tt.command))
			if c.err != nil {
				t.Fatalf("Invoke: %v", c.err)
			}
			if c.res.ExitCode != tt.wantCode || c.res.Signal != tt.wantSignal {
				t.Errorf("exit %d signal %q, want %d %q", c.res.ExitCode, c.res.Signal, tt.wantCode, tt.wantSignal)
			}
			if !strings.Contains(c.res.Stderr, tt.wantStderr) {
				t.Errorf("stderr %q, want it to contain %q", c.res.Stderr, tt.wantStderr)
			}
			if c.res.TimedOut || c.res.Command != tt.command || c.res.Cwd != "." {
				t.Errorf("result %+v", c.res)
			}
			wantSummary := fmt.Sprintf("exit %d in ", tt.wantCode)
			if tt.wantSignal != "" {
				wantSummary = "killed by " + tt.wantSignal
			}
			if !strings.HasPrefix(c.summary, wantSummary) {
				t.Errorf("summary %q, want prefix %q", c.summary, wantSummary)
			}
		})
	}
}

func TestStreaming(t *testing.T) {
	c := invoke(t.Context(), t, newTools(), t.TempDir(),
		args(`printf 'a\n'; sleep 0.3; printf 'b\n' >&2; sleep 0.3; printf 'c'`))
	if c.err != nil {
		t.Fatal(c.err)
	}
	want := []chunk{{"stdout", "a\n"}, {"stderr", "b\n"}, {"stdout", "c"}}
	if fmt.Sprint(c.updates) != fmt.Sprint(want) {
		t.Errorf("updates = %q, want %q", c.updates, want)
	}
	if c.res.Stdout != "a\nc" || c.res.Stderr != "b\n" || c.res.ExitCode != 0 {
		t.Errorf("result %+v", c.res)
	}
	// The first chunk must arrive while the command runs, not at its end.
	if early := c.returned.Sub(c.first); early < 400*time.Millisecond {
		t.Errorf("first output arrived %s before Invoke returned; want it streamed as written (≥400ms before)", early)
	}
	if !strings.HasSuffix(c.summary, ", 3 lines of output") {
		t.Errorf("summary %q", c.summary)
	}
}

func TestStdinIsEmpty(t *testing.T) {
	c := invoke(t.Context(), t, newTools(), t.TempDir(), args(`cat; echo "read $?"`))
	if c.err != nil {
		t.Fatal(c.err)
	}
	if c.res.Stdout != "read 0\n" {
		t.Errorf("stdout %q, want cat to see end of input at once", c.res.Stdout)
	}
}

func TestCwd(t *testing.T) {
	ws := t.TempDir()
	outside := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "sub", "deeper"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "file.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub", filepath.Join(ws, "inside")); err != nil {
		t.Fatal(err)
	}
	realWS, err := filepath.EvalSymlinks(ws)
	if err != nil {
		t.Fatal(err)
	}
	// os.Root refuses absolute symlinks even when they point inside.
	if err := os.Symlink(filepath.Join(realWS, "sub", "deeper"), filepath.Join(ws, "abslink")); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		cwd      string
		wantRel  string // on success
		wantPwd  string // pwd -P, on success
		wantCode engine.ToolErrorCode
	}{
		{"default is the root", "", ".", realWS, ""},
		{"dot", ".", ".", realWS, ""},
		{"relative", "sub", "sub", filepath.Join(realWS, "sub"), ""},
		{"nested", "sub/deeper", "sub/deeper", filepath.Join(realWS, "sub", "deeper"), ""},
		{"dot-dot inside", "sub/deeper/..", "sub", filepath.Join(realWS, "sub"), ""},
		{"absolute inside", filepath.Join(ws, "sub"), "sub", filepath.Join(realWS, "sub"), ""},
		{"symlink inside", "inside", "inside", filepath.Join(realWS, "sub"), ""},
		{"absolute symlink inside", "abslink", "abslink", filepath.Join(realWS, "sub", "deeper"), ""},
		{"climbs out", "..", "", "", engine.ToolCodePermissionDenied},
		{"climbs out through sub", "sub/../../x", "", "", engine.ToolCodePermissionDenied},
		{"absolute outside", outside, "", "", engine.ToolCodePermissionDenied},
		{"root of filesystem", "/", "", "", engine.ToolCodePermissionDenied},
		{"symlink escape", "escape", "", "", engine.ToolCodePermissionDenied},
		{"below symlink escape", "escape/x", "", "", engine.ToolCodePermissionDenied},
		{"missing", "nope", "", "", engine.ToolCodeNotFound},
		{"a file", "file.txt", "", "", engine.ToolCodeInvalidInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			marker := filepath.Join(outside, "ran")
			a := args("pwd -P; touch "+marker, `, "cwd": `+strconv.Quote(tt.cwd))
			c := invoke(t.Context(), t, newTools(), ws, a)
			if tt.wantCode != "" {
				if got := toolCode(c.err); got != tt.wantCode {
					t.Fatalf("err = %v (code %q), want code %s", c.err, got, tt.wantCode)
				}
				if !strings.Contains(c.err.Error(), "cwd") {
					t.Errorf("message %q does not name cwd", c.err)
				}
				if tt.wantCode == engine.ToolCodePermissionDenied && !errors.Is(c.err, engine.ErrPermissionDenied) {
					t.Errorf("errors.Is(err, ErrPermissionDenied) = false")
				}
				if _, err := os.Stat(marker); err == nil {
					t.Errorf("the command ran although cwd was refused")
				}
				return
			}
			if c.err != nil {
				t.Fatalf("Invoke: %v", c.err)
			}
			if got := strings.TrimSpace(c.res.Stdout); got != tt.wantPwd {
				t.Errorf("pwd = %q, want %q", got, tt.wantPwd)
			}
			if c.res.Cwd != tt.wantRel {
				t.Errorf("result cwd = %q, want %q", c.res.Cwd, tt.wantRel)
			}
			os.Remove(marker)
		})
	}
}

func TestOutputCap(t *testing.T) {
	tests := []struct {
		name                      string
		command                   string
		max                       int
		wantStdout, wantStderr    string
		wantDroppedOut, wantDrErr int64
	}{
		{"stdout capped", `head -c 100000 /dev/zero | tr '\0' a`, 1000, strings.Repeat("a", 1000), "", 99000, 0},
		{"streams capped separately", `printf 0123456789 >&2; printf ab`, 5, "ab", "01234", 0, 5},
		{"exact fit", `printf 12345`, 5, "12345", "", 0, 0},
		{"cap does not split a rune", `printf '\342\202\254\342\202\254\342\202\254'`, 4, "€", "", 6, 0},
		{"invalid UTF-8 replaced", `printf 'a\377b'`, 100, "a\uFFFDb", "", 0, 0},
	}
	ws := t.TempDir()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := invoke(t.Context(), t, newTools(), ws, args(tt.command, fmt.Sprintf(`, "max_output_bytes": %d`, tt.max)))
			if c.err != nil {
				t.Fatal(c.err)
			}
			if c.res.Stdout != tt.wantStdout || c.res.Stderr != tt.wantStderr {
				t.Errorf("stdout %q stderr %q, want %q %q", c.res.Stdout, c.res.Stderr, tt.wantStdout, tt.wantStderr)
			}
			if c.res.StdoutTruncatedBytes != tt.wantDroppedOut || c.res.StderrTruncatedBytes != tt.wantDrErr {
				t.Errorf("truncated %d/%d bytes, want %d/%d", c.res.StdoutTruncatedBytes, c.res.StderrTruncatedBytes, tt.wantDroppedOut, tt.wantDrErr)
			}
			if dropped := tt.wantDroppedOut + tt.wantDrErr; dropped > 0 && !strings.Contains(c.summary, "dropped") {
				t.Errorf("summary %q does not mention dropped output", c.summary)
			}
		})
	}
}

// TestTimeout checks that a timeout stops the whole process tree, including
// background grandchildren and processes that ignore SIGTERM, and returns
// the output so far.
func TestTimeout(t *testing.T) {
	tests := []struct {
		name       string
		command    string
		wantSignal string
		minElapsed time.Duration
	}{
		{"background grandchildren", `echo $$; sleep 30 & echo $!; sleep 30 & echo $!; wait`, "SIGTERM", time.Second},
		{"grandchildren ignoring SIGTERM", `trap '' TERM; echo $$; sleep 30 & echo $!; (trap '' TERM; sleep 30) & echo $!; wait`, "SIGKILL", time.Second + testGrace},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := invoke(t.Context(), t, newTools(), t.TempDir(), args(tt.command, `, "timeout_seconds": 1`))
			if c.err != nil {
				t.Fatalf("Invoke: %v (a timeout is a successful call)", c.err)
			}
			ps := pids(t, c.res.Stdout)
			if len(ps) != 3 {
				t.Fatalf("stdout %q, want the shell's and two background pids (the output so far)", c.res.Stdout)
			}
			assertStopped(t, ps[0], ps[1:])
			if !c.res.TimedOut || c.res.TimeoutSeconds != 1 || c.res.Signal != tt.wantSignal {
				t.Errorf("timed_out %v timeout %v signal %q, want true 1 %q", c.res.TimedOut, c.res.TimeoutSeconds, c.res.Signal, tt.wantSignal)
			}
			if c.elapsed < tt.minElapsed || c.elapsed > tt.minElapsed+2*time.Second {
				t.Errorf("Invoke took %s, want about %s", c.elapsed, tt.minElapsed)
			}
			if !strings.HasPrefix(c.summary, "timed out after 1.0s, 3 lines of output") {
				t.Errorf("summary %q", c.summary)
			}
		})
	}
}

func TestCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var (
		mu  sync.Mutex
		out strings.Builder
	)
	tools := newTools()
	start := time.Now()
	_, err := tools.Invoke(ctx, engine.InvokeRequest{Tool: ToolName, WorkspaceRoot: t.TempDir(),
		Args: json.RawMessage(args(`echo $$; sleep 30 & echo $!; sleep 30 & echo $!; wait`))},
		func(u engine.ToolUpdate) {
			mu.Lock()
			defer mu.Unlock()
			out.WriteString(u.Output.Text)
			if strings.Count(out.String(), "\n") == 3 {
				cancel()
			}
		})
	elapsed := time.Since(start)
	if got := toolCode(err); got != engine.ToolCodeCancelled {
		t.Fatalf("err = %v (code %q), want code cancelled", err, got)
	}
	if !strings.Contains(err.Error(), "cancelled") {
		t.Errorf("message %q", err)
	}
	if elapsed > 5*time.Second {
		t.Errorf("Invoke took %s after cancellation", elapsed)
	}
	mu.Lock()
	ps := pids(t, out.String())
	mu.Unlock()
	if len(ps) != 3 {
		t.Fatalf("output %v, want three pids", ps)
	}
	assertStopped(t, ps[0], ps[1:])
}

func TestCancelledBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	marker := filepath.Join(t.TempDir(), "ran")
	c := invoke(ctx, t, newTools(), t.TempDir(), args("touch "+marker))
	if got := toolCode(c.err); got != engine.ToolCodeCancelled {
		t.Fatalf("err = %v, want code cancelled", c.err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran although the call was cancelled")
	}
}

// TestCallerDeadline checks that a caller's deadline nearer than the
// command's timeout stops the command early enough to return its output,
// and that a deadline too near for that gives a timeout error.
func TestCallerDeadline(t *testing.T) {
	t.Run("room for the result", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), 2500*time.Millisecond)
		defer cancel()
		c := invoke(ctx, t, newTools(), t.TempDir(), args(`echo $$; sleep 30`))
		if c.err != nil {
			t.Fatalf("Invoke: %v", c.err)
		}
		if ctx.Err() != nil {
			t.Errorf("Invoke returned after the caller's deadline (%s)", c.elapsed)
		}
		if !c.res.TimedOut || c.res.TimeoutSeconds >= 1.3 || c.res.TimeoutSeconds < 1 {
			t.Errorf("timed_out %v timeout %v, want true and about 1.2 (2.5s - grace - 1s)", c.res.TimedOut, c.res.TimeoutSeconds)
		}
		assertStopped(t, pids(t, c.res.Stdout)[0], nil)
	})
	t.Run("too near", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		var mu sync.Mutex
		var out strings.Builder
		_, err := newTools().Invoke(ctx, engine.InvokeRequest{Tool: ToolName, WorkspaceRoot: t.TempDir(),
			Args: json.RawMessage(args(`echo $$; sleep 30`))},
			func(u engine.ToolUpdate) { mu.Lock(); out.WriteString(u.Output.Text); mu.Unlock() })
		if got := toolCode(err); got != engine.ToolCodeTimeout {
			t.Fatalf("err = %v (code %q), want code timeout", err, got)
		}
		mu.Lock()
		defer mu.Unlock()
		assertStopped(t, pids(t, out.String())[0], nil)
	})
}

func TestBackgroundProcessesStopped(t *testing.T) {
	c := invoke(t.Context(), t, newTools(), t.TempDir(), args(`echo $$; sleep 30 & echo $!`))
	if c.err != nil {
		t.Fatal(c.err)
	}
	ps := pids(t, c.res.Stdout)
	if len(ps) != 2 {
		t.Fatalf("stdout %q", c.res.Stdout)
	}
	assertStopped(t, ps[0], ps[1:])
	if c.res.ExitCode != 0 || c.res.TimedOut || !c.res.BackgroundStopped || c.res.OutputIncomplete {
		t.Errorf("result %+v, want exit 0 with background_stopped", c.res)
	}
	if c.elapsed > testGrace+time.Second {
		t.Errorf("Invoke took %s; the background sleep held it up", c.elapsed)
	}
	if !strings.HasSuffix(c.summary, "; background processes stopped") {
		t.Errorf("summary %q", c.summary)
	}
}

// TestDetachedProcessHoldingOutput checks that a process that left the
// group and keeps the output pipes open does not hang the call.
func TestDetachedProcessHoldingOutput(t *testing.T) {
	if _, err := os.Stat("/usr/bin/setsid"); err != nil {
		t.Skip("setsid(1) is not installed")
	}
	// Wait until the detached sleep has left the shell's group, so that
	// the outcome does not depend on which runs first.
	cmd := `setsid sleep 30 & pid=$!
until [ "$(cut -d' ' -f5 /proc/$pid/stat)" != "$$" ]; do sleep 0.01; done
echo $pid`
	c := invoke(t.Context(), t, newTools(), t.TempDir(), args(cmd))
	if c.err != nil {
		t.Fatal(c.err)
	}
	ps := pids(t, c.res.Stdout)
	if len(ps) != 1 {
		t.Fatalf("stdout %q", c.res.Stdout)
	}
	t.Cleanup(func() { _ = syscall.Kill(ps[0], syscall.SIGKILL) })
	if !c.res.OutputIncomplete || c.res.BackgroundStopped || c.res.ExitCode != 0 {
		t.Errorf("result %+v, want exit 0 with output_incomplete", c.res)
	}
	if c.elapsed < testGrace || c.elapsed > testGrace+2*time.Second {
		t.Errorf("Invoke took %s, want about the grace %s", c.elapsed, testGrace)
	}
}

func TestStartFailure(t *testing.T) {
	tools := New(Options{Shell: "/nonexistent/sh", KillGrace: testGrace})
	c := invoke(t.Context(), t, tools, t.TempDir(), args("true"))
	if got := toolCode(c.err); got != engine.ToolCodeFailed {
		t.Fatalf("err = %v (code %q), want code failed", c.err, got)
	}
	if !strings.Contains(c.err.Error(), "/nonexistent/sh") {
		t.Errorf("message %q does not name the shell", c.err)
	}
}

func TestRequestErrors(t *testing.T) {
	ws := t.TempDir()
	tests := []struct {
		name     string
		req      engine.InvokeRequest
		wantCode engine.ToolErrorCode
		wantText string
	}{
		{"unknown tool", engine.InvokeRequest{Tool: "read_file", Args: json.RawMessage(args("true")), WorkspaceRoot: ws},
			engine.ToolCodeUnknownTool, "run_command"},
		{"no workspace", engine.InvokeRequest{Tool: ToolName, Args: json.RawMessage(args("true"))},
			engine.ToolCodeFailed, "workspace"},
		{"missing workspace", engine.InvokeRequest{Tool: ToolName, Args: json.RawMessage(args("true")), WorkspaceRoot: filepath.Join(ws, "gone")},
			engine.ToolCodeNotFound, "workspace"},
		{"invalid input", engine.InvokeRequest{Tool: ToolName, Args: json.RawMessage(`{"cmd": "ls"}`), WorkspaceRoot: ws},
			engine.ToolCodeInvalidInput, `unknown field "cmd"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newTools().Invoke(t.Context(), tt.req, func(engine.ToolUpdate) { t.Error("unexpected update") })
			if got := toolCode(err); got != tt.wantCode {
				t.Fatalf("err = %v (code %q), want code %s", err, got, tt.wantCode)
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("message %q, want it to contain %q", err, tt.wantText)
			}
		})
	}
}

func TestConcurrentCalls(t *testing.T) {
	tools := newTools()
	ws := t.TempDir()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			c := invoke(t.Context(), t, tools, ws, args(fmt.Sprintf("echo out%d; echo err%d >&2; sleep 0.1; echo out%d", i, i, i)))
			if c.err != nil {
				t.Errorf("call %d: %v", i, c.err)
				return
			}
			if want := fmt.Sprintf("out%d\nout%d\n", i, i); c.res.Stdout != want {
				t.Errorf("call %d stdout %q, want %q", i, c.res.Stdout, want)
			}
			if want := fmt.Sprintf("err%d\n", i); c.res.Stderr != want {
				t.Errorf("call %d stderr %q, want %q", i, c.res.Stderr, want)
			}
		})
	}
	wg.Wait()
}

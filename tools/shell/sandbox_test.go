package shell

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

// shellQuote quotes s for /bin/sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// sandboxedTools returns Tools with opts and the test grace, or skips t
// naming why the system lacks the sandbox opts.Sandbox asks for.
func sandboxedTools(t *testing.T, opts Options) *Tools {
	t.Helper()
	opts.KillGrace = testGrace
	tools := New(opts)
	if tools.sandbox.err != "" {
		t.Skipf("skipping: %s", tools.sandbox.err)
	}
	return tools
}

// runOps runs each op's shell command in a subshell and returns the exit
// status of each by name, the command's TMPDIR and the call.
func runOps(t *testing.T, tools *Tools, ws string, ops []sandboxOp) (rcs map[string]int, tmp string, c call) {
	t.Helper()
	var script strings.Builder
	for _, op := range ops {
		fmt.Fprintf(&script, "( %s ); echo \"@%s=$?\"\n", op.cmd, op.name)
	}
	script.WriteString(`echo "@TMPDIR=$TMPDIR"` + "\n")
	c = invoke(t.Context(), t, tools, ws, args(script.String(), `, "timeout_seconds": 60`))
	if c.err != nil {
		t.Fatalf("Invoke: %v", c.err)
	}
	rcs = map[string]int{}
	for line := range strings.Lines(c.res.Stdout) {
		name, val, ok := strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, "@")), "=")
		if !ok || !strings.HasPrefix(line, "@") {
			continue
		}
		if name == "TMPDIR" {
			tmp = val
			continue
		}
		n, err := strconv.Atoi(val)
		if err != nil {
			t.Fatalf("line %q", line)
		}
		rcs[name] = n
	}
	return rcs, tmp, c
}

// sandboxOp is one operation of a sandbox test: a shell command and
// whether it must succeed.
type sandboxOp struct {
	name, cmd string
	ok        bool
}

// sandboxModes are the sandboxes the suite runs against.
var sandboxModes = []SandboxMode{SandboxLandlock, SandboxBubblewrap}

// TestSandboxFilesystem checks, in every sandbox this system has, that a
// command writes inside the workspace and its TMPDIR, and nowhere else:
// not in another directory, not through a symlink leading out, not next
// to its TMPDIR; and that the TMPDIR is gone afterwards.
func TestSandboxFilesystem(t *testing.T) {
	for _, mode := range sandboxModes {
		t.Run(string(mode), func(t *testing.T) {
			tools := sandboxedTools(t, Options{Sandbox: mode})
			ws, outside := t.TempDir(), t.TempDir()
			existing := filepath.Join(outside, "existing")
			if err := os.WriteFile(existing, []byte("original"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ws, "keep.txt"), []byte("k"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, filepath.Join(ws, "escape")); err != nil {
				t.Fatal(err)
			}
			// Next to the command's TMPDIR, in the same parent.
			sibling := filepath.Join(os.TempDir(), fmt.Sprintf("plexus-sandbox-test-%d-%s", os.Getpid(), mode))
			t.Cleanup(func() { os.Remove(sibling) })
			out := shellQuote(outside)
			ops := []sandboxOp{
				{"write in workspace", `echo in > made.txt`, true},
				{"mkdir in workspace", `mkdir -p sub/deeper && echo x > sub/deeper/f`, true},
				{"rename between workspace dirs", `mv sub/deeper/f moved.txt`, true},
				{"remove in workspace", `rm keep.txt`, true},
				{"write in TMPDIR", `echo tmp > "$TMPDIR/t" && test "$(cat "$TMPDIR/t")" = tmp`, true},
				{"write /dev/null", `echo x > /dev/null`, true},
				{"write /dev/stderr", `echo x > /dev/stderr`, true},
				{"create outside", `echo x > ` + out + `/planted`, false},
				{"overwrite outside", `echo x > ` + out + `/existing`, false},
				{"append outside", `echo x >> ` + out + `/existing`, false},
				{"remove outside", `rm -f ` + out + `/existing`, false},
				{"mkdir outside", `mkdir ` + out + `/dir`, false},
				{"move out of the workspace", `mv made.txt ` + out + `/moved`, false},
				{"write through a symlink out", `echo x > escape/via-link`, false},
				{"write next to TMPDIR", `echo x > ` + shellQuote(sibling), false},
				{"block device in workspace", `mknod disk b 7 0`, false},
				{"character device in workspace", `mknod mem c 1 1`, false},
			}
			if tools.sandbox.kind != kindLandlock || tools.sandbox.abi >= 3 {
				ops = append(ops, sandboxOp{"truncate outside", `: > ` + out + `/existing`, false})
			}
			got, tmp, c := runOps(t, tools, ws, ops)
			for _, op := range ops {
				rc, ran := got[op.name]
				switch {
				case !ran:
					t.Errorf("%s: did not run; stdout %q stderr %q", op.name, c.res.Stdout, c.res.Stderr)
				case op.ok && rc != 0:
					t.Errorf("%s: exit %d, want success; stderr %q", op.name, rc, c.res.Stderr)
				case !op.ok && rc == 0:
					t.Errorf("%s: succeeded, want it refused", op.name)
				}
			}
			entries, err := os.ReadDir(outside)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 1 || entries[0].Name() != "existing" {
				t.Errorf("the directory outside holds %v, want only existing", entries)
			}
			if b, err := os.ReadFile(existing); err != nil || string(b) != "original" {
				t.Errorf("the file outside holds %q (%v), want it untouched", b, err)
			}
			if _, err := os.Lstat(sibling); err == nil {
				t.Errorf("%s was written next to TMPDIR", sibling)
			}
			for name, want := range map[string]string{"made.txt": "in\n", "moved.txt": "x\n"} {
				if b, err := os.ReadFile(filepath.Join(ws, name)); err != nil || string(b) != want {
					t.Errorf("workspace %s = %q (%v), want %q", name, b, err, want)
				}
			}
			if _, err := os.Stat(filepath.Join(ws, "keep.txt")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("keep.txt was not removed: %v", err)
			}
			checkTmpdirGone(t, tmp)
			if c.res.Sandbox != tools.sandbox.desc || !strings.HasPrefix(c.res.Sandbox, map[SandboxMode]string{SandboxLandlock: "landlock abi ", SandboxBubblewrap: "bubblewrap"}[mode]) {
				t.Errorf("result sandbox %q, plan %q", c.res.Sandbox, tools.sandbox.desc)
			}
			if tools.sandbox.warning == "" && len(c.progress) > 0 {
				t.Errorf("progress %q streamed for a complete sandbox", c.progress)
			}
		})
	}
}

// checkTmpdirGone checks that tmp is a private temporary directory of a
// command, and that it no longer exists.
func checkTmpdirGone(t *testing.T, tmp string) {
	t.Helper()
	parent, err := filepath.EvalSymlinks(os.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(tmp) != parent || !strings.HasPrefix(filepath.Base(tmp), "plexus-run-") {
		t.Errorf("TMPDIR = %q, want a plexus-run-* directory in %s", tmp, parent)
	}
	if _, err := os.Lstat(tmp); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("TMPDIR %s still exists after the command (%v)", tmp, err)
	}
}

// netTargets are a TCP listener and a UDP socket on 127.0.0.1 and a
// listener on an abstract Unix socket, which count what reaches them.
type netTargets struct {
	tcpAddr, udpAddr, abstract string
	accepted                   atomic.Int32 // TCP and abstract Unix
	datagrams                  atomic.Int32
}

func newNetTargets(t *testing.T) *netTargets {
	t.Helper()
	n := &netTargets{}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	n.tcpAddr = ln.Addr().String()
	n.abstract = fmt.Sprintf("plexus-test-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-"))
	un, err := net.Listen("unix", "@"+n.abstract)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { un.Close() })
	for _, l := range []net.Listener{ln, un} {
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				n.accepted.Add(1)
				c.Close()
			}
		}()
	}
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	n.udpAddr = pc.LocalAddr().String()
	go func() {
		b := make([]byte, 64)
		for {
			if _, _, err := pc.ReadFrom(b); err != nil {
				return
			}
			n.datagrams.Add(1)
		}
	}()
	return n
}

// TestSandboxNetwork checks, in every sandbox this system has, that a
// command cannot reach a TCP listener on 127.0.0.1 (not over TCP, not over
// Multipath TCP), cannot send it UDP, cannot listen on a TCP port and
// cannot reach an abstract Unix socket outside, while its own Unix
// sockets still work; and that with AllowNetwork it reaches the TCP and
// UDP listeners.
func TestSandboxNetwork(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// GORACE: a -race binary otherwise sleeps a second before exiting.
	probe := "GORACE=atexit_sleep_ms=0 " + shellQuote(exe) + " " + netProbeArg + " "
	for _, mode := range sandboxModes {
		t.Run(string(mode)+"/denied", func(t *testing.T) {
			tools := sandboxedTools(t, Options{Sandbox: mode})
			plan := tools.sandbox
			if plan.kind == kindLandlock && !plan.seccomp {
				t.Skipf("skipping: the Landlock sandbox cannot cut off the network here: %s", plan.warning)
			}
			n := newNetTargets(t)
			ops := []sandboxOp{
				{"tcp", probe + "tcp " + n.tcpAddr, false},
				{"mptcp", probe + "mptcp " + n.tcpAddr, false},
				{"unix", probe + `unix "$TMPDIR"`, true},
			}
			if plan.kind == kindBubblewrap || plan.abi >= 6 {
				// Landlock scopes them from ABI 6; bubblewrap's
				// network namespace has its own.
				ops = append(ops, sandboxOp{"abstract unix", probe + "abstract " + n.abstract, false})
			}
			if plan.seccomp && ioURingSetup() == nil {
				// io_uring could create sockets past seccomp.
				ops = append(ops, sandboxOp{"io_uring", probe + "iouring", false})
			}
			if mode == SandboxLandlock {
				// In bubblewrap's own network namespace listening is
				// allowed and reaches nobody; sending UDP succeeds
				// there and arrives nowhere (checked below).
				ops = append(ops, sandboxOp{"listen", probe + "listen", false}, sandboxOp{"udp", probe + "udp " + n.udpAddr, false})
			} else {
				ops = append(ops, sandboxOp{"udp", probe + "udp " + n.udpAddr + " || true", true})
			}
			got, _, c := runOps(t, tools, t.TempDir(), ops)
			for _, op := range ops {
				rc, ran := got[op.name]
				switch {
				case !ran:
					t.Errorf("%s: did not run; stdout %q stderr %q", op.name, c.res.Stdout, c.res.Stderr)
				case op.ok && rc != 0:
					t.Errorf("%s: exit %d, want success; stderr %q", op.name, rc, c.res.Stderr)
				case !op.ok && rc == 0:
					t.Errorf("%s: succeeded, want it refused; stderr %q", op.name, c.res.Stderr)
				}
			}
			time.Sleep(200 * time.Millisecond) // anything in flight lands
			if a, d := n.accepted.Load(), n.datagrams.Load(); a != 0 || d != 0 {
				t.Errorf("the listeners saw %d connections and %d datagrams, want none", a, d)
			}
			if !strings.Contains(c.res.Sandbox, "network") && mode == SandboxLandlock {
				t.Errorf("result sandbox %q does not say the network is restricted", c.res.Sandbox)
			}
		})
		t.Run(string(mode)+"/allowed", func(t *testing.T) {
			tools := sandboxedTools(t, Options{Sandbox: mode, AllowNetwork: true})
			n := newNetTargets(t)
			ops := []sandboxOp{
				{"tcp", probe + "tcp " + n.tcpAddr, true},
				{"udp", probe + "udp " + n.udpAddr, true},
				{"listen", probe + "listen", true},
				{"unix", probe + `unix "$TMPDIR"`, true},
			}
			got, _, c := runOps(t, tools, t.TempDir(), ops)
			for _, op := range ops {
				if rc, ran := got[op.name]; !ran || rc != 0 {
					t.Errorf("%s: exit %d (ran %v), want success; stderr %q", op.name, rc, ran, c.res.Stderr)
				}
			}
			deadline := time.Now().Add(2 * time.Second)
			for (n.accepted.Load() == 0 || n.datagrams.Load() == 0) && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if a, d := n.accepted.Load(), n.datagrams.Load(); a != 1 || d != 1 {
				t.Errorf("the listeners saw %d connections and %d datagrams, want 1 and 1", a, d)
			}
			if !strings.HasSuffix(c.res.Sandbox, "; network allowed") {
				t.Errorf("result sandbox %q does not say the network is allowed", c.res.Sandbox)
			}
		})
	}
}

// processesRunning lists the running processes whose command line is
// exactly argv.
func processesRunning(t *testing.T, argv ...string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join(argv, "\x00") + "\x00"
	var found []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && string(b) == want && running(pid) {
			found = append(found, pid)
		}
	}
	return found
}

// TestSandboxTimeout checks, in every sandbox this system has, that a
// command that runs past its timeout is stopped with every process it
// started, also ones that ignore SIGTERM, and that its TMPDIR is removed.
func TestSandboxTimeout(t *testing.T) {
	for i, mode := range sandboxModes {
		t.Run(string(mode), func(t *testing.T) {
			tools := sandboxedTools(t, Options{Sandbox: mode})
			// Durations no other test uses, to find the processes by
			// their command line (in bubblewrap's PID namespace $$ and
			// $! are not the PIDs seen from here).
			sleeps := []string{fmt.Sprintf("41.%d1", i), fmt.Sprintf("42.%d1", i), fmt.Sprintf("43.%d1", i)}
			cmd := fmt.Sprintf(`echo "$TMPDIR"; sleep %s & (trap '' TERM; sleep %s) & trap '' TERM; sleep %s; wait`, sleeps[0], sleeps[1], sleeps[2])
			c := invoke(t.Context(), t, tools, t.TempDir(), args(cmd, `, "timeout_seconds": 1`))
			if c.err != nil {
				t.Fatalf("Invoke: %v (a timeout is a successful call)", c.err)
			}
			// The shell ignores SIGTERM, so under Landlock (where the
			// shell is the process run_command started) SIGKILL ends
			// it; bwrap, which run_command starts instead, dies of
			// SIGTERM and takes its namespace with it.
			wantSignal := map[SandboxMode]string{SandboxLandlock: "SIGKILL", SandboxBubblewrap: "SIGTERM"}[mode]
			if !c.res.TimedOut || c.res.Signal != wantSignal {
				t.Errorf("timed_out %v exit %d signal %q, want a timeout ended by %s", c.res.TimedOut, c.res.ExitCode, c.res.Signal, wantSignal)
			}
			for _, s := range sleeps {
				if left := processesRunning(t, "sleep", s); len(left) > 0 {
					t.Errorf("sleep %s still runs as %v", s, left)
					for _, p := range left {
						_ = syscall.Kill(p, syscall.SIGKILL)
					}
				}
			}
			if c.elapsed > time.Second+testGrace+2*time.Second {
				t.Errorf("Invoke took %s", c.elapsed)
			}
			checkTmpdirGone(t, strings.TrimSpace(c.res.Stdout))
		})
	}
}

// TestCommandEnvironment checks that a command gets only the allowed
// variables, whatever the sandbox: a secret in the plugin's environment
// (OPENAI_API_KEY) is absent, allowed names and prefixes pass, the proxy
// variables pass only with the network allowed, and Result.Env names
// exactly what the command got.
func TestCommandEnvironment(t *testing.T) {
	const canary = "sk-plexus-canary-3f9a"
	t.Setenv("OPENAI_API_KEY", canary)
	t.Setenv("PLEXUS_TEST_SECRET", canary)
	t.Setenv("LC_PLEXUS_TEST", "locale")
	t.Setenv("PLEXUS_EXTRA_ONE", "extra")
	t.Setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
	t.Setenv("TMPDIR", os.TempDir()) // replaced, never passed through
	tests := []struct {
		name      string
		opts      Options
		wantNames []string
		notNames  []string
	}{
		{"default", Options{},
			[]string{"PATH", "LC_PLEXUS_TEST", "PWD", "TMPDIR"},
			[]string{"OPENAI_API_KEY", "PLEXUS_TEST_SECRET", "PLEXUS_EXTRA_ONE", "HTTPS_PROXY"}},
		{"extra prefix", Options{EnvAllow: []string{"PLEXUS_EXTRA_*"}},
			[]string{"PLEXUS_EXTRA_ONE"},
			[]string{"OPENAI_API_KEY", "PLEXUS_TEST_SECRET", "HTTPS_PROXY"}},
		{"network allowed", Options{AllowNetwork: true},
			[]string{"HTTPS_PROXY"},
			[]string{"OPENAI_API_KEY", "PLEXUS_TEST_SECRET"}},
		{"no sandbox", Options{Sandbox: SandboxNone},
			[]string{"PATH", "PWD", "TMPDIR"},
			[]string{"OPENAI_API_KEY", "PLEXUS_TEST_SECRET", "HTTPS_PROXY"}},
	}
	// Variables the shell itself sets.
	shellSet := []string{"PWD", "OLDPWD", "SHLVL", "_"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.KillGrace = testGrace
			tools := New(tt.opts)
			ws := t.TempDir()
			c := invoke(t.Context(), t, tools, ws, args(`env -0; printf '\n@TMPDIR=%s\n' "$TMPDIR"`))
			if c.err != nil {
				t.Fatal(c.err)
			}
			body, tail, _ := strings.Cut(c.res.Stdout, "\n@TMPDIR=")
			vars := map[string]string{}
			for kv := range strings.SplitSeq(strings.TrimSuffix(body, "\x00"), "\x00") {
				name, val, _ := strings.Cut(kv, "=")
				vars[name] = val
			}
			filter := newEnvFilter(tt.opts.EnvAllow, tt.opts.AllowNetwork)
			for name := range vars {
				if !filter.allows(name) && !slices.Contains(shellSet, name) && name != "TMPDIR" {
					t.Errorf("the command got %s, which is not allowed", name)
				}
				if !slices.Contains(shellSet, name) && !slices.Contains(c.res.Env, name) {
					t.Errorf("the command got %s, but Result.Env %v does not name it", name, c.res.Env)
				}
			}
			for _, name := range c.res.Env {
				if _, ok := vars[name]; !ok {
					t.Errorf("Result.Env names %s, which the command did not get", name)
				}
			}
			if !slices.IsSorted(c.res.Env) {
				t.Errorf("Result.Env %v is not sorted", c.res.Env)
			}
			for _, name := range tt.wantNames {
				if _, ok := vars[name]; !ok {
					t.Errorf("the command did not get %s", name)
				}
			}
			for _, name := range tt.notNames {
				if _, ok := vars[name]; ok {
					t.Errorf("the command got %s", name)
				}
			}
			if strings.Contains(c.res.Stdout, canary) {
				t.Error("the secret's value reached the command")
			}
			tmp := strings.TrimSpace(tail)
			if vars["TMPDIR"] != tmp || tmp == os.TempDir() {
				t.Errorf("TMPDIR = %q, want the command's own directory", vars["TMPDIR"])
			}
			if real, _ := filepath.EvalSymlinks(ws); vars["PWD"] != real {
				t.Errorf("PWD = %q, want %q", vars["PWD"], real)
			}
			checkTmpdirGone(t, tmp)
		})
	}
}

// TestSandboxNoneWarns checks that with the sandbox turned off, a warning
// is streamed before the command's output, and the result and its summary
// say that the command was not sandboxed.
func TestSandboxNoneWarns(t *testing.T) {
	c := invoke(t.Context(), t, New(Options{Sandbox: SandboxNone, KillGrace: testGrace}), t.TempDir(), args("echo hi"))
	if c.err != nil {
		t.Fatal(c.err)
	}
	if len(c.progress) != 1 || !c.progressFirst {
		t.Fatalf("progress %q (before the output: %v), want one warning before the output", c.progress, c.progressFirst)
	}
	if w := c.progress[0]; !strings.HasPrefix(w, "warning: run_command is not sandboxed (disabled by options)") || !strings.Contains(w, "network") {
		t.Errorf("warning %q", w)
	}
	if c.res.Sandbox != "none: disabled by options" || c.res.Stdout != "hi\n" {
		t.Errorf("result %+v", c.res)
	}
	if !strings.HasSuffix(c.summary, "; not sandboxed") {
		t.Errorf("summary %q", c.summary)
	}
}

// TestSandboxLauncherFailure checks that when the launcher cannot set up
// the sandbox, the call fails and the command does not run.
func TestSandboxLauncherFailure(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	launcher := append([]string{exe}, launcherCommand...)
	tools := sandboxedTools(t, Options{Sandbox: SandboxLandlock, Launcher: append(launcher, "--write", "not/absolute")})
	marker := filepath.Join(t.TempDir(), "ran")
	c := invoke(t.Context(), t, tools, t.TempDir(), args("touch "+marker))
	if got := toolCode(c.err); got != engine.ToolCodeFailed {
		t.Fatalf("err = %v (code %q), want code failed", c.err, got)
	}
	if msg := c.err.Error(); !strings.Contains(msg, "sandbox launcher failed") || !strings.Contains(msg, "not/absolute") {
		t.Errorf("message %q", msg)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran")
	}
}

// TestChooseSandbox checks the choice of sandbox, its description and its
// warning for the systems Plexus may meet.
func TestChooseSandbox(t *testing.T) {
	launcher := []string{"/usr/bin/plexus", "plugin", "sandbox-exec"}
	full := sandboxProbe{landlockABI: 7, seccomp: true, launcher: launcher}
	noLandlock := sandboxProbe{landlockWhy: "the kernel has no Landlock support", seccomp: true, launcher: launcher}
	abi3 := sandboxProbe{landlockABI: 3, seccomp: true, launcher: launcher}
	abi3NoSeccomp := sandboxProbe{landlockABI: 3, seccompWhy: "seccomp filters are unavailable (EINVAL)", launcher: launcher}
	abi5NoSeccomp := sandboxProbe{landlockABI: 5, seccompWhy: "seccomp filters are unavailable (EINVAL)", launcher: launcher}
	abi2 := sandboxProbe{landlockABI: 2, seccomp: true, launcher: launcher}
	noLauncher := sandboxProbe{landlockABI: 7, seccomp: true, launcherWhy: "the plexus binary cannot be found"}
	const bwrapMissing = "bubblewrap is not installed"
	tests := []struct {
		name        string
		opts        Options
		probe       sandboxProbe
		bwrap       string // "" when missing
		wantKind    sandboxKind
		wantDesc    string
		wantWarning string // substring; "" means no warning
		wantErr     string // substring
		wantBwrap   bool   // bubblewrap was looked for
	}{
		{"landlock", Options{}, full, "/usr/bin/bwrap", kindLandlock, "landlock abi 7: filesystem and network", "", "", false},
		{"landlock with network", Options{AllowNetwork: true}, full, "", kindLandlock, "landlock abi 7: filesystem; network allowed", "", "", false},
		{"old landlock with seccomp", Options{}, abi3, "", kindLandlock, "landlock abi 3: filesystem and network", "", "", false},
		{"landlock without truncation", Options{}, abi2, "", kindLandlock, "landlock abi 2: filesystem (except truncation) and network", "truncated", "", false},
		{"landlock TCP only", Options{}, abi5NoSeccomp, "", kindLandlock, "landlock abi 5: filesystem and TCP", "UDP, Multipath TCP", "", false},
		{"no network rules: bubblewrap", Options{}, abi3NoSeccomp, "/usr/bin/bwrap", kindBubblewrap, "bubblewrap", "", "", true},
		{"no network rules, no bubblewrap", Options{}, abi3NoSeccomp, "", kindLandlock, "landlock abi 3: filesystem only", "the command can use the network", "", true},
		{"no network rules, network allowed", Options{AllowNetwork: true}, abi3NoSeccomp, "", kindLandlock, "landlock abi 3: filesystem; network allowed", "", "", false},
		{"no landlock: bubblewrap", Options{}, noLandlock, "/usr/bin/bwrap", kindBubblewrap, "bubblewrap", "", "", true},
		{"no landlock: bubblewrap with network", Options{AllowNetwork: true}, noLandlock, "/usr/bin/bwrap", kindBubblewrap, "bubblewrap; network allowed", "", "", true},
		{"no launcher: bubblewrap", Options{}, noLauncher, "/usr/bin/bwrap", kindBubblewrap, "bubblewrap", "", "", true},
		{"nothing", Options{}, noLandlock, "", kindNone, "none: the kernel has no Landlock support, and " + bwrapMissing, "is not sandboxed", "", true},
		{"disabled", Options{Sandbox: SandboxNone}, full, "/usr/bin/bwrap", kindNone, "none: disabled by options", "is not sandboxed (disabled by options)", "", false},
		{"landlock required", Options{Sandbox: SandboxLandlock}, full, "", kindLandlock, "landlock abi 7: filesystem and network", "", "", false},
		{"landlock required, missing", Options{Sandbox: SandboxLandlock}, noLandlock, "/usr/bin/bwrap", "", "", "", "require the Landlock sandbox, but the kernel has no Landlock support", false},
		{"landlock required, no launcher", Options{Sandbox: SandboxLandlock}, noLauncher, "", "", "", "", "the plexus binary cannot be found", false},
		{"bubblewrap required", Options{Sandbox: SandboxBubblewrap}, full, "/usr/bin/bwrap", kindBubblewrap, "bubblewrap", "", "", true},
		{"bubblewrap required, missing", Options{Sandbox: SandboxBubblewrap}, full, "", "", "", "", "require the bubblewrap sandbox, but " + bwrapMissing, true},
		{"unknown mode", Options{Sandbox: "firejail"}, full, "", "", "", "", `unknown sandbox mode "firejail"`, false},
		{"relative writable dir", Options{WritableDirs: []string{"cache"}}, full, "", "", "", "", `"cache" is not an absolute path`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			looked := false
			plan := chooseSandbox(tt.opts, tt.probe, func() (string, string) {
				looked = true
				if tt.bwrap == "" {
					return "", bwrapMissing
				}
				return tt.bwrap, ""
			})
			if looked != tt.wantBwrap {
				t.Errorf("looked for bubblewrap: %v, want %v", looked, tt.wantBwrap)
			}
			if tt.wantErr != "" {
				if !strings.Contains(plan.err, tt.wantErr) {
					t.Errorf("err %q, want it to contain %q", plan.err, tt.wantErr)
				}
				return
			}
			if plan.err != "" || plan.kind != tt.wantKind || plan.desc != tt.wantDesc {
				t.Errorf("got kind %q desc %q err %q, want %q %q", plan.kind, plan.desc, plan.err, tt.wantKind, tt.wantDesc)
			}
			switch {
			case tt.wantWarning == "" && plan.warning != "":
				t.Errorf("warning %q, want none", plan.warning)
			case tt.wantWarning != "" && !strings.Contains(plan.warning, tt.wantWarning):
				t.Errorf("warning %q, want it to contain %q", plan.warning, tt.wantWarning)
			case plan.warning != "" && !strings.HasPrefix(plan.warning, "warning: "):
				t.Errorf("warning %q does not start with \"warning: \"", plan.warning)
			}
		})
	}
}

// TestSandboxDescription checks what the tool's description tells the
// model about the sandbox.
func TestSandboxDescription(t *testing.T) {
	tests := []struct {
		name      string
		plan      sandboxPlan
		want, not []string
	}{
		{"landlock", sandboxPlan{kind: kindLandlock}, []string{"runs in a sandbox", "inside the workspace and $TMPDIR", "no network access"}, nil},
		{"writable dirs", sandboxPlan{kind: kindBubblewrap, writable: []string{"/cache", "/dev/shm"}}, []string{"inside the workspace, $TMPDIR and /cache, /dev/shm", "no network access"}, nil},
		{"network allowed", sandboxPlan{kind: kindLandlock, network: true}, []string{"runs in a sandbox"}, []string{"network"}},
		{"none", sandboxPlan{kind: kindNone}, nil, []string{"sandbox", "network"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := toolSpec(Options{}.withDefaults(), tt.plan).Description
			for _, w := range tt.want {
				if !strings.Contains(d, w) {
					t.Errorf("description lacks %q: %s", w, d)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(d, n) {
					t.Errorf("description mentions %q: %s", n, d)
				}
			}
		})
	}
}

// TestSandboxArgv checks the command lines of the three kinds of sandbox.
func TestSandboxArgv(t *testing.T) {
	tests := []struct {
		name string
		plan sandboxPlan
		want string
	}{
		{"landlock", sandboxPlan{kind: kindLandlock, launcher: []string{"/bin/plexus", "plugin", "sandbox-exec"}, writable: []string{"/cache"}},
			"/bin/plexus plugin sandbox-exec --status-fd 3 --workspace /ws --tmp /tmp/t --write /cache -- /bin/sh -c ls"},
		{"landlock with network", sandboxPlan{kind: kindLandlock, launcher: []string{"/bin/plexus", "plugin", "sandbox-exec"}, network: true},
			"/bin/plexus plugin sandbox-exec --status-fd 3 --workspace /ws --tmp /tmp/t --allow-network -- /bin/sh -c ls"},
		{"bubblewrap", sandboxPlan{kind: kindBubblewrap, bwrap: "/usr/bin/bwrap", writable: []string{"/cache"}},
			"/usr/bin/bwrap --die-with-parent --unshare-pid --unshare-net --cap-drop ALL --ro-bind / / --dev /dev --proc /proc --bind /ws /ws --bind /tmp/t /tmp/t --bind-try /cache /cache --chdir /ws/sub -- /bin/sh -c ls"},
		{"bubblewrap with network", sandboxPlan{kind: kindBubblewrap, bwrap: "/usr/bin/bwrap", network: true},
			"/usr/bin/bwrap --die-with-parent --unshare-pid --cap-drop ALL --ro-bind / / --dev /dev --proc /proc --bind /ws /ws --bind /tmp/t /tmp/t --chdir /ws/sub -- /bin/sh -c ls"},
		{"none", sandboxPlan{kind: kindNone}, "/bin/sh -c ls"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := strings.Join(tt.plan.argv("/ws", "/ws/sub", "/tmp/t", "/bin/sh", "ls"), " "); got != tt.want {
				t.Errorf("argv\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestEnvFilter(t *testing.T) {
	tests := []struct {
		name    string
		extra   []string
		network bool
		allowed []string
		denied  []string
	}{
		{"defaults", nil, false,
			[]string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ", "SHELL", "GOPATH", "GOCACHE", "CARGO_HOME"},
			[]string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "SSH_AUTH_SOCK", "GOAUTH", "HTTPS_PROXY", "https_proxy", "LC", "PLEXUS_MODEL", "TMP", "LD_PRELOAD", "DBUS_SESSION_BUS_ADDRESS"}},
		{"network", nil, true,
			[]string{"HTTPS_PROXY", "https_proxy", "NO_PROXY"},
			[]string{"OPENAI_API_KEY"}},
		{"extra names and prefixes", []string{"NPM_CONFIG_*", "MY_TOOL", ""}, false,
			[]string{"NPM_CONFIG_REGISTRY", "MY_TOOL"},
			[]string{"MY_TOOL_X", "NPM_TOKEN"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newEnvFilter(tt.extra, tt.network)
			for _, name := range tt.allowed {
				if !f.allows(name) {
					t.Errorf("%s is not allowed", name)
				}
			}
			for _, name := range tt.denied {
				if f.allows(name) {
					t.Errorf("%s is allowed", name)
				}
			}
		})
	}
}

func TestEnvFilterBuild(t *testing.T) {
	f := newEnvFilter(nil, false)
	env, names := f.build([]string{"PATH=/a", "OPENAI_API_KEY=x", "PATH=/b", "TMPDIR=/tmp", "PWD=/old", "=weird", "LANG=C.UTF-8", "novalue"}, "/ws", "/tmp/t")
	if want := []string{"LANG=C.UTF-8", "PATH=/b", "PWD=/ws", "TMPDIR=/tmp/t"}; !slices.Equal(env, want) {
		t.Errorf("env = %q, want %q", env, want)
	}
	if want := []string{"LANG", "PATH", "PWD", "TMPDIR"}; !slices.Equal(names, want) {
		t.Errorf("names = %q, want %q", names, want)
	}
}

// TestRemoveTreeReadOnly checks that a TMPDIR holding directories without
// write permission (as Go's module cache leaves them) is removed.
func TestRemoveTreeReadOnly(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("skipping: root removes read-only directories anyway, so this cannot tell")
	}
	dir := filepath.Join(t.TempDir(), "tmp")
	if err := os.MkdirAll(filepath.Join(dir, "mod", "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mod", "pkg", "f"), nil, 0o444); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(dir, "mod", "pkg"), filepath.Join(dir, "mod")} {
		if err := os.Chmod(d, 0o555); err != nil {
			t.Fatal(err)
		}
	}
	if err := removeTree(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s still exists: %v", dir, err)
	}
}

// TestPerCallSettings checks that the host's per-call settings override
// the options: sandbox.network opens and closes the network for one call,
// env.allow passes one more variable, and a bad value is refused.
func TestPerCallSettings(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	probe := "GORACE=atexit_sleep_ms=0 " + shellQuote(exe) + " " + netProbeArg + " tcp "
	tools := sandboxedTools(t, Options{Sandbox: SandboxLandlock})
	if !tools.plans[0].seccomp {
		t.Skipf("skipping: the Landlock sandbox cannot cut off the network here: %s", tools.plans[0].warning)
	}
	n := newNetTargets(t)
	ws := t.TempDir()
	for _, tt := range []struct {
		setting string
		ok      bool
	}{{"", false}, {"allow", true}, {"deny", false}} {
		c := invokeWith(t.Context(), t, tools, ws, args(probe+n.tcpAddr, ""), map[string]string{SettingNetwork: tt.setting})
		if c.err != nil {
			t.Fatalf("%s=%q: %v", SettingNetwork, tt.setting, c.err)
		}
		if got := c.res.ExitCode == 0; got != tt.ok {
			t.Errorf("%s=%q: connect succeeded %v, want %v (sandbox %q, stderr %q)", SettingNetwork, tt.setting, got, tt.ok, c.res.Sandbox, c.res.Stderr)
		}
	}
	if got := n.accepted.Load(); got != 1 {
		t.Errorf("the listener saw %d connections, want 1 (from the call with network allowed)", got)
	}

	t.Setenv("PLEXUS_SHELL_TEST_EXTRA", "passed")
	script := args(`echo "[$PLEXUS_SHELL_TEST_EXTRA]"`, "")
	if c := invoke(t.Context(), t, tools, ws, script); c.err != nil || c.res.Stdout != "[]\n" {
		t.Errorf("without %s: stdout %q, err %v; want the variable dropped", SettingEnv, c.res.Stdout, c.err)
	}
	c := invokeWith(t.Context(), t, tools, ws, script, map[string]string{SettingEnv: "GOFLAGS, PLEXUS_SHELL_TEST_EXTRA"})
	if c.err != nil || c.res.Stdout != "[passed]\n" || !slices.Contains(c.res.Env, "PLEXUS_SHELL_TEST_EXTRA") {
		t.Errorf("with %s: stdout %q, env %v, err %v; want the variable passed", SettingEnv, c.res.Stdout, c.res.Env, c.err)
	}

	c = invokeWith(t.Context(), t, tools, ws, script, map[string]string{SettingNetwork: "yes"})
	var te *engine.ToolError
	if !errors.As(c.err, &te) || te.Code != engine.ToolCodeInvalidInput || !strings.Contains(te.Message, SettingNetwork) {
		t.Errorf("%s=yes: err %v, want invalid_input naming the setting", SettingNetwork, c.err)
	}
}

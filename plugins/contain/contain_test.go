package contain_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/plugins/contain"
)

// envHost makes the test binary a host process for TestSIGKILLedHost: it
// starts a contained shell that leaves a daemon behind (see daemonScript),
// prints the daemon's pid, then waits to be killed.
const envHost = "PLEXUS_CONTAIN_TEST_HOST"

// envRequire makes a missing namespace mode a failure instead of a skip;
// .ci/run sets it.
const envRequire = "PLEXUS_REQUIRE_CONTAINMENT"

func TestMain(m *testing.M) {
	if fifo := os.Getenv(envHost); fifo != "" {
		os.Exit(host(fifo))
	}
	os.Exit(m.Run())
}

// daemonScript holds the FIFO $1 open for writing and starts a daemon that
// escapes both the process group and the session (setsid in a subshell
// that exits, so the daemon is orphaned) and holds the FIFO too; then the
// shell sleeps. The FIFO's reader sees EOF once both are gone.
const daemonScript = `exec 3>"$1"; (setsid sleep 300 &); exec sleep 300`

func host(fifo string) int {
	cmd := exec.Command("sh", "-c", daemonScript, "sh", fifo)
	contain.Apply(cmd, contain.Available())
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(cmd.Process.Pid)
	for {
		time.Sleep(time.Hour) // until killed
	}
}

// openFIFO makes a FIFO and opens its read end without blocking; a read
// returns EOF once every writer (the daemon) has gone.
func openFIFO(t *testing.T) (string, *os.File) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return path, f
}

// waitWriter waits until the FIFO has a writer: the daemon has started.
func waitWriter(t *testing.T, fifo string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if holders(fifo) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the daemon did not start within 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// holders counts other processes that hold path open, from /proc/*/fd.
func holders(path string) int {
	n := 0
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if pid, err := strconv.Atoi(p.Name()); err != nil || pid == os.Getpid() {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
		for _, fd := range fds {
			if l, _ := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name())); l == path {
				n++
			}
		}
	}
	return n
}

// waitEOF waits for the FIFO's writers to be gone: a read returns EOF.
func waitEOF(t *testing.T, f *os.File, what string) {
	t.Helper()
	if err := syscall.SetNonblock(int(f.Fd()), false); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, f)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		killHolders(f.Name())
		t.Fatalf("%s: the daemon still runs 30 s later", what)
	}
}

// killHolders kills the processes holding path open (a test's leftovers).
func killHolders(path string) {
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
		for _, fd := range fds {
			if l, _ := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name())); l == path {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

func requireNamespaces(t *testing.T) contain.Mode {
	t.Helper()
	mode := contain.Available()
	if mode.SurvivesSIGKILL() {
		return mode
	}
	msg := fmt.Sprintf("no PID namespace can be created here (%v), so descendants survive a SIGKILL of the engine", contain.Why())
	if os.Getenv(envRequire) != "" {
		t.Fatal(msg)
	}
	t.Skipf("%s; set %s=1 to make this a failure", msg, envRequire)
	return mode
}

// TestKillEndsEscapedDaemon: Kill of a contained process also ends a
// daemon it started that left its process group and session.
func TestKillEndsEscapedDaemon(t *testing.T) {
	mode := requireNamespaces(t)
	fifo, f := openFIFO(t)
	cmd := exec.Command("sh", "-c", daemonScript, "sh", fifo)
	contain.Apply(cmd, mode)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitWriter(t, fifo)
	contain.Kill(cmd.Process.Pid, mode)
	cmd.Wait()
	waitEOF(t, f, "after Kill")
}

// TestSIGKILLedHost: when the engine (here a host process) is killed with
// SIGKILL, the contained process and a daemon it started both end (issue
// 14 item 6, issue 15: processes started by plugins survived with PPID 1).
func TestSIGKILLedHost(t *testing.T) {
	requireNamespaces(t)
	fifo, f := openFIFO(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	hostCmd := exec.Command(exe)
	hostCmd.Env = append(os.Environ(), envHost+"="+fifo)
	hostCmd.Stderr = os.Stderr
	out, err := hostCmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := hostCmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		hostCmd.Process.Kill()
		t.Fatalf("host: %v", err)
	}
	child, _ := strconv.Atoi(strings.TrimSpace(line))
	waitWriter(t, fifo)
	if err := hostCmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	hostCmd.Wait()
	waitEOF(t, f, "after SIGKILL of the host")
	// The shell, the namespace's init, is still finishing its exit (it
	// waits for the namespace to empty) or is a zombie of the host's init.
	deadline := time.Now().Add(30 * time.Second)
	for running(child) {
		if time.Now().After(deadline) {
			t.Fatalf("the contained shell %d still runs 30 s after its host was killed", child)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// running reports whether pid exists and is not a zombie.
func running(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || (b[i+2] != 'Z' && b[i+2] != 'X')
}

// TestSessionModeKill: in Session mode (the fallback), Kill ends
// descendants that stay in the session.
func TestSessionModeKill(t *testing.T) {
	fifo, f := openFIFO(t)
	cmd := exec.Command("sh", "-c", `(exec 3>"$1"; exec sleep 300) & sleep 300`, "sh", fifo)
	contain.Apply(cmd, contain.Session)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitWriter(t, fifo)
	contain.Kill(cmd.Process.Pid, contain.Session)
	cmd.Wait()
	waitEOF(t, f, "after Kill in Session mode")
}

// TestAvailable reports the mode this machine offers.
func TestAvailable(t *testing.T) {
	t.Logf("available: %s (why not stronger: %v)", contain.Available(), contain.Why())
	if contain.Available() != contain.Session && contain.Why() != nil {
		t.Errorf("namespace mode %s with an error %v", contain.Available(), contain.Why())
	}
}

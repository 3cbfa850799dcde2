package mcp_test

import (
	"context"
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
	"github.com/plexus-agent/plexus/plugins/mcp"
)

// envTestHost makes the test binary an engine stand-in for
// TestSIGKILLedHostEndsServerDescendants: "SERVER|FIFO" names the noop
// server binary and the FIFO. It connects to the server started through a
// shell that leaves a daemon behind (daemonServer), prints "ready" and
// waits to be killed.
const envTestHost = "PLEXUS_MCP_TEST_HOST"

func TestMain(m *testing.M) {
	if v := os.Getenv(envTestHost); v != "" {
		os.Exit(testHost(v))
	}
	os.Exit(m.Run())
}

// daemonServer is the configuration of a stdio server started through a
// shell that first starts a daemon (setsid in a subshell that exits, so
// it leaves the server's process group and session and is orphaned)
// holding fifo open for writing, then runs the noop server.
func daemonServer(server, fifo string) *mcp.Config {
	return &mcp.Config{Servers: map[string]mcp.ServerConfig{"noop": {Command: "sh", Args: []string{"-c",
		`(setsid sleep 300 3>"$1" </dev/null >/dev/null 2>&1 &); exec "$2"`, "sh", fifo, server}}}}
}

func testHost(v string) int {
	server, fifo, _ := strings.Cut(v, "|")
	ts := mcp.New(daemonServer(server, fifo), mcp.Options{})
	if _, err := ts.Tools(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ready")
	for {
		time.Sleep(time.Hour) // until killed
	}
}

// fifoReader makes a FIFO and opens its read end without blocking.
func fifoReader(t *testing.T) (string, *os.File) {
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

// fifoWriters lists the other processes that hold path open.
func fifoWriters(path string) []int {
	var pids []int
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
		for _, fd := range fds {
			if l, _ := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name())); l == path {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// waitFIFOClosed waits until every writer of the FIFO is gone; after 30 s
// it kills them and fails.
func waitFIFOClosed(t *testing.T, f *os.File, what string) {
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
		for _, pid := range fifoWriters(f.Name()) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		t.Fatalf("%s: a daemon the server started still runs 30 s later", what)
	}
}

func requireNamespaces(t *testing.T) {
	t.Helper()
	if contain.Available().SurvivesSIGKILL() {
		return
	}
	msg := fmt.Sprintf("no PID namespace can be created here (%v), so a server's descendants survive a SIGKILL of plexus", contain.Why())
	if os.Getenv("PLEXUS_REQUIRE_CONTAINMENT") != "" {
		t.Fatal(msg)
	}
	t.Skipf("%s; set PLEXUS_REQUIRE_CONTAINMENT=1 to make this a failure", msg)
}

// TestSIGKILLedHostEndsServerDescendants: when the engine is killed with
// SIGKILL, a daemon its stdio server started ends too (issue 15).
func TestSIGKILLedHostEndsServerDescendants(t *testing.T) {
	requireNamespaces(t)
	server := buildCmd(t, "./internal/noopserver", "noopserver")
	fifo, f := fifoReader(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	host := exec.Command(exe)
	host.Env = append(os.Environ(), envTestHost+"="+server+"|"+fifo)
	host.Stderr = os.Stderr
	out, err := host.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 6)
	if _, err := io.ReadFull(out, line); err != nil || string(line) != "ready\n" {
		host.Process.Kill()
		t.Fatalf("host: %q %v", line, err)
	}
	if len(fifoWriters(fifo)) == 0 {
		host.Process.Kill()
		t.Fatal("the daemon is not running")
	}
	host.Process.Signal(syscall.SIGKILL)
	host.Wait()
	waitFIFOClosed(t, f, "after SIGKILL of the engine")
}

// TestCloseEndsServerDescendants: Close ends a daemon the server started
// although it left the server's process group and session.
func TestCloseEndsServerDescendants(t *testing.T) {
	requireNamespaces(t)
	server := buildCmd(t, "./internal/noopserver", "noopserver")
	fifo, f := fifoReader(t)
	ts := mcp.New(daemonServer(server, fifo), mcp.Options{Logger: testLogger(t)})
	if _, err := ts.Tools(context.Background()); err != nil {
		ts.Close()
		t.Fatal(err)
	}
	ts.Close()
	waitFIFOClosed(t, f, "after Close")
}

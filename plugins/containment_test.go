package plugins_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/plugins"
	"github.com/plexus-agent/plexus/plugins/contain"
)

// envTestHost makes the test binary a plexus stand-in for
// TestSIGKILLedHostEndsPluginDescendants: "PLUGINDIR|FIFO" names the
// plugin directory and the FIFO the plugin's daemon holds. It starts a
// Manager, has the test plugin start a daemon, prints "ready" and waits
// to be killed.
const envTestHost = "PLEXUS_PLUGINS_TEST_HOST"

func testHost(v string) int {
	dir, fifo, _ := strings.Cut(v, "|")
	m, err := plugins.NewManager(plugins.Options{Dirs: []string{dir}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	args, _ := json.Marshal(map[string]string{"fifo": fifo})
	if _, err := m.Toolset().Invoke(context.Background(), engine.InvokeRequest{CallID: "c", Tool: "daemon", Args: args}, func(engine.ToolUpdate) {}); err != nil {
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

// waitFIFOClosed waits until every writer of the FIFO is gone (a read
// returns EOF); after 30 s it kills them and fails.
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
		t.Fatalf("%s: a daemon the plugin started still runs 30 s later", what)
	}
}

func requireNamespaces(t *testing.T) {
	t.Helper()
	if contain.Available().SurvivesSIGKILL() {
		return
	}
	msg := fmt.Sprintf("no PID namespace can be created here (%v), so a plugin's descendants survive a SIGKILL of plexus", contain.Why())
	if os.Getenv("PLEXUS_REQUIRE_CONTAINMENT") != "" {
		t.Fatal(msg)
	}
	t.Skipf("%s; set PLEXUS_REQUIRE_CONTAINMENT=1 to make this a failure", msg)
}

// TestSIGKILLedHostEndsPluginDescendants kills a host process with SIGKILL
// after its plugin started a daemon that left the plugin's session: the
// daemon must end too (issue 14 item 6 and issue 15: processes a plugin
// started survived plexus with PPID 1).
func TestSIGKILLedHostEndsPluginDescendants(t *testing.T) {
	requireNamespaces(t)
	fifo, f := fifoReader(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	host := exec.Command(exe)
	host.Env = append(os.Environ(), envTestHost+"="+pluginDir(t, "plexus-tool-test")+"|"+fifo)
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
	waitFIFOClosed(t, f, "after SIGKILL of the host")
}

// TestCloseEndsPluginDescendants: Close ends a daemon the plugin started,
// although it left the plugin's session.
func TestCloseEndsPluginDescendants(t *testing.T) {
	requireNamespaces(t)
	fifo, f := fifoReader(t)
	m := newManager(t, plugins.Options{})
	if _, _, err := invoke(t, m.Toolset(), "daemon", fmt.Sprintf(`{"fifo":%q}`, fifo)); err != nil {
		t.Fatal(err)
	}
	m.Close()
	waitFIFOClosed(t, f, "after Close")
}

// TestCloseDuringHangingStart closes a Manager while a plugin that never
// completes its handshake is starting, with a ten-minute StartTimeout:
// Close must not wait for it.
func TestCloseDuringHangingStart(t *testing.T) {
	started := make(chan struct{})
	var once sync.Once
	log := slog.New(hookHandler{slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug}), func(r slog.Record) {
		if r.Message == "plugin started" {
			once.Do(func() { close(started) })
		}
	}})
	m, err := plugins.NewManager(plugins.Options{Dirs: []string{pluginDir(t, "plexus-tool-hang")}, StartTimeout: 10 * time.Minute, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	listed := make(chan error, 1)
	go func() {
		_, err := m.Toolset().Tools(context.Background())
		listed <- err
	}()
	select {
	case <-started: // the process runs; go-plugin waits for its handshake
	case err := <-listed:
		t.Fatalf("Tools returned before the hanging plugin started: %v", err)
	}
	closed := make(chan struct{})
	go func() {
		m.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Close still waits 30 s later for a start that would time out after 10 minutes")
	}
	if err := <-listed; err == nil {
		t.Error("Tools succeeded although the only plugin never started")
	}
}

// TestWrongMagicCookie starts a go-plugin plugin built with another
// program's handshake: the error names the likely cause and shows what
// the plugin printed (issue 20 item 7).
func TestWrongMagicCookie(t *testing.T) {
	m := newManager(t, plugins.Options{Dirs: []string{pluginDir(t, "plexus-tool-wrongcookie")}})
	_, err := m.Toolset().Tools(context.Background())
	if err == nil {
		t.Fatal("a plugin with another magic cookie started")
	}
	for _, want := range []string{
		"another handshake (magic cookie)",        // the likely cause
		"This binary is a plugin",                 // what the plugin printed on stderr
		"plugins.ServeTool or plugins.ServeModel", // what to do
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if !errors.Is(err, plugins.ErrNotPlugin) {
		t.Errorf("error does not match ErrNotPlugin: %v", err)
	}
}

// TestPluginInPIDNamespace: a third-party plugin is its namespace's first
// process.
func TestPluginInPIDNamespace(t *testing.T) {
	requireNamespaces(t)
	ts := newManager(t, plugins.Options{}).Toolset()
	host := pidOf(t, ts)
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", host))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(v)
			if len(f) < 2 || f[len(f)-1] != "1" {
				t.Errorf("plugin pids by namespace %v, want it to be 1 in its own", f)
			}
			return
		}
	}
	t.Error("no NSpid line in /proc/PID/status")
}

// hookHandler is a slog.Handler that also passes each record to on.
type hookHandler struct {
	slog.Handler
	on func(slog.Record)
}

func (h hookHandler) Handle(ctx context.Context, r slog.Record) error {
	h.on(r)
	return h.Handler.Handle(ctx, r)
}

func (h hookHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return hookHandler{h.Handler.WithAttrs(as), h.on}
}

func (h hookHandler) WithGroup(name string) slog.Handler {
	return hookHandler{h.Handler.WithGroup(name), h.on}
}

package plugins

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin/runner"

	"github.com/plexus-agent/plexus/plugins/contain"
	"github.com/plexus-agent/plexus/plugins/internal/tail"
)

// pluginRunner is the go-plugin runner.Runner of a launched plugin. It
// opens the binary, checks that open file against the lock file (check),
// and executes that same file (on Linux through /proc/self/fd, so a file
// swapped in at the path after the check is not what runs), contained
// (package contain), with stdin /dev/null, and with its stderr's last
// lines kept for error messages. It can be killed while go-plugin still
// waits for the handshake.
type pluginRunner struct {
	path  string
	args  []string
	env   []string
	mode  contain.Mode
	check func(*os.File) error // nil: no verification
	log   hclog.Logger

	stderrTail *tail.Writer
	stderrEOF  chan struct{} // closed when the plugin's stderr is closed

	cmd    *exec.Cmd
	stdout io.ReadCloser
	stderr io.ReadCloser

	mu     sync.Mutex
	pid    int
	killed bool
}

var _ runner.Runner = (*pluginRunner)(nil)

func newPluginRunner(path string, args, env []string, mode contain.Mode, check func(*os.File) error, log hclog.Logger) *pluginRunner {
	return &pluginRunner{path: path, args: args, env: env, mode: mode, check: check, log: log,
		stderrTail: tail.New(20, nil), stderrEOF: make(chan struct{})}
}

// Start verifies and starts the plugin.
func (r *pluginRunner) Start(context.Context) error {
	f, err := os.Open(r.path)
	if err != nil {
		if r.check != nil {
			return fmt.Errorf("%w: %v", ErrChecksumUnverified, err)
		}
		return err
	}
	defer f.Close() // the child has exec'd (or failed) when Start returns
	if r.check != nil {
		if err := r.check(f); err != nil {
			return err
		}
	}
	cmd := &exec.Cmd{Path: execPath(f, r.path), Args: append([]string{r.path}, r.args...), Env: r.env}
	contain.Apply(cmd, r.mode)
	if r.stdout, err = cmd.StdoutPipe(); err != nil {
		return err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	r.stderr = &teeReader{r: stderr, w: r.stderrTail, eof: r.stderrEOF}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.killed {
		return errors.New("stopped before it started")
	}
	if err := cmd.Start(); err != nil {
		// The path, not /proc/self/fd/N, in the error.
		var pe *os.PathError
		if errors.As(err, &pe) {
			pe.Path = r.path
		}
		return err
	}
	r.cmd, r.pid = cmd, cmd.Process.Pid
	r.log.Debug("plugin started", "path", r.path, "pid", r.pid, "containment", r.mode.String())
	return nil
}

// execPath is what to execute for the open binary f at path: the open
// file itself where /proc/self/fd exists (the kernel resolves it before
// it closes the descriptor, which is close-on-exec), else path. A script
// (#!) is executed by path: its interpreter opens the script by the name
// it is given, after the descriptor is closed.
func execPath(f *os.File, path string) string {
	if runtime.GOOS != "linux" {
		return path
	}
	var magic [2]byte
	if n, _ := f.ReadAt(magic[:], 0); n == 2 && string(magic[:]) == "#!" {
		return path
	}
	fdPath := "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
	if _, err := os.Stat(fdPath); err != nil {
		return path
	}
	return fdPath
}

// Pid is the plugin's pid (as the host sees it), 0 before Start.
func (r *pluginRunner) Pid() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pid
}

// Wait waits for the plugin to exit.
func (r *pluginRunner) Wait(context.Context) error {
	if r.cmd == nil {
		return errors.New("plugin not started")
	}
	return r.cmd.Wait()
}

// Kill kills the plugin and what it started (see contain.Kill); it may be
// called before, during or after Start, and more than once.
func (r *pluginRunner) Kill(context.Context) error {
	r.mu.Lock()
	r.killed = true
	pid := r.pid
	r.mu.Unlock()
	if pid > 0 {
		contain.Kill(pid, r.mode)
	}
	return nil
}

// Stdout carries the handshake line.
func (r *pluginRunner) Stdout() io.ReadCloser { return r.stdout }

// Stderr carries the plugin's logs; the runner keeps its last lines.
func (r *pluginRunner) Stderr() io.ReadCloser { return r.stderr }

// Name is the binary's path.
func (r *pluginRunner) Name() string { return r.path }

// ID is the pid.
func (r *pluginRunner) ID() string { return strconv.Itoa(r.Pid()) }

// Diagnose adds nothing to go-plugin's message: the host explains a
// failed handshake itself (handshakeErr), with what the plugin printed.
func (r *pluginRunner) Diagnose(context.Context) string { return "" }

// PluginToHost and HostToPlugin: the plugin shares the host's file system
// and network, so addresses are the same on both sides.
func (r *pluginRunner) PluginToHost(n, a string) (string, string, error) { return n, a, nil }
func (r *pluginRunner) HostToPlugin(n, a string) (string, string, error) { return n, a, nil }

// teeReader copies what is read to w and closes eof at the end of r.
type teeReader struct {
	r    io.ReadCloser
	w    io.Writer
	eof  chan struct{}
	once sync.Once
}

func (t *teeReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		t.w.Write(p[:n])
	}
	if err != nil {
		t.once.Do(func() { close(t.eof) })
	}
	return n, err
}

func (t *teeReader) Close() error { return t.r.Close() }

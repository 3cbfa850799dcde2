package unixrpc

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// ErrServerRunning is returned (wrapped) by Listen when a server already
// answers on the socket path.
var ErrServerRunning = errors.New("another server is running")

// DefaultSocketPath is $XDG_RUNTIME_DIR/plexus-{pid}.sock, or
// /tmp/plexus-{pid}.sock when XDG_RUNTIME_DIR is not set, pid being this
// process's id.
func DefaultSocketPath() string {
	dir := os.Getenv("XDG_RUNTIME_DIR")
	if dir == "" {
		dir = "/tmp"
	}
	return filepath.Join(dir, fmt.Sprintf("plexus-%d.sock", os.Getpid()))
}

// staleDialTimeout bounds the probe of an existing socket file.
const staleDialTimeout = time.Second

// Listen creates a Unix socket at path with mode 0600 and listens on it.
// The socket is made in a private directory beside path, given mode 0600
// and then linked into place, so it is never reachable with a wider mode;
// linking fails rather than replace a file that appeared meanwhile.
//
// An existing socket file at path that nobody answers on (a server that
// died without removing it) is removed first; one that answers is an
// error wrapping ErrServerRunning. A path that exists and is not a socket
// (a symlink included) is an error, and is left alone.
//
// Closing the listener removes the socket file, unless it was replaced
// by another one meanwhile.
func Listen(path string) (net.Listener, error) {
	if err := removeStale(path); err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	tmp, err := os.MkdirTemp(dir, ".px")
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	defer os.RemoveAll(tmp)
	tmpPath := filepath.Join(tmp, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmpPath, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(tmpPath, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Link(tmpPath, path); err != nil {
		ln.Close()
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("listen on %s: the path was created by someone else meanwhile: %w", path, err)
		}
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return &socketListener{UnixListener: ln, path: path, fi: fi}, nil
}

// removeStale removes a socket file at path that nobody answers on.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listen on %s: %w", path, err)
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("listen on %s: the path exists and is not a socket (%s); remove it or choose another path", path, fi.Mode().Type())
	}
	conn, err := net.DialTimeout("unix", path, staleDialTimeout)
	if err == nil {
		conn.Close()
		return fmt.Errorf("listen on %s: %w there (it accepts connections); stop it or choose another path", path, ErrServerRunning)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("listen on %s: cannot tell whether a server is running there: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("listen on %s: remove the stale socket: %w", path, err)
	}
	return nil
}

// socketListener removes its socket file when closed.
type socketListener struct {
	*net.UnixListener
	path string
	fi   fs.FileInfo
	once sync.Once
	err  error
}

// Close stops listening and removes the socket file if it is still this
// listener's.
func (l *socketListener) Close() error {
	l.once.Do(func() {
		l.err = l.UnixListener.Close()
		if fi, err := os.Lstat(l.path); err == nil && os.SameFile(fi, l.fi) {
			os.Remove(l.path)
		}
	})
	return l.err
}

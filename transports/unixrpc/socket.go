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
// Servers starting on the same path take turns: the check for a stale
// socket, its removal and the link run holding an exclusive flock(2) on
// path+".lock" (created with mode 0600), so a server never removes the
// live socket another one has just linked. The lock file stays while the
// listener is open (a server that dies leaves it, and the next Listen
// reuses it) and is removed, under the lock, when the listener is closed
// (or Listen fails).
//
// Closing the listener removes the socket file, unless it was replaced
// by another one meanwhile.
func Listen(path string) (_ net.Listener, err error) {
	lock, err := lockPath(path + ".lock")
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			os.Remove(path + ".lock") // safe under the lock: see lockPath
		}
		lock.Close() // releases the lock
	}()
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

// lockPath opens (creating it, 0600) the lock file at path and takes an
// exclusive flock on it, waiting for another holder. Since a closing
// listener removes the file, a lock taken on a file that is no longer at
// path (or was replaced) is dropped and taken again on the new one.
// Closing the returned file releases the lock.
func lockPath(path string) (*os.File, error) {
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, fmt.Errorf("open the lock file: %w", err)
		}
		if err := flock(f, syscall.LOCK_EX); err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		held, err1 := f.Stat()
		now, err2 := os.Lstat(path)
		if err1 == nil && err2 == nil && os.SameFile(held, now) {
			return f, nil
		}
		f.Close()
		if err1 != nil {
			return nil, fmt.Errorf("lock %s: %w", path, err1)
		}
		if err2 != nil && !errors.Is(err2, fs.ErrNotExist) {
			return nil, fmt.Errorf("lock %s: %w", path, err2)
		}
	}
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// testHookStale, when set (by tests), runs after removeStale found a
// stale socket and before it removes it.
var testHookStale func()

// removeStale removes a socket file at path that nobody answers on. The
// caller holds the path's lock.
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
	if testHookStale != nil {
		testHookStale()
	}
	// Remove the file found stale, not one that replaced it meanwhile (a
	// server that does not take the lock).
	again, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil || !os.SameFile(fi, again) {
		return fmt.Errorf("listen on %s: the socket was replaced while it was checked; try again", path)
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
// listener's, and then the lock file, holding the lock.
func (l *socketListener) Close() error {
	l.once.Do(func() {
		l.err = l.UnixListener.Close()
		lock, lerr := lockPath(l.path + ".lock")
		if fi, err := os.Lstat(l.path); err == nil && os.SameFile(fi, l.fi) {
			os.Remove(l.path)
		}
		if lerr == nil {
			os.Remove(l.path + ".lock")
			lock.Close()
		}
	})
	return l.err
}

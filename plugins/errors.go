package plugins

import (
	"errors"
	"fmt"
)

// Sentinel errors of the plugin host and installer; match them with
// errors.Is.
var (
	// ErrChecksumMismatch: a plugin binary's SHA-256 is not the one its
	// lock file records. A *ChecksumError carries the details.
	ErrChecksumMismatch = errors.New("plugin checksum does not match the lock file")
	// ErrChecksumUnverified: a plugin binary could not be read to check
	// its SHA-256 (permissions, an I/O error), so the host refuses to
	// launch it.
	ErrChecksumUnverified = errors.New("plugin checksum could not be verified")
	// ErrNotLocked: a third-party plugin binary has no lock file entry,
	// so the host refuses to launch it.
	ErrNotLocked = errors.New("plugin is not in the lock file")
	// ErrDebugPluginGone: a plugin the host attached to for debugging
	// (PLEXUS_REATTACH_PLUGINS) has exited; the host does not relaunch it.
	ErrDebugPluginGone = errors.New("debugged plugin has gone away")
	// ErrNotPlugin: a binary is not a Plexus plugin of the kind its name
	// says (no handshake, or it does not serve that kind).
	ErrNotPlugin = errors.New("not a Plexus plugin")
	// ErrShadowed: a plugin would be installed under the kind and name of
	// a built-in plugin, which the host always uses instead.
	ErrShadowed = errors.New("plugin name taken by a built-in plugin")
)

// ChecksumError is a plugin binary whose SHA-256 differs from its lock
// file entry. It matches ErrChecksumMismatch.
type ChecksumError struct {
	Ref      Ref
	Path     string // the binary
	LockFile string // the lock file that holds the expected sum
	Want     string // hex SHA-256 recorded at install
	Got      string // hex SHA-256 of the file now ("" when unreadable)
}

func (e *ChecksumError) Error() string {
	got := e.Got
	if got == "" {
		got = "unreadable"
	}
	return fmt.Sprintf("%s is not the binary that was installed: its SHA-256 is %s, but %s records %s; "+
		"if you rebuilt or replaced it on purpose, install it again with `plexus plugins install SOURCE`, "+
		"otherwise it may have been tampered with (`plexus plugins verify` checks every plugin)",
		e.Path, got, e.LockFile, e.Want)
}

// Is reports whether target is ErrChecksumMismatch.
func (e *ChecksumError) Is(target error) bool { return target == ErrChecksumMismatch }

// notLockedError is a discovered third-party plugin with no lock entry.
type notLockedError struct {
	path, lockFile string
}

func (e *notLockedError) Error() string {
	return fmt.Sprintf("%s is not in %s, so it is not launched; install it with `plexus plugins install %s` (or install it from its source)",
		e.path, e.lockFile, e.path)
}

func (e *notLockedError) Is(target error) bool { return target == ErrNotLocked }

// Package workspace confines file access to a workspace root. Every path a
// tool, a patch or a client names goes through Root.Resolve, which refuses
// `..` that climbs out, absolute paths outside the root and symlinks whose
// target lies outside it, with an error that says so. File operations then
// go through the os.Root returned by Root.FS (openat-based, so a symlink
// swapped in after the check still cannot escape).
package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/plexus-agent/plexus/engine"
)

// Root is an open workspace directory. Safe for concurrent use.
type Root struct {
	dir  string // absolute, symlinks resolved
	orig string // absolute as given, for recognising absolute paths under it
	root *os.Root
}

// Open opens the workspace directory dir.
func Open(dir string) (*Root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	r, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	return &Root{dir: real, orig: abs, root: r}, nil
}

// Dir is the workspace's absolute path with symlinks resolved.
func (r *Root) Dir() string { return r.dir }

// FS is the os.Root through which confined file operations go. Pass it the
// relative paths Resolve returns.
func (r *Root) FS() *os.Root { return r.root }

// Close releases the directory handle.
func (r *Root) Close() error { return r.root.Close() }

// EscapeError reports a path that would leave the workspace. It matches
// engine.ErrPermissionDenied with errors.Is.
type EscapeError struct {
	Path   string // as given
	Root   string
	Reason string // "climbs out with ..", "is outside", "is a symlink to ..."
}

func (e *EscapeError) Error() string {
	return fmt.Sprintf("path %q %s the workspace %s; only paths inside the workspace are allowed", e.Path, e.Reason, e.Root)
}

// Is matches engine.ErrPermissionDenied.
func (e *EscapeError) Is(target error) bool { return target == engine.ErrPermissionDenied }

// Resolve turns a path named by a client or model (relative to the root, or
// absolute) into a clean slash-free relative path inside the root ("." for
// the root itself). It follows symlinks along the existing part of the
// path and refuses any that lead outside. A path that does not exist yet is
// fine as long as its existing parent is inside. Errors: *EscapeError.
func (r *Root) Resolve(path string) (string, error) {
	if path == "" {
		path = "."
	}
	if strings.ContainsRune(path, 0) {
		return "", &EscapeError{Path: path, Root: r.dir, Reason: "contains a NUL byte and cannot name a file in"}
	}
	var rel string
	if filepath.IsAbs(path) {
		clean := filepath.Clean(path)
		var ok bool
		if rel, ok = within(r.dir, clean); !ok {
			if rel, ok = within(r.orig, clean); !ok {
				return "", &EscapeError{Path: path, Root: r.dir, Reason: "is outside"}
			}
		}
	} else {
		rel = filepath.Clean(path)
		if rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return "", &EscapeError{Path: path, Root: r.dir, Reason: "climbs out of"}
		}
	}
	if err := r.checkSymlinks(path, rel); err != nil {
		return "", err
	}
	return rel, nil
}

// checkSymlinks resolves the longest existing prefix of rel and checks that
// it stays inside the root.
func (r *Root) checkSymlinks(given, rel string) error {
	full := filepath.Join(r.dir, rel)
	probe := full
	for {
		real, err := filepath.EvalSymlinks(probe)
		if err == nil {
			if _, ok := within(r.dir, real); !ok {
				return &EscapeError{Path: given, Root: r.dir, Reason: fmt.Sprintf("leads (through a symlink, to %s) out of", real)}
			}
			return nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("resolve %s: %w", given, err)
		}
		parent := filepath.Dir(probe)
		if parent == probe || len(parent) < len(r.dir) {
			return nil
		}
		probe = parent
	}
}

// within reports whether path is dir or below it, and returns the relative
// path.
func within(dir, path string) (string, bool) {
	rel, err := filepath.Rel(dir, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", false
	}
	return rel, true
}

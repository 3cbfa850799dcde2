// Package workspace confines file access to a workspace root. Every path a
// tool, a patch or a client names goes through Root.Resolve (or Root.Real),
// which refuses `..` that climbs out, absolute paths outside the root and
// symlinks whose target lies outside it, with an error that says so. File
// operations then go through the os.Root returned by Root.FS (openat-based,
// so a symlink swapped in after the check still cannot escape; Root.FSError
// turns that refusal into the same *EscapeError).
//
// Root.Walk visits the workspace the way git sees it: nested .gitignore
// files, .git/info/exclude, never .git itself, never through a symlinked
// directory, in sorted order.
package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/plexus-agent/plexus/engine"
)

// maxSymlinks is how many symlinks Resolve follows in one path before it
// gives up with ELOOP; Linux's own limit (MAXSYMLINKS) is 40.
const maxSymlinks = 40

// Root is an open workspace directory. Safe for concurrent use.
type Root struct {
	dir  string // absolute, symlinks resolved
	orig string // absolute as given, for recognising absolute paths under it
	root *os.Root
}

// Open opens the workspace directory dir (absolute, or relative to the
// current directory; symlinks in it are resolved once, here). Errors wrap
// the os error, so errors.Is(err, fs.ErrNotExist) holds when dir does not
// exist; a dir that is a file fails with syscall.ENOTDIR.
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
// relative paths Resolve or Real return, and pass its errors through
// FSError.
func (r *Root) FS() *os.Root { return r.root }

// Close releases the directory handle. Operations through FS fail after it.
func (r *Root) Close() error { return r.root.Close() }

// EscapeError reports a path that would leave the workspace. It matches
// engine.ErrPermissionDenied with errors.Is.
type EscapeError struct {
	Path   string // as given
	Root   string // the workspace directory
	Reason string // completes "path P <Reason> the workspace R", e.g. "climbs out of"
}

func (e *EscapeError) Error() string {
	return fmt.Sprintf("path %q %s the workspace %s; only paths inside the workspace are allowed", e.Path, e.Reason, e.Root)
}

// Is matches engine.ErrPermissionDenied.
func (e *EscapeError) Is(target error) bool { return target == engine.ErrPermissionDenied }

// Resolve turns a path named by a client or model (relative to the root, or
// absolute) into a clean relative path inside the root, in the OS's form
// (filepath separators; "." for the root itself). `..` is applied
// lexically. Resolve follows every symlink along the existing part of the
// path, as the kernel would, and refuses the path when one leads outside
// the root, even if the link's target does not exist yet. A path that does
// not exist yet is fine as long as it would be created inside.
//
// Errors: *EscapeError (errors.Is engine.ErrPermissionDenied) for paths that
// leave the workspace; an error matching engine.ErrInvalidRequest for a
// path containing a NUL byte; an error matching both fs.ErrNotExist and
// syscall.ENOTDIR when a component in the middle of the path is a file; other os errors (a
// permission problem, a symlink loop) wrapped.
func (r *Root) Resolve(path string) (string, error) {
	rel, _, err := r.resolve(path)
	return rel, err
}

// Real is Resolve, but the returned path (relative, OS form) has every
// symlink in the existing part of the path replaced by what it points to,
// so operations through FS on it traverse no symlink (unless one is swapped
// in meanwhile, which os.Root confines). Use it for the operation and
// Resolve's path for what to show: an absolute symlink that points inside
// the workspace works through Real, while os.Root refuses absolute
// symlinks. Errors as Resolve.
func (r *Root) Real(path string) (string, error) {
	_, real, err := r.resolve(path)
	return real, err
}

// resolve returns the lexical and the real relative path of path.
func (r *Root) resolve(given string) (lexical, real string, err error) {
	p := given
	if p == "" {
		p = "."
	}
	if strings.ContainsRune(p, 0) {
		return "", "", fmt.Errorf("%w: path %q contains a NUL byte, which no file name can contain", engine.ErrInvalidRequest, given)
	}
	if filepath.IsAbs(p) {
		clean := filepath.Clean(p)
		var ok bool
		if lexical, ok = within(r.dir, clean); !ok {
			if lexical, ok = within(r.orig, clean); !ok {
				return "", "", &EscapeError{Path: given, Root: r.dir, Reason: "is outside"}
			}
		}
	} else {
		lexical = filepath.Clean(p)
		if lexical == ".." || strings.HasPrefix(lexical, ".."+string(filepath.Separator)) {
			return "", "", &EscapeError{Path: given, Root: r.dir, Reason: "climbs out of"}
		}
	}
	real, err = r.follow(given, lexical)
	if err != nil {
		return "", "", err
	}
	return lexical, real, nil
}

// follow resolves the symlinks along rel (clean, relative, inside) the way
// the kernel does, one component at a time through the os.Root, and
// returns the real relative path. The part of the path that does not
// exist is appended as it is.
func (r *Root) follow(given, rel string) (string, error) {
	todo := splitPath(filepath.ToSlash(rel))
	var done []string // real components so far; each an existing directory unless last
	links := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				// Only a symlink target can bring us here: rel itself is
				// clean and inside.
				return "", &EscapeError{Path: given, Root: r.dir, Reason: "leads (through a symlink, to a path above the root) out of"}
			}
			done = done[:len(done)-1]
			continue
		}
		cur := path.Join(append(done, c)...)
		fi, err := r.root.Lstat(filepath.FromSlash(cur))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// The rest does not exist (yet): apply it lexically.
			done = append(done, c)
			for _, c := range todo {
				switch c {
				case "", ".":
				case "..":
					if len(done) == 0 {
						return "", &EscapeError{Path: given, Root: r.dir, Reason: "leads (through a symlink, to a path above the root) out of"}
					}
					done = done[:len(done)-1]
				default:
					done = append(done, c)
				}
			}
			return filepath.FromSlash(joinOrDot(done)), nil
		case errors.Is(err, syscall.ENOTDIR):
			return "", &notDirError{path: given, file: path.Dir(cur)}
		case err != nil:
			if fe := r.FSError(given, err); fe != err {
				return "", fe
			}
			return "", fmt.Errorf("resolve path %q: %w", given, err)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			if len(todo) > 0 && !fi.IsDir() {
				return "", &notDirError{path: given, file: cur}
			}
			done = append(done, c)
			continue
		}
		links++
		if links > maxSymlinks {
			return "", fmt.Errorf("resolve path %q: more than %d symlinks: %w", given, maxSymlinks, syscall.ELOOP)
		}
		target, err := r.root.Readlink(filepath.FromSlash(cur))
		if err != nil {
			return "", fmt.Errorf("resolve path %q: %w", given, r.FSError(given, err))
		}
		if filepath.IsAbs(target) {
			clean := filepath.Clean(target)
			in, ok := within(r.dir, clean)
			if !ok {
				in, ok = within(r.orig, clean)
			}
			if !ok {
				return "", &EscapeError{Path: given, Root: r.dir, Reason: fmt.Sprintf("leads (through the symlink %s, to %s) out of", cur, clean)}
			}
			done = nil
			todo = append(splitPath(filepath.ToSlash(in)), todo...)
			continue
		}
		// A relative target is relative to the link's directory, which is
		// done. Check the escape here to name the link in the error.
		if dest := path.Join(path.Join(done...), filepath.ToSlash(target)); dest == ".." || strings.HasPrefix(dest, "../") {
			return "", &EscapeError{Path: given, Root: r.dir, Reason: fmt.Sprintf("leads (through the symlink %s, to %s) out of", cur, filepath.Join(r.dir, filepath.FromSlash(dest)))}
		}
		todo = append(splitPath(filepath.ToSlash(target)), todo...)
	}
	return filepath.FromSlash(joinOrDot(done)), nil
}

// notDirError reports a path that goes through a file as if it were a
// directory. It matches fs.ErrNotExist and syscall.ENOTDIR.
type notDirError struct {
	path string // as given
	file string // the component that is a file, relative to the root
}

func (e *notDirError) Error() string {
	return fmt.Sprintf("path %q does not exist: %s is a file, not a directory", e.path, e.file)
}

// Is matches fs.ErrNotExist and syscall.ENOTDIR.
func (e *notDirError) Is(target error) bool {
	return target == fs.ErrNotExist || target == syscall.ENOTDIR
}

// FSError turns an error from an operation through FS on path (as the
// caller named it) into an *EscapeError when os.Root refused it because it
// leads out of the root (a symlink swapped in after Resolve, an absolute
// symlink, `..` through a symlink). Any other error, and nil, is returned
// unchanged.
func (r *Root) FSError(path string, err error) error {
	if err == nil {
		return nil
	}
	if sentinel := rootEscapeSentinel(); sentinel != nil && errors.Is(err, sentinel) {
		return &EscapeError{Path: path, Root: r.dir, Reason: "leads (through a symlink) out of"}
	}
	return err
}

// rootEscapeSentinel is os.Root's unexported "path escapes from parent"
// error, captured once by asking an os.Root for "..".
var rootEscapeSentinel = sync.OnceValue(func() error {
	root, err := os.OpenRoot(string(filepath.Separator))
	if err != nil {
		return nil
	}
	defer root.Close()
	_, err = root.Lstat("..")
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
})

// within reports whether path is dir or below it, and returns the relative
// path.
func within(dir, path string) (string, bool) {
	rel, err := filepath.Rel(dir, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", false
	}
	return rel, true
}

// splitPath splits a slash-separated relative path into its components;
// "." gives none.
func splitPath(p string) []string {
	if p == "" || p == "." {
		return nil
	}
	return strings.Split(p, "/")
}

// joinOrDot joins components with slashes; none gives ".".
func joinOrDot(parts []string) string {
	if len(parts) == 0 {
		return "."
	}
	return strings.Join(parts, "/")
}

// ToolError turns an error of Resolve or Real for the path given, or of
// an operation through FS on it, into the *engine.ToolError a tool
// returns, so the model reads why: permission_denied for a path that
// leaves the workspace (an *EscapeError, also one os.Root reported) or
// that the operating system refused; invalid_input for a path no file can
// have (a NUL byte); not_found for a missing file or a file used as a
// directory; failed otherwise (a symlink loop, an I/O error). tool
// prefixes the message.
func (r *Root) ToolError(tool, given string, err error) *engine.ToolError {
	err = r.FSError(given, err)
	var esc *EscapeError
	switch {
	case errors.As(err, &esc):
		return engine.ToolErrorf(engine.ToolCodePermissionDenied, "%s: %v", tool, esc)
	case errors.Is(err, engine.ErrInvalidRequest):
		return engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: %v", tool, err)
	case errors.Is(err, fs.ErrNotExist) && errors.Is(err, syscall.ENOTDIR):
		return engine.ToolErrorf(engine.ToolCodeNotFound, "%s: %v", tool, err)
	case errors.Is(err, fs.ErrNotExist):
		return engine.ToolErrorf(engine.ToolCodeNotFound, "%s: %q does not exist in the workspace %s", tool, given, r.Dir())
	case errors.Is(err, fs.ErrPermission):
		return engine.ToolErrorf(engine.ToolCodePermissionDenied, "%s: the operating system refused access to %q: %v", tool, given, err)
	case errors.Is(err, syscall.ELOOP):
		return engine.ToolErrorf(engine.ToolCodeFailed, "%s: %q goes through a loop of symlinks: %v", tool, given, err)
	}
	return engine.ToolErrorf(engine.ToolCodeFailed, "%s: %q: %v", tool, given, err)
}

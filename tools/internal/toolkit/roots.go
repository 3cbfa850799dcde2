package toolkit

import (
	"errors"
	iofs "io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/workspace"
)

// Roots caches open workspace roots by directory. Safe for concurrent use;
// the zero value is ready.
type Roots struct {
	mu    sync.Mutex
	roots map[string]*workspace.Root // by cleaned directory
}

// Get returns the open workspace for dir (an absolute path), opening it on
// first use and again when the directory at that path is no longer the
// one open (deleted or replaced). Errors are *engine.ToolError naming tool.
func (rs *Roots) Get(tool, dir string) (*workspace.Root, *engine.ToolError) {
	if dir == "" {
		return nil, engine.ToolErrorf(engine.ToolCodeFailed, "%s was called without a workspace root; open a workspace first", tool)
	}
	if !filepath.IsAbs(dir) {
		return nil, engine.ToolErrorf(engine.ToolCodeFailed, "%s was called with the relative workspace root %q; the host must send an absolute path", tool, dir)
	}
	key := filepath.Clean(dir)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r, ok := rs.roots[key]; ok {
		if sameDir(r, key) {
			return r, nil
		}
		r.Close()
		delete(rs.roots, key)
	}
	r, err := workspace.Open(key)
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		return nil, engine.ToolErrorf(engine.ToolCodeNotFound, "the workspace root %s does not exist", key)
	case errors.Is(err, syscall.ENOTDIR):
		return nil, engine.ToolErrorf(engine.ToolCodeFailed, "the workspace root %s is not a directory", key)
	case err != nil:
		return nil, engine.ToolErrorf(engine.ToolCodeFailed, "cannot open the workspace root: %v", err)
	}
	if rs.roots == nil {
		rs.roots = map[string]*workspace.Root{}
	}
	rs.roots[key] = r
	return r, nil
}

// Close closes every cached root. The cache stays usable.
func (rs *Roots) Close() error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var errs []error
	for dir, r := range rs.roots {
		errs = append(errs, r.Close())
		delete(rs.roots, dir)
	}
	return errors.Join(errs...)
}

// sameDir reports whether the directory at path is still the one r has
// open.
func sameDir(r *workspace.Root, path string) bool {
	open, err := r.FS().Stat(".")
	if err != nil {
		return false
	}
	now, err := os.Stat(path)
	return err == nil && os.SameFile(open, now)
}

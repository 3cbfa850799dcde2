package index

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/plexus-agent/plexus/engine"
)

// FileChange is one file event, as the WebSocket protocol's
// client.file_changes carries them.
type FileChange struct {
	// Type is "created", "modified" or "deleted".
	Type string `json:"type"`
	// Path is workspace-relative (or absolute inside the workspace).
	Path string `json:"file_path"`
	// ContentHash ("sha256:<hex>") is the client's view of the content;
	// optional, and only a hint: the file is read and hashed anyway.
	ContentHash string `json:"content_hash,omitempty"`
}

// ApplyChanges updates the index for the changed files without a full
// scan: created and modified files are read (and analysed if their content
// is new), deleted ones leave the catalog. A change to a path outside the
// workspace is an error naming it; the others are still applied.
func (ix *Index) ApplyChanges(ctx context.Context, changes []FileChange) (BuildStats, error) {
	start := time.Now()
	var work []fileWork
	var removed []string
	var bad []error
	seen := map[string]bool{}
	ix.mu.RLock()
	files := ix.files
	ix.mu.RUnlock()
	for _, c := range changes {
		rel, err := ix.fsroot.Resolve(c.Path)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		rel = filepath.ToSlash(rel)
		if seen[rel] {
			continue
		}
		seen[rel] = true
		switch c.Type {
		case "created", "modified", "deleted":
		default:
			bad = append(bad, fmt.Errorf("%w: change of %s: type %q is not created, modified or deleted", engine.ErrInvalidRequest, c.Path, c.Type))
			continue
		}
		// The disk decides: a "deleted" file that exists is indexed, a
		// "modified" one that is gone (or ignored, or too big) is dropped.
		info, err := ix.fsroot.FS().Lstat(rel)
		ignored, _ := ix.fsroot.Ignored(rel)
		if err != nil || !info.Mode().IsRegular() || ignored || info.Size() > ix.svc.opts.MaxFileSize {
			if _, ok := files[rel]; ok {
				removed = append(removed, rel)
			}
			continue
		}
		work = append(work, fileWork{path: rel, size: info.Size(), mtime: info.ModTime().UnixNano()})
	}
	ix.buildMu.Lock()
	stats, err := ix.apply(ctx, work, removed, false, ix.reporter(nil))
	ix.buildMu.Unlock()
	stats.Duration = time.Since(start)
	if err != nil {
		return stats, err
	}
	return stats, errors.Join(bad...)
}

// watchDebounce is how long the watcher waits for more events before it
// applies what it collected: editors write a file in several steps.
const watchDebounce = 30 * time.Millisecond

// Watch follows file-system events under the workspace (Linux inotify and
// the like, through fsnotify) and applies them after a short debounce,
// until ctx ends. Once its watches are in place it refreshes the index, so
// changes made while it started are not missed. Directories created later are watched too; ignored
// directories (.gitignore, .git) are not. onApply, if set, is called after
// each batch with its stats and error. It returns ctx's error, or an error
// when watching cannot start (for example the inotify watch limit).
func (ix *Index) Watch(ctx context.Context, onApply func(BuildStats, error)) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", ix.root, err)
	}
	defer w.Close()
	// addTree watches the directory rel and every directory below it
	// (Walk does not report rel itself).
	addTree := func(rel string) error {
		if err := w.Add(filepath.Join(ix.root, filepath.FromSlash(rel))); err != nil {
			return fmt.Errorf("watch %s: %w (raise fs.inotify.max_user_watches, or index without --watch)", rel, err)
		}
		return ix.fsroot.Walk(ctx, rel, walkOptions(), func(p string, d fs.DirEntry) error {
			if d.IsDir() {
				if err := w.Add(filepath.Join(ix.root, filepath.FromSlash(p))); err != nil {
					return fmt.Errorf("watch %s: %w (raise fs.inotify.max_user_watches, or index without --watch)", p, err)
				}
			}
			return nil
		})
	}
	if err := addTree("."); err != nil {
		return err
	}
	// Changes made before the watches were in place have no event: one
	// refresh catches them.
	st, err := ix.Build(ctx, BuildOptions{})
	if onApply != nil {
		onApply(st, err)
	}
	pending := map[string]bool{}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-w.Errors:
			ix.svc.log.Warn("index watcher", "workspace", ix.root, "error", err)
		case ev := <-w.Events:
			rel, err := filepath.Rel(ix.root, ev.Name)
			if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
				continue
			}
			rel = filepath.ToSlash(rel)
			if rel == ".git" || strings.HasPrefix(rel, ".git/") {
				continue
			}
			if ev.Has(fsnotify.Create) {
				if fi, err := os.Lstat(ev.Name); err == nil && fi.IsDir() {
					if ignored, _ := ix.fsroot.Ignored(rel); !ignored {
						if err := addTree(rel); err != nil {
							ix.svc.log.Warn("index watcher", "error", err)
						}
						// Files may have been created before the watch.
						ix.fsroot.Walk(ctx, rel, walkOptions(), func(p string, d fs.DirEntry) error {
							if d.Type().IsRegular() {
								pending[p] = true
							}
							return nil
						})
					}
					timer.Reset(watchDebounce)
					continue
				}
			}
			pending[rel] = true
			timer.Reset(watchDebounce)
		case <-timer.C:
			var changes []FileChange
			ix.mu.RLock()
			files := ix.files
			ix.mu.RUnlock()
			for p := range pending {
				typ := "modified"
				if _, err := os.Lstat(filepath.Join(ix.root, filepath.FromSlash(p))); err != nil {
					typ = "deleted"
				}
				if typ == "deleted" {
					if _, ok := files[p]; !ok {
						// A deleted directory: drop the files under it.
						for f := range files {
							if strings.HasPrefix(f, p+"/") {
								changes = append(changes, FileChange{Type: "deleted", Path: f})
							}
						}
						continue
					}
				}
				changes = append(changes, FileChange{Type: typ, Path: p})
			}
			clear(pending)
			slices.SortFunc(changes, func(a, b FileChange) int { return strings.Compare(a.Path, b.Path) })
			stats, err := ix.ApplyChanges(ctx, changes)
			if onApply != nil {
				onApply(stats, err)
			}
		}
	}
}

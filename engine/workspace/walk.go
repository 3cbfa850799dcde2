package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// WalkOptions configure Walk. The zero value visits, at any depth,
// everything below the directory that git would not ignore, and stops at
// the first directory it cannot read.
type WalkOptions struct {
	// IncludeIgnored also visits entries that ignore rules exclude, and
	// descends into ignored directories. .git is skipped regardless.
	IncludeIgnored bool
	// MaxDepth limits how far below the walked directory Walk goes: 1
	// visits only the directory's own entries, 2 also their children, and
	// so on. Zero or less means no limit.
	MaxDepth int
	// SkipDir, when set, is called for each directory before fn sees it;
	// returning true leaves that directory out entirely (fn is not called
	// for it and Walk does not enter it). rel is as fn gets it.
	SkipDir func(rel string, d fs.DirEntry) bool
	// OnError, when set, is called when a directory below the walked one
	// cannot be listed or one of its ignore files cannot be read; the
	// directory's contents are then skipped (fn has already seen the
	// directory itself). Returning nil goes on with the walk; returning an
	// error stops it, and Walk returns that error. When OnError is nil such
	// an error stops the walk.
	OnError func(rel string, err error) error
}

// WalkFunc is called by Walk for each entry it visits. rel is the entry's
// workspace-relative path with forward slashes (never "." and never with a
// leading "./"); d describes the entry itself, not a symlink's target
// (d.Type() has fs.ModeSymlink for symlinks, which Walk never enters).
//
// Returning fs.SkipDir from a directory skips its contents; from a file it
// skips the rest of the file's directory. Returning fs.SkipAll stops the
// walk and Walk returns nil. Any other error stops the walk and Walk
// returns it unchanged.
type WalkFunc func(rel string, d fs.DirEntry) error

// Walk visits the entries below dir (a path as Resolve accepts; "" or "."
// for the whole workspace; dir itself is not passed to fn) depth-first,
// each directory's entries in byte order of their names, a directory
// before its contents. It sees the workspace the way git does:
//
//   - .gitignore files apply to their own directory and everything below
//     it, deeper files overriding shallower ones, with git's pattern syntax
//     (negation with "!", anchoring with a leading or inner "/", dir-only
//     patterns ending in "/", "*", "?", "[...]", "**"). The
//     .git/info/exclude of the workspace, and of any repository nested in
//     it, applies below that repository's directory with lower priority
//     than its .gitignore files. Ignore files outside the workspace (above
//     its root, core.excludesFile) are not read.
//   - As in git, nothing inside an ignored directory can be re-included;
//     Walk does not enter ignored directories unless
//     opts.IncludeIgnored. If dir itself is ignored (or inside an ignored
//     directory), everything below it is, and by default fn is never
//     called; Ignored tells callers whether that is the case.
//   - Entries named .git (directories or files) are never visited.
//   - Symlinks are reported but never followed, so Walk cannot leave the
//     workspace or loop; everything is read through the os.Root.
//
// If dir is a symlink to a directory inside the workspace, Walk walks the
// target, applying the rules of where it really is, and reports paths
// under dir as given. Walk checks ctx before each entry and returns
// ctx.Err() once it has ended.
//
// Errors: those of Resolve for dir; an error wrapping syscall.ENOTDIR when
// dir is not a directory; fs.ErrNotExist when it does not exist; a failure
// to list dir or read its ignore files (or those of the directories above
// it); errors from opts.OnError or fn as described there.
func (r *Root) Walk(ctx context.Context, dir string, opts WalkOptions, fn WalkFunc) error {
	lexical, real, err := r.resolve(dir)
	if err != nil {
		return err
	}
	fi, err := r.root.Stat(real)
	if err != nil {
		return fmt.Errorf("walk %s: %w", dir, r.FSError(dir, err))
	}
	if !fi.IsDir() {
		return &fs.PathError{Op: "walk", Path: dir, Err: syscall.ENOTDIR}
	}
	parts := splitPath(filepath.ToSlash(real))
	if slices.Contains(parts, gitDirName) {
		return nil // nothing in .git is ever visited
	}
	ps, ignored, err := r.rulesDown(parts, true)
	if err != nil {
		return fmt.Errorf("walk %s: %w", dir, err)
	}
	if ignored && !opts.IncludeIgnored {
		return nil
	}
	w := &walker{r: r, opts: opts, fn: fn}
	prefix := filepath.ToSlash(lexical)
	if prefix == "." {
		prefix = ""
	}
	err = w.walkDir(ctx, dirState{real: parts, report: prefix, rules: ps, ignored: ignored}, true)
	if errors.Is(err, fs.SkipAll) {
		return nil
	}
	return err
}

// walker is the state of one Walk call.
type walker struct {
	r    *Root
	opts WalkOptions
	fn   WalkFunc
}

// dirState describes a directory Walk is about to list.
type dirState struct {
	real    []string            // components of its real path below the root
	report  string              // its path as reported to fn; "" for the root
	rules   []gitignore.Pattern // rules of the directories above it
	ignored bool                // it (or a directory above it) is ignored
	depth   int                 // 0 for the walked directory
}

// walkDir lists one directory and visits its entries. An error it returns
// stops the walk (fs.SkipAll included).
func (w *walker) walkDir(ctx context.Context, st dirState, top bool) error {
	name := filepath.FromSlash(joinOrDot(st.real))
	entries, err := w.readDir(name)
	if err == nil && !st.ignored {
		hasGit, hasIgnore := false, false
		for _, e := range entries {
			switch e.Name() {
			case gitDirName:
				hasGit = e.IsDir()
			case gitignoreName:
				hasIgnore = true
			}
		}
		st.rules, err = w.r.dirRules(st.real, st.rules, hasGit, hasIgnore)
	}
	if err != nil {
		err = w.r.FSError(joinOrDot(st.real), err)
		if top || w.opts.OnError == nil {
			return fmt.Errorf("walk %s: %w", orDot(st.report), err)
		}
		return w.opts.OnError(orDot(st.report), err)
	}
	matcher := gitignore.NewMatcher(st.rules)
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		if e.Name() == gitDirName {
			continue
		}
		childReal := append(st.real[:len(st.real):len(st.real)], e.Name())
		isDir := e.IsDir() // false for symlinks, which are never entered
		ignored := st.ignored || matcher.Match(childReal, isDir)
		if ignored && !w.opts.IncludeIgnored {
			continue
		}
		rel := e.Name()
		if st.report != "" {
			rel = st.report + "/" + e.Name()
		}
		if isDir && w.opts.SkipDir != nil && w.opts.SkipDir(rel, e) {
			continue
		}
		err := w.fn(rel, e)
		if errors.Is(err, fs.SkipDir) {
			if isDir {
				continue
			}
			return nil // skip the rest of this directory
		}
		if err != nil {
			return err
		}
		if !isDir || (w.opts.MaxDepth > 0 && st.depth+1 >= w.opts.MaxDepth) {
			continue
		}
		if err := w.walkDir(ctx, dirState{real: childReal, report: rel, rules: st.rules, ignored: ignored, depth: st.depth + 1}, false); err != nil {
			return err
		}
	}
	return nil
}

// readDir lists a directory through the os.Root, sorted by name.
func (w *walker) readDir(name string) ([]fs.DirEntry, error) {
	f, err := w.r.root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, nil
}

// orDot returns rel, or "." for the root.
func orDot(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}

package fs

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/workspace"
	"github.com/plexus-agent/plexus/tools/internal/toolkit"
)

// maxUnreadable caps the directories a result names as unreadable.
const maxUnreadable = 20

// ListResult is the content of a list_files result. The key "files" is
// what front-ends show (protocols/ndjson-stdio.md).
type ListResult struct {
	// Path is the directory listed, workspace-relative with slashes.
	Path string `json:"path"`
	// Files are workspace-relative slash paths in walk order (sorted,
	// depth-first). Recursive listings hold files (and symlinks) only;
	// one-level listings also hold directories, with a trailing "/".
	Files []string `json:"files"`
	// Truncated is true when more entries matched than max_results.
	Truncated bool `json:"truncated"`
	// Unreadable names directories whose contents could not be listed,
	// with the reason.
	Unreadable []string `json:"unreadable,omitempty"`
	// Pending are the entries of Files that exist only as edits proposed
	// earlier in this model response (new files, and the new directories
	// they go in), not yet on disk. Files proposed for deletion are left
	// out of Files.
	Pending []string `json:"pending,omitempty"`
}

type listArgs struct {
	Path           *string `json:"path"`
	Recursive      *bool   `json:"recursive"`
	Pattern        *string `json:"pattern"`
	MaxResults     *int    `json:"max_results"`
	IncludeIgnored *bool   `json:"include_ignored"`
}

func (t *Tools) listFiles(ctx context.Context, root *workspace.Root, ov overlay, raw []byte) (engine.ToolResult, error) {
	const tool = ListFilesTool
	var a listArgs
	if err := toolkit.DecodeArgs(tool, raw, t.fields[tool], &a); err != nil {
		return engine.ToolResult{}, err
	}
	dir := "."
	if a.Path != nil && *a.Path != "" {
		dir = *a.Path
	}
	recursive := a.Recursive == nil || *a.Recursive
	limit, err := maxResults(tool, a.MaxResults, t.opts.ListResults, t.opts.MaxListResults)
	if err != nil {
		return engine.ToolResult{}, err
	}
	var g *workspace.Glob
	if a.Pattern != nil {
		if g, err = newGlob(tool, "pattern", *a.Pattern); err != nil {
			return engine.ToolResult{}, err
		}
	}
	p, err := t.resolve(tool, root, dir)
	if err != nil {
		return engine.ToolResult{}, err
	}
	opts, onDisk, err := t.walkOptions(tool, root, ov, p, a.IncludeIgnored)
	if err != nil {
		return engine.ToolResult{}, err
	}
	if !recursive {
		opts.MaxDepth = 1
	}
	res := ListResult{Path: p.show, Files: []string{}}
	opts.OnError = func(rel string, err error) error {
		t.opts.Logger.Debug("list_files: directory skipped", "dir", rel, "err", err)
		if len(res.Unreadable) < maxUnreadable {
			res.Unreadable = append(res.Unreadable, fmt.Sprintf("%s: %v", rel, err))
		}
		return nil
	}
	// Take one entry more than the limit: pending deletions are skipped
	// here and pending files merged in below, so truncation is decided
	// after the merge.
	realDir := p.file()
	if onDisk {
		err = root.Walk(ctx, filepath.FromSlash(p.show), opts, func(rel string, d iofs.DirEntry) error {
			if recursive && d.IsDir() {
				return nil
			}
			if !d.IsDir() {
				if f, ok := ov[joinRel(realDir, relTo(p.show, rel))]; ok && f.Deleted {
					return nil
				}
			}
			if !g.MatchUnder(rel, relTo(p.show, rel)) {
				return nil
			}
			if d.IsDir() {
				rel += "/"
			}
			res.Files = append(res.Files, rel)
			if len(res.Files) > limit {
				return iofs.SkipAll
			}
			return nil
		})
		if err != nil {
			return engine.ToolResult{}, walkError(ctx, tool, root, p, err)
		}
	}
	res.Pending = t.pendingEntries(root, ov, p, recursive, opts.IncludeIgnored, g)
	if len(res.Pending) > 0 {
		res.Files = append(res.Files, res.Pending...)
		slices.SortFunc(res.Files, walkOrder)
	}
	if len(res.Files) > limit {
		res.Files, res.Truncated = res.Files[:limit], true
		res.Pending = slices.DeleteFunc(res.Pending, func(e string) bool {
			_, kept := slices.BinarySearchFunc(res.Files, e, walkOrder)
			return !kept
		})
	}
	return engine.JSONResult(res, res.summary(recursive))
}

// pendingEntries returns the entries a listing of p gains from the
// overlay: pending files that are not on disk (and, one level deep, the
// new directories holding them), with the listing's depth, ignore rules
// and pattern applied, as workspace-relative paths under p.show.
func (t *Tools) pendingEntries(root *workspace.Root, ov overlay, p resolved, recursive, includeIgnored bool, g *workspace.Glob) []string {
	var out []string
	dir := p.file()
	for _, sub := range ov.filesUnder(dir) {
		if inGitDir(joinRel(dir, sub)) {
			continue // never listed, as Root.Walk does not
		}
		entry, isDir := sub, false
		if first, _, nested := strings.Cut(sub, "/"); nested && !recursive {
			entry, isDir = first, true
		}
		if _, err := root.FS().Lstat(filepath.FromSlash(joinRel(dir, entry))); err == nil {
			continue // on disk: the walk lists it, unless it is ignored
		}
		if !includeIgnored {
			ignored, err := root.Ignored(filepath.FromSlash(joinRel(dir, sub)))
			if err != nil {
				t.opts.Logger.Debug("list_files: pending file's ignore rules unreadable", "file", joinRel(dir, sub), "err", err)
			}
			if ignored {
				continue
			}
		}
		rel := joinRel(p.show, entry)
		if !g.MatchUnder(rel, entry) {
			continue
		}
		if isDir {
			rel += "/"
		}
		if !slices.Contains(out, rel) {
			out = append(out, rel)
		}
	}
	slices.SortFunc(out, walkOrder)
	return out
}

// walkOrder orders listing entries as Root.Walk visits them: component by
// component, each in byte order (so "a/x" comes before "a.txt"), a
// trailing "/" ignored.
func walkOrder(a, b string) int {
	a, b = strings.TrimSuffix(a, "/"), strings.TrimSuffix(b, "/")
	for a != "" && b != "" {
		ca, ra, _ := strings.Cut(a, "/")
		cb, rb, _ := strings.Cut(b, "/")
		if c := strings.Compare(ca, cb); c != 0 {
			return c
		}
		a, b = ra, rb
	}
	return strings.Compare(a, b)
}

// walkOptions checks that a resolved path is a directory a walk may list
// and returns the options for it: ignored files are included when the call
// asks or when the directory itself is ignored (it was named explicitly).
// onDisk is false for a directory that exists only as the directory of
// pending files.
func (t *Tools) walkOptions(tool string, root *workspace.Root, ov overlay, p resolved, includeIgnored *bool) (opts workspace.WalkOptions, onDisk bool, err error) {
	switch f, ok := ov.get(p); {
	case ok && f.Deleted:
		return opts, false, engine.ToolErrorf(engine.ToolCodeNotFound, "%s: %s does not exist for this call: an earlier call of this response proposed deleting it", tool, p.show)
	case ok:
		return opts, false, engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: %s is a file (proposed earlier in this response), not a directory; use read_file to read it", tool, p.show)
	}
	fi, err := root.FS().Stat(p.real)
	switch {
	case errors.Is(err, iofs.ErrNotExist) && len(ov.filesUnder(p.file())) > 0:
	case err != nil:
		return opts, false, pathError(tool, root, p.given, err)
	case !fi.IsDir():
		return opts, false, engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: %s is a file, not a directory; use read_file to read it", tool, p.show)
	default:
		onDisk = true
	}
	if inGitDir(p.show) || inGitDir(p.file()) {
		return opts, false, engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: %s is inside .git, which is never listed or searched; use git commands through run_command instead", tool, p.show)
	}
	opts.IncludeIgnored = includeIgnored != nil && *includeIgnored
	if !opts.IncludeIgnored {
		ignored, err := root.Ignored(p.real)
		if err != nil {
			return opts, false, pathError(tool, root, p.given, err)
		}
		opts.IncludeIgnored = ignored
	}
	return opts, onDisk, nil
}

// joinRel joins a workspace-relative directory and a path below it.
func joinRel(dir, rel string) string {
	if dir == "." {
		return rel
	}
	return dir + "/" + rel
}

// relTo returns rel relative to the directory dir (both workspace-relative).
func relTo(dir, rel string) string {
	if dir == "." {
		return rel
	}
	return strings.TrimPrefix(rel, dir+"/")
}

// maxResults validates a max_results argument.
func maxResults(tool string, v *int, def, limit int) (int, error) {
	if v == nil {
		return def, nil
	}
	if *v < 1 || *v > limit {
		return 0, toolkit.Invalid(tool, "max_results", "must be between 1 and %d, not %d", limit, *v)
	}
	return *v, nil
}

// walkError turns an error from Root.Walk into a *engine.ToolError.
func walkError(ctx context.Context, tool string, root *workspace.Root, p resolved, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return toolkit.CtxError(tool, ctx.Err())
	}
	return pathError(tool, root, p.given, err)
}

func (r ListResult) summary(recursive bool) string {
	noun, nouns, prep := "file", "files", "under"
	if !recursive {
		noun, nouns, prep = "entry", "entries", "in"
	}
	s := fmt.Sprintf("%s %s %s", plural(len(r.Files), noun, nouns), prep, r.Path)
	if n := len(r.Pending); n > 0 {
		s += fmt.Sprintf(" (%d pending)", n)
	}
	if r.Truncated {
		s += " (truncated)"
	}
	if n := len(r.Unreadable); n > 0 {
		s += fmt.Sprintf(", %s unreadable", plural(n, "directory", "directories"))
	}
	return s
}

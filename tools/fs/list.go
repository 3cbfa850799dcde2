package fs

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"path/filepath"
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
}

type listArgs struct {
	Path           *string `json:"path"`
	Recursive      *bool   `json:"recursive"`
	Pattern        *string `json:"pattern"`
	MaxResults     *int    `json:"max_results"`
	IncludeIgnored *bool   `json:"include_ignored"`
}

func (t *Tools) listFiles(ctx context.Context, root *workspace.Root, raw []byte, _ func(engine.ToolUpdate)) (engine.ToolResult, error) {
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
	opts, err := t.walkOptions(tool, root, p, a.IncludeIgnored)
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
	err = root.Walk(ctx, filepath.FromSlash(p.show), opts, func(rel string, d iofs.DirEntry) error {
		if recursive && d.IsDir() {
			return nil
		}
		if !g.MatchUnder(rel, relTo(p.show, rel)) {
			return nil
		}
		if len(res.Files) == limit {
			res.Truncated = true
			return iofs.SkipAll
		}
		if d.IsDir() {
			rel += "/"
		}
		res.Files = append(res.Files, rel)
		return nil
	})
	if err != nil {
		return engine.ToolResult{}, walkError(ctx, tool, root, p, err)
	}
	return engine.JSONResult(res, res.summary(recursive))
}

// walkOptions checks that a resolved path is a directory a walk may list
// and returns the options for it: ignored files are included when the call
// asks or when the directory itself is ignored (it was named explicitly).
func (t *Tools) walkOptions(tool string, root *workspace.Root, p resolved, includeIgnored *bool) (workspace.WalkOptions, error) {
	fi, err := root.FS().Stat(p.real)
	if err != nil {
		return workspace.WalkOptions{}, pathError(tool, root, p.given, err)
	}
	if !fi.IsDir() {
		return workspace.WalkOptions{}, engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: %s is a file, not a directory; use read_file to read it", tool, p.show)
	}
	if inGitDir(p.show) || inGitDir(filepath.ToSlash(p.real)) {
		return workspace.WalkOptions{}, engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: %s is inside .git, which is never listed or searched; use git commands through run_command instead", tool, p.show)
	}
	opts := workspace.WalkOptions{IncludeIgnored: includeIgnored != nil && *includeIgnored}
	if !opts.IncludeIgnored {
		ignored, err := root.Ignored(p.real)
		if err != nil {
			return workspace.WalkOptions{}, pathError(tool, root, p.given, err)
		}
		opts.IncludeIgnored = ignored
	}
	return opts, nil
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
		return ctxError(tool, ctx.Err())
	}
	return pathError(tool, root, p.given, err)
}

func (r ListResult) summary(recursive bool) string {
	noun, nouns, prep := "file", "files", "under"
	if !recursive {
		noun, nouns, prep = "entry", "entries", "in"
	}
	s := fmt.Sprintf("%s %s %s", plural(len(r.Files), noun, nouns), prep, r.Path)
	if r.Truncated {
		s += " (truncated)"
	}
	if n := len(r.Unreadable); n > 0 {
		s += fmt.Sprintf(", %s unreadable", plural(n, "directory", "directories"))
	}
	return s
}

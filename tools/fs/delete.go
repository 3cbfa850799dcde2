package fs

import (
	"context"
	"fmt"
	iofs "io/fs"
	"path"
	"path/filepath"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/workspace"
	"github.com/plexus-agent/plexus/tools/internal/toolkit"
)

// DeleteResult is the content of a delete_file result: what is proposed.
type DeleteResult struct {
	// Path is the file as the call named it, workspace-relative with
	// slashes.
	Path string `json:"path"`
	// Target is the file the deletion removes when Path goes through a
	// symlinked directory (workspace-relative); empty when it is Path.
	Target string `json:"target,omitempty"`
	// Bytes is the size of the file proposed for deletion.
	Bytes int `json:"bytes"`
	// Status is StatusProposed.
	Status string `json:"status"`
}

type deleteArgs struct {
	Path      *string `json:"path"`
	Rationale *string `json:"rationale"`
}

func (t *Tools) deleteFile(ctx context.Context, root *workspace.Root, ov overlay, raw []byte) (engine.ToolResult, error) {
	const tool = DeleteFileTool
	var a deleteArgs
	if err := toolkit.DecodeArgs(tool, raw, t.fields[tool], &a); err != nil {
		return engine.ToolResult{}, err
	}
	if a.Path == nil || *a.Path == "" {
		return engine.ToolResult{}, toolkit.Missing(tool, "path", "the file to delete, relative to the workspace root")
	}
	p, err := t.editTarget(tool, root, *a.Path)
	if err != nil {
		return engine.ToolResult{}, err
	}
	if _, pending := ov.get(p); !pending {
		if err := t.checkDeletable(tool, root, p); err != nil {
			return engine.ToolResult{}, err
		}
	}
	cur, err := t.current(tool, root, ov, p)
	switch {
	case err != nil:
		return engine.ToolResult{}, err
	case !cur.exists && cur.pending:
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeNotFound, "%s: %s is already proposed for deletion by an earlier call of this response", tool, p.show)
	case !cur.exists:
		return engine.ToolResult{}, pathError(tool, root, p.given, iofs.ErrNotExist)
	}
	if err := ctx.Err(); err != nil {
		return engine.ToolResult{}, toolkit.CtxError(tool, err)
	}
	res := DeleteResult{Path: p.show, Target: targetOf(p), Bytes: len(cur.content), Status: StatusProposed}
	summary := fmt.Sprintf("proposed deleting %s (%s)", shownAs(p), formatBytes(int64(len(cur.content))))
	return proposal(res, summary, engine.FileEdit{Path: p.file(), Base: cur.content, BaseExists: true, Delete: true})
}

// checkDeletable checks, on disk, that the entry p names is a regular
// file: not a directory, and not a symlink (whose deletion would be
// ambiguous between the link and its target). Errors are
// *engine.ToolError.
func (t *Tools) checkDeletable(tool string, root *workspace.Root, p resolved) error {
	// The entry itself: its directory with symlinks resolved, and its own
	// name, not followed.
	dir, err := root.Real(filepath.FromSlash(path.Dir(p.show)))
	if err != nil {
		return pathError(tool, root, p.given, err)
	}
	fi, err := root.FS().Lstat(filepath.Join(dir, path.Base(p.show)))
	switch {
	case err != nil:
		return pathError(tool, root, p.given, err)
	case fi.IsDir():
		return engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: %s is a directory; delete_file deletes one file per call (delete the files in it, or remove the directory with run_command)", tool, p.show)
	case fi.Mode()&iofs.ModeSymlink != 0:
		return engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: %s is a symlink; delete_file deletes regular files only (remove the link with run_command, or delete the file it points to, %s)", tool, p.show, p.file())
	case !fi.Mode().IsRegular():
		return engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: %s is not a regular file (%s) and cannot be deleted with delete_file", tool, p.show, fileType(fi.Mode()))
	}
	return nil
}

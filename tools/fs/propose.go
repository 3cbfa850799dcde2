package fs

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"path"
	"path/filepath"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/workspace"
	"github.com/plexus-agent/plexus/tools/internal/toolkit"
)

// Status values of an edit tool's result.
const (
	// StatusProposed: the result's edit is proposed; the engine applies it
	// once the user approves it.
	StatusProposed = "proposed"
	// StatusUnchanged: write_file found the file already holding the
	// content, so nothing is proposed.
	StatusUnchanged = "unchanged"
)

// editTarget resolves the path an edit tool was given and refuses what the
// edit tools never change: the workspace root and anything in .git.
// Errors are *engine.ToolError.
func (t *Tools) editTarget(tool string, root *workspace.Root, given string) (resolved, error) {
	p, err := t.resolve(tool, root, given)
	if err != nil {
		return resolved{}, err
	}
	if p.show == "." || p.file() == "." {
		return resolved{}, toolkit.Invalid(tool, "path", "names the workspace root; give the path of a file")
	}
	if inGitDir(p.show) || inGitDir(p.file()) {
		return resolved{}, engine.ToolErrorf(engine.ToolCodePermissionDenied, "%s: %s is inside .git; the file tools do not change git's own files (hooks, config, objects), use git commands through run_command instead", tool, p.show)
	}
	return p, nil
}

// fileState is a file's current content as an edit sees it.
type fileState struct {
	content []byte
	exists  bool
	// pending is true when the state is an earlier call's proposal in
	// the same model response (content, or a deletion).
	pending bool
}

// current returns the current state of the file p: its pending content
// when an earlier call of the response edited it, else the disk's. It
// refuses directories, other files that are not regular, and files larger
// than MaxFileBytes. Errors are *engine.ToolError.
func (t *Tools) current(tool string, root *workspace.Root, ov overlay, p resolved) (fileState, error) {
	if f, ok := ov.get(p); ok {
		if f.Deleted {
			return fileState{pending: true}, nil
		}
		return fileState{content: f.Content, exists: true, pending: true}, nil
	}
	f, exists, err := openRegular(tool, root, ov, p)
	if err != nil || !exists {
		return fileState{}, err
	}
	defer f.Close()
	limit := t.opts.MaxFileBytes
	tooLarge := func(size int64) error {
		return engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: %s is %s, larger than the %s the file tools edit; change it with run_command instead", tool, p.show, formatBytes(size), formatBytes(int64(limit)))
	}
	if fi, err := f.Stat(); err == nil && fi.Size() > int64(limit) {
		return fileState{}, tooLarge(fi.Size())
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return fileState{}, engine.ToolErrorf(engine.ToolCodeFailed, "%s: reading %s failed: %v", tool, p.show, err)
	}
	if len(b) > limit {
		return fileState{}, tooLarge(int64(len(b)))
	}
	return fileState{content: b, exists: true}, nil
}

// checkParent checks that the directory a new file goes in exists: on
// disk, or as the directory of files proposed earlier in the response, or
// that it may be created (createDirs). Errors are *engine.ToolError.
func checkParent(tool string, root *workspace.Root, ov overlay, p resolved, createDirs bool) error {
	file := p.file()
	if above := ov.fileAbove(file); above != "" {
		return engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: %s is a file (proposed earlier in this response), so %s cannot be created in it", tool, above, p.show)
	}
	dir := path.Dir(file)
	fi, err := root.FS().Stat(filepath.FromSlash(dir))
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		return engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: %s is a file, so %s cannot be created in it", tool, dir, p.show)
	case !errors.Is(err, iofs.ErrNotExist):
		return pathError(tool, root, p.given, err)
	case createDirs || len(ov.filesUnder(dir)) > 0:
		return nil
	}
	return engine.ToolErrorf(engine.ToolCodeNotFound, "%s: the directory %s does not exist; set create_dirs to true to create it along with %s", tool, dir, p.show)
}

// targetOf is the file an edit of p changes, when it is not p as named (p
// is a symlink or goes through one); "" otherwise.
func targetOf(p resolved) string {
	if p.file() == p.show {
		return ""
	}
	return p.file()
}

// digest is "sha256:" and the hex SHA-256 of b.
func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// proposal is the result of an edit tool: content v, the summary, and the
// one edit.
func proposal(v any, summary string, edit engine.FileEdit) (engine.ToolResult, error) {
	res, err := engine.JSONResult(v, summary)
	if err != nil {
		return engine.ToolResult{}, err
	}
	res.Edits = []engine.FileEdit{edit}
	return res, nil
}

// shownAs names a proposal's file for a summary: the path as named, and
// the file it changes when that differs.
func shownAs(p resolved) string {
	if t := targetOf(p); t != "" {
		return fmt.Sprintf("%s (→ %s)", p.show, t)
	}
	return p.show
}

package fs

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/workspace"
	"github.com/plexus-agent/plexus/tools/internal/toolkit"
)

// newFileMode is the mode of a file write_file creates, before the umask.
const newFileMode = 0o644

// newDirMode is the mode of directories create_dirs makes, before the
// umask.
const newDirMode = 0o755

// keptModeBits are the mode bits write_file carries over from the file it
// replaces.
const keptModeBits = iofs.ModePerm | iofs.ModeSetuid | iofs.ModeSetgid | iofs.ModeSticky

// WriteResult is the content of a write_file result.
type WriteResult struct {
	// Path is the file as the call named it, workspace-relative with
	// slashes.
	Path string `json:"path"`
	// BytesWritten is the size of the new content, in bytes.
	BytesWritten int `json:"bytes_written"`
	// Created is true when the file did not exist before.
	Created bool `json:"created"`
	// SHA256 is "sha256:" and the hex digest of the new content.
	SHA256 string `json:"sha256"`
	// FilesModified holds the file actually written (Path with symlinks
	// resolved); the engine collects it into the turn's metadata.
	FilesModified []string `json:"files_modified"`
}

type writeArgs struct {
	Path       *string `json:"path"`
	Content    *string `json:"content"`
	CreateDirs *bool   `json:"create_dirs"`
}

func (t *Tools) writeFile(ctx context.Context, root *workspace.Root, raw []byte, _ func(engine.ToolUpdate)) (engine.ToolResult, error) {
	const tool = WriteFileTool
	var a writeArgs
	if err := toolkit.DecodeArgs(tool, raw, t.fields[tool], &a); err != nil {
		return engine.ToolResult{}, err
	}
	if a.Path == nil || *a.Path == "" {
		return engine.ToolResult{}, toolkit.Missing(tool, "path", "the file to write, relative to the workspace root")
	}
	if a.Content == nil {
		return engine.ToolResult{}, toolkit.Missing(tool, "content", "the complete new contents of the file; use \"\" for an empty file")
	}
	if len(*a.Content) > t.opts.MaxWriteBytes {
		return engine.ToolResult{}, toolkit.Invalid(tool, "content", "is %s, more than the %s write_file accepts", formatBytes(int64(len(*a.Content))), formatBytes(int64(t.opts.MaxWriteBytes)))
	}
	p, err := t.resolve(tool, root, *a.Path)
	if err != nil {
		return engine.ToolResult{}, err
	}
	realSlash := filepath.ToSlash(p.real)
	if p.show == "." || realSlash == "." {
		return engine.ToolResult{}, toolkit.Invalid(tool, "path", "names the workspace root; give the path of a file")
	}
	if inGitDir(p.show) || inGitDir(realSlash) {
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodePermissionDenied, "%s: %s is inside .git; write_file does not change git's own files (hooks, config, objects), use git commands through run_command instead", tool, p.show)
	}

	created := false
	var mode iofs.FileMode
	fi, err := root.FS().Lstat(p.real)
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		created = true
	case err != nil:
		return engine.ToolResult{}, pathError(tool, root, p.given, err)
	case fi.IsDir():
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: %s is a directory; give the path of a file", tool, p.show)
	case !fi.Mode().IsRegular():
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: %s is not a regular file (%s) and cannot be written", tool, p.show, fileType(fi.Mode()))
	default:
		mode = fi.Mode() & keptModeBits
	}

	dir := filepath.Dir(p.real)
	if created {
		if err := t.ensureDir(tool, root, p, dir, a.CreateDirs != nil && *a.CreateDirs); err != nil {
			return engine.ToolResult{}, err
		}
	}
	if err := ctx.Err(); err != nil {
		return engine.ToolResult{}, ctxError(tool, err)
	}
	data := []byte(*a.Content)
	if err := writeAtomic(root, p.real, data, created, mode); err != nil {
		return engine.ToolResult{}, pathError(tool, root, p.given, err)
	}
	sum := sha256.Sum256(data)
	res := WriteResult{
		Path: p.show, BytesWritten: len(data), Created: created,
		SHA256:        "sha256:" + hex.EncodeToString(sum[:]),
		FilesModified: []string{realSlash},
	}
	return engine.JSONResult(res, res.summary())
}

// ensureDir checks that the directory a new file goes in exists, creating
// it (and its parents) when allowed. Errors are *engine.ToolError.
func (t *Tools) ensureDir(tool string, root *workspace.Root, p resolved, dir string, create bool) error {
	fi, err := root.FS().Stat(dir)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		return engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: %s is a file, so %s cannot be created in it", tool, filepath.ToSlash(dir), p.show)
	case !errors.Is(err, iofs.ErrNotExist):
		return pathError(tool, root, p.given, err)
	case !create:
		return engine.ToolErrorf(engine.ToolCodeNotFound, "%s: the directory %s does not exist; set create_dirs to true to create it along with %s", tool, filepath.ToSlash(dir), p.show)
	}
	if err := root.FS().MkdirAll(dir, newDirMode); err != nil {
		return pathError(tool, root, p.given, err)
	}
	return nil
}

// writeAtomic replaces (or creates) the file name in root with data: it
// writes a temporary file in the same directory, syncs it, gives it mode
// (for a file that existed; a new file gets newFileMode less the umask)
// and renames it over name, so readers see the old or the new content,
// never a mix. Everything goes through the os.Root.
func writeAtomic(root *workspace.Root, name string, data []byte, created bool, mode iofs.FileMode) (err error) {
	fsys := root.FS()
	dir, base := filepath.Split(name)
	perm := iofs.FileMode(newFileMode)
	if !created {
		perm = 0o600 // until the chmod below; never wider than the target
	}
	var tmp string
	var f *os.File
	for range 10 {
		tmp = filepath.Join(dir, "."+base+"."+randomHex(6)+".plexus.tmp")
		f, err = fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if !errors.Is(err, iofs.ErrExist) {
			break
		}
	}
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			fsys.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err = f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", tmp, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if !created {
		if err = fsys.Chmod(tmp, mode); err != nil {
			return err
		}
	}
	if err = fsys.Rename(tmp, name); err != nil {
		return err
	}
	// Make the rename durable; a failure here does not undo the write.
	if d, derr := fsys.Open(orDot(dir)); derr == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// orDot returns dir, or "." when it is empty.
func orDot(dir string) string {
	if dir == "" {
		return "."
	}
	return dir
}

// randomHex returns 2n random hex digits.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (r WriteResult) summary() string {
	s := fmt.Sprintf("wrote %s to %s", formatBytes(int64(r.BytesWritten)), r.Path)
	if r.Created {
		s += " (new file)"
	}
	return s
}

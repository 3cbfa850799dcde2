package fs

import (
	"bytes"
	"context"
	"fmt"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/workspace"
	"github.com/plexus-agent/plexus/tools/internal/toolkit"
)

// WriteResult is the content of a write_file result: what is proposed.
type WriteResult struct {
	// Path is the file as the call named it, workspace-relative with
	// slashes.
	Path string `json:"path"`
	// Target is the file the edit changes when Path is a symlink or goes
	// through one (workspace-relative); empty when it is Path itself.
	Target string `json:"target,omitempty"`
	// Bytes is the size of the proposed content.
	Bytes int `json:"bytes"`
	// Created is true when the file does not exist yet (on disk, or after
	// the earlier edits of the response).
	Created bool `json:"created"`
	// SHA256 is "sha256:" and the hex digest of the proposed content.
	SHA256 string `json:"sha256"`
	// Status is StatusProposed, or StatusUnchanged when the file already
	// holds the content (the result then has no edit).
	Status string `json:"status"`
}

type writeArgs struct {
	Path               *string   `json:"path"`
	Content            *string   `json:"content"`
	CreateDirs         *bool     `json:"create_dirs"`
	Rationale          *string   `json:"rationale"`
	AcceptanceCriteria *[]string `json:"acceptance_criteria"`
}

func (t *Tools) writeFile(ctx context.Context, root *workspace.Root, ov overlay, raw []byte) (engine.ToolResult, error) {
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
	if len(*a.Content) > t.opts.MaxFileBytes {
		return engine.ToolResult{}, toolkit.Invalid(tool, "content", "is %s, more than the %s write_file accepts", formatBytes(int64(len(*a.Content))), formatBytes(int64(t.opts.MaxFileBytes)))
	}
	p, err := t.editTarget(tool, root, *a.Path)
	if err != nil {
		return engine.ToolResult{}, err
	}
	cur, err := t.current(tool, root, ov, p)
	if err != nil {
		return engine.ToolResult{}, err
	}
	if !cur.exists {
		if err := checkParent(tool, root, ov, p, a.CreateDirs != nil && *a.CreateDirs); err != nil {
			return engine.ToolResult{}, err
		}
	}
	if err := ctx.Err(); err != nil {
		return engine.ToolResult{}, toolkit.CtxError(tool, err)
	}
	data := []byte(*a.Content)
	res := WriteResult{
		Path: p.show, Target: targetOf(p), Bytes: len(data), Created: !cur.exists,
		SHA256: digest(data), Status: StatusProposed,
	}
	if cur.exists && bytes.Equal(cur.content, data) {
		res.Status = StatusUnchanged
		return engine.JSONResult(res, fmt.Sprintf("%s already holds this content; nothing proposed", shownAs(p)))
	}
	summary := fmt.Sprintf("proposed %s for %s", formatBytes(int64(len(data))), shownAs(p))
	if res.Created {
		summary += " (new file)"
	}
	return proposal(res, summary, engine.FileEdit{Path: p.file(), Base: cur.content, BaseExists: cur.exists, New: data})
}

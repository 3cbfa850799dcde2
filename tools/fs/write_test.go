package fs

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-agent/plexus/internal/testtree"

	"github.com/plexus-agent/plexus/engine"
)

// writeArgsJSON encodes write_file arguments.
func writeArgsJSON(t *testing.T, path, content string, createDirs bool) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"path": path, "content": content, "create_dirs": createDirs})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// wantEdit checks that a call proposed exactly the edit want.
func wantEdit(t *testing.T, c call, want engine.FileEdit) {
	t.Helper()
	if len(c.res.Edits) != 1 {
		t.Fatalf("proposed %d edits, want 1: %+v", len(c.res.Edits), c.res.Edits)
	}
	got := c.res.Edits[0]
	if got.Path != want.Path || got.BaseExists != want.BaseExists || got.Delete != want.Delete ||
		!bytes.Equal(got.Base, want.Base) || !bytes.Equal(got.New, want.New) {
		t.Errorf("edit\ngot  {Path:%s BaseExists:%v Delete:%v Base:%q New:%.60q}\nwant {Path:%s BaseExists:%v Delete:%v Base:%q New:%.60q}",
			got.Path, got.BaseExists, got.Delete, got.Base, got.New, want.Path, want.BaseExists, want.Delete, want.Base, want.New)
	}
	if !want.Delete && got.New == nil {
		t.Error("New is nil; an edit that keeps the file must carry its content, even when empty")
	}
}

func TestWriteFile(t *testing.T) {
	ws := t.TempDir()
	testtree.Write(t, ws, map[string]string{"main.go": "package old\n", "docs/real.md": "old\n", "util/u.go": "package util\n"})
	testtree.Symlink(t, "docs/real.md", filepath.Join(ws, "README.md"))
	testtree.Symlink(t, "util", filepath.Join(ws, "utillink"))
	testtree.Symlink(t, filepath.Join(ws, "docs", "new.md"), filepath.Join(ws, "dangling.md"))
	unchangedAfter(t, ws)
	tl := newTools(t, Options{})
	content := strings.Repeat("x", 2150)
	sum := digest([]byte(content))

	tests := []struct {
		name    string
		path    string
		dirs    bool
		want    WriteResult
		edit    engine.FileEdit
		summary string
	}{
		{name: "new file", path: "new.txt",
			want:    WriteResult{Path: "new.txt", Bytes: 2150, Created: true, SHA256: sum, Status: StatusProposed},
			edit:    engine.FileEdit{Path: "new.txt", New: []byte(content)},
			summary: "proposed 2.1 KiB for new.txt (new file)"},
		{name: "replace", path: "main.go",
			want:    WriteResult{Path: "main.go", Bytes: 2150, SHA256: sum, Status: StatusProposed},
			edit:    engine.FileEdit{Path: "main.go", Base: []byte("package old\n"), BaseExists: true, New: []byte(content)},
			summary: "proposed 2.1 KiB for main.go"},
		{name: "create_dirs", path: "a/b/c.txt", dirs: true,
			want: WriteResult{Path: "a/b/c.txt", Bytes: 2150, Created: true, SHA256: sum, Status: StatusProposed},
			edit: engine.FileEdit{Path: "a/b/c.txt", New: []byte(content)}},
		{name: "through a symlink inside", path: "README.md",
			want:    WriteResult{Path: "README.md", Target: "docs/real.md", Bytes: 2150, SHA256: sum, Status: StatusProposed},
			edit:    engine.FileEdit{Path: "docs/real.md", Base: []byte("old\n"), BaseExists: true, New: []byte(content)},
			summary: "proposed 2.1 KiB for README.md (→ docs/real.md)"},
		{name: "through a symlinked directory", path: "utillink/v.go",
			want: WriteResult{Path: "utillink/v.go", Target: "util/v.go", Bytes: 2150, Created: true, SHA256: sum, Status: StatusProposed},
			edit: engine.FileEdit{Path: "util/v.go", New: []byte(content)}},
		{name: "dangling symlink inside creates its target", path: "dangling.md",
			want: WriteResult{Path: "dangling.md", Target: "docs/new.md", Bytes: 2150, Created: true, SHA256: sum, Status: StatusProposed},
			edit: engine.FileEdit{Path: "docs/new.md", New: []byte(content)}},
		{name: "absolute path inside", path: filepath.Join(ws, "abs.txt"),
			want: WriteResult{Path: "abs.txt", Bytes: 2150, Created: true, SHA256: sum, Status: StatusProposed},
			edit: engine.FileEdit{Path: "abs.txt", New: []byte(content)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got WriteResult
			c := mustOK(t, tl, ws, WriteFileTool, writeArgsJSON(t, tt.path, content, tt.dirs), &got)
			if got != tt.want {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
			if tt.summary != "" && c.res.Summary != tt.summary {
				t.Errorf("summary = %q, want %q", c.res.Summary, tt.summary)
			}
			wantEdit(t, c, tt.edit)
		})
	}

	t.Run("empty content", func(t *testing.T) {
		var got WriteResult
		c := mustOK(t, tl, ws, WriteFileTool, writeArgsJSON(t, "empty.txt", "", false), &got)
		if got.SHA256 != "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" || got.Bytes != 0 || !got.Created {
			t.Errorf("got %+v", got)
		}
		wantEdit(t, c, engine.FileEdit{Path: "empty.txt", New: []byte{}})
		if c.res.Summary != "proposed 0 B for empty.txt (new file)" {
			t.Errorf("summary = %q", c.res.Summary)
		}
	})
	t.Run("same content proposes nothing", func(t *testing.T) {
		var got WriteResult
		c := mustOK(t, tl, ws, WriteFileTool, writeArgsJSON(t, "main.go", "package old\n", false), &got)
		if got.Status != StatusUnchanged || got.Created || len(c.res.Edits) != 0 {
			t.Errorf("got %+v, edits %v", got, c.res.Edits)
		}
		if c.res.Summary != "main.go already holds this content; nothing proposed" {
			t.Errorf("summary = %q", c.res.Summary)
		}
	})
	t.Run("rationale and acceptance criteria are accepted", func(t *testing.T) {
		var got WriteResult
		c := mustOK(t, tl, ws, WriteFileTool, `{"path":"main.go","content":"package main\n","rationale":"rename the package","acceptance_criteria":["go build ./... passes"]}`, &got)
		wantEdit(t, c, engine.FileEdit{Path: "main.go", Base: []byte("package old\n"), BaseExists: true, New: []byte("package main\n")})
	})
}

func TestWriteFileErrors(t *testing.T) {
	ws := t.TempDir()
	testtree.Write(t, ws, map[string]string{"dir/x.txt": "x", "file.txt": "f", ".git/HEAD": "ref\n", "huge.txt": strings.Repeat("h", 101)})
	testtree.Symlink(t, ".git", filepath.Join(ws, "gitlink"))
	unchangedAfter(t, ws)
	tl := newTools(t, Options{MaxFileBytes: 100})
	tests := []struct {
		name  string
		args  string
		code  engine.ToolErrorCode
		parts []string
	}{
		{"missing directory", writeArgsJSON(t, "new/x.txt", "x", false), engine.ToolCodeNotFound, []string{"directory new does not exist", "create_dirs"}},
		{"a directory", writeArgsJSON(t, "dir", "x", false), engine.ToolCodeInvalidInput, []string{"dir is a directory"}},
		{"the root", writeArgsJSON(t, ".", "x", false), engine.ToolCodeInvalidInput, []string{`"path"`, "workspace root"}},
		{"parent is a file", writeArgsJSON(t, "file.txt/x", "x", true), engine.ToolCodeNotFound, []string{"file.txt is a file"}},
		{"inside .git", writeArgsJSON(t, ".git/hooks/pre-commit", "#!/bin/sh\n", true), engine.ToolCodePermissionDenied, []string{"inside .git", "run_command"}},
		{"into .git through a symlink", writeArgsJSON(t, "gitlink/config", "x", false), engine.ToolCodePermissionDenied, []string{"inside .git"}},
		{"too large", writeArgsJSON(t, "big.txt", strings.Repeat("x", 101), false), engine.ToolCodeInvalidInput, []string{`"content"`, "101 B", "100 B"}},
		{"replacing a file over the limit", writeArgsJSON(t, "huge.txt", "small", false), engine.ToolCodeInvalidInput, []string{"huge.txt is 101 B", "100 B", "run_command"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := invoke(context.Background(), tl, ws, WriteFileTool, tt.args)
			wantToolError(t, c.err, tt.code, tt.parts...)
			if c.res.Edits != nil {
				t.Errorf("a refused call proposed %v", c.res.Edits)
			}
		})
	}

	// A cancelled call proposes nothing.
	ctx, cancel := context.WithCancel(context.Background())
	tl.afterResolve = func(string) { cancel() }
	c := invoke(ctx, tl, ws, WriteFileTool, writeArgsJSON(t, "late.txt", "x", false))
	wantToolError(t, c.err, engine.ToolCodeCancelled)
	if c.res.Edits != nil {
		t.Errorf("a cancelled call proposed %v", c.res.Edits)
	}
}

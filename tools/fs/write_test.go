package fs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/plexus-agent/plexus/internal/testtree"

	"github.com/plexus-agent/plexus/engine"
)

// args encodes write_file arguments.
func writeArgsJSON(t *testing.T, path, content string, createDirs bool) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"path": path, "content": content, "create_dirs": createDirs})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// dirNames lists the names in dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestWriteFile(t *testing.T) {
	ws := t.TempDir()
	testtree.Write(t, ws, map[string]string{"main.go": "package old\n", "docs/real.md": "old\n"})
	if err := os.Chmod(filepath.Join(ws, "main.go"), 0o750); err != nil {
		t.Fatal(err)
	}
	testtree.Symlink(t, "docs/real.md", filepath.Join(ws, "README.md"))
	tl := newTools(t, Options{})
	content := strings.Repeat("x", 2150)
	sum := sha256.Sum256([]byte(content))
	digest := "sha256:" + hex.EncodeToString(sum[:])

	tests := []struct {
		name     string
		path     string
		dirs     bool
		want     WriteResult
		file     string // where the content must land
		summary  string
		wantMode os.FileMode
	}{
		{name: "new file", path: "new.txt",
			want: WriteResult{Path: "new.txt", BytesWritten: 2150, Created: true, SHA256: digest, FilesModified: []string{"new.txt"}},
			file: "new.txt", summary: "wrote 2.1 KiB to new.txt (new file)"},
		{name: "overwrite keeps the mode", path: "main.go",
			want: WriteResult{Path: "main.go", BytesWritten: 2150, SHA256: digest, FilesModified: []string{"main.go"}},
			file: "main.go", summary: "wrote 2.1 KiB to main.go", wantMode: 0o750},
		{name: "create_dirs", path: "a/b/c.txt", dirs: true,
			want: WriteResult{Path: "a/b/c.txt", BytesWritten: 2150, Created: true, SHA256: digest, FilesModified: []string{"a/b/c.txt"}},
			file: "a/b/c.txt"},
		{name: "through a symlink inside", path: "README.md",
			want: WriteResult{Path: "README.md", BytesWritten: 2150, SHA256: digest, FilesModified: []string{"docs/real.md"}},
			file: "docs/real.md"},
		{name: "absolute path inside", path: filepath.Join(ws, "abs.txt"),
			want: WriteResult{Path: "abs.txt", BytesWritten: 2150, Created: true, SHA256: digest, FilesModified: []string{"abs.txt"}},
			file: "abs.txt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got WriteResult
			c := mustOK(t, tl, ws, WriteFileTool, writeArgsJSON(t, tt.path, content, tt.dirs), &got)
			if !equalWrite(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
			if tt.summary != "" && c.res.Summary != tt.summary {
				t.Errorf("summary = %q, want %q", c.res.Summary, tt.summary)
			}
			b, err := os.ReadFile(filepath.Join(ws, filepath.FromSlash(tt.file)))
			if err != nil || string(b) != content {
				t.Errorf("%s holds %d bytes, %v", tt.file, len(b), err)
			}
			if tt.wantMode != 0 {
				fi, _ := os.Stat(filepath.Join(ws, tt.file))
				if fi.Mode().Perm() != tt.wantMode {
					t.Errorf("mode = %v, want %v", fi.Mode().Perm(), tt.wantMode)
				}
			}
		})
	}
	if fi, err := os.Lstat(filepath.Join(ws, "README.md")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("README.md is no longer a symlink: %v %v", fi.Mode(), err)
	}
	for _, dir := range []string{ws, filepath.Join(ws, "docs"), filepath.Join(ws, "a", "b")} {
		for _, name := range dirNames(t, dir) {
			if strings.HasSuffix(name, ".tmp") {
				t.Errorf("temporary file %s left in %s", name, dir)
			}
		}
	}

	// An empty content is a valid (empty) file.
	var got WriteResult
	mustOK(t, tl, ws, WriteFileTool, writeArgsJSON(t, "empty.txt", "", false), &got)
	if fi, err := os.Stat(filepath.Join(ws, "empty.txt")); err != nil || fi.Size() != 0 || got.SHA256 != "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Errorf("empty write: %v %v %+v", fi, err, got)
	}
}

func equalWrite(a, b WriteResult) bool {
	return a.Path == b.Path && a.BytesWritten == b.BytesWritten && a.Created == b.Created && a.SHA256 == b.SHA256 && slices.Equal(a.FilesModified, b.FilesModified)
}

func TestWriteFileErrors(t *testing.T) {
	ws := t.TempDir()
	testtree.Write(t, ws, map[string]string{"dir/x.txt": "x", "file.txt": "f", ".git/HEAD": "ref\n"})
	tl := newTools(t, Options{MaxWriteBytes: 100})
	tests := []struct {
		name  string
		args  string
		code  engine.ToolErrorCode
		parts []string
	}{
		{"missing directory", writeArgsJSON(t, "new/x.txt", "x", false), engine.ToolCodeNotFound, []string{"directory new does not exist", "create_dirs"}},
		{"a directory", writeArgsJSON(t, "dir", "x", false), engine.ToolCodeInvalidInput, []string{"dir is a directory"}},
		{"the root", writeArgsJSON(t, ".", "x", false), engine.ToolCodeInvalidInput, []string{"workspace root"}},
		{"parent is a file", writeArgsJSON(t, "file.txt/x", "x", true), engine.ToolCodeNotFound, []string{"file.txt is a file"}},
		{"inside .git", writeArgsJSON(t, ".git/hooks/pre-commit", "#!/bin/sh\n", true), engine.ToolCodePermissionDenied, []string{"inside .git"}},
		{"too large", writeArgsJSON(t, "big.txt", strings.Repeat("x", 101), false), engine.ToolCodeInvalidInput, []string{`"content"`, "101 B", "100 B"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := invoke(context.Background(), tl, ws, WriteFileTool, tt.args)
			wantToolError(t, c.err, tt.code, tt.parts...)
		})
	}
	for _, p := range []string{"new", ".git/hooks", "big.txt"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); !os.IsNotExist(err) {
			t.Errorf("a refused write created %s", p)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "file.txt")); string(b) != "f" {
		t.Errorf("file.txt changed to %q", b)
	}

	// A cancelled call writes nothing.
	ctx, cancel := context.WithCancel(context.Background())
	tl.afterResolve = func(string) { cancel() }
	c := invoke(ctx, tl, ws, WriteFileTool, writeArgsJSON(t, "late.txt", "x", false))
	wantToolError(t, c.err, engine.ToolCodeCancelled)
	if _, err := os.Lstat(filepath.Join(ws, "late.txt")); !os.IsNotExist(err) {
		t.Error("a cancelled write_file created late.txt")
	}
}

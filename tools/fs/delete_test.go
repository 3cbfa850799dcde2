package fs

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/plexus-agent/plexus/internal/testtree"

	"github.com/plexus-agent/plexus/engine"
)

func TestDeleteFile(t *testing.T) {
	ws := t.TempDir()
	testtree.Write(t, ws, map[string]string{"old.go": strings.Repeat("o", 2150), "util/u.go": "package util\n", "empty.txt": ""})
	testtree.Symlink(t, "util", filepath.Join(ws, "utillink"))
	unchangedAfter(t, ws)
	tl := newTools(t, Options{})
	tests := []struct {
		name, args string
		want       DeleteResult
		edit       engine.FileEdit
		summary    string
	}{
		{name: "a file", args: `{"path":"old.go","rationale":"nothing imports it"}`,
			want:    DeleteResult{Path: "old.go", Bytes: 2150, Status: StatusProposed},
			edit:    engine.FileEdit{Path: "old.go", Base: []byte(strings.Repeat("o", 2150)), BaseExists: true, Delete: true},
			summary: "proposed deleting old.go (2.1 KiB)"},
		{name: "an empty file", args: `{"path":"empty.txt"}`,
			want: DeleteResult{Path: "empty.txt", Status: StatusProposed},
			edit: engine.FileEdit{Path: "empty.txt", BaseExists: true, Delete: true}},
		{name: "through a symlinked directory", args: `{"path":"utillink/u.go"}`,
			want:    DeleteResult{Path: "utillink/u.go", Target: "util/u.go", Bytes: 13, Status: StatusProposed},
			edit:    engine.FileEdit{Path: "util/u.go", Base: []byte("package util\n"), BaseExists: true, Delete: true},
			summary: "proposed deleting utillink/u.go (→ util/u.go) (13 B)"},
		{name: "absolute path inside", args: `{"path":` + strconv.Quote(filepath.Join(ws, "old.go")) + `}`,
			want: DeleteResult{Path: "old.go", Bytes: 2150, Status: StatusProposed},
			edit: engine.FileEdit{Path: "old.go", Base: []byte(strings.Repeat("o", 2150)), BaseExists: true, Delete: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got DeleteResult
			c := mustOK(t, tl, ws, DeleteFileTool, tt.args, &got)
			if got != tt.want {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
			if tt.summary != "" && c.res.Summary != tt.summary {
				t.Errorf("summary = %q, want %q", c.res.Summary, tt.summary)
			}
			wantEdit(t, c, tt.edit)
		})
	}
}

func TestDeleteFileErrors(t *testing.T) {
	ws := t.TempDir()
	testtree.Write(t, ws, map[string]string{"dir/x.txt": "x", "real.txt": "r", "big.txt": strings.Repeat("b", 101), ".git/HEAD": "ref\n"})
	testtree.Symlink(t, "real.txt", filepath.Join(ws, "link.txt"))
	testtree.Symlink(t, "dir", filepath.Join(ws, "dirlink"))
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	unchangedAfter(t, ws)
	tl := newTools(t, Options{MaxFileBytes: 100})
	tests := []struct {
		name, path string
		code       engine.ToolErrorCode
		parts      []string
	}{
		{"missing", "nope.txt", engine.ToolCodeNotFound, []string{`"nope.txt" does not exist`, "list_files"}},
		{"a directory", "dir", engine.ToolCodeInvalidInput, []string{"dir is a directory", "one file per call"}},
		{"a symlink", "link.txt", engine.ToolCodeInvalidInput, []string{"link.txt is a symlink", "regular files only", "real.txt"}},
		{"a symlink to a directory", "dirlink", engine.ToolCodeInvalidInput, []string{"dirlink is a symlink"}},
		{"a FIFO", "fifo", engine.ToolCodeInvalidInput, []string{"not a regular file", "named pipe"}},
		{"inside .git", ".git/HEAD", engine.ToolCodePermissionDenied, []string{"inside .git"}},
		{"the root", ".", engine.ToolCodeInvalidInput, []string{"workspace root"}},
		{"over the size limit", "big.txt", engine.ToolCodeInvalidInput, []string{"big.txt is 101 B", "100 B", "run_command"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := invoke(context.Background(), tl, ws, DeleteFileTool, `{"path":`+strconv.Quote(tt.path)+`}`)
			wantToolError(t, c.err, tt.code, append([]string{DeleteFileTool + ":"}, tt.parts...)...)
			if c.res.Edits != nil {
				t.Errorf("a refused call proposed %v", c.res.Edits)
			}
		})
	}

	ctx, cancel := context.WithCancel(context.Background())
	tl.afterResolve = func(string) { cancel() }
	c := invoke(ctx, tl, ws, DeleteFileTool, `{"path":"real.txt"}`)
	wantToolError(t, c.err, engine.ToolCodeCancelled)
	if c.res.Edits != nil {
		t.Errorf("a cancelled call proposed %v", c.res.Edits)
	}
}

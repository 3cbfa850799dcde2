package fs

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-agent/plexus/internal/testtree"

	"github.com/plexus-agent/plexus/engine"
)

var knownCodes = map[engine.ToolErrorCode]bool{
	engine.ToolCodeInvalidInput: true, engine.ToolCodeNotFound: true, engine.ToolCodePermissionDenied: true,
	engine.ToolCodeCancelled: true, engine.ToolCodeTimeout: true, engine.ToolCodeFailed: true,
}

// FuzzInvoke feeds arbitrary arguments to every tool over a workspace
// with symlinks to the outside. Every call must end in a result or a
// *engine.ToolError with a known code, results must name paths inside the
// workspace, and nothing outside the workspace may change.
func FuzzInvoke(f *testing.F) {
	base := f.TempDir()
	ws, outside := filepath.Join(base, "ws"), filepath.Join(base, "outside")
	testtree.Write(f, ws, map[string]string{"inside.txt": "inside\nneedle\n", "sub/f.txt": "sub\n", ".gitignore": "*.log\n"})
	testtree.Write(f, outside, map[string]string{"secret.txt": "secret needle\n"})
	testtree.Symlink(f, filepath.Join(outside, "secret.txt"), filepath.Join(ws, "out_file"))
	testtree.Symlink(f, outside, filepath.Join(ws, "out_dir"))
	testtree.Symlink(f, "../outside", filepath.Join(ws, "out_rel"))
	testtree.Symlink(f, filepath.Join(outside, "new.txt"), filepath.Join(ws, "dangling_out"))
	tl := New(Options{})
	f.Cleanup(func() { tl.Close() })

	seeds := []struct {
		tool uint8
		args string
	}{
		{0, `{"path":"inside.txt","start_line":2}`},
		{0, `{"path":"../outside/secret.txt"}`},
		{0, `{"path":"out_dir/secret.txt"}`},
		{0, `{"path":"/etc/passwd"}`},
		{1, `{"path":".","recursive":false,"pattern":"**/*.txt"}`},
		{1, `{"path":"out_rel"}`},
		{1, `{"pattern":"*.txt","include_ignored":true}`},
		{2, `{"path":"sub/new.txt","content":"x","create_dirs":true}`},
		{2, `{"path":"dangling_out","content":"x"}`},
		{2, `{"path":"out_rel/x/y","content":"x","create_dirs":true}`},
		{0, `{"path":"a\u0000b"}`},
		{0, `[]`},
		{1, `null`},
		{1, `{"pattern":"\\"}`},
		{2, `{"path":".","content":""}`},
	}
	for _, s := range seeds {
		f.Add(s.tool, []byte(s.args))
	}
	names := []string{ReadFileTool, ListFilesTool, WriteFileTool}
	before := snapshot(f, outside)

	f.Fuzz(func(t *testing.T, tool uint8, args []byte) {
		name := names[int(tool)%len(names)]
		res, err := tl.Invoke(context.Background(), engine.InvokeRequest{Tool: name, Args: args, WorkspaceRoot: ws}, func(engine.ToolUpdate) {})
		if err != nil {
			var te *engine.ToolError
			if !errors.As(err, &te) || !knownCodes[te.Code] || te.Message == "" {
				t.Fatalf("%s %q: error %v (%T)", name, args, err, err)
			}
		} else {
			var out struct {
				Path          string   `json:"path"`
				Files         []string `json:"files"`
				FilesModified []string `json:"files_modified"`
			}
			if e := json.Unmarshal(res.Content, &out); e != nil {
				t.Fatalf("%s %q: result %s: %v", name, args, res.Content, e)
			}
			paths := append(append([]string{out.Path}, out.Files...), out.FilesModified...)
			for _, p := range paths {
				p = strings.TrimSuffix(p, "/")
				if p != "" && p != "." && !filepath.IsLocal(p) {
					t.Fatalf("%s %q: result names %q, not a workspace-relative path", name, args, p)
				}
			}
		}
		if after := snapshot(t, outside); !maps.Equal(before, after) {
			t.Fatalf("%s %q changed the outside directory: %v", name, args, after)
		}
	})
}

// FuzzGlob checks that any pattern either is refused as invalid_input or
// matches without panicking.
func FuzzGlob(f *testing.F) {
	for _, s := range []string{"*.go", "src/**/*.ts", "[", "**/**/x", "a\\", "./x", "/", "?", "[!a]*"} {
		f.Add(s, "src/a/b.go")
	}
	f.Fuzz(func(t *testing.T, pattern, rel string) {
		g, err := newGlob("t", "pattern", pattern)
		if err != nil {
			var te *engine.ToolError
			if !errors.As(err, &te) || te.Code != engine.ToolCodeInvalidInput {
				t.Fatalf("newGlob(%q) = %v", pattern, err)
			}
			return
		}
		g.MatchUnder(rel, rel)
	})
}

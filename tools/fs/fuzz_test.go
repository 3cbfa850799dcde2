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
// with symlinks to the outside, with or without pending content of earlier
// calls (when tool has its high bit set). Every call must end in a result
// or a *engine.ToolError with a known code; results and proposed edits
// must name paths inside the workspace (edits never in .git), only edit
// tools may propose edits, and nothing inside or outside the workspace
// may change.
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
	overlay := map[string]engine.OverlayFile{
		"inside.txt":   {Content: []byte("pending\nneedle\n")},
		"sub/f.txt":    {Deleted: true},
		"new/n.txt":    {Content: []byte("new needle\n")},
		"out_file":     {Content: []byte("pending through a link\n")},
		"../escape.go": {Content: []byte("x")},
	}

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
		{3, `{"path":"inside.txt","old_string":"needle","new_string":"pin"}`},
		{3, `{"path":"out_rel/secret.txt","old_string":"secret","new_string":"x"}`},
		{3, `{"path":"sub/f.txt","old_string":"sub","new_string":"x","replace_all":true}`},
		{4, `{"path":"sub/f.txt"}`},
		{4, `{"path":"out_file"}`},
		{0x80, `{"path":"inside.txt"}`},
		{0x81, `{"path":"new"}`},
		{0x83, `{"path":"new/n.txt","old_string":"new","new_string":"old"}`},
		{0x84, `{"path":"sub/f.txt"}`},
	}
	for _, s := range seeds {
		f.Add(s.tool, []byte(s.args))
	}
	before := snapshot(f, base)

	f.Fuzz(func(t *testing.T, tool uint8, args []byte) {
		name := toolNames[int(tool&0x7f)%len(toolNames)]
		req := engine.InvokeRequest{Tool: name, Args: args, WorkspaceRoot: ws}
		if tool&0x80 != 0 {
			req.Overlay = overlay
		}
		res, err := tl.Invoke(context.Background(), req, func(engine.ToolUpdate) {})
		if err != nil {
			var te *engine.ToolError
			if !errors.As(err, &te) || !knownCodes[te.Code] || te.Message == "" {
				t.Fatalf("%s %q: error %v (%T)", name, args, err, err)
			}
		} else {
			var out struct {
				Path   string   `json:"path"`
				Target string   `json:"target"`
				Files  []string `json:"files"`
			}
			if e := json.Unmarshal(res.Content, &out); e != nil {
				t.Fatalf("%s %q: result %s: %v", name, args, res.Content, e)
			}
			paths := append([]string{out.Path, out.Target}, out.Files...)
			for _, p := range paths {
				p = strings.TrimSuffix(p, "/")
				if p != "" && p != "." && !filepath.IsLocal(p) {
					t.Fatalf("%s %q: result names %q, not a workspace-relative path", name, args, p)
				}
			}
			edit := name == WriteFileTool || name == EditFileTool || name == DeleteFileTool
			if !edit && len(res.Edits) > 0 || len(res.Edits) > 1 {
				t.Fatalf("%s %q proposed %d edits", name, args, len(res.Edits))
			}
			for _, e := range res.Edits {
				if !filepath.IsLocal(e.Path) || e.Path != filepath.ToSlash(filepath.Clean(e.Path)) || inGitDir(e.Path) {
					t.Fatalf("%s %q: edit of %q", name, args, e.Path)
				}
			}
		}
		if after := snapshot(t, base); !maps.Equal(before, after) {
			t.Fatalf("%s %q changed the file tree: %v", name, args, after)
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

// FuzzReplace checks edit_file's replacement against strings.Replace and
// its line counts against the sizes of the two texts.
func FuzzReplace(f *testing.F) {
	f.Add("a\nbXc\nd\n", "X", "Y", true)
	f.Add("xx\nab\n", "x", "y\nz", true)
	f.Add("p\nq\nr", "q\nr", "", false)
	f.Add("aaa", "aa", "a", false)
	f.Fuzz(func(t *testing.T, s, old, repl string, all bool) {
		if old == "" {
			return
		}
		at := occurrences(s, old)
		if len(at) == 0 {
			return
		}
		want := strings.ReplaceAll(s, old, repl)
		if !all {
			at = at[:1]
			want = strings.Replace(s, old, repl, 1)
		}
		out, added, removed := replaceAt(s, old, repl, at)
		if out != want {
			t.Fatalf("replaceAt(%q, %q, %q) = %q, want %q", s, old, repl, out, want)
		}
		if removed > len(splitLines(s)) || added > len(splitLines(out)) || removed < 0 || added < 0 {
			t.Fatalf("replaceAt(%q, %q, %q): -%d +%d lines of %d and %d", s, old, repl, removed, added, len(splitLines(s)), len(splitLines(out)))
		}
		if out != s && removed == 0 && added == 0 {
			t.Fatalf("replaceAt(%q, %q, %q) changed the text but counts no lines", s, old, repl)
		}
	})
}

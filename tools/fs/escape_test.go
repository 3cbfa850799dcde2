package fs

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/plexus-agent/plexus/internal/testtree"

	"github.com/plexus-agent/plexus/engine"
)

// escapeFixture is a workspace whose symlinks point outside it, beside an
// outside directory holding a secret.
type escapeFixture struct {
	base, ws, outside string
}

func newEscapeFixture(t *testing.T) escapeFixture {
	base := t.TempDir()
	f := escapeFixture{base: base, ws: filepath.Join(base, "ws"), outside: filepath.Join(base, "outside")}
	testtree.Write(t, f.ws, map[string]string{"inside.txt": "inside\n", "sub/f.txt": "sub\n"})
	testtree.Write(t, f.outside, map[string]string{"secret.txt": "secret\n", "f.txt": "outside f\n"})
	testtree.Symlink(t, filepath.Join(f.outside, "secret.txt"), filepath.Join(f.ws, "out_file"))
	testtree.Symlink(t, f.outside, filepath.Join(f.ws, "out_dir"))
	testtree.Symlink(t, "../outside", filepath.Join(f.ws, "out_rel"))
	testtree.Symlink(t, filepath.Join(f.outside, "new.txt"), filepath.Join(f.ws, "dangling_out"))
	return f
}

// TestPathEscapesRefused tries to leave the workspace through every tool
// and checks each attempt is refused as permission_denied, naming the path
// and the workspace, with nothing outside read into a result, nothing
// proposed and nothing written.
func TestPathEscapesRefused(t *testing.T) {
	f := newEscapeFixture(t)
	tl := newTools(t, Options{})
	unchangedAfter(t, f.base)

	paths := []string{
		"../outside/secret.txt",
		"sub/../../outside/secret.txt",
		"/etc/passwd",
		filepath.Join(f.outside, "secret.txt"),
		"out_file",
		"out_dir/secret.txt",
		"out_rel/secret.txt",
		"dangling_out",
	}
	writeOnly := []string{"out_dir/new.txt", "out_rel/deep/new.txt", "../outside/new.txt", filepath.Join(f.outside, "new.txt")}
	type attempt struct{ tool, path, args string }
	var attempts []attempt
	q := strconv.Quote
	for _, p := range paths {
		attempts = append(attempts,
			attempt{ReadFileTool, p, `{"path":` + q(p) + `}`},
			attempt{WriteFileTool, p, `{"path":` + q(p) + `,"content":"pwned\n","create_dirs":true}`},
			attempt{EditFileTool, p, `{"path":` + q(p) + `,"old_string":"secret","new_string":"pwned"}`},
			attempt{DeleteFileTool, p, `{"path":` + q(p) + `}`},
		)
	}
	for _, p := range append(writeOnly, "out_dir", "out_rel", "..", "/") {
		attempts = append(attempts,
			attempt{WriteFileTool, p, `{"path":` + q(p) + `,"content":"pwned\n","create_dirs":true}`},
			attempt{ListFilesTool, p, `{"path":` + q(p) + `}`},
		)
	}
	for _, p := range []string{"out_dir", "out_rel", "..", "/"} {
		attempts = append(attempts, attempt{DeleteFileTool, p, `{"path":` + q(p) + `}`})
	}
	// The same escapes with pending content under the escaping paths: the
	// overlay never makes an outside path reachable.
	ov := map[string]engine.OverlayFile{}
	for _, p := range append(paths, writeOnly...) {
		ov[p] = engine.OverlayFile{Content: []byte("secret\n")}
	}
	for _, a := range attempts {
		t.Run(a.tool+" "+a.path, func(t *testing.T) {
			for _, o := range []map[string]engine.OverlayFile{nil, ov} {
				c := invokeOver(context.Background(), tl, f.ws, o, a.tool, a.args)
				wantToolError(t, c.err, engine.ToolCodePermissionDenied, a.tool+":", strconv.Quote(a.path), "the workspace "+f.ws)
				if c.res.Content != nil || c.res.Edits != nil {
					t.Errorf("refused call returned content %s, edits %v", c.res.Content, c.res.Edits)
				}
			}
		})
	}
}

// TestSwappedSymlinkRefused swaps a directory for a symlink to outside
// after the path was resolved; the os.Root refuses, and the tools report
// it as permission_denied.
func TestSwappedSymlinkRefused(t *testing.T) {
	tests := []struct{ tool, args string }{
		{ReadFileTool, `{"path":"sub/f.txt"}`},
		{WriteFileTool, `{"path":"sub/f.txt","content":"pwned\n"}`},
		{WriteFileTool, `{"path":"sub/new.txt","content":"pwned\n"}`},
		{WriteFileTool, `{"path":"sub/deeper/new.txt","content":"pwned\n","create_dirs":true}`},
		{EditFileTool, `{"path":"sub/f.txt","old_string":"outside","new_string":"pwned"}`},
		{DeleteFileTool, `{"path":"sub/f.txt"}`},
		{ListFilesTool, `{"path":"sub"}`},
	}
	for _, tt := range tests {
		t.Run(tt.tool+" "+tt.args, func(t *testing.T) {
			f := newEscapeFixture(t)
			tl := newTools(t, Options{})
			tl.afterResolve = func(string) {
				if err := os.RemoveAll(filepath.Join(f.ws, "sub")); err != nil {
					t.Fatal(err)
				}
				testtree.Symlink(t, f.outside, filepath.Join(f.ws, "sub"))
			}
			before := snapshot(t, f.outside)
			c := invoke(context.Background(), tl, f.ws, tt.tool, tt.args)
			wantToolError(t, c.err, engine.ToolCodePermissionDenied, "sub", f.ws)
			if after := snapshot(t, f.outside); !maps.Equal(before, after) {
				t.Errorf("outside changed:\nbefore %v\nafter  %v", before, after)
			}
			var content map[string]any
			if c.res.Content != nil && json.Unmarshal(c.res.Content, &content) == nil {
				t.Errorf("refused call returned %v", content)
			}
			if c.res.Edits != nil {
				t.Errorf("refused call proposed %v", c.res.Edits)
			}
		})
	}
}

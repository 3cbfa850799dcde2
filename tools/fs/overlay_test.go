package fs

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/plexus-agent/plexus/internal/testtree"

	"github.com/plexus-agent/plexus/engine"
)

// response plays the engine's part within one model response: the edits
// of each call become the pending content the next calls get.
type response struct {
	t  *testing.T
	tl *Tools
	ws string
	ov map[string]engine.OverlayFile
}

func newResponse(t *testing.T, tl *Tools, ws string) *response {
	return &response{t: t, tl: tl, ws: ws, ov: map[string]engine.OverlayFile{}}
}

// call invokes a tool with the pending content so far and adds its edits.
func (r *response) call(tool, args string) call {
	c := invokeOver(context.Background(), r.tl, r.ws, r.ov, tool, args)
	r.add(c)
	return c
}

// ok is call for a call that must succeed; it decodes the content into out.
func (r *response) ok(tool, args string, out any) call {
	r.t.Helper()
	c := mustOKOver(r.t, r.tl, r.ws, r.ov, tool, args, out)
	r.add(c)
	return c
}

// add makes a call's edits pending, as the engine does.
func (r *response) add(c call) {
	for _, e := range c.res.Edits {
		r.ov[e.Path] = engine.OverlayFile{Content: e.New, Deleted: e.Delete}
	}
}

func overlayFixture(t *testing.T) (*Tools, string) {
	ws := t.TempDir()
	testtree.Write(t, ws, map[string]string{
		".gitignore": "*.log\n",
		"main.go":    mainGo,
		"src/a.go":   "package src\n",
		"src/b.go":   "package src // b\n",
		"docs/x.md":  "# X\n",
	})
	testtree.Symlink(t, "src", filepath.Join(ws, "srclink"))
	unchangedAfter(t, ws)
	return newTools(t, Options{}), ws
}

// TestOverlayEditChain edits the same files several times within one
// response: every edit's base is the content the previous one proposed.
func TestOverlayEditChain(t *testing.T) {
	tl, ws := overlayFixture(t)
	r := newResponse(t, tl, ws)

	v1 := "package main\n\nfunc f() {}\n"
	var w WriteResult
	c := r.ok(WriteFileTool, `{"path":"new.go","content":"package main\n\nfunc f() {}\n"}`, &w)
	wantEdit(t, c, engine.FileEdit{Path: "new.go", New: []byte(v1)})

	var rd ReadResult
	c = r.ok(ReadFileTool, `{"path":"new.go"}`, &rd)
	if want := (ReadResult{Path: "new.go", Content: v1, StartLine: 1, EndLine: 3, TotalLines: 3, Pending: true}); rd != want {
		t.Errorf("read of a pending file\ngot  %+v\nwant %+v", rd, want)
	}
	if c.res.Summary != "3 lines of new.go (1-3) (pending edit)" {
		t.Errorf("summary = %q", c.res.Summary)
	}

	// An edit on top of the pending write has the written content as base.
	v2 := "package main\n\nfunc f() int { return 1 }\n"
	var e EditResult
	c = r.ok(EditFileTool, `{"path":"new.go","old_string":"func f() {}","new_string":"func f() int { return 1 }"}`, &e)
	wantEdit(t, c, engine.FileEdit{Path: "new.go", Base: []byte(v1), BaseExists: true, New: []byte(v2)})

	// A search that only the disk content would satisfy fails, and says
	// which content it searched.
	c = r.call(EditFileTool, `{"path":"new.go","old_string":"func f() {}","new_string":"func g() {}"}`)
	wantToolError(t, c.err, engine.ToolCodeInvalidInput, "was not found in new.go (as edited earlier in this response)")

	// write_file over the pending file replaces it: not a new file.
	c = r.ok(WriteFileTool, `{"path":"new.go","content":"package main\n"}`, &w)
	if w.Created {
		t.Error("write_file over a pending file says created")
	}
	wantEdit(t, c, engine.FileEdit{Path: "new.go", Base: []byte(v2), BaseExists: true, New: []byte("package main\n")})

	// Two edits of a file on disk: the second builds on the first.
	first := "package main\n\nimport \"os\"\n"
	c = r.ok(EditFileTool, `{"path":"main.go","old_string":"import \"fmt\"","new_string":"import \"os\""}`, &e)
	wantEdit(t, c, engine.FileEdit{Path: "main.go", Base: []byte(mainGo), BaseExists: true, New: []byte(first + mainGo[len("package main\n\nimport \"fmt\"\n"):])})
	pending := r.ov["main.go"].Content
	c = r.ok(EditFileTool, `{"path":"main.go","old_string":"hello","new_string":"bye","replace_all":true}`, &e)
	if e.Replacements != 2 {
		t.Errorf("replacements = %d, want 2", e.Replacements)
	}
	if len(c.res.Edits) == 1 && string(c.res.Edits[0].Base) != string(pending) {
		t.Errorf("second edit's base %q, want the first edit's result %q", c.res.Edits[0].Base, pending)
	}

	// Through a symlinked directory the edit (and the overlay key) is the
	// real file; reading it under either name gives the pending content.
	c = r.ok(EditFileTool, `{"path":"srclink/a.go","old_string":"package src","new_string":"package source"}`, &e)
	wantEdit(t, c, engine.FileEdit{Path: "src/a.go", Base: []byte("package src\n"), BaseExists: true, New: []byte("package source\n")})
	for _, p := range []string{"src/a.go", "srclink/a.go"} {
		r.ok(ReadFileTool, `{"path":"`+p+`"}`, &rd)
		if rd.Content != "package source\n" || !rd.Pending {
			t.Errorf("read %s = %+v", p, rd)
		}
	}

	// Deleting a pending new file proposes deleting its pending content.
	var d DeleteResult
	c = r.ok(DeleteFileTool, `{"path":"new.go"}`, &d)
	wantEdit(t, c, engine.FileEdit{Path: "new.go", Base: []byte("package main\n"), BaseExists: true, Delete: true})
}

// TestOverlayDeletion checks that a file proposed for deletion is gone for
// every later call of the response.
func TestOverlayDeletion(t *testing.T) {
	tl, ws := overlayFixture(t)
	r := newResponse(t, tl, ws)
	var d DeleteResult
	c := r.ok(DeleteFileTool, `{"path":"src/b.go"}`, &d)
	wantEdit(t, c, engine.FileEdit{Path: "src/b.go", Base: []byte("package src // b\n"), BaseExists: true, Delete: true})

	c = r.call(ReadFileTool, `{"path":"src/b.go"}`)
	wantToolError(t, c.err, engine.ToolCodeNotFound, "src/b.go does not exist for this call", "proposed deleting it")
	c = r.call(EditFileTool, `{"path":"src/b.go","old_string":"b","new_string":"c"}`)
	wantToolError(t, c.err, engine.ToolCodeNotFound, "proposed deleting it", "write_file")
	c = r.call(DeleteFileTool, `{"path":"src/b.go"}`)
	wantToolError(t, c.err, engine.ToolCodeNotFound, "already proposed for deletion")
	c = r.call(ListFilesTool, `{"path":"src/b.go"}`)
	wantToolError(t, c.err, engine.ToolCodeNotFound, "proposed deleting it")

	var l ListResult
	r.ok(ListFilesTool, `{"path":"src"}`, &l)
	if !slices.Equal(l.Files, []string{"src/a.go"}) || l.Pending != nil {
		t.Errorf("list after the deletion: %+v", l)
	}
	// Through the symlinked directory too.
	r.ok(ListFilesTool, `{"path":"srclink"}`, &l)
	if !slices.Equal(l.Files, []string{"srclink/a.go"}) {
		t.Errorf("list through the link after the deletion: %+v", l)
	}

	// Writing it again creates it anew.
	var w WriteResult
	c = r.ok(WriteFileTool, `{"path":"src/b.go","content":"package src // new b\n"}`, &w)
	if !w.Created {
		t.Error("write_file after a pending deletion does not say created")
	}
	wantEdit(t, c, engine.FileEdit{Path: "src/b.go", New: []byte("package src // new b\n")})
	r.ok(ReadFileTool, `{"path":"src/b.go"}`, new(ReadResult))
}

// TestOverlayListing checks which pending files list_files shows.
func TestOverlayListing(t *testing.T) {
	tl, ws := overlayFixture(t)
	r := newResponse(t, tl, ws)
	for _, args := range []string{
		`{"path":"new.go","content":"package main\n"}`,
		`{"path":"pkg/deep/x.go","content":"package deep\n","create_dirs":true}`,
		`{"path":"src/c.go","content":"package src\n"}`,
		`{"path":"debug.log","content":"ignored\n"}`,
		`{"path":"main.go","content":"package main\n"}`, // changed, not new
	} {
		r.ok(WriteFileTool, args, new(WriteResult))
	}
	// The directory of a pending file exists for later calls: no
	// create_dirs needed.
	r.ok(WriteFileTool, `{"path":"pkg/deep/y.go","content":"package deep\n"}`, new(WriteResult))
	r.ok(DeleteFileTool, `{"path":"docs/x.md"}`, new(DeleteResult))

	tests := []struct {
		name    string
		args    string
		files   []string
		pending []string
		trunc   bool
		summary string
	}{
		{name: "recursive", args: `{}`,
			files:   []string{".gitignore", "main.go", "new.go", "pkg/deep/x.go", "pkg/deep/y.go", "src/a.go", "src/b.go", "src/c.go", "srclink"},
			pending: []string{"new.go", "pkg/deep/x.go", "pkg/deep/y.go", "src/c.go"},
			summary: "9 files under . (4 pending)"},
		{name: "one level", args: `{"recursive":false}`,
			files:   []string{".gitignore", "docs/", "main.go", "new.go", "pkg/", "src/", "srclink"},
			pending: []string{"new.go", "pkg/"}},
		{name: "a directory only pending files are in", args: `{"path":"pkg"}`,
			files: []string{"pkg/deep/x.go", "pkg/deep/y.go"}, pending: []string{"pkg/deep/x.go", "pkg/deep/y.go"}},
		{name: "one level of a pending directory", args: `{"path":"pkg","recursive":false}`,
			files: []string{"pkg/deep/"}, pending: []string{"pkg/deep/"}},
		{name: "through a symlinked directory", args: `{"path":"srclink"}`,
			files: []string{"srclink/a.go", "srclink/b.go", "srclink/c.go"}, pending: []string{"srclink/c.go"}},
		{name: "pattern", args: `{"pattern":"x.go"}`,
			files: []string{"pkg/deep/x.go"}, pending: []string{"pkg/deep/x.go"}},
		{name: "pattern relative to path", args: `{"path":"pkg","pattern":"deep/y.go"}`,
			files: []string{"pkg/deep/y.go"}, pending: []string{"pkg/deep/y.go"}},
		{name: "ignored pending file with include_ignored", args: `{"pattern":"*.log","include_ignored":true}`,
			files: []string{"debug.log"}, pending: []string{"debug.log"}},
		{name: "ignored pending file without", args: `{"pattern":"*.log"}`,
			files: []string{}},
		{name: "truncation counts pending files in order", args: `{"max_results":3}`,
			files: []string{".gitignore", "main.go", "new.go"}, pending: []string{"new.go"}, trunc: true,
			summary: "3 files under . (1 pending) (truncated)"},
		{name: "truncation cuts pending files past the limit", args: `{"max_results":5}`,
			files: []string{".gitignore", "main.go", "new.go", "pkg/deep/x.go", "pkg/deep/y.go"}, pending: []string{"new.go", "pkg/deep/x.go", "pkg/deep/y.go"}, trunc: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l ListResult
			c := mustOKOver(t, tl, ws, r.ov, ListFilesTool, tt.args, &l)
			if !slices.Equal(l.Files, tt.files) || !slices.Equal(l.Pending, tt.pending) || l.Truncated != tt.trunc {
				t.Errorf("files %q pending %q truncated %v\nwant  %q pending %q truncated %v", l.Files, l.Pending, l.Truncated, tt.files, tt.pending, tt.trunc)
			}
			if tt.summary != "" && c.res.Summary != tt.summary {
				t.Errorf("summary = %q, want %q", c.res.Summary, tt.summary)
			}
		})
	}

	errs := []struct {
		tool, args string
		code       engine.ToolErrorCode
		parts      []string
	}{
		{ListFilesTool, `{"path":"new.go"}`, engine.ToolCodeInvalidInput, []string{"new.go is a file (proposed earlier in this response)", "read_file"}},
		{ReadFileTool, `{"path":"pkg"}`, engine.ToolCodeInvalidInput, []string{"pkg is a directory"}},
		{EditFileTool, `{"path":"pkg/deep","old_string":"a","new_string":"b"}`, engine.ToolCodeInvalidInput, []string{"pkg/deep is a directory"}},
		{WriteFileTool, `{"path":"new.go/inner.go","content":"x","create_dirs":true}`, engine.ToolCodeInvalidInput, []string{"new.go is a file (proposed earlier in this response)"}},
		{WriteFileTool, `{"path":"other/z.go","content":"x"}`, engine.ToolCodeNotFound, []string{"directory other does not exist", "create_dirs"}},
	}
	for _, tt := range errs {
		t.Run(tt.tool+" "+tt.args, func(t *testing.T) {
			c := invokeOver(context.Background(), tl, ws, r.ov, tt.tool, tt.args)
			wantToolError(t, c.err, tt.code, tt.parts...)
		})
	}
}

// TestOverlayKeys checks the keys an overlay may hold: they are cleaned,
// keys outside the workspace are ignored, and a symlink's own name (as
// another plugin's edit tool may use) is found too.
func TestOverlayKeys(t *testing.T) {
	tl, ws := overlayFixture(t)
	testOv := map[string]engine.OverlayFile{
		"./src/a.go":      {Content: []byte("package cleaned\n")},
		"../outside.go":   {Content: []byte("package outside\n")},
		"/etc/passwd":     {Content: []byte("root\n")},
		"srclink/b.go":    {Content: []byte("package bylink\n")},
		"docs//x.md":      {Deleted: true},
		"":                {Content: []byte("empty key\n")},
		"src/../main.go":  {Content: []byte("package dotdot\n")},
		"pkg/./new/n.go":  {Content: []byte("package n\n")},
		"src/a.go/../../": {Content: []byte("root dir\n")},
		".git/config":     {Content: []byte("[core]\n")},
	}
	reads := map[string]string{
		"src/a.go":     "package cleaned\n",
		"srclink/b.go": "package bylink\n",
		"main.go":      "package dotdot\n",
		"pkg/new/n.go": "package n\n",
	}
	for p, want := range reads {
		var rd ReadResult
		mustOKOver(t, tl, ws, testOv, ReadFileTool, `{"path":"`+p+`"}`, &rd)
		if rd.Content != want || !rd.Pending {
			t.Errorf("read %s = %+v, want pending %q", p, rd, want)
		}
	}
	c := invokeOver(context.Background(), tl, ws, testOv, ReadFileTool, `{"path":"docs/x.md"}`)
	wantToolError(t, c.err, engine.ToolCodeNotFound, "proposed deleting it")

	// .git is never listed, pending or not.
	for _, args := range []string{`{}`, `{"include_ignored":true}`} {
		var l ListResult
		mustOKOver(t, tl, ws, testOv, ListFilesTool, args, &l)
		if want := []string{"pkg/new/n.go"}; !slices.Equal(l.Pending, want) {
			t.Errorf("%s: pending = %q, want %q (files %q)", args, l.Pending, want, l.Files)
		}
		if slices.Contains(l.Files, "docs/x.md") {
			t.Errorf("%s: listing shows a pending deletion: %q", args, l.Files)
		}
	}
}

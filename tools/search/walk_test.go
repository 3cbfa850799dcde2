package search

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/internal/testtree"
)

// matchLines formats matches as the stream does.
func matchLines(ms []engine.TextMatch) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = formatMatch(m)
	}
	return out
}

func TestSearchText(t *testing.T) {
	ws, _ := projectFixture(t)
	testtree.Write(t, ws, map[string]string{
		"unicode.txt": "ünïcödé needle\nNEEDLE upper\n",
		"crlf.txt":    "ends with needle\r\nneedle not at end\r\n",
		"regex.txt":   "a+b (needle)\naab needle\n",
		"image.png":   "\x89PNG\r\n\x1a\n\x00\x00needle",
		"big.txt":     strings.Repeat("needle\n", 200),
	})
	tests := []struct {
		name    string
		args    string
		opts    Options
		want    []string
		trunc   bool
		summary string
	}{
		{name: "regex over the workspace", args: `{"pattern":"needle\\b","regex":true,"path":"src"}`,
			want: []string{
				"src/keep.gen.go:1:17: package main // needle kept",
				"src/main.go:3:15: func main() { needle() }",
				"src/util/strings_test.go:1:17: package util // needle",
			},
			summary: "3 matches in 3 files"},
		{name: "include glob", args: `{"pattern":"needle","include":"*.ts*"}`,
			want: []string{"app.tsx:1:10: import { needle } from './index';", "index.ts:1:14: export const needle = 1;"}},
		{name: "include glob with a path", args: `{"pattern":"needle","include":"src/util/*.go"}`,
			want: []string{"src/util/strings_test.go:1:17: package util // needle"}},
		{name: "literal by default", args: `{"pattern":"a+b (needle)"}`,
			want: []string{"regex.txt:1:1: a+b (needle)"}},
		{name: "regex", args: `{"pattern":"a+b (needle)","regex":true,"path":"regex.txt"}`,
			want: []string{"regex.txt:2:1: aab needle"}},
		{name: "literal dollar", args: `{"pattern":"needle$","path":"crlf.txt"}`,
			want: []string{}},
		{name: "case insensitive, column in characters", args: `{"pattern":"needle","case_insensitive":true,"path":"unicode.txt"}`,
			want: []string{"unicode.txt:1:9: ünïcödé needle", "unicode.txt:2:1: NEEDLE upper"}},
		{name: "case sensitive by default", args: `{"pattern":"NEEDLE","path":"unicode.txt"}`,
			want: []string{"unicode.txt:2:1: NEEDLE upper"}},
		{name: "$ matches before CRLF", args: `{"pattern":"needle$","regex":true,"path":"crlf.txt"}`,
			want: []string{"crlf.txt:1:11: ends with needle"}},
		{name: "^ anchors each line", args: `{"pattern":"^needle","regex":true,"include":"crlf.txt"}`,
			want: []string{"crlf.txt:2:1: needle not at end"}},
		{name: `\A anchors each line too`, args: `{"pattern":"\\Aneedle","regex":true,"include":"*.txt","limit":1}`,
			want: []string{"big.txt:1:1: needle"}, trunc: true},
		{name: "limit truncates", args: `{"pattern":"needle","path":"big.txt","limit":3}`,
			want:    []string{"big.txt:1:1: needle", "big.txt:2:1: needle", "big.txt:3:1: needle"},
			trunc:   true,
			summary: "3 matches in 1 file (truncated)"},
		{name: "explicit ignored directory is searched", args: `{"pattern":"needle","path":"node_modules"}`,
			want: []string{"node_modules/lib/x.js:1:1: needle in a dependency"}},
		{name: "explicit ignored file is searched", args: `{"pattern":"needle","path":"app.log"}`,
			want: []string{"app.log:1:1: needle in a log"}},
		{name: "symlinked directory inside", args: `{"pattern":"needle","path":"utillink"}`,
			want: []string{"utillink/strings_test.go:1:17: package util // needle"}},
		{name: "no matches", args: `{"pattern":"haystack","path":"src"}`, want: []string{}, summary: "no matches in 6 files"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := newTools(t, tt.opts)
			var got TextResult
			c := mustOK(t, tl, ws, nil, SearchTextTool, tt.args, &got)
			if lines := matchLines(got.Matches); !slices.Equal(lines, tt.want) || got.Truncated != tt.trunc {
				t.Errorf("matches %q truncated %v\nwant    %q truncated %v", lines, got.Truncated, tt.want, tt.trunc)
			}
			if tt.summary != "" && c.res.Summary != tt.summary {
				t.Errorf("summary = %q, want %q", c.res.Summary, tt.summary)
			}
			// Every match was streamed, in order, before the result.
			var streamed []string
			for _, u := range c.updates {
				if u.Output != nil {
					if u.Output.Stream != MatchStream {
						t.Errorf("stream %q, want %q", u.Output.Stream, MatchStream)
					}
					streamed = append(streamed, u.Output.Text)
				}
			}
			if want := matchLines(got.Matches); !slices.Equal(streamed, want) {
				t.Errorf("streamed %q\nresult   %q", streamed, want)
			}
		})
	}
}

// TestSearchTextGitignore searches the whole project: ignored files, .git,
// binary files and the symlink to outside are all left out.
func TestSearchTextGitignore(t *testing.T) {
	ws, _ := projectFixture(t)
	testtree.Write(t, ws, map[string]string{"image.png": "\x89PNG\r\n\x1a\n\x00\x00needle"})
	tl := newTools(t, Options{})
	var got TextResult
	c := mustOK(t, tl, ws, nil, SearchTextTool, `{"pattern":"needle"}`, &got)
	want := []string{
		"README.md:2:5: The needle is here.",
		"app.tsx:1:10: import { needle } from './index';",
		"index.ts:1:14: export const needle = 1;",
		"src/keep.gen.go:1:17: package main // needle kept",
		"src/main.go:3:15: func main() { needle() }",
		"src/util/strings_test.go:1:17: package util // needle",
	}
	if lines := matchLines(got.Matches); !slices.Equal(lines, want) {
		t.Errorf("matches %q\nwant    %q", lines, want)
	}
	if got.FilesSearched != 10 || got.FilesSkipped != 1 || got.Truncated {
		t.Errorf("searched %d, skipped %d, truncated %v; want 10, 1, false", got.FilesSearched, got.FilesSkipped, got.Truncated)
	}
	if want := "6 matches in 6 files, 1 file skipped"; c.res.Summary != want {
		t.Errorf("summary = %q, want %q", c.res.Summary, want)
	}
}

func TestSearchTextSkips(t *testing.T) {
	ws := t.TempDir()
	testtree.Write(t, ws, map[string]string{
		"a.txt":     "needle\n",
		"image.png": "\x89PNG\x00needle",
		"big.txt":   strings.Repeat("needle ", 200),
	})
	tl := newTools(t, Options{MaxSearchFileBytes: 1000})
	var got TextResult
	c := mustOK(t, tl, ws, nil, SearchTextTool, `{"pattern":"needle"}`, &got)
	if got.FilesSearched != 1 || got.FilesSkipped != 2 || len(got.Matches) != 1 {
		t.Errorf("searched %d skipped %d matches %d; want 1, 2, 1", got.FilesSearched, got.FilesSkipped, len(got.Matches))
	}
	if want := "1 match in 1 file, 2 files skipped"; c.res.Summary != want {
		t.Errorf("summary = %q, want %q", c.res.Summary, want)
	}
	// Named explicitly, a file that cannot be searched is an error.
	for path, part := range map[string]string{"image.png": "binary", "big.txt": "larger than the 1000 B search limit"} {
		c := invoke(context.Background(), tl, ws, nil, SearchTextTool, `{"pattern":"needle","path":"`+path+`"}`)
		wantToolError(t, c.err, engine.ToolCodeInvalidInput, path, part)
	}
}

func TestSearchTextLongLine(t *testing.T) {
	ws := t.TempDir()
	line := strings.Repeat("é", 500) + "NEEDLE" + strings.Repeat("x", 1000)
	testtree.Write(t, ws, map[string]string{"min.js": line + "\n"})
	tl := newTools(t, Options{})
	var got TextResult
	mustOK(t, tl, ws, nil, SearchTextTool, `{"pattern":"NEEDLE"}`, &got)
	if len(got.Matches) != 1 {
		t.Fatalf("matches = %v", got.Matches)
	}
	m := got.Matches[0]
	if m.Column != 501 || !strings.Contains(m.Text, "NEEDLE") || !strings.HasPrefix(m.Text, "…") || !strings.HasSuffix(m.Text, "…") || len(m.Text) > maxMatchText+2*len("…") {
		t.Errorf("match = column %d, text %q (%d bytes)", m.Column, m.Text, len(m.Text))
	}
}

// TestSearchTextProgress searches enough files to get progress updates.
func TestSearchTextProgress(t *testing.T) {
	ws := t.TempDir()
	files := map[string]string{}
	for i := range 250 {
		files[fmt.Sprintf("d/f%03d.txt", i)] = "nothing here\n"
	}
	files["d/f123.txt"] = "needle\n"
	testtree.Write(t, ws, files)
	tl := newTools(t, Options{SearchWorkers: 3})
	var got TextResult
	c := mustOK(t, tl, ws, nil, SearchTextTool, `{"pattern":"needle"}`, &got)
	if got.FilesSearched != 250 || len(got.Matches) != 1 {
		t.Errorf("searched %d, matches %v", got.FilesSearched, got.Matches)
	}
	var progress []string
	for _, u := range c.updates {
		if u.Progress != nil {
			progress = append(progress, u.Progress.Message)
		}
	}
	if !slices.Contains(progress, "searched 100 files, 0 matches so far") || !slices.Contains(progress, "searched 200 files, 1 match so far") {
		t.Errorf("progress = %q", progress)
	}
}

// TestSearchTextOrderIsDeterministic runs the same search with many
// workers several times; results come in walk order every time.
func TestSearchTextOrderIsDeterministic(t *testing.T) {
	ws := t.TempDir()
	files := map[string]string{}
	for i := range 60 {
		files[fmt.Sprintf("p%02d/f.txt", i)] = strings.Repeat("x\n", i*50) + "needle\n"
	}
	testtree.Write(t, ws, files)
	tl := newTools(t, Options{SearchWorkers: 8})
	var first []string
	for range 5 {
		var got TextResult
		mustOK(t, tl, ws, nil, SearchTextTool, `{"pattern":"needle","limit":40}`, &got)
		lines := matchLines(got.Matches)
		if len(lines) != 40 || !got.Truncated || !slices.IsSorted(lines) {
			t.Fatalf("got %d matches (truncated %v), sorted %v", len(lines), got.Truncated, slices.IsSorted(lines))
		}
		if first == nil {
			first = lines
		} else if !slices.Equal(first, lines) {
			t.Fatalf("results differ between runs")
		}
	}
}

// TestSearchTextCancelled cancels a long search from its first streamed
// match and expects it to stop promptly.
func TestSearchTextCancelled(t *testing.T) {
	ws := t.TempDir()
	files := map[string]string{}
	big := strings.Repeat("needle haystack haystack haystack\n", 20000) // ~680 KB
	for i := range 40 {
		files[fmt.Sprintf("f%02d.txt", i)] = big
	}
	testtree.Write(t, ws, files)
	tl := newTools(t, Options{})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var streamed atomic.Int32
	start := time.Now()
	_, err := tl.Invoke(ctx, engine.InvokeRequest{Tool: SearchTextTool, Args: []byte(`{"pattern":"needle","limit":1000}`), WorkspaceRoot: ws},
		func(u engine.ToolUpdate) {
			if u.Output != nil && streamed.Add(1) == 1 {
				cancel()
			}
		})
	wantToolError(t, err, engine.ToolCodeCancelled)
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("cancelled search took %s", elapsed)
	}

	dctx, dcancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer dcancel()
	<-dctx.Done()
	c := invoke(dctx, tl, ws, nil, SearchTextTool, `{"pattern":"needle"}`)
	wantToolError(t, c.err, engine.ToolCodeTimeout)
}

func TestSearchTextErrors(t *testing.T) {
	ws, _ := projectFixture(t)
	tl := newTools(t, Options{})
	if err := os.Mkdir(filepath.Join(ws, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		args  string
		code  engine.ToolErrorCode
		parts []string
	}{
		{"missing path", `{"pattern":"x","path":"nope"}`, engine.ToolCodeNotFound, []string{`"nope"`}},
		{".git", `{"pattern":"needle","path":".git"}`, engine.ToolCodeInvalidInput, []string{"inside .git"}},
		{"symlink to outside", `{"pattern":"needle","path":"out"}`, engine.ToolCodePermissionDenied, []string{`"out"`}},
		{"file behind a symlink to outside", `{"pattern":"needle","path":"out/secret.txt"}`, engine.ToolCodePermissionDenied, []string{`"out/secret.txt"`}},
		{"dotdot", `{"pattern":"needle","path":"../outside"}`, engine.ToolCodePermissionDenied, []string{"climbs out of"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := invoke(context.Background(), tl, ws, nil, SearchTextTool, tt.args)
			wantToolError(t, c.err, tt.code, tt.parts...)
		})
	}
	// A whole-workspace search never reads through the symlink to outside.
	var got TextResult
	mustOK(t, tl, ws, nil, SearchTextTool, `{"pattern":"needle outside"}`, &got)
	if len(got.Matches) != 0 {
		t.Errorf("search reached outside the workspace: %v", got.Matches)
	}
}

func TestExcerpt(t *testing.T) {
	short := []byte("short line")
	if got := excerpt(short, 0, 5); got != "short line" {
		t.Errorf("excerpt(short) = %q", got)
	}
	long := []byte(strings.Repeat("a", 1000) + "MATCH" + strings.Repeat("b", 1000))
	got := excerpt(long, 1000, 1005)
	if !strings.Contains(got, "MATCH") || !strings.HasPrefix(got, "…") || !strings.HasSuffix(got, "…") {
		t.Errorf("excerpt(long) = %q", got)
	}
	end := []byte(strings.Repeat("a", 1000) + "MATCH")
	if got := excerpt(end, 1000, 1005); !strings.HasSuffix(got, "MATCH") || len(got) != maxMatchText+len("…") {
		t.Errorf("excerpt(match at end) = %q (%d bytes)", got, len(got))
	}
	bad := []byte("bad \xff byte")
	if got := excerpt(bad, 0, 1); got != "bad \uFFFD byte" {
		t.Errorf("excerpt(invalid UTF-8) = %q", got)
	}
}

// projectFixture is a workspace with .gitignore files, a .git directory,
// a symlink to a directory outside and one to a directory inside.
func projectFixture(t *testing.T) (ws, outside string) {
	base := t.TempDir()
	ws, outside = filepath.Join(base, "ws"), filepath.Join(base, "outside")
	testtree.Write(t, ws, map[string]string{
		".gitignore":               "node_modules/\n*.log\ndist/\n",
		".git/HEAD":                "ref: refs/heads/main\n",
		".git/config":              "needle in git config\n",
		"README.md":                "# Demo\nThe needle is here.\n",
		"app.log":                  "needle in a log\n",
		"index.ts":                 "export const needle = 1;\n",
		"app.tsx":                  "import { needle } from './index';\n",
		"node_modules/lib/x.js":    "needle in a dependency\n",
		"dist/bundle.js":           "needle in build output\n",
		"src/.gitignore":           "*.gen.go\n!keep.gen.go\n",
		"src/main.go":              "package main\n\nfunc main() { needle() }\n",
		"src/main_test.go":         "package main\n",
		"src/a.gen.go":             "package main // needle generated\n",
		"src/keep.gen.go":          "package main // needle kept\n",
		"src/util/strings.go":      "package util\n",
		"src/util/strings_test.go": "package util // needle\n",
	})
	testtree.Write(t, outside, map[string]string{"secret.txt": "needle outside\n"})
	testtree.Symlink(t, outside, filepath.Join(ws, "out"))
	testtree.Symlink(t, "src/util", filepath.Join(ws, "utillink"))
	return ws, outside
}

func TestSearchTextContextLines(t *testing.T) {
	ws := t.TempDir()
	testtree.Write(t, ws, map[string]string{
		"a.txt":    "one\nneedle two\nthree\nneedle four\nfive\nsix\n",
		"long.txt": strings.Repeat("x", 400) + "\nneedle\n",
		"crlf.txt": "before\r\nneedle\r\nafter\r\n",
	})
	tests := []struct {
		name string
		args string
		want []engine.TextMatch
	}{
		{"overlapping context, file start", `{"pattern":"needle","path":"a.txt","context_lines":2}`, []engine.TextMatch{
			{Path: "a.txt", Line: 2, Column: 1, Text: "needle two", Before: []string{"one"}, After: []string{"three", "needle four"}},
			{Path: "a.txt", Line: 4, Column: 1, Text: "needle four", Before: []string{"needle two", "three"}, After: []string{"five", "six"}},
		}},
		{"file end", `{"pattern":"six","path":"a.txt","context_lines":3}`, []engine.TextMatch{
			{Path: "a.txt", Line: 6, Column: 1, Text: "six", Before: []string{"three", "needle four", "five"}},
		}},
		{"the last match within the limit gets its after lines", `{"pattern":"needle","path":"a.txt","context_lines":1,"limit":1}`, []engine.TextMatch{
			{Path: "a.txt", Line: 2, Column: 1, Text: "needle two", Before: []string{"one"}, After: []string{"three"}},
		}},
		{"long context lines are cut", `{"pattern":"needle","path":"long.txt","context_lines":1}`, []engine.TextMatch{
			{Path: "long.txt", Line: 2, Column: 1, Text: "needle", Before: []string{strings.Repeat("x", maxMatchText) + "…"}},
		}},
		{"CRLF", `{"pattern":"needle","path":"crlf.txt","context_lines":1}`, []engine.TextMatch{
			{Path: "crlf.txt", Line: 2, Column: 1, Text: "needle", Before: []string{"before"}, After: []string{"after"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := newTools(t, Options{})
			var got TextResult
			mustOK(t, tl, ws, nil, SearchTextTool, tt.args, &got)
			if !reflect.DeepEqual(got.Matches, tt.want) {
				t.Errorf("matches\n%+v\nwant\n%+v", got.Matches, tt.want)
			}
		})
	}
}

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

// TestPathEscapesRefused names paths outside the workspace in every tool,
// with and without an index: each is refused as permission_denied naming
// the path and the workspace, before the index is asked.
func TestPathEscapesRefused(t *testing.T) {
	f := newEscapeFixture(t)
	tl := newTools(t, Options{})
	paths := []string{
		"../outside/secret.txt",
		"sub/../../outside/secret.txt",
		"/etc/passwd",
		filepath.Join(f.outside, "secret.txt"),
		"out_file",
		"out_dir",
		"out_dir/secret.txt",
		"out_rel/secret.txt",
		"dangling_out",
		"..",
	}
	q := strconv.Quote
	for _, p := range paths {
		for _, a := range []struct{ tool, args string }{
			{SearchTextTool, `{"pattern":"secret","path":` + q(p) + `}`},
			{SearchTextTool, `{"query":"secret","path":` + q(p) + `}`},
			{SearchSymbolsTool, `{"query":"secret","path":` + q(p) + `}`},
			{VectorSearchTool, `{"query":"secret","path":` + q(p) + `}`},
		} {
			for _, host := range []*fakeHost{nil, noIndexHost(), {}} {
				t.Run(a.args, func(t *testing.T) {
					var h engine.ToolHost
					if host != nil {
						h = host
					}
					c := invoke(context.Background(), tl, f.ws, h, a.tool, a.args)
					wantToolError(t, c.err, engine.ToolCodePermissionDenied, a.tool+":", q(p), "the workspace "+f.ws)
					if c.res.Content != nil || len(c.updates) != 0 {
						t.Errorf("refused call returned content %s, updates %+v", c.res.Content, c.updates)
					}
					if host != nil && len(host.queries) != 0 {
						t.Errorf("the index was asked %+v", host.queries)
					}
				})
			}
		}
	}
}

// TestSwappedSymlinkRefused swaps a directory for a symlink to outside
// after the path was resolved; the os.Root refuses, and the fallback
// reports it as permission_denied.
func TestSwappedSymlinkRefused(t *testing.T) {
	for _, args := range []string{`{"pattern":"outside","path":"sub"}`, `{"pattern":"outside","path":"sub/f.txt"}`} {
		t.Run(args, func(t *testing.T) {
			f := newEscapeFixture(t)
			tl := newTools(t, Options{})
			tl.afterResolve = func(string) {
				if err := os.RemoveAll(filepath.Join(f.ws, "sub")); err != nil {
					t.Fatal(err)
				}
				testtree.Symlink(t, f.outside, filepath.Join(f.ws, "sub"))
			}
			c := invoke(context.Background(), tl, f.ws, nil, SearchTextTool, args)
			wantToolError(t, c.err, engine.ToolCodePermissionDenied, "sub", f.ws)
			if c.res.Content != nil {
				t.Errorf("refused call returned content %s", c.res.Content)
			}
		})
	}
}

// FuzzSearchText feeds arbitrary arguments to the fallback search over a
// workspace with symlinks to the outside. Every call must end in a result
// or a *engine.ToolError with a known code, and every match must name a
// path inside the workspace.
func FuzzSearchText(f *testing.F) {
	base := f.TempDir()
	ws, outside := filepath.Join(base, "ws"), filepath.Join(base, "outside")
	testtree.Write(f, ws, map[string]string{"inside.txt": "inside\nneedle\n", "sub/f.txt": "sub\n", ".gitignore": "*.log\n", "a.log": "needle\n"})
	testtree.Write(f, outside, map[string]string{"secret.txt": "secret needle\n"})
	testtree.Symlink(f, outside, filepath.Join(ws, "out_dir"))
	testtree.Symlink(f, "../outside", filepath.Join(ws, "out_rel"))
	tl := New(Options{SearchWorkers: 2})
	f.Cleanup(func() { tl.Close() })
	for _, s := range []string{
		`{"pattern":"needle"}`,
		`{"pattern":"(?i)NEE","regex":true,"path":"sub","include":"*.txt","context_lines":3}`,
		`{"pattern":"needle","path":"out_dir"}`,
		`{"pattern":"\\","regex":true}`,
		`{"pattern":"a","query":"b"}`,
		`{"query":"needle"}`,
		`{"pattern":"x","path":"a\u0000b"}`,
		`[]`,
		`null`,
	} {
		f.Add([]byte(s))
	}
	known := map[engine.ToolErrorCode]bool{
		engine.ToolCodeInvalidInput: true, engine.ToolCodeNotFound: true, engine.ToolCodePermissionDenied: true,
		engine.ToolCodeCancelled: true, engine.ToolCodeTimeout: true, engine.ToolCodeFailed: true,
	}
	f.Fuzz(func(t *testing.T, args []byte) {
		res, err := tl.Invoke(context.Background(), engine.InvokeRequest{Tool: SearchTextTool, Args: args, WorkspaceRoot: ws}, func(engine.ToolUpdate) {})
		if err != nil {
			var te *engine.ToolError
			if !errors.As(err, &te) || !known[te.Code] || te.Message == "" {
				t.Fatalf("%q: error %v (%T)", args, err, err)
			}
			return
		}
		var out TextResult
		if e := json.Unmarshal(res.Content, &out); e != nil {
			t.Fatalf("%q: result %s: %v", args, res.Content, e)
		}
		for _, m := range out.Matches {
			if !filepath.IsLocal(m.Path) || strings.HasPrefix(m.Path, "out_") {
				t.Fatalf("%q: match in %q, not a file inside the workspace", args, m.Path)
			}
		}
	})
}

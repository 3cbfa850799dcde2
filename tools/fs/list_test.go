package fs

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/plexus-agent/plexus/internal/testtree"

	"github.com/plexus-agent/plexus/engine"
)

// projectFixture is a small project with ignore rules, a nested
// .gitignore, a .git directory and symlinks, next to an outside directory.
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
	unchangedAfter(t, ws)
	return ws, outside
}

func TestListFiles(t *testing.T) {
	ws, _ := projectFixture(t)
	tests := []struct {
		name    string
		args    string
		opts    Options
		want    []string
		trunc   bool
		summary string
	}{
		{name: "default: recursive, gitignore aware", args: `{}`,
			want: []string{".gitignore", "README.md", "app.tsx", "index.ts", "out", "src/.gitignore", "src/keep.gen.go", "src/main.go", "src/main_test.go",
				"src/util/strings.go", "src/util/strings_test.go", "utillink"},
			summary: "12 files under ."},
		{name: "subdirectory", args: `{"path":"src/util"}`,
			want: []string{"src/util/strings.go", "src/util/strings_test.go"}, summary: "2 files under src/util"},
		{name: "one level marks directories", args: `{"path":".","recursive":false}`,
			want:    []string{".gitignore", "README.md", "app.tsx", "index.ts", "out", "src/", "utillink"},
			summary: "7 entries in ."},
		{name: "one level of a subdirectory", args: `{"path":"src","recursive":false}`,
			want: []string{"src/.gitignore", "src/keep.gen.go", "src/main.go", "src/main_test.go", "src/util/"}},
		{name: "pattern on the base name", args: `{"pattern":"*_test.go"}`,
			want: []string{"src/main_test.go", "src/util/strings_test.go"}},
		{name: "pattern with ** on the workspace path", args: `{"pattern":"src/**/*.go"}`,
			want: []string{"src/keep.gen.go", "src/main.go", "src/main_test.go", "src/util/strings.go", "src/util/strings_test.go"}},
		{name: "pattern relative to path", args: `{"path":"src","pattern":"util/*.go"}`,
			want: []string{"src/util/strings.go", "src/util/strings_test.go"}},
		{name: "pattern matching nothing", args: `{"pattern":"*.rs"}`, want: []string{}, summary: "0 files under ."},
		{name: "max_results truncates", args: `{"max_results":3}`,
			want: []string{".gitignore", "README.md", "app.tsx"}, trunc: true, summary: "3 files under . (truncated)"},
		{name: "exactly max_results is not truncated", args: `{"path":"src/util","max_results":2}`,
			want: []string{"src/util/strings.go", "src/util/strings_test.go"}},
		{name: "default limit from Options", args: `{}`, opts: Options{ListResults: 2},
			want: []string{".gitignore", "README.md"}, trunc: true},
		{name: "include_ignored", args: `{"include_ignored":true,"pattern":"*.js"}`,
			want: []string{"dist/bundle.js", "node_modules/lib/x.js"}},
		{name: "an ignored directory named explicitly is listed", args: `{"path":"node_modules"}`,
			want: []string{"node_modules/lib/x.js"}},
		{name: "symlink to a directory inside", args: `{"path":"utillink"}`,
			want: []string{"utillink/strings.go", "utillink/strings_test.go"}},
		{name: "absolute path inside", args: `{"path":"` + filepath.Join(ws, "src", "util") + `"}`,
			want: []string{"src/util/strings.go", "src/util/strings_test.go"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := newTools(t, tt.opts)
			var got ListResult
			c := mustOK(t, tl, ws, ListFilesTool, tt.args, &got)
			if !slices.Equal(got.Files, tt.want) || got.Truncated != tt.trunc {
				t.Errorf("files %q truncated %v\nwant  %q truncated %v", got.Files, got.Truncated, tt.want, tt.trunc)
			}
			if tt.summary != "" && c.res.Summary != tt.summary {
				t.Errorf("summary = %q, want %q", c.res.Summary, tt.summary)
			}
		})
	}
}

// TestListFilesContract checks the shape front-ends rely on:
// {"files": ["index.ts", "app.tsx"], ...}, an array even when empty.
func TestListFilesContract(t *testing.T) {
	ws := t.TempDir()
	testtree.Write(t, ws, map[string]string{"index.ts": "", "app.tsx": ""})
	unchangedAfter(t, ws)
	tl := newTools(t, Options{})
	for args, want := range map[string][]any{`{}`: {"app.tsx", "index.ts"}, `{"pattern":"*.rs"}`: {}} {
		c := invoke(context.Background(), tl, ws, ListFilesTool, args)
		if c.err != nil {
			t.Fatal(c.err)
		}
		var raw map[string]any
		if err := json.Unmarshal(c.res.Content, &raw); err != nil {
			t.Fatal(err)
		}
		files, ok := raw["files"].([]any)
		if !ok || !slices.Equal(files, want) {
			t.Errorf("%s: content %s, want \"files\": %q", args, c.res.Content, want)
		}
	}
}

func TestListFilesErrors(t *testing.T) {
	ws, _ := projectFixture(t)
	tl := newTools(t, Options{})
	tests := []struct {
		name  string
		args  string
		code  engine.ToolErrorCode
		parts []string
	}{
		{"a file", `{"path":"README.md"}`, engine.ToolCodeInvalidInput, []string{"README.md is a file", "read_file"}},
		{"missing", `{"path":"nope"}`, engine.ToolCodeNotFound, []string{`"nope" does not exist`}},
		{".git", `{"path":".git"}`, engine.ToolCodeInvalidInput, []string{"inside .git"}},
		{"symlink to outside", `{"path":"out"}`, engine.ToolCodePermissionDenied, []string{`"out"`, ws}},
		{"dotdot", `{"path":"../outside"}`, engine.ToolCodePermissionDenied, []string{`"../outside"`, "climbs out of"}},
		{"absolute outside", `{"path":"/etc"}`, engine.ToolCodePermissionDenied, []string{`"/etc"`, "is outside"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := invoke(context.Background(), tl, ws, ListFilesTool, tt.args)
			wantToolError(t, c.err, tt.code, tt.parts...)
		})
	}
}

func TestGlob(t *testing.T) {
	tests := []struct {
		pattern, rel, base string
		want               bool
	}{
		{"*.go", "src/main.go", "main.go", true},
		{"*.go", "src/main.ts", "main.ts", false},
		{"main.go", "a/b/main.go", "b/main.go", true},
		{"src/*.go", "src/main.go", "main.go", true},
		{"src/*.go", "src/x/main.go", "x/main.go", false},
		{"src/**/*.go", "src/main.go", "main.go", true},
		{"src/**/*.go", "src/x/y/main.go", "x/y/main.go", true},
		{"**/*_test.go", "a/b_test.go", "a/b_test.go", true},
		{"**/*_test.go", "b_test.go", "b_test.go", true},
		{"src/**", "src/a/b", "a/b", true},
		{"**/**/x", "a/x", "a/x", true},
		{"./src/*.go", "src/a.go", "a.go", true},
		{"/src/*.go", "src/a.go", "a.go", true},
		{"x/*.go", "src/x/a.go", "x/a.go", true}, // relative to the listed directory
		{"[ab].txt", "d/a.txt", "a.txt", true},
		{"?.txt", "d/ab.txt", "ab.txt", false},
		{"src/**/b/**/c", "src/b/c", "b/c", true},
		{"src/**/b/**/c", "src/x/b/y/z/c", "x/b/y/z/c", true},
		{"src/**/b/**/c", "src/x/c", "x/c", false},
		// Many ** against a deep path: must not backtrack exponentially.
		{strings.Repeat("**/a/", 30) + "b", strings.Repeat("a/", 60) + "c", "", false},
	}
	for _, tt := range tests {
		g, err := newGlob("t", "pattern", tt.pattern)
		if err != nil {
			t.Fatalf("newGlob(%q): %v", tt.pattern, err)
		}
		if got := g.MatchUnder(tt.rel, tt.base); got != tt.want {
			t.Errorf("glob %q match(%q, %q) = %v, want %v", tt.pattern, tt.rel, tt.base, got, tt.want)
		}
	}
}

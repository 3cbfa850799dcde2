package workspace

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/plexus-agent/plexus/internal/testtree"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"

	"github.com/plexus-agent/plexus/engine"
)

var gitignoreMatcher = gitignore.NewMatcher

// walkFixture builds a workspace that exercises every ignore rule, next to
// a directory outside it.
func walkFixture(t *testing.T) (ws, outside string) {
	base := t.TempDir()
	ws, outside = filepath.Join(base, "ws"), filepath.Join(base, "outside")
	testtree.Write(t, ws, map[string]string{
		".gitignore": "# comment\n" +
			"*.log\n" +
			"!keep.log\n" +
			"/build/\n" + // anchored, dir-only
			"node_modules/\n" +
			"docs/**\n" + // everything inside docs ...
			"!docs/keep.md\n" + // ... but this
			"\\#hash\n" + // escaped comment character
			"trailing   \n", // trailing spaces are ignored
		".git/HEAD":                 "ref: refs/heads/main\n",
		".git/info/exclude":         "secret.txt\n",
		"a.go":                      "package a\n",
		"app.log":                   "log\n",
		"keep.log":                  "kept\n",
		"secret.txt":                "s\n",
		"#hash":                     "h\n",
		"trailing":                  "t\n",
		"build/out.o":               "o\n",
		"node_modules/pkg/index.js": "x\n",
		"docs/a.md":                 "a\n",
		"docs/keep.md":              "k\n",
		"src/.gitignore":            "*.tmp\r\n!important.tmp\r\ngen/\r\n", // CRLF
		"src/main.go":               "package main\n",
		"src/a.tmp":                 "t\n",
		"src/important.tmp":         "i\n",
		"src/build/x.go":            "package build\n", // /build/ is anchored to the root
		"src/gen/g.go":              "package gen\n",
		"src/sub/gen":               "a file named gen is not a gen/ directory\n",
		"src/sub/x.log":             "ignored by the root's *.log\n",
		"nested/.git/info/exclude":  "*.gen\n",
		"nested/.git/config":        "[core]\n",
		"nested/x.gen":              "g\n",
		"nested/y.go":               "package y\n",
	})
	testtree.Write(t, outside, map[string]string{"secret.txt": "outside\n", "dir/f.txt": "f\n"})
	testtree.Symlink(t, outside, filepath.Join(ws, "link_out"))
	testtree.Symlink(t, "src", filepath.Join(ws, "link_dir"))
	return ws, outside
}

// collect walks dir and returns the reported paths, directories with a
// trailing slash and symlinks with a trailing @.
func collect(t *testing.T, r *Root, dir string, opts WalkOptions) []string {
	t.Helper()
	var got []string
	err := r.Walk(context.Background(), dir, opts, func(rel string, d fs.DirEntry) error {
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			rel += "@"
		case d.IsDir():
			rel += "/"
		}
		got = append(got, rel)
		return nil
	})
	if err != nil {
		t.Fatalf("Walk(%q): %v", dir, err)
	}
	return got
}

func TestWalk(t *testing.T) {
	ws, _ := walkFixture(t)
	r := openRoot(t, ws)

	all := []string{
		"#hash", ".gitignore", "a.go", "app.log", "build/", "build/out.o",
		"docs/", "docs/a.md", "docs/keep.md", "keep.log", "link_dir@", "link_out@",
		"nested/", "nested/x.gen", "nested/y.go",
		"node_modules/", "node_modules/pkg/", "node_modules/pkg/index.js",
		"secret.txt",
		"src/", "src/.gitignore", "src/a.tmp", "src/build/", "src/build/x.go",
		"src/gen/", "src/gen/g.go", "src/important.tmp", "src/main.go",
		"src/sub/", "src/sub/gen", "src/sub/x.log", "trailing",
	}
	tests := []struct {
		name string
		dir  string
		opts WalkOptions
		want []string
	}{
		{
			name: "gitignore aware",
			dir:  "",
			want: []string{
				".gitignore", "a.go",
				"docs/", "docs/keep.md", // docs/** ignores the contents, not docs; negation re-includes
				"keep.log",               // negated *.log
				"link_dir@", "link_out@", // symlinks are reported, not followed
				"nested/", "nested/y.go", // nested repo's info/exclude drops x.gen; its .git is skipped
				"src/", "src/.gitignore", "src/build/", "src/build/x.go",
				"src/important.tmp", "src/main.go", "src/sub/", "src/sub/gen",
			},
		},
		{name: "include ignored", dir: ".", opts: WalkOptions{IncludeIgnored: true}, want: all},
		{
			name: "max depth 1",
			dir:  ".",
			opts: WalkOptions{MaxDepth: 1},
			want: []string{".gitignore", "a.go", "docs/", "keep.log", "link_dir@", "link_out@", "nested/", "src/"},
		},
		{
			name: "max depth 1 in a subdirectory",
			dir:  "src",
			opts: WalkOptions{MaxDepth: 1},
			want: []string{"src/.gitignore", "src/build/", "src/important.tmp", "src/main.go", "src/sub/"},
		},
		{
			name: "subdirectory keeps the root's rules",
			dir:  "src/sub",
			want: []string{"src/sub/gen"},
		},
		{
			name: "ignored directory gives nothing",
			dir:  "node_modules",
			want: nil,
		},
		{
			name: "ignored directory with IncludeIgnored",
			dir:  "node_modules",
			opts: WalkOptions{IncludeIgnored: true},
			want: []string{"node_modules/pkg/", "node_modules/pkg/index.js"},
		},
		{
			name: "symlink to a directory inside is walked as its target",
			dir:  "link_dir/sub",
			want: []string{"link_dir/sub/gen"},
		},
		{
			name: "SkipDir hook",
			dir:  ".",
			opts: WalkOptions{SkipDir: func(rel string, d fs.DirEntry) bool { return rel == "src" || d.Name() == "nested" }},
			want: []string{".gitignore", "a.go", "docs/", "docs/keep.md", "keep.log", "link_dir@", "link_out@"},
		},
		{name: ".git is never walked", dir: ".git", opts: WalkOptions{IncludeIgnored: true}, want: nil},
		{name: "absolute path inside", dir: filepath.Join(ws, "nested"), want: []string{"nested/y.go"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := collect(t, r, tt.dir, tt.opts)
			if !slices.Equal(got, tt.want) {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestWalkErrors(t *testing.T) {
	ws, _ := walkFixture(t)
	r := openRoot(t, ws)
	noop := func(string, fs.DirEntry) error { return nil }
	tests := []struct {
		name  string
		dir   string
		errIs error
	}{
		{"symlink to outside", "link_out", engine.ErrPermissionDenied},
		{"dotdot", "../outside", engine.ErrPermissionDenied},
		{"absolute outside", "/etc", engine.ErrPermissionDenied},
		{"a file", "a.go", syscall.ENOTDIR},
		{"missing", "nope", fs.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := r.Walk(context.Background(), tt.dir, WalkOptions{}, noop)
			if !errors.Is(err, tt.errIs) {
				t.Errorf("Walk(%q) = %v, want %v", tt.dir, err, tt.errIs)
			}
		})
	}
}

// TestWalkNeverLeaves records every path the walk's callback sees while
// IncludeIgnored is on and checks none is outside or behind a symlink.
func TestWalkNeverLeaves(t *testing.T) {
	ws, _ := walkFixture(t)
	r := openRoot(t, ws)
	for _, rel := range collect(t, r, ".", WalkOptions{IncludeIgnored: true}) {
		if strings.HasPrefix(rel, "link_out/") || strings.HasPrefix(rel, "link_dir/") || strings.Contains(rel, "secret.txt") && rel != "secret.txt" {
			t.Errorf("walk reached %q", rel)
		}
	}
}

func TestWalkCallbackControl(t *testing.T) {
	ws, _ := walkFixture(t)
	r := openRoot(t, ws)
	ctx := context.Background()

	t.Run("SkipDir from a directory", func(t *testing.T) {
		var got []string
		err := r.Walk(ctx, ".", WalkOptions{}, func(rel string, d fs.DirEntry) error {
			got = append(got, rel)
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		})
		want := []string{".gitignore", "a.go", "docs", "keep.log", "link_dir", "link_out", "nested", "src"}
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("got %q, %v; want %q", got, err, want)
		}
	})
	t.Run("SkipDir from a file skips its siblings", func(t *testing.T) {
		var got []string
		err := r.Walk(ctx, "src", WalkOptions{}, func(rel string, d fs.DirEntry) error {
			got = append(got, rel)
			if rel == "src/build/x.go" || rel == "src/important.tmp" {
				return fs.SkipDir
			}
			return nil
		})
		want := []string{"src/.gitignore", "src/build", "src/build/x.go", "src/important.tmp"}
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("got %q, %v; want %q", got, err, want)
		}
	})
	t.Run("SkipAll", func(t *testing.T) {
		n := 0
		err := r.Walk(ctx, ".", WalkOptions{}, func(string, fs.DirEntry) error {
			n++
			if n == 3 {
				return fs.SkipAll
			}
			return nil
		})
		if err != nil || n != 3 {
			t.Errorf("n, err = %d, %v; want 3, nil", n, err)
		}
	})
	t.Run("other errors stop the walk unchanged", func(t *testing.T) {
		stop := errors.New("stop")
		n := 0
		err := r.Walk(ctx, ".", WalkOptions{}, func(string, fs.DirEntry) error {
			n++
			return stop
		})
		if err != stop || n != 1 {
			t.Errorf("n, err = %d, %v; want 1, stop", n, err)
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		n := 0
		err := r.Walk(cctx, ".", WalkOptions{}, func(string, fs.DirEntry) error {
			n++
			cancel()
			return nil
		})
		if !errors.Is(err, context.Canceled) || n != 1 {
			t.Errorf("n, err = %d, %v; want 1, context.Canceled", n, err)
		}
	})
}

// TestWalkOnError makes a subdirectory's .gitignore a symlink to outside
// the workspace, which os.Root refuses to read.
func TestWalkOnError(t *testing.T) {
	ws, outside := walkFixture(t)
	testtree.Write(t, outside, map[string]string{"ignore": "*\n"})
	testtree.Write(t, ws, map[string]string{"bad/f.txt": "f\n"})
	testtree.Symlink(t, filepath.Join(outside, "ignore"), filepath.Join(ws, "bad", ".gitignore"))
	r := openRoot(t, ws)
	noop := func(string, fs.DirEntry) error { return nil }

	err := r.Walk(context.Background(), ".", WalkOptions{}, noop)
	if !errors.Is(err, engine.ErrPermissionDenied) || !strings.Contains(err.Error(), "bad") {
		t.Errorf("Walk without OnError = %v, want an escape error naming bad", err)
	}

	var failed []string
	got := collect(t, r, ".", WalkOptions{MaxDepth: 2, OnError: func(rel string, err error) error {
		failed = append(failed, rel)
		if !errors.Is(err, engine.ErrPermissionDenied) {
			t.Errorf("OnError(%q, %v), want an escape error", rel, err)
		}
		return nil
	}})
	if !slices.Equal(failed, []string{"bad"}) {
		t.Errorf("OnError saw %q, want [bad]", failed)
	}
	if slices.Contains(got, "bad/f.txt") || !slices.Contains(got, "bad/") || !slices.Contains(got, "src/main.go") {
		t.Errorf("walk = %q, want bad/ listed, its contents skipped, the rest walked", got)
	}

	stop := errors.New("stop")
	err = r.Walk(context.Background(), ".", WalkOptions{OnError: func(string, error) error { return stop }}, noop)
	if err != stop {
		t.Errorf("Walk with OnError returning stop = %v", err)
	}
}

func TestIgnored(t *testing.T) {
	ws, _ := walkFixture(t)
	r := openRoot(t, ws)
	tests := []struct {
		path string
		want bool
	}{
		{".", false},
		{"a.go", false},
		{"app.log", true},
		{"keep.log", false},
		{"secret.txt", true},
		{"build", true},
		{"build/out.o", true},
		{"src/build/x.go", false},
		{"node_modules/pkg/index.js", true},
		{"src/gen/g.go", true},
		{"src/sub/gen", false},
		{"src/a.tmp", true},
		{"src/important.tmp", false},
		{"docs", false},
		{"docs/a.md", true},
		{"docs/keep.md", false},
		{".git/HEAD", true},
		{"nested/x.gen", true},
		{"not-yet.log", true},
		{"link_dir/a.tmp", true},
	}
	for _, tt := range tests {
		got, err := r.Ignored(tt.path)
		if err != nil || got != tt.want {
			t.Errorf("Ignored(%q) = %v, %v; want %v", tt.path, got, err, tt.want)
		}
	}
	if _, err := r.Ignored("../x"); !errors.Is(err, engine.ErrPermissionDenied) {
		t.Errorf("Ignored(../x) = %v, want an escape error", err)
	}
}

// TestWalkMatchesGit compares Walk with git's own view of untracked, not
// ignored files. It needs a git binary and is skipped without one.
func TestWalkMatchesGit(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	ws := t.TempDir()
	testtree.Write(t, ws, map[string]string{
		".gitignore": "*.log\n!keep.log\n/build/\nnode_modules/\ndocs/**\n!docs/keep.md\n**/cache\nsrc/*.gen.go\n",
		"a.go":       "", "app.log": "", "keep.log": "",
		"build/out.o": "", "src/build/x.go": "",
		"node_modules/p.js": "", "lib/node_modules/q.js": "",
		"docs/a.md": "", "docs/keep.md": "", "docs/deep/b.md": "",
		"x/cache/c": "", "cache": "",
		"src/a.gen.go": "", "src/deep/b.gen.go": "", "src/main.go": "",
		"src/.gitignore": "*.tmp\n!important.tmp\ngen/\n/local.txt\n",
		"src/a.tmp":      "", "src/important.tmp": "", "src/gen/g.go": "", "src/sub/gen": "",
		"src/local.txt": "", "src/sub/local.txt": "",
	})
	git := func(args ...string) string {
		cmd := exec.Command(gitBin, args...)
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "HOME="+ws)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	git("init", "-q")
	want := strings.Fields(git("ls-files", "--others", "--exclude-standard"))
	sort.Strings(want)

	r := openRoot(t, ws)
	var got []string
	err = r.Walk(context.Background(), ".", WalkOptions{}, func(rel string, d fs.DirEntry) error {
		if !d.IsDir() {
			got = append(got, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("Walk files:\n  %q\ngit ls-files --others --exclude-standard:\n  %q", got, want)
	}
}

// FuzzParseIgnore feeds arbitrary ignore files and paths to the matcher;
// it must not panic, and a comment-only file must ignore nothing.
func FuzzParseIgnore(f *testing.F) {
	for _, s := range []string{"*.log\n!keep.log\n", "/build/\n", "docs/**\n!docs/a\n", "\\#x\n", "!\n", "/\n", "**\n", "a/**/b/\n", "[\n", "\ufeff# c\r\nx\r\n"} {
		f.Add(s, "a/b/keep.log", false)
	}
	f.Fuzz(func(t *testing.T, data, p string, isDir bool) {
		ps := parseIgnore([]byte(data), []string{"a"})
		parts := strings.Split(p, "/")
		gitignoreMatcher(ps).Match(parts, isDir)
		comments := parseIgnore([]byte("# "+strings.ReplaceAll(data, "\n", " ")), nil)
		if len(comments) != 0 {
			t.Fatalf("a comment line gave %d patterns", len(comments))
		}
	})
}

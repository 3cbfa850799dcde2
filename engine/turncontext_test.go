package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const loginGo = `package auth

import "errors"

// Login checks a password.
func Login(user, password string) error {
	if password == "" {
		return errors.New("empty password")
	}
	return check(user)
}

func check(user string) error {
	return nil
}
`

const modelsPy = `import os


class User:
    def __init__(self, name):
        self.name = name

    def greet(self):
        greeting = "hi " + self.name
        return greeting


def helper():
    return 1
`

// contextFiles is the workspace most gathering tests run in.
var contextFiles = map[string]string{
	"go.mod":                           "module example.com/m\n\ngo 1.22\n",
	"auth/login.go":                    loginGo,
	"auth/login_test.go":               "package auth\n\nfunc TestLogin(t *testing.T) {}\n",
	"cmd/main.go":                      "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/m/auth\"\n)\n\nfunc main() { fmt.Println(auth.Login(\"a\", \"b\")) }\n",
	"web/login.ts":                     "export function login(user: string): boolean {\n  return user.length > 0;\n}\n",
	"web/login.test.ts":                "import { login } from './login';\ntest('login', () => { expect(login('a')).toBe(true); });\n",
	"web/app.ts":                       "import { login } from './login';\nimport React from 'react';\nconsole.log(login('x'));\n",
	"py/pkg/__init__.py":               "",
	"py/pkg/models.py":                 modelsPy,
	"py/pkg/views.py":                  "from .models import User\nfrom . import helpers\n\ndef show():\n    return User('a')\n",
	"py/pkg/test_models.py":            "from .models import User\n",
	"src/main/java/com/x/Foo.java":     "package com.x;\npublic class Foo {}\n",
	"src/test/java/com/x/FooTest.java": "package com.x;\nclass FooTest {}\n",
	"lib.rs":                           "pub fn a() {}\n#[cfg(test)]\nmod tests {}\n",
	"notes.md":                         "see login\n",
}

// newContextWorkspace writes files into a fresh directory and returns its
// root (symlinks resolved, as Workspace.Root is) and a directory outside
// it holding secret.txt, which root/link points to.
func newContextWorkspace(t *testing.T, files map[string]string) (root, outside string) {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	outside = t.TempDir()
	for name, text := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("TOP SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	return root, outside
}

// fakeSearcher answers with canned hits and records the queries.
type fakeSearcher struct {
	chunks  []ChunkHit
	text    TextResult
	symbols []SymbolHit
	err     error

	chunkQueries []ChunkQuery
	textQueries  []TextQuery
}

func (s *fakeSearcher) SearchSymbols(_ context.Context, _ string, q SymbolQuery) ([]SymbolHit, error) {
	return s.symbols, s.err
}

func (s *fakeSearcher) SearchText(_ context.Context, _ string, q TextQuery, _ func(TextMatch)) (TextResult, error) {
	s.textQueries = append(s.textQueries, q)
	return s.text, s.err
}

func (s *fakeSearcher) SearchChunks(_ context.Context, _ string, q ChunkQuery) ([]ChunkHit, error) {
	s.chunkQueries = append(s.chunkQueries, q)
	return s.chunks, s.err
}

func (s *fakeSearcher) SearchVectors(context.Context, string, ChunkQuery) ([]ChunkHit, error) {
	return nil, ErrUnsupported
}

func sel(l1, c1, l2, c2 int) *Selection {
	return &Selection{Start: Position{l1, c1}, End: Position{l2, c2}}
}

func cursor(l, c int) *Selection { return sel(l, c, l, c) }

func exitCode(n int) *int { return &n }

func TestGatherContext(t *testing.T) {
	root, outside := newContextWorkspace(t, contextFiles)
	hash := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	gitMissing := "The workspace is not a git repository"
	if _, err := exec.LookPath("git"); err != nil {
		gitMissing = "git is not installed"
	}
	diag := Diagnostic{FilePath: "auth/login.go", Severity: "error", Message: "undefined: x", Line: 7, Character: 9, Source: "gopls"}
	term := &TerminalOutput{Command: "go test ./...", ExitCode: exitCode(1), Stdout: "--- FAIL: TestLogin\n", Timestamp: "2025-12-30T10:30:45Z"}
	chunkSearch := &fakeSearcher{chunks: []ChunkHit{
		{Path: "auth/login.go", StartLine: 1, EndLine: 15, Kind: "file"},
		{Path: "auth/login.go", StartLine: 6, EndLine: 11, Kind: "function", Name: "Login"},
		{Path: "auth/other.go", StartLine: 1, EndLine: 3},
	}}
	textSearch := &fakeSearcher{text: TextResult{Matches: []TextMatch{
		{Path: "web/app.ts", Line: 1}, {Path: "notes.md", Line: 1}, {Path: "web/login.ts", Line: 1},
	}}}

	tests := []struct {
		name    string
		ctx     TurnContext
		search  Searcher
		want    []string
		notWant []string
		refused int
	}{
		{
			name: "no command",
			ctx: TurnContext{
				ActiveEditor:   &ActiveEditor{FilePath: "auth/login.go", Language: "go", Selection: sel(6, 1, 8, 2), VisibleRange: &LineRange{0, 14}, ContentHash: hash(loginGo)},
				OpenEditors:    []OpenEditor{{FilePath: "web/app.ts", IsDirty: true}, {FilePath: filepath.Join(root, "web/login.ts")}},
				Diagnostics:    []Diagnostic{{FilePath: "web/app.ts", Severity: "warning", Message: "unused\nimport", Line: 1}, diag},
				TerminalOutput: term,
			},
			want: []string{
				"## Editor context", "line numbers are 1-based",
				"### Active file auth/login.go (go)\n15 lines. Visible: lines 1-15.",
				"### Selection in auth/login.go, lines 7-9\n```go\nif password == \"\" {\n\t\treturn errors.New(\"empty password\")\n\t}\n```",
				"### Diagnostics (2)\n- auth/login.go:8:10 error [gopls]: undefined: x\n- web/app.ts:2:1 warning: unused import",
				"### Open editors\n- web/app.ts (unsaved changes)\n- web/login.ts",
			},
			notWant: []string{"unsaved changes: the text", "Terminal output", "git diff", "Dependents", "### Command", "Code around"},
		},
		{
			name: "unsaved changes",
			ctx:  TurnContext{ActiveEditor: &ActiveEditor{FilePath: "auth/login.go", ContentHash: hash("edited")}},
			want: []string{"The editor has unsaved changes"},
		},
		{
			name:    "fix",
			ctx:     TurnContext{Command: "/fix", ActiveEditor: &ActiveEditor{FilePath: "auth/login.go", Selection: cursor(7, 9)}, Diagnostics: []Diagnostic{diag}, TerminalOutput: term, GitContext: &GitContext{Branch: "feature/auth", ModifiedFiles: []string{"auth/login.go"}, RecentCommits: []GitCommit{{SHA: "abc123", Message: "Add validation", Author: "Kevin"}}}},
			want:    []string{"### Command /fix\nFix the problems", "Cursor: line 8, column 10.", "### Terminal output of `go test ./...` (exit code 1, at 2025-12-30T10:30:45Z)\n```\n--- FAIL: TestLogin\n", "Branch: feature/auth\nModified: auth/login.go\nCommit abc123: Add validation (Kevin)", "### git diff\n" + gitMissing, "Code around the diagnostics: auth/login.go, lines 5-11", "> 8| \t\treturn errors.New"},
			notWant: []string{"Dependents", "Test file", "### Selection"},
		},
		{
			name: "fix without terminal output",
			ctx:  TurnContext{Command: "FIX", ActiveEditor: &ActiveEditor{FilePath: "auth/login.go"}},
			want: []string{"### Command /fix", "the client sent no terminal output"},
		},
		{
			name:    "test of a Go file",
			ctx:     TurnContext{Command: "/test", ActiveEditor: &ActiveEditor{FilePath: "auth/login.go"}, TerminalOutput: term},
			want:    []string{"### Source file (active) auth/login.go\n```go\npackage auth", "### Test file auth/login_test.go\n```go\npackage auth\n\nfunc TestLogin", "--- FAIL: TestLogin"},
			notWant: []string{"git diff", "Dependents", "Code around"},
		},
		{
			name: "test of a test file",
			ctx:  TurnContext{Command: "/test", ActiveEditor: &ActiveEditor{FilePath: "web/login.test.ts"}},
			want: []string{"### Test file (active) web/login.test.ts", "### Source file web/login.ts\n```ts\nexport function login", "the client sent no terminal output"},
		},
		{
			name: "test of Python",
			ctx:  TurnContext{Command: "/test", ActiveEditor: &ActiveEditor{FilePath: "py/pkg/models.py"}},
			want: []string{"### Test file py/pkg/test_models.py"},
		},
		{
			name: "test of Java",
			ctx:  TurnContext{Command: "/test", ActiveEditor: &ActiveEditor{FilePath: "src/main/java/com/x/Foo.java"}},
			want: []string{"### Test file src/test/java/com/x/FooTest.java"},
		},
		{
			name: "test without tests",
			ctx:  TurnContext{Command: "/test", ActiveEditor: &ActiveEditor{FilePath: "web/app.ts"}},
			want: []string{"### Test files\nNone yet (looked for: web/app.test.ts, web/app.spec.ts"},
		},
		{
			name: "test of Rust",
			ctx:  TurnContext{Command: "/test", ActiveEditor: &ActiveEditor{FilePath: "lib.rs"}},
			want: []string{"its unit tests live in the file itself"},
		},
		{
			name:    "explain at the cursor, by braces",
			ctx:     TurnContext{Command: "/explain", ActiveEditor: &ActiveEditor{FilePath: "auth/login.go", Selection: cursor(7, 3)}, TerminalOutput: term, Diagnostics: []Diagnostic{diag}},
			want:    []string{"### Command /explain", "### Code around the cursor: auth/login.go, lines 5-11 (found by braces)\n```go\n// Login checks a password.\nfunc Login", "\treturn check(user)\n}\n```"},
			notWant: []string{"Terminal output", "git diff", "func check", "Code around the diagnostics"},
		},
		{
			name:    "explain a selection",
			ctx:     TurnContext{Command: "/explain", ActiveEditor: &ActiveEditor{FilePath: "auth/login.go", Selection: sel(12, 0, 13, 0)}, TerminalOutput: term},
			want:    []string{"### Selection in auth/login.go, lines 13-13\n```go\nfunc check(user string) error {\n```"},
			notWant: []string{"Code around the cursor", "Terminal output", "git diff"},
		},
		{
			name:    "explain without a cursor",
			ctx:     TurnContext{Command: "/explain", ActiveEditor: &ActiveEditor{FilePath: "auth/login.go"}},
			want:    []string{"neither a selection nor a cursor position"},
			notWant: []string{"Code around the cursor"},
		},
		{
			name: "explain Python, by indentation",
			ctx:  TurnContext{Command: "/explain", ActiveEditor: &ActiveEditor{FilePath: "py/pkg/models.py", Selection: cursor(8, 4)}},
			want: []string{"lines 8-10 (found by indentation)\n```py\n    def greet(self):\n        greeting = \"hi \" + self.name\n        return greeting\n```"},
		},
		{
			name:   "explain with the code index",
			ctx:    TurnContext{Command: "/explain", ActiveEditor: &ActiveEditor{FilePath: "auth/login.go", Selection: cursor(7, 3)}},
			search: chunkSearch,
			want:   []string{"lines 6-11 (the code index's chunk for function Login)\n```go\nfunc Login"},
		},
		{
			name:    "refactor Go",
			ctx:     TurnContext{Command: "/refactor", ActiveEditor: &ActiveEditor{FilePath: "auth/login.go"}, TerminalOutput: term},
			want:    []string{"### Content of the active file auth/login.go\n```go\npackage auth", "### Workspace files it imports\nNone found.", "### Dependents of auth/login.go (found by a walk of the workspace)\n- cmd/main.go (imports \"example.com/m/auth\")"},
			notWant: []string{"Terminal output", "git diff"},
		},
		{
			name: "refactor Go imports",
			ctx:  TurnContext{Command: "/refactor", ActiveEditor: &ActiveEditor{FilePath: "cmd/main.go"}},
			want: []string{"- \"example.com/m/auth\": package auth/ (login.go)"},
		},
		{
			name:    "refactor TypeScript",
			ctx:     TurnContext{Command: "/refactor", ActiveEditor: &ActiveEditor{FilePath: "web/app.ts"}},
			want:    []string{"- \"./login\": web/login.ts", "### Imported file web/login.ts (beginning)\n```ts\nexport function login"},
			notWant: []string{"\"react\":"},
		},
		{
			name:    "refactor TypeScript dependents with the code index",
			ctx:     TurnContext{Command: "/refactor", ActiveEditor: &ActiveEditor{FilePath: "web/login.ts"}},
			search:  textSearch,
			want:    []string{"### Dependents of web/login.ts (found by the code index)\n- web/app.ts (imports \"./login\")\n"},
			notWant: []string{"notes.md"},
		},
		{
			name: "refactor Python",
			ctx:  TurnContext{Command: "/refactor", ActiveEditor: &ActiveEditor{FilePath: "py/pkg/models.py"}},
			want: []string{"- py/pkg/test_models.py (imports \".models\")", "- py/pkg/views.py (imports \".models\")"},
		},
		{
			name: "refactor Python imports",
			ctx:  TurnContext{Command: "/refactor", ActiveEditor: &ActiveEditor{FilePath: "py/pkg/views.py"}},
			want: []string{"- \".models\": py/pkg/models.py"},
		},
		{
			name: "mentions",
			ctx: TurnContext{Mentions: []Mention{
				{Type: MentionFile, Path: "web/login.ts"},
				{Type: MentionSymbol, Name: "check", FilePath: "auth/login.go", Line: 12},
				{Type: MentionSymbol, Name: "User"},
				{Type: "folder", Path: "web"},
			}},
			want: []string{"### Mentioned file web/login.ts\n```ts\nexport function login", "### Mentioned symbol check in auth/login.go, lines 13-15\n```go\nfunc check(user string) error {\n\treturn nil\n}\n```", "the mentioned symbol \"User\" is not included", "a mention of unknown type \"folder\""},
		},
		{
			name:   "symbol mention found by the index",
			ctx:    TurnContext{Mentions: []Mention{{Type: MentionSymbol, Name: "User"}}},
			search: &fakeSearcher{symbols: []SymbolHit{{Name: "User", Path: "py/pkg/models.py", StartLine: 4, EndLine: 10}}},
			want:   []string{"### Mentioned symbol User in py/pkg/models.py, lines 4-10"},
		},
		{
			name: "unknown command",
			ctx:  TurnContext{Command: "/deploy", ActiveEditor: &ActiveEditor{FilePath: "auth/login.go"}, TerminalOutput: term},
			want: []string{"\"/deploy\" is not a known command"}, notWant: []string{"Terminal output"},
		},
		{
			name: "paths leaving the workspace",
			ctx: TurnContext{
				ActiveEditor: &ActiveEditor{FilePath: "../" + filepath.Base(outside) + "/secret.txt"},
				Mentions: []Mention{
					{Type: MentionFile, Path: filepath.Join(outside, "secret.txt")},
					{Type: MentionFile, Path: "link/secret.txt"},
					{Type: MentionFile, Path: "auth/../../x"},
					{Type: MentionFile, Path: "missing.go"},
					{Type: MentionFile, Path: "auth"},
				},
			},
			want:    []string{"climbs out of the workspace; it was not read", "is outside the workspace", "\"link/secret.txt\" leads (through a symlink) outside the workspace", "missing.go does not exist", "auth is a directory"},
			notWant: []string{"TOP SECRET"},
			refused: 4,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := gatherContext(context.Background(), root, tt.search, &tt.ctx)
			for _, w := range tt.want {
				if !strings.Contains(got.text, w) {
					t.Errorf("the section lacks %q:\n%s", w, got.text)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(got.text, w) {
					t.Errorf("the section has %q:\n%s", w, got.text)
				}
			}
			if len(got.refused) != tt.refused {
				t.Errorf("refused %q, want %d paths", got.refused, tt.refused)
			}
			if len(got.text) > ContextBudget {
				t.Errorf("the section has %d bytes, over the budget", len(got.text))
			}
		})
	}
	if q := chunkSearch.chunkQueries; len(q) != 1 || q[0].Path != "auth/login.go" || q[0].Query == "" {
		t.Errorf("chunk queries %+v", q)
	}
	if q := textSearch.textQueries; len(q) != 1 || q[0].Pattern != "login" {
		t.Errorf("text queries %+v", q)
	}
}

func TestGatherContextGitDiff(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not on PATH")
	}
	root, _ := newContextWorkspace(t, map[string]string{"a.txt": "one\n", "b.txt": "same\n"})
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	fix := &TurnContext{Command: SlashFix}
	diffOf := func() string {
		t.Helper()
		return gatherContext(context.Background(), root, nil, fix).text
	}

	git("init", "-q", ".")
	git("add", "a.txt", "b.txt")
	if got := diffOf(); !strings.Contains(got, "```diff\ndiff --git a/a.txt b/a.txt\nnew file mode") {
		t.Errorf("before the first commit the staged files are the diff:\n%s", got)
	}
	git("commit", "-q", "-m", "first")
	if got := diffOf(); !strings.Contains(got, "No uncommitted changes to tracked files.") {
		t.Errorf("a clean tree:\n%s", got)
	}
	os.WriteFile(filepath.Join(root, "a.txt"), []byte("two\n"), 0o644)
	os.WriteFile(filepath.Join(root, "untracked.txt"), []byte("new\n"), 0o644)
	got := diffOf()
	for _, w := range []string{"### git diff HEAD (uncommitted changes to tracked files)\n```diff\ndiff --git a/a.txt b/a.txt", "-one\n+two"} {
		if !strings.Contains(got, w) {
			t.Errorf("the diff lacks %q:\n%s", w, got)
		}
	}
	if strings.Contains(got, "untracked.txt") || strings.Contains(got, "b.txt") {
		t.Errorf("the diff shows more than the change:\n%s", got)
	}

	// A big change is capped.
	os.WriteFile(filepath.Join(root, "b.txt"), []byte(strings.Repeat("a line of the change\n", 4000)), 0o644)
	got = diffOf()
	if !strings.Contains(got, "[… cut:") || strings.Count(got, "a line of the change") > maxGitDiffBytes/20 {
		t.Errorf("the diff is not capped (%d bytes)", len(got))
	}
	// /explain runs no git.
	if got := gatherContext(context.Background(), root, nil, &TurnContext{Command: SlashExplain}).text; strings.Contains(got, "git diff") {
		t.Errorf("/explain has a diff:\n%s", got)
	}
}

func TestGatherContextCaps(t *testing.T) {
	big := strings.Repeat("0123456789abcdef\n", 12<<10) // 204 KiB
	files := map[string]string{"big.txt": big}
	var mentions []Mention
	for i := range 8 {
		name := "f" + string(rune('a'+i)) + ".txt"
		files[name] = strings.Repeat(name+" ", 2000)
		mentions = append(mentions, Mention{Type: MentionFile, Path: name})
	}
	root, _ := newContextWorkspace(t, files)
	var diags []Diagnostic
	for i := range 100 {
		diags = append(diags, Diagnostic{FilePath: "big.txt", Severity: "error", Message: strings.Repeat("m", 1000), Line: i})
	}
	var open []OpenEditor
	for range 100 {
		open = append(open, OpenEditor{FilePath: "big.txt"})
	}
	c := &TurnContext{
		Command:        SlashFix,
		ActiveEditor:   &ActiveEditor{FilePath: "big.txt", Selection: sel(0, 0, 10000, 0)},
		Mentions:       mentions,
		Diagnostics:    diags,
		OpenEditors:    open,
		TerminalOutput: &TerminalOutput{Stdout: strings.Repeat("out\n", 50000) + "LAST LINE", Stderr: "\x1b[31mred\x1b[0m"},
	}
	got := gatherContext(context.Background(), root, nil, c).text
	if len(got) > ContextBudget {
		t.Errorf("the section has %d bytes, over the budget of %d", len(got), ContextBudget)
	}
	for _, w := range []string{
		"[… cut: 16", // the selection
		"[… 70 more not shown]",
		"[left out, the context budget of 48 KiB being spent:",
	} {
		if !strings.Contains(got, w) {
			t.Errorf("the section lacks %q", w)
		}
	}
	if strings.Contains(got, strings.Repeat("m", maxDiagnosticBytes+1)) {
		t.Error("a diagnostic's message is not capped")
	}

	// Each piece alone honours its cap.
	c = &TurnContext{Command: SlashTest, ActiveEditor: &ActiveEditor{FilePath: "fa.txt"}, TerminalOutput: c.TerminalOutput}
	got = gatherContext(context.Background(), root, nil, c).text
	for _, w := range []string{"earlier bytes cut]", "LAST LINE", "[stderr:]\nred\n"} {
		if !strings.Contains(got, w) {
			t.Errorf("the section lacks %q:\n%s", w, got)
		}
	}
	if n := strings.Count(got, "out\n"); n*4 > maxStdoutBytes {
		t.Errorf("%d bytes of stdout, over the cap", n*4)
	}
}

func TestRenderContextBudget(t *testing.T) {
	parts := []part{
		{title: "one", body: strings.Repeat("a", 3000)},
		{title: "two", body: strings.Repeat("`", 5) + strings.Repeat("b", 3000), code: true},
		{title: "three", body: "c"},
	}
	for _, budget := range []int{1 << 10, 2 << 10, 4 << 10, 5 << 10, 8 << 10} {
		got := renderContext(parts, []string{"a note"}, budget)
		if len(got) > budget {
			t.Errorf("budget %d: %d bytes", budget, len(got))
		}
		if !strings.HasSuffix(got, "- a note\n") {
			t.Errorf("budget %d: the notes are missing:\n%s", budget, got)
		}
		if budget < 8<<10 && !strings.Contains(got, "three") {
			t.Errorf("budget %d: what was left out is not named:\n%s", budget, got)
		}
		if strings.Count(got, "``````")%2 != 0 {
			t.Errorf("budget %d: an unclosed fence:\n%s", budget, got)
		}
	}
}

func TestSelectedText(t *testing.T) {
	lines := []string{"a😀b", "second", "third"}
	tests := []struct {
		name     string
		sel      Selection
		want     string
		from, to int
	}{
		{"within a line, past a surrogate pair", *sel(0, 1, 0, 4), "😀b", 0, 0},
		{"backwards", *sel(1, 3, 0, 3), "b\nsec", 0, 1},
		{"whole lines", *sel(1, 0, 2, 0), "second\n", 1, 1},
		{"past the end", *sel(2, 2, 9, 9), "ird", 2, 2},
		{"before the start", *sel(-5, 0, -1, 0), "", 0, 0},
		{"beyond the file", *sel(7, 0, 8, 0), "", 2, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, from, to := selectedText(lines, tt.sel)
			if got != tt.want || from != tt.from || to != tt.to {
				t.Errorf("got %q %d-%d, want %q %d-%d", got, from, to, tt.want, tt.from, tt.to)
			}
		})
	}
}

func TestMerge(t *testing.T) {
	var c TurnContext
	if err := json.Unmarshal([]byte(`{"active_editor":{"file_path":"a.go"},"diagnostics":[{"file_path":"a.go","severity":"error","message":"x","line":1,"character":2}],"terminal_output":{"command":"make","stdout":"old"},"command":"/fix"}`), &c); err != nil {
		t.Fatal(err)
	}
	var u TurnContext
	if err := json.Unmarshal([]byte(`{"diagnostics":[],"terminal_output":{"command":"make","stdout":"new"},"mentions":null}`), &u); err != nil {
		t.Fatal(err)
	}
	c.Merge(&u)
	c.Merge(nil)
	if c.ActiveEditor == nil || c.ActiveEditor.FilePath != "a.go" || c.Command != "/fix" {
		t.Errorf("members the update lacks changed: %+v", c)
	}
	if c.Diagnostics == nil || len(c.Diagnostics) != 0 {
		t.Errorf("an empty list did not clear the diagnostics: %+v", c.Diagnostics)
	}
	if c.TerminalOutput.Stdout != "new" {
		t.Errorf("terminal output %+v", c.TerminalOutput)
	}
}

func TestParseImports(t *testing.T) {
	tests := []struct {
		family, src string
		want        []string
	}{
		{langGo, "package a\n\nimport \"fmt\"\nimport m \"example.com/m/x\" // c\nimport (\n\t\"os\"\n\t_ \"example.com/m/y\"\n\t/* c */\n)\nimport (\"a\"; \"b\")\n\nfunc f() { _ = \"not/an/import\" }\n", []string{"fmt", "example.com/m/x", "os", "example.com/m/y", "a", "b"}},
		{langJS, "import a from './a';\nimport { b,\n c } from \"../b\";\nimport './side.css';\nimport type { T } from './t';\nexport * from './re';\nexport { x as y } from './rex';\nconst c = require('./c');\nconst d = await import('./d');\n// import e from 'e' in a comment still counts\n", []string{"./a", "../b", "./side.css", "./t", "./re", "./rex", "./c", "./d"}},
		{langPython, "import os, sys as system\nfrom .models import User\nfrom ..pkg.util import (a,\n b)\nfrom . import helpers, other as o\n    import json  # indented\nfrom __future__ import annotations\n", []string{"os", "sys", ".models", "..pkg.util", ".helpers", ".other", "json", "__future__"}},
		{langOther, "import x", nil},
	}
	for _, tt := range tests {
		t.Run(tt.family, func(t *testing.T) {
			got := parseImports(tt.family, []byte(tt.src))
			if tt.family == langJS {
				got = slices.DeleteFunc(got, func(s string) bool { return s == "e" })
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func FuzzParseImports(f *testing.F) {
	f.Add("package a\nimport (\n\"x\"\n)\n", "./a.js")
	f.Add("import a from './a'\nrequire(\"../b\")", "src/x/y.ts")
	f.Add("from ...a.b import c\nimport d", "p/q/r.py")
	f.Add("import (\"a\" `b`", "x.go")
	mod := goModule{dir: ".", path: "example.com/m"}
	f.Fuzz(func(t *testing.T, src, rel string) {
		if len(src) > 4<<10 {
			return // large inputs find nothing new and make minimizing crawl
		}
		for _, family := range []string{langGo, langJS, langPython, langOther} {
			for _, s := range parseImports(family, []byte(src)) {
				if s == "" || strings.ContainsAny(s, "\n\r\x00") {
					t.Fatalf("%s: bad specifier %q", family, s)
				}
				for _, c := range importCandidates(family, rel, s, mod) {
					if strings.Contains(c, "\x00") && !strings.Contains(rel, "\x00") {
						t.Fatalf("%s: candidate %q", family, c)
					}
				}
			}
		}
		lines := strings.Split(src, "\n")
		for _, l := range []int{0, len(lines) / 2, len(lines) - 1} {
			if s, e, ok := braceScope(lines, l); ok && (s < 0 || e >= len(lines) || s > l || e < l) {
				t.Fatalf("braceScope(%d) = %d-%d", l, s, e)
			}
			if s, e, ok := indentScope(lines, l); ok && (s < 0 || e >= len(lines) || s > e) {
				t.Fatalf("indentScope(%d) = %d-%d", l, s, e)
			}
		}
	})
}

func TestTestConvention(t *testing.T) {
	tests := []struct {
		rel            string
		tests, sources []string
		inFile         bool
	}{
		{rel: "a/x.go", tests: []string{"a/x_test.go"}},
		{rel: "a/x_test.go", sources: []string{"a/x.go"}},
		{rel: "x.ts", tests: []string{"x.test.ts", "x.spec.ts", "x.test.tsx", "x.spec.tsx", "__tests__/x.ts", "__tests__/x.test.ts", "__tests__/x.tsx", "__tests__/x.test.tsx"}},
		{rel: "s/__tests__/x.js", sources: []string{"s/x.js", "s/x.jsx"}},
		{rel: "s/x.spec.ts", sources: []string{"s/x.ts", "s/x.tsx"}},
		{rel: "p/m.py", tests: []string{"p/test_m.py", "p/m_test.py", "p/tests/test_m.py", "tests/test_m.py", "test/test_m.py"}},
		{rel: "p/tests/test_m.py", sources: []string{"p/tests/m.py", "p/m.py"}},
		{rel: "src/main/java/X.java", tests: []string{"src/main/java/XTest.java", "src/main/java/XTests.java", "src/test/java/XTest.java", "src/test/java/XTests.java"}},
		{rel: "src/test/java/XTest.java", sources: []string{"src/test/java/X.java", "src/main/java/X.java"}},
		{rel: "src/lib.rs", inFile: true},
		{rel: "README"},
	}
	for _, tt := range tests {
		t.Run(tt.rel, func(t *testing.T) {
			tests, sources, inFile := testConvention(tt.rel)
			if !slices.Equal(tests, tt.tests) || !slices.Equal(sources, tt.sources) || inFile != tt.inFile {
				t.Errorf("got %q %q %v\nwant %q %q %v", tests, sources, inFile, tt.tests, tt.sources, tt.inFile)
			}
		})
	}
}

func TestBraceScope(t *testing.T) {
	src := `class A {
  // m does things.
  @Override
  public void m(
      int a) {
    if (a > 0) {
      String s = "}";
      call(s);
    }
  }
}`
	lines := strings.Split(src, "\n")
	tests := []struct {
		line, start, end int
		ok               bool
	}{
		{line: 7, start: 1, end: 9, ok: true}, // in the if: the method
		{line: 3, start: 1, end: 9, ok: true}, // on its header
		{line: 10, start: 0, end: 10, ok: true},
	}
	for _, tt := range tests {
		start, end, ok := braceScope(lines, tt.line)
		if start != tt.start || end != tt.end || ok != tt.ok {
			t.Errorf("line %d: got %d-%d %v, want %d-%d %v", tt.line, start, end, ok, tt.start, tt.end, tt.ok)
		}
	}
	if _, _, ok := braceScope([]string{"x := 1", "y := 2"}, 1); ok {
		t.Error("a scope at the top level")
	}
}

// recordingModel answers every call with "ok" and records the requests.
type recordingModel struct{ reqs []ChatRequest }

func (m *recordingModel) ListModels(context.Context) ([]ModelInfo, error) { return nil, nil }

func (m *recordingModel) Embed(context.Context, EmbedRequest) (EmbedResponse, error) {
	return EmbedResponse{}, ErrUnsupported
}

func (m *recordingModel) Chat(_ context.Context, req ChatRequest, on func(ChatChunk) error) error {
	m.reqs = append(m.reqs, req)
	return on(ChatChunk{Text: "ok"})
}

// queryRetriever records the retrieval query.
type queryRetriever struct{ query string }

func (r *queryRetriever) Retrieve(_ context.Context, req RetrievalRequest, _ func(RetrievalEvent)) (RetrievalResult, error) {
	r.query = req.Query
	return RetrievalResult{}, nil
}

func TestTurnWithEditorContext(t *testing.T) {
	root, _ := newContextWorkspace(t, contextFiles)
	model, retr := &recordingModel{}, &queryRetriever{}
	e, err := New(Options{Models: map[string]Model{"rec": model}, Model: ModelRef{Provider: "rec", Name: "m"}, Retriever: retr})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := e.OpenWorkspace(root)
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.NewSession(ws, "")
	if err != nil {
		t.Fatal(err)
	}
	var events []Event
	in := TurnInput{Message: "why does this fail?", Context: &TurnContext{
		Command:      "/explain",
		ActiveEditor: &ActiveEditor{FilePath: "auth/login.go", Language: "go", Selection: sel(6, 1, 8, 2)},
		Diagnostics:  []Diagnostic{{FilePath: "auth/login.go", Severity: "error", Message: "undefined: x", Line: 7}},
		Mentions:     []Mention{{Type: MentionFile, Path: "../../etc/passwd"}},
	}}
	res, err := s.Run(context.Background(), in, TurnOptions{OnEvent: func(ev Event) { events = append(events, ev) }})
	if err != nil || res.Status != TurnCompleted {
		t.Fatalf("turn: %+v %v", res, err)
	}
	user := model.reqs[0].Messages[len(model.reqs[0].Messages)-1]
	if user.Role != RoleUser || !strings.HasPrefix(user.Content, "why does this fail?\n\n## Editor context\n") {
		t.Fatalf("user message:\n%s", user.Content)
	}
	for _, w := range []string{"### Command /explain", "return errors.New(\"empty password\")", "undefined: x", "climbs out of the workspace"} {
		if !strings.Contains(user.Content, w) {
			t.Errorf("the user message lacks %q:\n%s", w, user.Content)
		}
	}
	if h := s.History(); len(h) == 0 || h[0].Content != user.Content {
		t.Error("the history does not keep the message the model saw")
	}
	if !strings.HasPrefix(retr.query, "why does this fail?\n") || !strings.Contains(retr.query, `return errors.New("empty password")`) || !strings.Contains(retr.query, "undefined: x") {
		t.Errorf("retrieval query %q", retr.query)
	}
	refusals := 0
	for _, ev := range events {
		if d, ok := ev.Data.(*ErrorEvent); ok && d.Code == CodePolicyViolation && d.Recoverable && strings.Contains(d.Message, "../../etc/passwd") {
			refusals++
		}
	}
	if refusals != 1 {
		t.Errorf("%d refusal events, want 1", refusals)
	}

	// Without a context the message is the user's alone.
	if _, err := s.Run(context.Background(), TurnInput{Message: "plain"}, TurnOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := model.reqs[1].Messages[len(model.reqs[1].Messages)-1].Content; got != "plain" || retr.query != "plain" {
		t.Errorf("message %q, query %q", got, retr.query)
	}
	if errors.Is(&escapeError{}, ErrNotFound) || !errors.Is(&escapeError{}, ErrPermissionDenied) {
		t.Error("escapeError does not match ErrPermissionDenied")
	}
}

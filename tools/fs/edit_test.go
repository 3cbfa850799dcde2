package fs

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-agent/plexus/internal/testtree"

	"github.com/plexus-agent/plexus/engine"
)

// editArgsJSON encodes edit_file arguments.
func editArgsJSON(t *testing.T, path, old, repl string, all bool) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"path": path, "old_string": old, "new_string": repl, "replace_all": all})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const mainGo = "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hello\")\n\tfmt.Println(\"hello\")\n}\n"

func TestEditFile(t *testing.T) {
	ws := t.TempDir()
	testtree.Write(t, ws, map[string]string{
		"main.go":      mainGo,
		"crlf.txt":     "one\r\ntwo\r\nthree\r\n",
		"nonl.txt":     "a b c",
		"docs/real.md": "# Title\nold text\n",
	})
	testtree.Symlink(t, "docs/real.md", filepath.Join(ws, "README.md"))
	unchangedAfter(t, ws)
	tl := newTools(t, Options{})

	tests := []struct {
		name           string
		path, old, new string
		all            bool
		want           EditResult // Path, Target, Replacements, LinesRemoved, LinesAdded
		file           string     // the edit's Path
		base, out      string
		summary        string
	}{
		{name: "one line", path: "main.go", old: "import \"fmt\"", new: "import \"os\"",
			want: EditResult{Path: "main.go", Replacements: 1, LinesRemoved: 1, LinesAdded: 1},
			file: "main.go", base: mainGo, out: strings.Replace(mainGo, "import \"fmt\"", "import \"os\"", 1),
			summary: "proposed 1 line changed in main.go"},
		{name: "unique through context", path: "main.go", old: "\tfmt.Println(\"hello\")\n}", new: "\tfmt.Println(\"bye\")\n}",
			want: EditResult{Path: "main.go", Replacements: 1, LinesRemoved: 1, LinesAdded: 1},
			file: "main.go", base: mainGo, out: strings.Replace(mainGo, "\tfmt.Println(\"hello\")\n}", "\tfmt.Println(\"bye\")\n}", 1)},
		{name: "replace_all", path: "main.go", old: "hello", new: "hi", all: true,
			want: EditResult{Path: "main.go", Replacements: 2, LinesRemoved: 2, LinesAdded: 2},
			file: "main.go", base: mainGo, out: strings.ReplaceAll(mainGo, "hello", "hi"),
			summary: "proposed 2 lines changed in main.go (2 replacements)"},
		{name: "replace_all with one occurrence", path: "main.go", old: "package main", new: "package app", all: true,
			want: EditResult{Path: "main.go", Replacements: 1, LinesRemoved: 1, LinesAdded: 1},
			file: "main.go", base: mainGo, out: strings.Replace(mainGo, "package main", "package app", 1)},
		{name: "insert lines", path: "main.go", old: "func main() {\n", new: "func main() {\n\tdefer cleanup()\n\tsetup()\n",
			want: EditResult{Path: "main.go", Replacements: 1, LinesRemoved: 0, LinesAdded: 2},
			file: "main.go", base: mainGo, out: strings.Replace(mainGo, "func main() {\n", "func main() {\n\tdefer cleanup()\n\tsetup()\n", 1),
			summary: "proposed 2 lines changed in main.go"},
		{name: "remove lines", path: "main.go", old: "\nimport \"fmt\"\n", new: "",
			want: EditResult{Path: "main.go", Replacements: 1, LinesRemoved: 2, LinesAdded: 0},
			file: "main.go", base: mainGo, out: strings.Replace(mainGo, "\nimport \"fmt\"\n", "", 1)},
		{name: "CRLF kept", path: "crlf.txt", old: "two\r\n", new: "2\r\n",
			want: EditResult{Path: "crlf.txt", Replacements: 1, LinesRemoved: 1, LinesAdded: 1},
			file: "crlf.txt", base: "one\r\ntwo\r\nthree\r\n", out: "one\r\n2\r\nthree\r\n"},
		{name: "no final newline", path: "nonl.txt", old: "c", new: "c\nd",
			want: EditResult{Path: "nonl.txt", Replacements: 1, LinesRemoved: 1, LinesAdded: 2},
			file: "nonl.txt", base: "a b c", out: "a b c\nd"},
		{name: "through a symlink", path: "README.md", old: "old text", new: "new text",
			want: EditResult{Path: "README.md", Target: "docs/real.md", Replacements: 1, LinesRemoved: 1, LinesAdded: 1},
			file: "docs/real.md", base: "# Title\nold text\n", out: "# Title\nnew text\n",
			summary: "proposed 1 line changed in README.md (→ docs/real.md)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got EditResult
			c := mustOK(t, tl, ws, EditFileTool, editArgsJSON(t, tt.path, tt.old, tt.new, tt.all), &got)
			want := tt.want
			want.Bytes, want.SHA256, want.Status = len(tt.out), digest([]byte(tt.out)), StatusProposed
			if got != want {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
			if tt.summary != "" && c.res.Summary != tt.summary {
				t.Errorf("summary = %q, want %q", c.res.Summary, tt.summary)
			}
			wantEdit(t, c, engine.FileEdit{Path: tt.file, Base: []byte(tt.base), BaseExists: true, New: []byte(tt.out)})
		})
	}
}

func TestEditFileErrors(t *testing.T) {
	ws := t.TempDir()
	testtree.Write(t, ws, map[string]string{
		"main.go":    mainGo,
		"crlf.txt":   "one\r\ntwo\r\nthree\r\n",
		"aaa.txt":    "aaa\n",
		"binary.bin": "PK\x03\x04\x00\x00rest",
		"big.txt":    strings.Repeat("b", 90),
		"dir/x.txt":  "x",
		".git/HEAD":  "ref: refs/heads/main\n",
	})
	unchangedAfter(t, ws)
	tl := newTools(t, Options{MaxFileBytes: 100})
	tests := []struct {
		name  string
		args  string
		code  engine.ToolErrorCode
		parts []string
	}{
		{"not found, other indentation", editArgsJSON(t, "main.go", "    fmt.Println(\"hello\")\n    fmt.Println(\"hello\")", "x", false), engine.ToolCodeInvalidInput,
			[]string{`"old_string"`, "was not found in main.go", "read_file", "whitespace and indentation", `Line 6 reads "\tfmt.Println(\"hello\")", which matches the first line of old_string except for whitespace`}},
		{"not found, later line differs", editArgsJSON(t, "main.go", "func main() {\n\tfmt.Println(\"hullo\")\n", "x", false), engine.ToolCodeInvalidInput,
			[]string{"was not found in main.go", `matches the file up to line 6, which reads "\tfmt.Println(\"hello\")" where old_string has "\tfmt.Println(\"hullo\")"`}},
		{"not found, line endings", editArgsJSON(t, "crlf.txt", "one\ntwo\n", "x", false), engine.ToolCodeInvalidInput,
			[]string{"was not found in crlf.txt", `CRLF`, `\r\n`}},
		{"not found, past the end", editArgsJSON(t, "main.go", "}\n}\n", "x", false), engine.ToolCodeInvalidInput,
			[]string{"was not found in main.go", "matches the end of the file but goes on past it"}},
		{"not found, nothing close", editArgsJSON(t, "main.go", "zebra", "x", false), engine.ToolCodeInvalidInput,
			[]string{"was not found in main.go", "copy the exact text"}},
		{"ambiguous", editArgsJSON(t, "main.go", "fmt.Println(\"hello\")", "x", false), engine.ToolCodeInvalidInput,
			[]string{`"old_string"`, "occurs 2 times in main.go (at lines 6 and 7)", "more of the surrounding lines", "replace_all"}},
		{"ambiguous by overlapping", editArgsJSON(t, "aaa.txt", "aa", "b", false), engine.ToolCodeInvalidInput,
			[]string{"occurs 2 times in aaa.txt (at line 1)"}},
		{"missing file", editArgsJSON(t, "nope.go", "a", "b", false), engine.ToolCodeNotFound,
			[]string{`"nope.go" does not exist`, "write_file"}},
		{"a directory", editArgsJSON(t, "dir", "a", "b", false), engine.ToolCodeInvalidInput, []string{"dir is a directory"}},
		{"binary", editArgsJSON(t, "binary.bin", "rest", "best", false), engine.ToolCodeInvalidInput, []string{"binary.bin is a binary file"}},
		{"inside .git", editArgsJSON(t, ".git/HEAD", "main", "master", false), engine.ToolCodePermissionDenied, []string{"inside .git"}},
		{"the root", editArgsJSON(t, ".", "a", "b", false), engine.ToolCodeInvalidInput, []string{"workspace root"}},
		{"result too large", editArgsJSON(t, "big.txt", "b", "bb", true), engine.ToolCodeInvalidInput, []string{`"new_string"`, "would make big.txt 180 B", "100 B"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := invoke(context.Background(), tl, ws, EditFileTool, tt.args)
			wantToolError(t, c.err, tt.code, append([]string{EditFileTool + ":"}, tt.parts...)...)
			if c.res.Edits != nil {
				t.Errorf("a refused call proposed %v", c.res.Edits)
			}
		})
	}

	ctx, cancel := context.WithCancel(context.Background())
	tl.afterResolve = func(string) { cancel() }
	c := invoke(ctx, tl, ws, EditFileTool, editArgsJSON(t, "main.go", "main", "app", true))
	wantToolError(t, c.err, engine.ToolCodeCancelled)
	if c.res.Edits != nil {
		t.Errorf("a cancelled call proposed %v", c.res.Edits)
	}
}

func TestReplaceAt(t *testing.T) {
	tests := []struct {
		name, s, old, repl string
		all                bool
		out                string
		removed, added     int
	}{
		{"in a line", "a\nbXc\nd\n", "X", "Y", false, "a\nbYc\nd\n", 1, 1},
		{"two on one line count once", "xx\nab\n", "x", "y", true, "yy\nab\n", 1, 1},
		{"on neighbouring lines", "x\nx\nk\n", "x", "y", true, "y\ny\nk\n", 2, 2},
		{"far apart", "x\n1\n2\n3\nx\n", "x", "y", true, "y\n1\n2\n3\ny\n", 2, 2},
		{"join two lines", "a\nb\nc\n", "a\n", "a", false, "ab\nc\n", 2, 1},
		{"split a line", "ab\n", "ab", "a\nb", false, "a\nb\n", 1, 2},
		{"unchanged ends of a multi-line old are not counted", "p\nq\nr\n", "p\nq\nr", "p\nQ\nr", false, "p\nQ\nr\n", 1, 1},
		{"at the very end", "abc", "c", "", false, "ab", 1, 1},
		{"the whole file", "abc\n", "abc\n", "", false, "", 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at := occurrences(tt.s, tt.old)
			if !tt.all {
				at = at[:1]
			}
			out, added, removed := replaceAt(tt.s, tt.old, tt.repl, at)
			if out != tt.out || removed != tt.removed || added != tt.added {
				t.Errorf("replaceAt = %q -%d +%d, want %q -%d +%d", out, removed, added, tt.out, tt.removed, tt.added)
			}
		})
	}
}

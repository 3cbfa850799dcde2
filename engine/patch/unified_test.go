package patch

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/plexus-agent/plexus/engine"
)

func TestParseUnified(t *testing.T) {
	files := map[string]string{
		"a.txt":    numbered(20, nil),
		"src/b.go": "package b\n\nfunc B() {\n\treturn\n}\n",
		"crlf.txt": "1\r\n2\r\n3\r\n",
		"nonl.txt": "x\ny",
		"a/x.txt":  "in a\n",
		"rep.txt":  strings.Repeat("a\nb\n", 5),
	}
	tests := []struct {
		name string
		diff string
		want []Edit
	}{
		{
			name: "git style, several files",
			diff: "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1,5 +1,5 @@\n 1\n-2\n+two\n 3\n 4\n 5\n" +
				"diff --git a/src/b.go b/src/b.go\nindex 1234567..89abcde 100644\n--- a/src/b.go\n+++ b/src/b.go\n@@ -2,4 +2,4 @@ package b\n \n func B() {\n-\treturn\n+\treturn // now\n }\n",
			want: []Edit{
				modify("a.txt", numbered(20, nil), numbered(20, map[int]string{2: "two\n"})),
				modify("src/b.go", files["src/b.go"], "package b\n\nfunc B() {\n\treturn // now\n}\n"),
			},
		},
		{
			name: "hunks at an offset keep it",
			// The file has 20 lines; the hunks say 3 lines further up.
			diff: "--- a/a.txt\n+++ b/a.txt\n@@ -4,3 +4,3 @@\n 6\n-7\n+seven\n 8\n@@ -13,3 +13,3 @@\n 15\n-16\n+sixteen\n 17\n",
			want: []Edit{modify("a.txt", numbered(20, nil), numbered(20, map[int]string{7: "seven\n", 16: "sixteen\n"}))},
		},
		{
			name: "the nearest match wins, later lines first",
			// Lines 5-7 and 7-9 are both "a b a"; the hunk says line 6.
			diff: "--- rep.txt\n+++ rep.txt\n@@ -6,3 +6,3 @@\n a\n-b\n+B\n a\n",
			want: []Edit{modify("rep.txt", strings.Repeat("a\nb\n", 5), "a\nb\na\nb\na\nb\na\nB\na\nb\n")},
		},
		{
			name: "traditional with timestamps and no prefix",
			diff: "--- a.txt\t2024-01-01 00:00:00\n+++ a.txt\t2024-01-02 00:00:00\n@@ -20 +20,2 @@\n 20\n+21\n",
			want: []Edit{modify("a.txt", numbered(20, nil), numbered(21, nil))},
		},
		{
			name: "traditional where a/ is a real directory",
			diff: "--- a/x.txt\n+++ a/x.txt\n@@ -1 +1 @@\n-in a\n+still in a\n",
			want: []Edit{modify("a/x.txt", "in a\n", "still in a\n")},
		},
		{
			name: "zero context hunks apply where they say",
			diff: "--- a/a.txt\n+++ b/a.txt\n@@ -3 +3 @@\n-3\n+three\n@@ -10,0 +11 @@\n+10b\n",
			want: []Edit{modify("a.txt", numbered(20, nil), numbered(20, map[int]string{3: "three\n", 10: "10\n10b\n"}))},
		},
		{
			name: "CRLF and no final newline",
			diff: "--- a/crlf.txt\n+++ b/crlf.txt\n@@ -1,3 +1,2 @@\n 1\r\n-2\r\n 3\r\n" +
				"--- a/nonl.txt\n+++ b/nonl.txt\n@@ -1,2 +1,2 @@\n x\n-y\n\\ No newline at end of file\n+y\n",
			want: []Edit{modify("crlf.txt", "1\r\n2\r\n3\r\n", "1\r\n3\r\n"), modify("nonl.txt", "x\ny", "x\ny\n")},
		},
		{
			name: "create and delete",
			diff: "diff --git a/new/c.txt b/new/c.txt\nnew file mode 100644\n--- /dev/null\n+++ b/new/c.txt\n@@ -0,0 +1,2 @@\n+c\n+d\n" +
				"diff --git a/nonl.txt b/nonl.txt\ndeleted file mode 100644\n--- a/nonl.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-x\n-y\n\\ No newline at end of file\n",
			want: []Edit{{Path: "new/c.txt", New: []byte("c\nd\n")}, {Path: "nonl.txt", Base: []byte("x\ny"), BaseExists: true, Delete: true}},
		},
		{
			name: "create an empty file",
			diff: "diff --git a/e b/e\nnew file mode 100644\nindex 0000000..e69de29\n",
			want: []Edit{{Path: "e", New: []byte{}}},
		},
		{
			name: "rename with a change",
			diff: "diff --git a/src/b.go b/src/c.go\nsimilarity index 80%\nrename from src/b.go\nrename to src/c.go\n--- a/src/b.go\n+++ b/src/c.go\n@@ -1 +1 @@\n-package b\n+package c\n",
			want: []Edit{
				{Path: "src/b.go", Base: []byte(files["src/b.go"]), BaseExists: true, Delete: true},
				{Path: "src/c.go", New: []byte(strings.Replace(files["src/b.go"], "package b", "package c", 1))},
			},
		},
		{
			name: "copy",
			diff: "diff --git a/crlf.txt b/copy.txt\nsimilarity index 100%\ncopy from crlf.txt\ncopy to copy.txt\n",
			want: []Edit{{Path: "copy.txt", New: []byte(files["crlf.txt"])}},
		},
		{
			name: "one file twice composes",
			diff: "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n 1\n-2\n+two\n 3\n--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n 1\n-two\n+TWO\n 3\n",
			want: []Edit{
				modify("a.txt", numbered(20, nil), numbered(20, map[int]string{2: "two\n"})),
				modify("a.txt", numbered(20, map[int]string{2: "two\n"}), numbered(20, map[int]string{2: "TWO\n"})),
			},
		},
		{
			name: "quoted names",
			diff: "diff --git \"a/caf\\303\\251.txt\" \"b/caf\\303\\251.txt\"\nnew file mode 100644\n--- /dev/null\n+++ \"b/caf\\303\\251.txt\"\n@@ -0,0 +1 @@\n+u\n",
			want: []Edit{{Path: "café.txt", New: []byte("u\n")}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, _ := newWorkspace(t, files)
			got, err := ParseUnified(root, tt.diff)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(norm(got), norm(tt.want)) {
				t.Errorf("edits:\n%s\nwant:\n%s", showEdits(got), showEdits(tt.want))
			}
			if _, err := Propose(got, "", nil); err != nil {
				t.Errorf("Propose of the parsed edits: %v", err)
			}
		})
	}
}

// norm makes nil and empty byte slices compare equal.
func norm(es []Edit) []Edit {
	out := make([]Edit, len(es))
	for i, e := range es {
		e.Base, e.New = append([]byte{}, e.Base...), append([]byte{}, e.New...)
		out[i] = e
	}
	return out
}

func showEdits(es []Edit) string {
	var sb strings.Builder
	for _, e := range es {
		sb.WriteString(e.Path)
		if e.Delete {
			sb.WriteString(" delete")
		}
		sb.WriteString(" base ")
		if e.BaseExists {
			sb.WriteString(strings.ReplaceAll(string(e.Base), "\n", "⏎"))
		} else {
			sb.WriteString("(none)")
		}
		sb.WriteString(" new " + strings.ReplaceAll(string(e.New), "\n", "⏎") + "\n")
	}
	return sb.String()
}

func TestParseUnifiedErrors(t *testing.T) {
	files := map[string]string{"a.txt": numbered(20, nil), "bin": "\x00\x01"}
	tests := []struct {
		name    string
		diff    string
		wantErr error
		says    []string
	}{
		{"empty", "", engine.ErrInvalidRequest, []string{"names no file"}},
		{"prose only", "Here is the fix:\nno diff at all\n", engine.ErrInvalidRequest, []string{"names no file"}},
		{"hunk without file header", "@@ -1 +1 @@\n-a\n+b\n", engine.ErrInvalidRequest, []string{"parse diff", "without file header"}},
		{"miscounted hunk", "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n 1\n-2\n+two\n", engine.ErrInvalidRequest, []string{"parse diff", "miscounts"}},
		{
			"context that is not in the file",
			"--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n 1\n-2\n+two\n 3\n@@ -8,3 +8,3 @@\n 8\n-nine\n+9!\n 10\n",
			engine.ErrInvalidRequest, []string{"a.txt: hunk 2 (@@ -8,3 +8,3 @@) does not apply", `"8"`, "not in the file"},
		},
		{
			"no trailing context must match at the end",
			"--- a/a.txt\n+++ b/a.txt\n@@ -5,2 +5,2 @@\n 5\n-6\n+six\n",
			engine.ErrInvalidRequest, []string{"hunk 1", "end of the file"},
		},
		{
			"no leading context at line 1 must match at the start",
			"--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n-5\n+five\n 6\n",
			engine.ErrInvalidRequest, []string{"hunk 1", "start of the file"},
		},
		{
			"zero context elsewhere",
			"--- a/a.txt\n+++ b/a.txt\n@@ -4 +4 @@\n-5\n+five\n",
			engine.ErrInvalidRequest, []string{"hunk 1", "line 4 exactly"},
		},
		{
			"insertion past the end",
			"--- a/a.txt\n+++ b/a.txt\n@@ -30,0 +31 @@\n+x\n",
			engine.ErrInvalidRequest, []string{"no line 30"},
		},
		{"modify a missing file", "--- a/nope.txt\n+++ b/nope.txt\n@@ -1 +1 @@\n-a\n+b\n", engine.ErrNotFound, []string{"nope.txt", "does not exist"}},
		{"create an existing file", "--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1 @@\n+x\n", engine.ErrInvalidRequest, []string{"a.txt", "exists"}},
		{
			"a deletion that leaves lines",
			"diff --git a/a.txt b/a.txt\ndeleted file mode 100644\n--- a/a.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-1\n-2\n",
			engine.ErrInvalidRequest, []string{"a.txt", "must remove every line"},
		},
		{"mode only", "diff --git a/a.txt b/a.txt\nold mode 100644\nnew mode 100755\n", engine.ErrInvalidRequest, []string{"only changes its mode"}},
		{
			"binary patch",
			"diff --git a/bin b/bin\nindex 1111111..2222222 100644\nGIT binary patch\nliteral 2\nJcmZQzU;qFB000\n\nliteral 2\nJcmZQzU;qFB000\n\n",
			engine.ErrInvalidRequest, []string{"binary"},
		},
		{"binary file on disk", "--- a/bin\n+++ b/bin\n@@ -1 +1 @@\n-a\n+b\n", engine.ErrInvalidRequest, []string{"binary"}},
		{"climbs out", "--- a/../../etc/passwd\n+++ b/../../etc/passwd\n@@ -1 +1 @@\n-a\n+b\n", engine.ErrPermissionDenied, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, _ := newWorkspace(t, files)
			_, err := ParseUnified(root, tt.diff)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			for _, s := range tt.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
}

// TestParseGitOutput parses what git itself writes, with index lines and
// renames, and checks the edits give the new contents.
func TestParseGitOutput(t *testing.T) {
	g := newGitRepo(t)
	gen := newTextGen(9)
	for i := range 20 {
		a, b := gen.pair()
		if a == b {
			continue
		}
		diff := g.diff("dir/f.txt", []byte(a), true, []byte(b), true)
		root, _ := newWorkspace(t, map[string]string{"dir/f.txt": a})
		edits, err := ParseUnified(root, diff)
		if err != nil {
			t.Fatalf("case %d: %v\n%s", i, err, diff)
		}
		if len(edits) != 1 || string(edits[0].New) != b {
			t.Fatalf("case %d: edits %s, want %q", i, showEdits(edits), b)
		}
	}
}

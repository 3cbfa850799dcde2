package patch

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/plexus-agent/plexus/engine"
)

// funcFile is a Go-like file whose hunks get git's function-name context.
func funcFile(repl map[string]string) string {
	lines := []string{"func a() {\n"}
	for i := 1; i <= 20; i++ {
		lines = append(lines, "\tl"+strconv.Itoa(i)+"\n")
	}
	lines = append(lines, "}\n", "type T struct {\n")
	for i := 1; i <= 5; i++ {
		lines = append(lines, "\tf"+strconv.Itoa(i)+" int\n")
	}
	lines = append(lines, "}\n")
	s := strings.Join(lines, "")
	for old, new := range repl {
		s = strings.Replace(s, old, new, 1)
	}
	return s
}

func TestProposeGolden(t *testing.T) {
	long := "L" + strings.Repeat("x", 99) + "\n"
	tests := []struct {
		name       string
		path       string
		base       string
		baseExists bool
		new        string
		delete     bool
		op         Op
		diff       string
		hunks      [][4]int
	}{
		{
			name: "modify one line", path: "f.txt", baseExists: true,
			base: numbered(10, nil), new: numbered(10, map[int]string{5: "five\n"}),
			op: OpModify,
			diff: "diff --git a/f.txt b/f.txt\n--- a/f.txt\n+++ b/f.txt\n" +
				"@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n",
			hunks: [][4]int{{2, 7, 2, 7}},
		},
		{
			name: "three hunks at the edges and the middle", path: "f.txt", baseExists: true,
			base: numbered(30, nil), new: numbered(30, map[int]string{2: "two\n", 15: "", 29: "29\n29b\n"}),
			op: OpModify,
			diff: "diff --git a/f.txt b/f.txt\n--- a/f.txt\n+++ b/f.txt\n" +
				"@@ -1,5 +1,5 @@\n 1\n-2\n+two\n 3\n 4\n 5\n" +
				"@@ -12,7 +12,6 @@\n 12\n 13\n 14\n-15\n 16\n 17\n 18\n" +
				"@@ -27,4 +26,5 @@\n 27\n 28\n 29\n+29b\n 30\n",
			hunks: [][4]int{{1, 5, 1, 5}, {12, 7, 12, 6}, {27, 4, 26, 5}},
		},
		{
			name: "changes 6 lines apart share a hunk", path: "f.txt", baseExists: true,
			base: numbered(20, nil), new: numbered(20, map[int]string{5: "x\n", 12: "y\n"}),
			op: OpModify,
			diff: "diff --git a/f.txt b/f.txt\n--- a/f.txt\n+++ b/f.txt\n" +
				"@@ -2,14 +2,14 @@\n 2\n 3\n 4\n-5\n+x\n 6\n 7\n 8\n 9\n 10\n 11\n-12\n+y\n 13\n 14\n 15\n",
			hunks: [][4]int{{2, 14, 2, 14}},
		},
		{
			name: "changes 7 lines apart do not", path: "f.txt", baseExists: true,
			base: numbered(20, nil), new: numbered(20, map[int]string{5: "x\n", 13: "y\n"}),
			op:    OpModify,
			hunks: [][4]int{{2, 7, 2, 7}, {10, 7, 10, 7}},
		},
		{
			name: "create", path: "dir/new.txt", new: "x\ny\n", op: OpCreate,
			diff: "diff --git a/dir/new.txt b/dir/new.txt\nnew file mode 100644\n--- /dev/null\n+++ b/dir/new.txt\n" +
				"@@ -0,0 +1,2 @@\n+x\n+y\n",
			hunks: [][4]int{{0, 0, 1, 2}},
		},
		{
			name: "create without final newline", path: "n.txt", new: "n1\nn2", op: OpCreate,
			diff: "diff --git a/n.txt b/n.txt\nnew file mode 100644\n--- /dev/null\n+++ b/n.txt\n" +
				"@@ -0,0 +1,2 @@\n+n1\n+n2\n\\ No newline at end of file\n",
			hunks: [][4]int{{0, 0, 1, 2}},
		},
		{
			name: "delete", path: "old.txt", base: "x\ny\n", baseExists: true, delete: true, op: OpDelete,
			diff: "diff --git a/old.txt b/old.txt\ndeleted file mode 100644\n--- a/old.txt\n+++ /dev/null\n" +
				"@@ -1,2 +0,0 @@\n-x\n-y\n",
			hunks: [][4]int{{1, 2, 0, 0}},
		},
		{
			name: "add a final newline", path: "f.txt", baseExists: true, base: "q\nr", new: "q\nr\n", op: OpModify,
			diff: "diff --git a/f.txt b/f.txt\n--- a/f.txt\n+++ b/f.txt\n" +
				"@@ -1,2 +1,2 @@\n q\n-r\n\\ No newline at end of file\n+r\n",
			hunks: [][4]int{{1, 2, 1, 2}},
		},
		{
			name: "append to a file without final newline", path: "f.txt", baseExists: true, base: "1\n2\n3", new: "1\n2\n3\n4", op: OpModify,
			diff: "diff --git a/f.txt b/f.txt\n--- a/f.txt\n+++ b/f.txt\n" +
				"@@ -1,3 +1,4 @@\n 1\n 2\n-3\n\\ No newline at end of file\n+3\n+4\n\\ No newline at end of file\n",
			hunks: [][4]int{{1, 3, 1, 4}},
		},
		{
			name: "context line without final newline", path: "f.txt", baseExists: true, base: "a1\nb\nc", new: "A1\nb\nc", op: OpModify,
			diff: "diff --git a/f.txt b/f.txt\n--- a/f.txt\n+++ b/f.txt\n" +
				"@@ -1,3 +1,3 @@\n-a1\n+A1\n b\n c\n\\ No newline at end of file\n",
			hunks: [][4]int{{1, 3, 1, 3}},
		},
		{
			name: "CRLF", path: "w.txt", baseExists: true, base: "1\r\n2\r\n3\r\n", new: "1\r\n2x\r\n3\r\n", op: OpModify,
			diff: "diff --git a/w.txt b/w.txt\n--- a/w.txt\n+++ b/w.txt\n" +
				"@@ -1,3 +1,3 @@\n 1\r\n-2\r\n+2x\r\n 3\r\n",
			hunks: [][4]int{{1, 3, 1, 3}},
		},
		{
			name: "LF to CRLF", path: "w.txt", baseExists: true, base: "1\n2\n", new: "1\r\n2\r\n", op: OpModify,
			diff: "diff --git a/w.txt b/w.txt\n--- a/w.txt\n+++ b/w.txt\n" +
				"@@ -1,2 +1,2 @@\n-1\n-2\n+1\r\n+2\r\n",
			hunks: [][4]int{{1, 2, 1, 2}},
		},
		{
			name: "create an empty file", path: "e", new: "", op: OpCreate,
			diff: "diff --git a/e b/e\nnew file mode 100644\n",
		},
		{
			name: "delete an empty file", path: "e", baseExists: true, delete: true, op: OpDelete,
			diff: "diff --git a/e b/e\ndeleted file mode 100644\n",
		},
		{
			name: "fill an empty file", path: "e", baseExists: true, base: "", new: "a\n", op: OpModify,
			diff:  "diff --git a/e b/e\n--- a/e\n+++ b/e\n@@ -0,0 +1 @@\n+a\n",
			hunks: [][4]int{{0, 0, 1, 1}},
		},
		{
			name: "empty a file", path: "e", baseExists: true, base: "a\n", new: "", op: OpModify,
			diff:  "diff --git a/e b/e\n--- a/e\n+++ b/e\n@@ -1 +0,0 @@\n-a\n",
			hunks: [][4]int{{1, 1, 0, 0}},
		},
		{
			name: "function names, kept across hunks", path: "f.go", baseExists: true,
			base: funcFile(nil), new: funcFile(map[string]string{"\tl3\n": "\tL3\n", "\tl18\n": "\tL18\n", "\tf4 int\n": "\tF4 int\n"}),
			op: OpModify,
			diff: "diff --git a/f.go b/f.go\n--- a/f.go\n+++ b/f.go\n" +
				"@@ -1,7 +1,7 @@\n func a() {\n \tl1\n \tl2\n-\tl3\n+\tL3\n \tl4\n \tl5\n \tl6\n" +
				"@@ -16,7 +16,7 @@ func a() {\n \tl15\n \tl16\n \tl17\n-\tl18\n+\tL18\n \tl19\n \tl20\n }\n" +
				"@@ -24,6 +24,6 @@ type T struct {\n \tf1 int\n \tf2 int\n \tf3 int\n-\tf4 int\n+\tF4 int\n \tf5 int\n }\n",
			hunks: [][4]int{{1, 7, 1, 7}, {16, 7, 16, 7}, {24, 6, 24, 6}},
		},
		{
			name: "long function name cut to 80 bytes", path: "f.c", baseExists: true,
			base: long + numbered(8, nil), new: long + numbered(8, map[int]string{7: "seven\n"}),
			op: OpModify,
			diff: "diff --git a/f.c b/f.c\n--- a/f.c\n+++ b/f.c\n" +
				"@@ -5,5 +5,5 @@ " + long[:80] + "\n 4\n 5\n 6\n-7\n+seven\n 8\n",
			hunks: [][4]int{{5, 5, 5, 5}},
		},
		{
			name: "function name in a CRLF file", path: "w.c", baseExists: true,
			base: "int main() {  \r\n" + strings.ReplaceAll(numbered(8, nil), "\n", "\r\n"),
			new:  "int main() {  \r\n" + strings.ReplaceAll(numbered(8, map[int]string{7: "seven\n"}), "\n", "\r\n"),
			op:   OpModify,
			diff: "diff --git a/w.c b/w.c\n--- a/w.c\n+++ b/w.c\n" +
				"@@ -5,5 +5,5 @@ int main() {\n 4\r\n 5\r\n 6\r\n-7\r\n+seven\r\n 8\r\n",
			hunks: [][4]int{{5, 5, 5, 5}},
		},
		{
			name: "names with spaces get a tab", path: "sp ace/f g.txt", baseExists: true, base: "z\n", new: "Z\n", op: OpModify,
			diff:  "diff --git a/sp ace/f g.txt b/sp ace/f g.txt\n--- a/sp ace/f g.txt\t\n+++ b/sp ace/f g.txt\t\n@@ -1 +1 @@\n-z\n+Z\n",
			hunks: [][4]int{{1, 1, 1, 1}},
		},
		{
			name: "names with special bytes are quoted", path: "caf\u00e9\t\"q\".txt", baseExists: true, base: "u\n", new: "U\n", op: OpModify,
			diff: "diff --git \"a/caf\\303\\251\\t\\\"q\\\".txt\" \"b/caf\\303\\251\\t\\\"q\\\".txt\"\n" +
				"--- \"a/caf\\303\\251\\t\\\"q\\\".txt\"\n+++ \"b/caf\\303\\251\\t\\\"q\\\".txt\"\n@@ -1 +1 @@\n-u\n+U\n",
			hunks: [][4]int{{1, 1, 1, 1}},
		},
	}
	g := maybeGitRepo(t) // nil without git: then only the literal diffs are checked
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := Edit{Path: tt.path, BaseExists: tt.baseExists, Delete: tt.delete, New: []byte(tt.new)}
			if tt.baseExists {
				e.Base = []byte(tt.base)
			}
			s := mustPropose(t, e)
			if len(s.Files) != 1 {
				t.Fatalf("got %d files, want 1", len(s.Files))
			}
			fp := s.Files[0]
			if fp.Op != tt.op {
				t.Errorf("op = %s, want %s", fp.Op, tt.op)
			}
			if tt.diff != "" && fp.Diff != tt.diff {
				t.Errorf("diff:\n%s\nwant:\n%s", fp.Diff, tt.diff)
			}
			var hunks [][4]int
			var content string
			for _, h := range fp.Hunks {
				hunks = append(hunks, [4]int{h.OldStart, h.OldLines, h.NewStart, h.NewLines})
				content += h.Content
			}
			if !reflect.DeepEqual(hunks, tt.hunks) {
				t.Errorf("hunks = %v, want %v", hunks, tt.hunks)
			}
			if !strings.HasSuffix(fp.Diff, content) {
				t.Errorf("the diff does not end with the hunks' content")
			}
			if !strings.HasPrefix(fp.ID, "patch_") || len(fp.ID) != len("patch_")+16 || !strings.HasPrefix(s.ID, "pset_") {
				t.Errorf("ids %q, %q", s.ID, fp.ID)
			}
			wantBase, wantNew := "", hashOf([]byte(tt.new))
			if tt.baseExists {
				wantBase = hashOf([]byte(tt.base))
			}
			if tt.delete {
				wantNew = ""
			}
			if fp.BaseHash != wantBase || fp.NewHash != wantNew {
				t.Errorf("hashes %q, %q; want %q, %q", fp.BaseHash, fp.NewHash, wantBase, wantNew)
			}

			if g == nil {
				return
			}
			g.t = t
			if got := g.diff(tt.path, []byte(tt.base), tt.baseExists, []byte(tt.new), !tt.delete); got != fp.Diff {
				t.Errorf("git writes:\n%s\nwe write:\n%s", got, fp.Diff)
			}
		})
	}
}

func TestResult(t *testing.T) {
	base := numbered(30, nil)
	s := mustPropose(t, modify("f.txt", base, numbered(30, map[int]string{2: "two\n", 15: "", 29: "29\n29b\n"})))
	if len(s.Files[0].Hunks) != 3 {
		t.Fatalf("%d hunks, want 3", len(s.Files[0].Hunks))
	}
	fp := &s.Files[0]
	tests := []struct {
		hunks []int
		want  string
	}{
		{nil, base},
		{[]int{0}, numbered(30, map[int]string{2: "two\n"})},
		{[]int{1}, numbered(30, map[int]string{15: ""})},
		{[]int{2, 0}, numbered(30, map[int]string{2: "two\n", 29: "29\n29b\n"})},
		{[]int{0, 1, 2}, string(fp.New)},
	}
	for _, tt := range tests {
		got, exists, err := fp.Result(tt.hunks)
		if err != nil || !exists || string(got) != tt.want {
			t.Errorf("Result(%v) = %q, %v, %v; want %q", tt.hunks, got, exists, err, tt.want)
		}
	}
	for _, bad := range [][]int{{3}, {-1}, {1, 1}} {
		if _, _, err := fp.Result(bad); !isErr(err, engine.ErrInvalidRequest) {
			t.Errorf("Result(%v) error = %v, want ErrInvalidRequest", bad, err)
		}
	}

	create := mustPropose(t, Edit{Path: "c.txt", New: []byte("c\n")}).Files[0]
	del := mustPropose(t, Edit{Path: "d.txt", Base: []byte("d\n"), BaseExists: true, Delete: true}).Files[0]
	empty := mustPropose(t, Edit{Path: "e.txt"}).Files[0]
	for _, tt := range []struct {
		name   string
		fp     FilePatch
		hunks  []int
		want   string
		exists bool
	}{
		{"create, all", create, []int{0}, "c\n", true},
		{"create, none", create, nil, "", false},
		{"delete, all", del, []int{0}, "", false},
		{"delete, none", del, nil, "d\n", true},
		{"empty create is all hunks", empty, nil, "", true},
	} {
		got, exists, err := tt.fp.Result(tt.hunks)
		if err != nil || exists != tt.exists || string(got) != tt.want {
			t.Errorf("%s: Result = %q, %v, %v; want %q, %v", tt.name, got, exists, err, tt.want, tt.exists)
		}
	}
}

func TestProposeComposes(t *testing.T) {
	a, b, c := "1\n2\n3\n", "1\nTWO\n3\n", "1\nTWO\n3\nfour\n"
	tests := []struct {
		name    string
		edits   []Edit
		wantErr error
		want    map[string]Op // path → op of the resulting patches
		final   map[string]string
	}{
		{
			name:  "two edits of one file compose",
			edits: []Edit{modify("f", a, b), modify("g", "g\n", "G\n"), modify("./f", b, c)},
			want:  map[string]Op{"f": OpModify, "g": OpModify},
			final: map[string]string{"f": c, "g": "G\n"},
		},
		{
			name:  "create then modify is a create",
			edits: []Edit{{Path: "n", New: []byte(a)}, modify("n", a, b)},
			want:  map[string]Op{"n": OpCreate}, final: map[string]string{"n": b},
		},
		{
			name:  "modify then delete is a delete",
			edits: []Edit{modify("f", a, b), {Path: "f", Base: []byte(b), BaseExists: true, Delete: true}},
			want:  map[string]Op{"f": OpDelete},
		},
		{
			name:  "an edit back to the base is dropped",
			edits: []Edit{modify("f", a, b), modify("g", "g\n", "G\n"), modify("f", b, a)},
			want:  map[string]Op{"g": OpModify},
		},
		{
			name:  "create then delete is dropped",
			edits: []Edit{{Path: "n", New: []byte(a)}, {Path: "n", Base: []byte(a), BaseExists: true, Delete: true}, modify("g", "g\n", "G\n")},
			want:  map[string]Op{"g": OpModify},
		},
		{
			name:    "a no-op edit alone changes nothing",
			edits:   []Edit{modify("f", a, a)},
			wantErr: engine.ErrInvalidRequest,
		},
		{
			name:    "no edits change nothing",
			wantErr: engine.ErrInvalidRequest,
		},
		{
			name:    "a later edit against other content",
			edits:   []Edit{modify("f", a, b), modify("f", a, c)},
			wantErr: engine.ErrInvalidRequest,
		},
		{
			name:    "a later edit that thinks a deleted file exists",
			edits:   []Edit{{Path: "f", Base: []byte(a), BaseExists: true, Delete: true}, modify("f", "", b)},
			wantErr: engine.ErrInvalidRequest,
		},
		{
			name:    "binary new content",
			edits:   []Edit{modify("f", a, "x\x00y\n")},
			wantErr: engine.ErrInvalidRequest,
		},
		{
			name:    "binary base",
			edits:   []Edit{modify("f", "\x00", a)},
			wantErr: engine.ErrInvalidRequest,
		},
		{
			name:    "deleting a file that did not exist",
			edits:   []Edit{{Path: "f", Delete: true}},
			wantErr: engine.ErrInvalidRequest,
		},
		{
			name:    "a base for a file that did not exist",
			edits:   []Edit{{Path: "f", Base: []byte(a), New: []byte(b)}},
			wantErr: engine.ErrInvalidRequest,
		},
		{
			name:    "a file and a file inside it",
			edits:   []Edit{{Path: "d", New: []byte(a)}, {Path: "d/x", New: []byte(a)}},
			wantErr: engine.ErrInvalidRequest,
		},
		{name: "climbing out", edits: []Edit{modify("../x", a, b)}, wantErr: engine.ErrPermissionDenied},
		{name: "climbing out after a detour", edits: []Edit{modify("d/../../x", a, b)}, wantErr: engine.ErrPermissionDenied},
		{name: "absolute", edits: []Edit{modify("/etc/passwd", a, b)}, wantErr: engine.ErrPermissionDenied},
		{name: "the root", edits: []Edit{modify("d/..", a, b)}, wantErr: engine.ErrInvalidRequest},
		{name: "empty path", edits: []Edit{modify("", a, b)}, wantErr: engine.ErrInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Propose(tt.edits, "why", nil)
			if tt.wantErr != nil {
				if !isErr(err, tt.wantErr) {
					t.Fatalf("error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]Op{}
			for _, fp := range s.Files {
				got[fp.Path] = fp.Op
				if want, ok := tt.final[fp.Path]; ok && string(fp.New) != want {
					t.Errorf("%s: new = %q, want %q", fp.Path, fp.New, want)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("patches %v, want %v", got, tt.want)
			}
		})
	}
}

func TestProposeErrorsSayWhat(t *testing.T) {
	_, err := Propose([]Edit{modify("src/a.go", "a\n", "b\n"), modify("src/a.go", "x\n", "c\n")}, "", nil)
	if err == nil || !strings.Contains(err.Error(), "edit 2 of src/a.go") {
		t.Errorf("error %v does not name the edit", err)
	}
	_, err = Propose([]Edit{modify("img.png", "a\n", "\x89PNG\x00")}, "", nil)
	if err == nil || !strings.Contains(err.Error(), "img.png") || !strings.Contains(err.Error(), "binary") {
		t.Errorf("error %v does not say the file is binary", err)
	}
	_, err = Propose([]Edit{modify("f", "a\n", "a\n")}, "", nil)
	if err == nil || !strings.Contains(err.Error(), "the edits change nothing") {
		t.Errorf("error %v", err)
	}
}

func TestSetSurvivesJSON(t *testing.T) {
	s := mustPropose(t,
		modify("f.txt", numbered(30, nil), numbered(30, map[int]string{2: "two\n", 29: "x\n"})),
		Edit{Path: "new.txt", New: []byte("n\n")},
		Edit{Path: "gone.txt", Base: []byte("g\n"), BaseExists: true, Delete: true},
		Edit{Path: "empty.txt"},
	)
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Set
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, s) {
		t.Errorf("the set changed through JSON:\n%+v\nwant\n%+v", back, *s)
	}
	for _, key := range []string{`"old_start"`, `"new_lines"`, `"content"`, `"base_hash"`, `"acceptance_criteria"`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("JSON lacks %s", key)
		}
	}
}

func TestCorruptSetIsRefused(t *testing.T) {
	root, _ := newWorkspace(t, map[string]string{"f.txt": "a\nb\nc\n"})
	tests := []struct {
		name  string
		spoil func(fp *FilePatch)
	}{
		{"new content without its hash", func(fp *FilePatch) { fp.New = []byte("evil\n") }},
		{"hunk moved", func(fp *FilePatch) { fp.Hunks[0].OldStart += 5 }},
		{"hunk dropped", func(fp *FilePatch) { fp.Hunks = nil }},
		{"unknown op", func(fp *FilePatch) { fp.Op = "chmod" }},
		{"path not clean", func(fp *FilePatch) { fp.Path = "./f.txt" }},
		{"path escapes", func(fp *FilePatch) { fp.Path = "../f.txt" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustPropose(t, modify("f.txt", "a\nb\nc\n", "a\nB\nc\n"))
			tt.spoil(&s.Files[0])
			if _, err := Apply(root, s, Selection{All: true}); err == nil {
				t.Fatal("Apply accepted a corrupt set")
			}
			if _, err := s.Expected(Selection{All: true}); err == nil {
				t.Fatal("Expected accepted a corrupt set")
			}
		})
	}
}

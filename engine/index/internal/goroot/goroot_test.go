package goroot

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const sample = `package p

import "context"

// Buffer holds bytes until they are read.
type Buffer struct{ b []byte }

// ReadRune reads one rune from the buffer and returns it.
func (b *Buffer) ReadRune() (rune, int, error) { return 0, 0, nil }

// Dial connects to the address on the named network.
//
// More words.
func Dial(ctx context.Context, addr string) error {
	return nil
}

const Max, min = 10, 1

func undocumented() {}
`

func TestParseDecls(t *testing.T) {
	decls, err := ParseDecls([]byte(sample), nil)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		name          string
		kind          Kind
		recvText      string
		line, endLine int
		docLine       int
		ctx, exported bool
	}
	var got []row
	for _, d := range decls {
		got = append(got, row{d.Name, d.Kind, d.RecvText, d.Line, d.EndLine, d.DocLine, d.CtxFirst, d.Exported()})
	}
	want := []row{
		{"Buffer", Type, "", 6, 6, 5, false, true},
		{"ReadRune", Method, "func (b *Buffer)", 9, 9, 8, false, true},
		{"Dial", Func, "", 14, 16, 11, true, true},
		{"Max", Const, "", 18, 18, 0, false, true},
		{"min", Const, "", 18, 18, 0, false, false},
		{"undocumented", Func, "", 20, 20, 0, false, false},
	}
	if !slices.Equal(got, want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}
	if !decls[0].Struct || decls[1].Recv != "Buffer" || !decls[2].DocOwnLines {
		t.Errorf("decls = %+v", decls[:3])
	}
}

func TestStripDocs(t *testing.T) {
	src := []byte(sample)
	decls, err := ParseDecls(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := StripDocs(src, []Decl{decls[1], decls[2]})
	if err != nil {
		t.Fatal(err)
	}
	after, err := ParseDecls(out, nil)
	if err != nil {
		t.Fatalf("stripped source does not parse: %v\n%s", err, out)
	}
	for _, key := range [][2]string{{"Buffer", "ReadRune"}, {"", "Dial"}} {
		d, err := FindFunc(after, key[0], key[1])
		if err != nil || d.Doc != "" {
			t.Errorf("%v: %+v, %v", key, d, err)
		}
	}
	if got := strings.Count(string(out), "\n"); got != strings.Count(string(src), "\n")-4 {
		t.Errorf("stripped %d lines, want 4:\n%s", strings.Count(string(src), "\n")-got, out)
	}
	if _, err := StripDocs(src, []Decl{decls[5]}); err == nil {
		t.Error("stripping a function without a doc comment succeeded")
	}
}

func TestWords(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"ReadRune", "Read"}, {"readLine", "read"}, {"HTTPServer", "HTTPServer"}, {"Len", "Len"},
	} {
		if got := firstWord(tc.in); got != tc.want {
			t.Errorf("firstWord(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := WithoutName("ReadFile reads the file; see ReadFileFS and ReadFile.", "ReadFile"); got != "reads the file; see ReadFileFS and ." {
		t.Errorf("WithoutName = %q", got)
	}
}

// TestCorpus loads a small tree, draws from it and copies it with a doc
// comment stripped.
func TestCorpus(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"p/p.go":               sample,
		"p/p_test.go":          "package p\n\n// TestX tests the things it tests.\nfunc TestX() {}\n",
		"p/testdata/broken.go": "package (\n",
		"q/q.go":               "package q\n\nimport \"p\"\n\n// Dial dials the number given to it.\nfunc Dial() { p.Dial(nil, \"\"); p.Dial(nil, \"\") }\n",
		"README":               "not Go\n",
	}
	for p, body := range files {
		path := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := Load(root, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if c.NumFiles != 5 || len(c.Files) != 4 || c.File("p/testdata/broken.go").ParseErr == nil || c.Calls["p.Dial("] != 2 {
		t.Fatalf("corpus: %d files, %d Go, calls %v", c.NumFiles, len(c.Files), c.Calls)
	}
	ids := c.ExportedIdents(10, 1)
	byName := map[string][]string{}
	for _, id := range ids {
		byName[id.Name] = id.Files
	}
	if len(ids) != 3 || !slices.Equal(byName["Dial"], []string{"p/p.go", "q/q.go"}) || byName["TestX"] != nil {
		t.Errorf("idents = %v", ids)
	}
	docs := c.DocFuncs(10, 5, 1)
	var keys []string
	for _, d := range docs {
		keys = append(keys, d.Path+" "+d.Key()+": "+d.Sentence)
	}
	want := []string{
		"p/p.go Buffer.ReadRune: ReadRune reads one rune from the buffer and returns it.",
		"p/p.go Dial: Dial connects to the address on the named network.",
		"q/q.go Dial: Dial dials the number given to it.",
	}
	if !slices.Equal(keys, want) {
		t.Errorf("doc funcs:\n got %q\nwant %q", keys, want)
	}
	if a, b := c.Literals(6, 7), c.Literals(6, 7); !slices.Equal(a, b) || len(a) != 6 {
		t.Errorf("literals not deterministic or short: %q, %q", a, b)
	}
	dst := filepath.Join(t.TempDir(), "copy")
	edit := map[string]func([]byte) ([]byte, error){"q/q.go": func(b []byte) ([]byte, error) { return StripDocs(b, []Decl{docs[2].Decl}) }}
	if err := CopyTree(root, dst, edit); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dst, "q", "q.go"))
	if strings.Contains(string(got), "dials the number") || !strings.Contains(string(got), "func Dial()") {
		t.Errorf("copy of q.go:\n%s", got)
	}
	if readme, _ := os.ReadFile(filepath.Join(dst, "README")); string(readme) != "not Go\n" {
		t.Errorf("README copied as %q", readme)
	}
}

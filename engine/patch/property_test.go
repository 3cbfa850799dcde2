package patch

import (
	"bytes"
	"errors"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/aymanbagabas/go-udiff/myers"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/workspace"
)

// textGen makes random line-based texts: few distinct lines, so that
// repeats make the diffs ambiguous; empty texts, texts without a final
// newline, and CRLF lines.
type textGen struct{ r *rand.Rand }

func newTextGen(seed int64) *textGen { return &textGen{rand.New(rand.NewSource(seed))} }

var genLines = []string{"a\n", "b\n", "c\n", "{\n", "}\n", "\n", "func f() {\n", "\treturn\n", "x y\n", "d\r\n", "é\n"}

// lines is n random lines.
func (g *textGen) lines(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = genLines[g.r.Intn(len(genLines))]
	}
	return out
}

// text joins lines, sometimes dropping the final newline.
func (g *textGen) text(lines []string) string {
	s := strings.Join(lines, "")
	if s != "" && g.r.Intn(4) == 0 {
		s = strings.TrimSuffix(strings.TrimSuffix(s, "\n"), "\r")
		if s == "" {
			s = "z"
		}
	}
	return s
}

// pair is a random text and a random edit of it (or, rarely, an unrelated
// text).
func (g *textGen) pair() (string, string) {
	var a []string
	switch g.r.Intn(10) {
	case 0:
		a = nil
	case 1:
		a = g.lines(1 + g.r.Intn(3))
	default:
		a = g.lines(g.r.Intn(60))
	}
	if g.r.Intn(10) == 0 {
		return g.text(a), g.text(g.lines(g.r.Intn(30)))
	}
	b := slices.Clone(a)
	for range g.r.Intn(8) {
		i := 0
		if len(b) > 0 {
			i = g.r.Intn(len(b) + 1)
		}
		switch g.r.Intn(3) {
		case 0:
			b = slices.Insert(b, i, g.lines(1+g.r.Intn(3))...)
		case 1:
			if i < len(b) {
				b = slices.Delete(b, i, min(len(b), i+1+g.r.Intn(3)))
			}
		case 2:
			if i < len(b) {
				b[i] = genLines[g.r.Intn(len(genLines))]
			}
		}
	}
	return g.text(a), g.text(b)
}

// checkProperty checks, for texts a and b (both existing files), that all
// hunks give b, none give a, and a random subset s then a new patch from
// Result(s) to b gives b again. r picks the subset.
func checkProperty(t *testing.T, a, b []byte, r *rand.Rand) {
	t.Helper()
	s, err := Propose([]Edit{{Path: "f", Base: a, BaseExists: true, New: b}}, "", nil)
	if bytes.Equal(a, b) {
		if !errors.Is(err, engine.ErrInvalidRequest) {
			t.Fatalf("Propose of a no-op: %v", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("Propose(%q, %q): %v", a, b, err)
	}
	fp := &s.Files[0]
	all := make([]int, len(fp.Hunks))
	for i := range all {
		all[i] = i
	}
	if got, exists, err := fp.Result(all); err != nil || !exists || !bytes.Equal(got, b) {
		t.Fatalf("Result(all) = %q, %v, %v; want %q\ndiff:\n%s", got, exists, err, b, fp.Diff)
	}
	if got, exists, err := fp.Result(nil); err != nil || !exists || !bytes.Equal(got, a) {
		t.Fatalf("Result(none) = %q, %v, %v; want %q\ndiff:\n%s", got, exists, err, a, fp.Diff)
	}
	var sub []int
	for _, i := range r.Perm(len(fp.Hunks)) {
		if r.Intn(2) == 0 {
			sub = append(sub, i)
		}
	}
	mid, _, err := fp.Result(sub)
	if err != nil {
		t.Fatalf("Result(%v): %v", sub, err)
	}
	if len(sub) > 0 && len(sub) < len(fp.Hunks) && (bytes.Equal(mid, a) || bytes.Equal(mid, b)) {
		t.Fatalf("Result(%v) of %d hunks is the base or the new content", sub, len(fp.Hunks))
	}
	if bytes.Equal(mid, b) {
		return
	}
	s2, err := Propose([]Edit{{Path: "f", Base: mid, BaseExists: true, New: b}}, "", nil)
	if err != nil {
		t.Fatalf("Propose(Result(%v), b): %v", sub, err)
	}
	fp2 := &s2.Files[0]
	all2 := make([]int, len(fp2.Hunks))
	for i := range all2 {
		all2[i] = i
	}
	if got, _, err := fp2.Result(all2); err != nil || !bytes.Equal(got, b) {
		t.Fatalf("the rest of the hunks give %q, %v; want %q", got, err, b)
	}
}

// changedLines counts the '-' and '+' lines of a patch's hunks.
func changedLines(fp *FilePatch) int {
	n := 0
	for _, h := range fp.Hunks {
		for _, l := range strings.SplitAfter(h.Content, "\n")[1:] {
			if strings.HasPrefix(l, "-") || strings.HasPrefix(l, "+") {
				n++
			}
		}
	}
	return n
}

// myersChanged is the number of changed lines of an exact Myers diff.
func myersChanged(a, b string) int {
	n := 0
	for _, e := range myers.ComputeEdits(a, b) {
		n += len(splitLines(a[e.Start:e.End])) + len(splitLines(e.New))
	}
	return n
}

func TestProperty(t *testing.T) {
	gen := newTextGen(1)
	r := rand.New(rand.NewSource(2))
	root, dir := newWorkspace(t, nil)
	for i := range 3000 {
		a, b := gen.pair()
		checkProperty(t, []byte(a), []byte(b), r)
		if a == b {
			continue
		}
		fp := &mustPropose(t, modify("f", a, b)).Files[0]

		// Minimal: as few changed lines as an exact Myers diff.
		if got, want := changedLines(fp), myersChanged(a, b); got != want {
			t.Fatalf("case %d: %d changed lines, the minimum is %d\n%s", i, got, want, fp.Diff)
		}

		// The diff, parsed back against a, gives b.
		writeFile(t, dir, "f", a)
		edits, err := ParseUnified(root, fp.Diff)
		if err != nil {
			t.Fatalf("case %d: ParseUnified of our own diff: %v\n%s", i, err, fp.Diff)
		}
		if len(edits) != 1 || string(edits[0].New) != b || string(edits[0].Base) != a {
			t.Fatalf("case %d: ParseUnified gave %+v, want %q", i, edits, b)
		}
	}
}

// TestLargeRewrites checks the regions where the bounded search gives up:
// many scattered changes stay as small hunks, and a full rewrite of a big
// file stays a single replacement (and fast).
func TestLargeRewrites(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	var lines []string
	for i := range 5000 {
		lines = append(lines, "line "+strings.Repeat("x", i%7)+" "+string(rune('a'+r.Intn(26)))+" "+itoa5(i)+"\n")
	}
	a := strings.Join(lines, "")
	for _, changes := range []int{3, 60, 150, 400} {
		b := slices.Clone(lines)
		for i := range changes {
			b[(i*4999)/changes+1] = "changed " + itoa5(i) + "\n"
		}
		fp := &mustPropose(t, modify("big", a, strings.Join(b, ""))).Files[0]
		if got := changedLines(fp); got != 2*changes {
			t.Errorf("%d scattered one-line changes: %d changed lines, want %d", changes, got, 2*changes)
		}
		checkProperty(t, []byte(a), []byte(strings.Join(b, "")), r)
	}
	var other []string
	for i := range 4000 {
		other = append(other, "new "+itoa5(i)+"\n")
	}
	fp := &mustPropose(t, modify("big", a, strings.Join(other, ""))).Files[0]
	if len(fp.Hunks) != 1 || changedLines(fp) != 9000 {
		t.Errorf("full rewrite: %d hunks, %d changed lines", len(fp.Hunks), changedLines(fp))
	}
}

func itoa5(i int) string {
	b := []byte("00000")
	for j := 4; j >= 0; j-- {
		b[j] = byte('0' + i%10)
		i /= 10
	}
	return string(b)
}

func FuzzPropose(f *testing.F) {
	f.Add([]byte(""), []byte("a\n"))
	f.Add([]byte("a\nb\nc\n"), []byte("a\nc\n"))
	f.Add([]byte("a\nb"), []byte("a\nb\n"))
	f.Add([]byte("1\r\n2\r\n"), []byte("1\n2\n"))
	f.Add([]byte("x\x00"), []byte("y"))
	gen := newTextGen(4)
	for range 20 {
		a, b := gen.pair()
		f.Add([]byte(a), []byte(b))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		if bytes.IndexByte(a, 0) >= 0 || bytes.IndexByte(b, 0) >= 0 {
			if _, err := Propose([]Edit{{Path: "f", Base: a, BaseExists: true, New: b}}, "", nil); !errors.Is(err, engine.ErrInvalidRequest) {
				t.Fatalf("binary content: error %v", err)
			}
			return
		}
		checkProperty(t, a, b, rand.New(rand.NewSource(int64(len(a))*31+int64(len(b)))))
	})
}

// fuzzWorkspace holds the files the ParseUnified fuzz and mutation tests
// patch.
var fuzzWorkspace = map[string]string{
	"a.txt":     numbered(20, nil),
	"dir/b.go":  "package b\n\nfunc B() {\n\treturn\n}\n",
	"nonl.txt":  "x\ny",
	"crlf.txt":  "1\r\n2\r\n3\r\n",
	"empty.txt": "",
}

// unifiedSeeds are valid diffs against fuzzWorkspace, in several styles.
func unifiedSeeds(t testing.TB) []string {
	s := mustPropose(t,
		modify("a.txt", fuzzWorkspace["a.txt"], numbered(20, map[int]string{2: "two\n", 10: "", 19: "x\ny\n"})),
		modify("dir/b.go", fuzzWorkspace["dir/b.go"], "package b\n\nfunc B() {\n\treturn 1\n}\n"),
		modify("nonl.txt", "x\ny", "x\ny\n"),
		modify("crlf.txt", "1\r\n2\r\n3\r\n", "1\r\n3\r\n"),
		Edit{Path: "new/c.txt", New: []byte("c\n")},
		Edit{Path: "empty.txt", BaseExists: true, Delete: true},
	)
	var all strings.Builder
	var seeds []string
	for _, fp := range s.Files {
		seeds = append(seeds, fp.Diff)
		all.WriteString(fp.Diff)
	}
	seeds = append(seeds, all.String(),
		"--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n 1\n-2\n+2!\n 3\n",
		"--- a.txt\t2024-01-01\n+++ a.txt\t2024-01-02\n@@ -5 +5 @@\n-5\n+five\n",
		"diff --git a/a.txt b/moved.txt\nsimilarity index 90%\nrename from a.txt\nrename to moved.txt\n--- a/a.txt\n+++ b/moved.txt\n@@ -1,2 +1,2 @@\n-1\n+one\n 2\n",
		"diff --git a/a.txt b/a.txt\nold mode 100644\nnew mode 100755\n",
		"--- a/../escape\n+++ b/../escape\n@@ -1 +1 @@\n-a\n+b\n",
		"garbage\n@@ -1 +1 @@\n",
		"",
	)
	return seeds
}

// checkParseOutcome checks that ParseUnified's answer is clean: an error
// that matches one of its documented sentinels, or edits that Propose
// accepts and whose results are what the edits say.
func checkParseOutcome(t *testing.T, root *workspace.Root, diff string) {
	t.Helper()
	edits, err := ParseUnified(root, diff)
	if err != nil {
		if err.Error() == "" || !(errors.Is(err, engine.ErrInvalidRequest) || errors.Is(err, engine.ErrNotFound) || errors.Is(err, engine.ErrPermissionDenied)) {
			t.Fatalf("ParseUnified(%q): unclassified error %v", diff, err)
		}
		if strings.Contains(err.Error(), "internal error") {
			t.Fatalf("ParseUnified(%q): %v", diff, err)
		}
		return
	}
	final := map[string]*Edit{}
	for i := range edits {
		if p, err := cleanPath(edits[i].Path); err != nil || p != edits[i].Path {
			t.Fatalf("ParseUnified(%q) gave the path %q", diff, edits[i].Path)
		}
		final[edits[i].Path] = &edits[i]
	}
	s, err := Propose(edits, "", nil)
	if err != nil {
		if !errors.Is(err, engine.ErrInvalidRequest) {
			t.Fatalf("Propose of parsed edits: %v", err)
		}
		return
	}
	for _, fp := range s.Files {
		got, exists, err := fp.Result(nil)
		if len(fp.Hunks) > 0 {
			all := make([]int, len(fp.Hunks))
			for i := range all {
				all[i] = i
			}
			got, exists, err = fp.Result(all)
		}
		e := final[fp.Path]
		if err != nil || exists == e.Delete || (!e.Delete && !bytes.Equal(got, e.New)) {
			t.Fatalf("ParseUnified(%q): %s ends as %q (exists %v, %v), the edit says %q", diff, fp.Path, got, exists, err, e.New)
		}
	}
}

func FuzzParseUnified(f *testing.F) {
	for _, s := range unifiedSeeds(f) {
		f.Add(s)
	}
	root, _ := newWorkspace(f, fuzzWorkspace)
	f.Fuzz(func(t *testing.T, diff string) {
		checkParseOutcome(t, root, diff)
	})
}

// TestParseUnifiedMutations runs the fuzz check over deterministic
// mutations of valid diffs: lines dropped, duplicated, swapped or edited,
// numbers changed, bytes flipped.
func TestParseUnifiedMutations(t *testing.T) {
	root, _ := newWorkspace(t, fuzzWorkspace)
	r := rand.New(rand.NewSource(5))
	seeds := unifiedSeeds(t)
	for range 4000 {
		lines := strings.SplitAfter(seeds[r.Intn(len(seeds))], "\n")
		for range 1 + r.Intn(3) {
			i := r.Intn(len(lines))
			switch r.Intn(6) {
			case 0:
				lines = slices.Delete(lines, i, i+1)
			case 1:
				lines = slices.Insert(lines, i, lines[i])
			case 2:
				j := r.Intn(len(lines))
				lines[i], lines[j] = lines[j], lines[i]
			case 3:
				if l := lines[i]; l != "" {
					lines[i] = string("-+ @\\d"[r.Intn(6)]) + l[1:]
				}
			case 4:
				lines[i] = strings.Map(func(c rune) rune {
					if c >= '0' && c <= '9' && r.Intn(2) == 0 {
						return '0' + rune(r.Intn(10))
					}
					return c
				}, lines[i])
			case 5:
				if l := []byte(lines[i]); len(l) > 0 {
					l[r.Intn(len(l))] = byte(r.Intn(256))
					lines[i] = string(l)
				}
			}
			if len(lines) == 0 {
				lines = []string{""}
			}
		}
		checkParseOutcome(t, root, strings.Join(lines, ""))
	}
}

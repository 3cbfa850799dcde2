package index

import (
	"context"

	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/plexus-agent/plexus/internal/testtree"

	"github.com/plexus-agent/plexus/engine"
)

// oddCorpus holds what trips trigram filters: case variants, the Kelvin
// sign and the long s (which fold to k and s), non-ASCII letters, long
// lines and files without a final newline.
var oddCorpus = map[string]string{
	"a.go":        "package a\n\nfunc ReadFile() {}\nfunc readfile() {}\n// READFILE in shouting\nvar x = \"key: value\"\n",
	"kelvin.txt":  "temperature in \u212Aelvin\nthe \u212AEY is here\n",
	"longs.txt":   "the ſtrange caſe of the miſsing s\nmisſing\n",
	"unicode.txt": "Ünïcödé ünïcödé ÜNÏCÖDÉ\nstraße STRASSE\n",
	"noeol.txt":   "last line without newline: needle",
	"long.txt":    strings.Repeat("x", 5000) + "needle" + strings.Repeat("y", 5000) + "\nshort needle\n",
	"sub/b.py":    "def read_file(path):\n    return open(path).read()\n\nclass Keyring:\n    pass\n",
	"digits.txt":  "a123x 0x1F x12x\nβ١٢٣x and ž4٣x\n 12x-3 2024-01-31\n(1999-12-31) é5x\n",
}

// bruteForce matches q line by line over every file, as grep would.
func bruteForce(t *testing.T, files map[string]string, q engine.TextQuery) []string {
	t.Helper()
	match := func(line string) bool { return strings.Contains(line, q.Pattern) }
	if q.Regex || q.CaseInsensitive {
		expr := q.Pattern
		if !q.Regex {
			expr = regexp.QuoteMeta(expr)
		}
		if q.CaseInsensitive {
			expr = "(?i)" + expr
		}
		match = regexp.MustCompile(expr).MatchString
	}
	var out []string
	for p, content := range files {
		for i, line := range strings.Split(content, "\n") {
			if i == strings.Count(content, "\n") && line == "" {
				continue // the empty string after a final newline
			}
			if match(line) {
				out = append(out, fmt.Sprintf("%s:%d", p, i+1))
			}
		}
	}
	sort.Strings(out)
	return out
}

func indexed(t *testing.T, ix *Index, q engine.TextQuery) []string {
	t.Helper()
	q.Limit = engine.NoLimit
	res, err := ix.SearchText(context.Background(), q, nil)
	if err != nil {
		t.Fatalf("%+v: %v", q, err)
	}
	var out []string
	for _, m := range res.Matches {
		out = append(out, fmt.Sprintf("%s:%d", m.Path, m.Line))
	}
	sort.Strings(out)
	return out
}

func TestTextSearchMatchesBruteForce(t *testing.T) {
	_, ix, _ := newTestIndex(t, oddCorpus)
	build(t, ix, BuildOptions{})
	queries := []engine.TextQuery{
		{Pattern: "ReadFile"}, {Pattern: "readfile", CaseInsensitive: true}, {Pattern: "read_file"},
		{Pattern: "kelvin", CaseInsensitive: true}, {Pattern: "KEY", CaseInsensitive: true}, {Pattern: "key"},
		{Pattern: "strange", CaseInsensitive: true}, {Pattern: "missing", CaseInsensitive: true}, {Pattern: "case", CaseInsensitive: true},
		{Pattern: "ünïcödé", CaseInsensitive: true}, {Pattern: "Ünïcödé"}, {Pattern: "STRASSE", CaseInsensitive: true},
		{Pattern: "needle"}, {Pattern: "NEEDLE", CaseInsensitive: true}, {Pattern: "ne"},
		{Pattern: `func \w+\(\)`, Regex: true}, {Pattern: `(?i)read_?file`, Regex: true}, {Pattern: `^def `, Regex: true},
		{Pattern: `k\w+`, Regex: true, CaseInsensitive: true}, {Pattern: `line$`, Regex: true}, {Pattern: `x+needle`, Regex: true},
		{Pattern: `(value|pass)`, Regex: true}, {Pattern: `[A-Z]{4,}`, Regex: true}, {Pattern: `e\s+i`, Regex: true},
		{Pattern: `misſ`, CaseInsensitive: true}, {Pattern: `\x{212A}`, Regex: true}, {Pattern: `.`, Regex: true},
		// Non-ASCII case folding and regexes without a long literal: the
		// case variants and the bounded-window prefilters.
		{Pattern: "é", CaseInsensitive: true}, {Pattern: "É", CaseInsensitive: true}, {Pattern: "ß", CaseInsensitive: true},
		{Pattern: "straße", CaseInsensitive: true}, {Pattern: "cödé", CaseInsensitive: true}, {Pattern: "Ü", CaseInsensitive: true},
		{Pattern: `\pL\pN{0,3}e`, Regex: true}, {Pattern: `[a-z]{2}e`, Regex: true}, {Pattern: `\pL{3}é`, Regex: true, CaseInsensitive: true},
		{Pattern: `[0-9]{4}-[0-9]{2}`, Regex: true}, {Pattern: `y{3}z?`, Regex: true}, {Pattern: `(?i)k\w`, Regex: true},
		{Pattern: `x{10}needle`, Regex: true}, {Pattern: `e\b`, Regex: true}, {Pattern: `ſ.`, Regex: true, CaseInsensitive: true},
		{Pattern: `\pL\pN{3}x`, Regex: true}, {Pattern: `\pL\pN{2}x`, Regex: true}, {Pattern: `[0-9]{4}-[0-9]{2}-[0-9]{2}`, Regex: true},
		{Pattern: `\pN{2}x`, Regex: true}, {Pattern: `\pLx`, Regex: true}, {Pattern: `(1|2)\d-`, Regex: true}, {Pattern: `é\dx`, Regex: true},
	}
	for _, q := range queries {
		got, want := indexed(t, ix, q), bruteForce(t, oddCorpus, q)
		if !slices.Equal(got, want) {
			t.Errorf("%+v:\n got %v\nwant %v", q, got, want)
		}
	}
}

func TestTextSearchColumnsAndCuts(t *testing.T) {
	_, ix, _ := newTestIndex(t, oddCorpus)
	build(t, ix, BuildOptions{})
	res, _ := ix.SearchText(context.Background(), engine.TextQuery{Pattern: "needle", Path: "long.txt"}, nil)
	if len(res.Matches) != 2 || res.Matches[0].Column != 5001 || len(res.Matches[0].Text) > maxLineBytes+10 || !strings.Contains(res.Matches[0].Text, "needle") {
		t.Errorf("long line: %+v", res.Matches)
	}
	res, _ = ix.SearchText(context.Background(), engine.TextQuery{Pattern: "cödé", Path: "unicode.txt"}, nil)
	if len(res.Matches) != 1 || res.Matches[0].Column != 4 {
		t.Errorf("column in characters: %+v", res.Matches)
	}
	if _, err := ix.SearchText(context.Background(), engine.TextQuery{Pattern: "a\nb"}, nil); err == nil || !strings.Contains(err.Error(), "spans lines") {
		t.Errorf("multi-line pattern: %v", err)
	}
}

func TestRequiredLiteral(t *testing.T) {
	cases := []struct {
		expr string
		lit  string
		fold bool
	}{
		{`func \(\w+ \*Reader\) Read`, " *Reader) Read", false},
		{`(?i)ReadFile\(`, "readfile(", true},
		{`a+bcdef`, "bcdef", false},
		{`(x|y)abc`, "abc", false},
		{`\w+`, "", false},
		{`(?:foo)+bar`, "foo", false},
	}
	for _, c := range cases {
		m, err := newTextMatcher(engine.TextQuery{Pattern: c.expr, Regex: true})
		if err != nil {
			t.Fatal(err)
		}
		if string(m.req) != c.lit || m.reqFold != c.fold {
			t.Errorf("%s: required %q (fold %v), want %q (%v)", c.expr, m.req, m.reqFold, c.lit, c.fold)
		}
	}
}

// FuzzTextSearch checks the index against a brute-force scan for arbitrary
// patterns.
func FuzzTextSearch(f *testing.F) {
	for _, s := range []string{"ReadFile", "kEy", "ſ", `\w+e`, "(a|b)c", "ü", "needle$", `\pL\pN{3}x`, `[0-9]{2}-[0-9]`, "é"} {
		f.Add(s, false, false)
		f.Add(s, true, true)
	}
	// One index for every input, owned by f (a t's cleanup would close
	// it after the first input).
	dir := f.TempDir()
	testtree.Write(f, dir, oddCorpus)
	svc, err := Open(context.Background(), Options{Path: f.TempDir() + "/index.db"})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { svc.Close() })
	ix, err := svc.Workspace(context.Background(), dir)
	if err != nil {
		f.Fatal(err)
	}
	if _, err := ix.Build(context.Background(), BuildOptions{}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, pattern string, regex, ci bool) {
		q := engine.TextQuery{Pattern: pattern, Regex: regex, CaseInsensitive: ci}
		if _, err := newTextMatcher(q); err != nil || pattern == "" || strings.ContainsRune(pattern, '\n') {
			return
		}
		if regex || ci {
			if _, err := regexp.Compile("(?i)" + pattern); err != nil {
				return
			}
		}
		got, want := indexed(t, ix, q), bruteForce(t, oddCorpus, q)
		if !slices.Equal(got, want) {
			t.Errorf("%+v:\n got %v\nwant %v", q, got, want)
		}
	})
}

// FuzzDecodeSegment feeds arbitrary bytes (and mutations of a real
// segment) to the decoder: it must fail cleanly, never panic or allocate
// without bound.
func FuzzDecodeSegment(f *testing.F) {
	b := newSegmentBuilder()
	d := makeDoc([]byte("package p\n\nfunc F() {}\n"), "go", storedAnalysis{
		symbols: []docSymbol{{name: "F", kind: "function", line: 3, end: 3, col: 6}},
		chunks:  []docChunk{{start: 1, end: 3}},
	}, newTrigramSet())
	d.content = 7
	b.add(d)
	f.Add(b.finish().encode())
	f.Add([]byte(segmentMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := decodeSegment(data)
		if err != nil {
			return
		}
		// A decoded segment must be safe to query.
		for _, tri := range s.triKeys {
			s.trigramDocs(nil, tri)
		}
		for _, term := range s.termKeys {
			decodeTermList(s.termList(term), func(termEntry) {})
		}
	})
}

// FuzzDecodeAnalysis does the same for stored analyses.
func FuzzDecodeAnalysis(f *testing.F) {
	f.Add(storedAnalysis{symbols: []docSymbol{{name: "F", kind: "function", line: 1, end: 2}}, chunks: []docChunk{{start: 1, end: 2, name: "F"}}}.encode())
	f.Add([]byte(analysisMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		decodeAnalysis(data, true)
	})
}

// FuzzPatternQuery checks that planning a regex never panics and never
// rejects a file that matches: the plan's trigrams must all occur in any
// line the expression matches.
func FuzzPatternQuery(f *testing.F) {
	for _, s := range []string{`abc`, `(?i)key`, `a(b|c)d`, `x{2,}yz`, `[a-z]+foo`, `^$`} {
		f.Add(s, "xx abc key abd xxyz zfoo")
	}
	f.Fuzz(func(t *testing.T, expr, text string) {
		re, err := regexp.Compile(expr)
		if err != nil || strings.ContainsRune(text, '\n') {
			return
		}
		q, err := patternQuery(expr, true, false)
		if err != nil {
			return
		}
		loc := re.FindStringIndex(text)
		if loc == nil {
			return
		}
		ts := newTrigramSet()
		ts.add([]byte(text))
		have := map[trigram]bool{}
		for _, tr := range ts.take() {
			have[tr] = true
		}
		docs, all := q.eval(func(tr trigram) []uint32 {
			if have[tr] {
				return []uint32{0}
			}
			return nil
		}, func(tr trigram) int { return 1 })
		if !all && !slices.Contains(docs, 0) {
			t.Errorf("%q matches %q but the trigram plan rejects it", expr, text)
		}
	})
}

// TestTextSearchHasNoHiddenCap: every match comes back when asked, well
// past the 10,000 that once were a silent maximum, and Truncated is set
// exactly when the limit cut matches, also when one file holds them all.
func TestTextSearchHasNoHiddenCap(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 12000; i++ {
		fmt.Fprintf(&b, "hit %d\n", i)
	}
	_, ix, _ := newTestIndex(t, map[string]string{"big.txt": b.String(), "small.txt": "hit\n"})
	build(t, ix, BuildOptions{})
	for _, tc := range []struct {
		limit, n  int
		truncated bool
	}{
		{engine.NoLimit, 12001, false},
		{12001, 12001, false},
		{12000, 12000, true},
		{11000, 11000, true},
		{0, defaultTextLimit, true},
	} {
		res, err := ix.SearchText(context.Background(), engine.TextQuery{Pattern: "hit", Limit: tc.limit}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Matches) != tc.n || res.Truncated != tc.truncated {
			t.Errorf("limit %d: %d matches, truncated %v; want %d, %v", tc.limit, len(res.Matches), res.Truncated, tc.n, tc.truncated)
		}
	}
}

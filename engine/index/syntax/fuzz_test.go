package syntax

import (
	"os"
	"path/filepath"
	"testing"
)

// fuzzLangs are the languages FuzzAnalyze picks from; the last is a text
// language, which exercises the paragraph chunker alone.
var fuzzLangs = []Lang{
	LangGo, LangPython, LangJavaScript, LangTypeScript, LangTSX,
	LangRust, LangJava, LangC, LangCPP, LangMarkdown,
}

// FuzzAnalyze feeds arbitrary bytes to Analyze as each language, with
// arbitrary chunk limits, and checks that it neither panics nor breaks
// the Analysis invariants.
func FuzzAnalyze(f *testing.F) {
	langIndex := func(l Lang) uint8 {
		for i, x := range fuzzLangs {
			if x == l {
				return uint8(i)
			}
		}
		return uint8(len(fuzzLangs) - 1)
	}
	for _, tc := range symbolCases {
		f.Add(langIndex(tc.lang), uint8(0), uint8(0), []byte(tc.src))
		f.Add(langIndex(tc.lang), uint8(4), uint8(2), []byte(tc.src))
	}
	paths, _ := filepath.Glob(filepath.Join("testdata", "*.*"))
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(langIndex(Detect(p, src)), uint8(10), uint8(3), src)
	}
	for i := range fuzzLangs {
		f.Add(uint8(i), uint8(0), uint8(0), []byte(""))
		f.Add(uint8(i), uint8(1), uint8(1), []byte("\x00\xff\n\n}{)(\n\"unterminated\n/* open"))
		f.Add(uint8(i), uint8(2), uint8(0), []byte("class A {\n  def f(:\n    fn g() { struct S; }\n}\n}\n"))
	}
	f.Fuzz(func(t *testing.T, li, max, min uint8, src []byte) {
		lang := fuzzLangs[int(li)%len(fuzzLangs)]
		opts := Options{MaxChunkLines: int(max % 64), MinChunkLines: int(min % 16)}
		a, err := Analyze(lang, src, opts)
		if err != nil {
			t.Fatalf("%s: %v", lang, err)
		}
		if msg := checkAnalysis(src, a, opts); msg != "" {
			t.Fatalf("%s %+v: %s", lang, opts, msg)
		}
	})
}

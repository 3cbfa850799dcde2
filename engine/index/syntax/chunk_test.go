package syntax

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func chunkStrings(chunks []Chunk) []string {
	out := make([]string, len(chunks))
	for i, c := range chunks {
		out[i] = fmt.Sprintf("%d-%d %s %s %d", c.StartLine, c.EndLine, c.Kind, c.Name, c.Part)
	}
	return out
}

// numbered returns n lines "<prefix>1" ... "<prefix>n" with a blank line
// after every every-th line (none when every is 0).
func numbered(prefix string, n, every int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%s%d\n", prefix, i)
		if every > 0 && i%every == 0 && i < n {
			b.WriteString("\n")
		}
	}
	return b.String()
}

func TestChunks(t *testing.T) {
	tests := []struct {
		name string
		lang Lang
		src  string
		opts Options
		want []string
	}{
		{
			name: "go: header joins the first function, small trailer joins the last",
			lang: LangGo,
			src: `package p

import "fmt"

func Hello() {
	fmt.Println("a")
	fmt.Println("b")
	fmt.Println("c")
}

func World() {
	fmt.Println("a")
	fmt.Println("b")
	fmt.Println("c")
}
var x = 1
`,
			want: []string{
				"1-9 function Hello 0",
				"11-16 function World 0",
			},
		},
		{
			name: "go: a long function is cut at blank lines into parts",
			lang: LangGo,
			// Lines 3-4 header, then 3 blocks of 6 lines and a closing brace.
			src:  "package p\n\nfunc Long() {\n" + numbered("\tx = ", 18, 6) + "}\n",
			opts: Options{MaxChunkLines: 10, MinChunkLines: 2},
			// The function spans 3-24: "func", 6 lines, blank, 6, blank,
			// 6, "}". The package clause joins the first part.
			want: []string{
				"1-9 function Long 1",
				"11-16 function Long 2",
				"18-24 function Long 3",
			},
		},
		{
			name: "go: short definitions stay with the code around them",
			lang: LangGo,
			src: `package p

const A = 1
const B = 2

type K int

func (k K) String() string { return "k" }
`,
			want: []string{"1-8 const A 0"},
		},
		{
			name: "python: a long class is cut around its methods",
			lang: LangPython,
			src: `class Store:
    """Keeps things."""

    limit = 3
    timeout = 5

    def put(self, k, v):
        self.check(k)
        self.items[k] = v
        self.count += 1
        return v

    def get(self, k):
        self.check(k)
        v = self.items[k]
        self.hits += 1
        return v

    def check(self, k): pass
`,
			opts: Options{MaxChunkLines: 10},
			want: []string{
				"1-5 class Store 1",
				"7-11 method Store.put 0",
				"13-19 method Store.get 0", // the one-line check joins the previous method
			},
		},
		{
			name: "rust: a module is cut around its items however short",
			lang: LangRust,
			src: `mod tests {
    use super::*;

    fn first() {
        let a = 1;
        let b = 2;
        assert_eq!(a + 1, b);
    }

    fn second() {
        let a = 1;
        let b = 2;
        assert_eq!(a + 1, b);
    }
}
`,
			want: []string{
				"1-8 function tests.first 0", // "mod tests {" and the use joined the first function
				"10-15 function tests.second 0",
			},
		},
		{
			name: "text: paragraphs packed up to the limit",
			lang: LangText,
			src:  numbered("line ", 12, 3),
			opts: Options{MaxChunkLines: 8, MinChunkLines: 1},
			// Paragraphs of 3 lines at 1-3, 5-7, 9-11, 13-15.
			want: []string{"1-7   0", "9-15   0"},
		},
		{
			name: "text: a paragraph longer than the limit is cut hard",
			lang: LangText,
			src:  numbered("w", 9, 0),
			opts: Options{MaxChunkLines: 4, MinChunkLines: 1},
			want: []string{"1-4   0", "5-8   0", "9-9   0"},
		},
		{
			name: "markdown: headings start chunks",
			lang: LangMarkdown,
			src:  "# Title\nintro\nmore\n## Part\nbody\nbody\n",
			opts: Options{MaxChunkLines: 4, MinChunkLines: 1},
			want: []string{"1-3   0", "4-6   0"},
		},
		{
			name: "empty and blank files have no chunks",
			lang: LangText,
			src:  "\n  \n\t\n",
			want: []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := Analyze(tt.lang, []byte(tt.src), tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			diffStrings(t, chunkStrings(a.Chunks), tt.want)
			if msg := checkAnalysis([]byte(tt.src), a, tt.opts); msg != "" {
				t.Error(msg)
			}
		})
	}
}

// optionSets are the settings the property tests try.
var optionSets = []Options{
	{},
	{MaxChunkLines: 40, MinChunkLines: 3},
	{MaxChunkLines: 7, MinChunkLines: 7},
	{MaxChunkLines: 1},
	{MaxChunkLines: 3, MinChunkLines: 1},
}

// TestInvariantsGoroot checks the Analysis invariants on every Go file of
// GOROOT/src (every 16th under -short or the race detector).
func TestInvariantsGoroot(t *testing.T) {
	files := gorootFiles(t, ".go", ".c", ".h", ".s", ".py", ".js", ".md", ".sh")
	step := 1
	if testing.Short() || raceEnabled {
		step = 16
	}
	checked := 0
	for i := 0; i < len(files); i += step {
		src, err := os.ReadFile(files[i])
		if err != nil {
			t.Fatal(err)
		}
		lang := Detect(files[i], src)
		// Every file with the defaults; a sample with the others.
		sets := optionSets[:1]
		if i%(7*step) == 0 {
			sets = optionSets
		}
		for _, opts := range sets {
			a, err := Analyze(lang, src, opts)
			if err != nil {
				t.Fatalf("%s: %v", files[i], err)
			}
			if msg := checkAnalysis(src, a, opts); msg != "" {
				t.Fatalf("%s %+v: %s", files[i], opts, msg)
			}
		}
		checked++
	}
	t.Logf("checked %d files", checked)
}

// TestInvariantsTestdata checks the invariants on the realistic sources
// in testdata and the symbol test cases, with every option set.
func TestInvariantsTestdata(t *testing.T) {
	type input struct {
		name string
		lang Lang
		src  []byte
	}
	var inputs []input
	paths, err := filepath.Glob(filepath.Join("testdata", "*.*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, input{p, Detect(p, src), src})
	}
	for _, tc := range symbolCases {
		inputs = append(inputs, input{tc.name, tc.lang, []byte(tc.src)})
	}
	for _, in := range inputs {
		for _, opts := range optionSets {
			a, err := Analyze(in.lang, in.src, opts)
			if err != nil {
				t.Fatalf("%s: %v", in.name, err)
			}
			if Supported(in.lang) && len(a.Symbols) == 0 {
				t.Errorf("%s: no symbols", in.name)
			}
			if msg := checkAnalysis(in.src, a, opts); msg != "" {
				t.Errorf("%s %+v: %s", in.name, opts, msg)
			}
		}
	}
}

// TestInvariantsCorpus checks the invariants on every file under the
// directory named by PLEXUS_SYNTAX_CORPUS (a checkout of any project), and
// logs throughput per language. It is skipped when the variable is unset.
func TestInvariantsCorpus(t *testing.T) {
	root := os.Getenv("PLEXUS_SYNTAX_CORPUS")
	if root == "" {
		t.Skip("PLEXUS_SYNTAX_CORPUS not set")
	}
	type stat struct {
		files, bytes, symbols int
		took                  time.Duration
	}
	stats := map[Lang]*stat{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		lang := Detect(path, src[:min(len(src), 512)])
		start := time.Now()
		a, err := Analyze(lang, src, Options{})
		took := time.Since(start)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			return nil
		}
		if msg := checkAnalysis(src, a, Options{}); msg != "" {
			t.Errorf("%s: %s", path, msg)
		}
		s := stats[lang]
		if s == nil {
			s = &stat{}
			stats[lang] = s
		}
		s.files++
		s.bytes += len(src)
		s.symbols += len(a.Symbols)
		s.took += took
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for lang, s := range stats {
		t.Logf("%-10s %6d files %8.2f MB %9v %7.1f MB/s %7d symbols", lang, s.files,
			float64(s.bytes)/1e6, s.took.Round(time.Millisecond), float64(s.bytes)/1e6/s.took.Seconds(), s.symbols)
	}
}

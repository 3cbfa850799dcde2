package main

// The documentation's code blocks are checked here, so that what a user
// copies from the README or a package doc works:
//
//   - Shell blocks (README ```sh, and package doc blocks that start with a
//     command) must parse as bash; every plexus command in them must
//     exist with the flags given and an accepted number of arguments; a
//     path into the repository (./x, examples/..., replay:examples/...)
//     must exist; `go test -run R PKG` must name tests of PKG (and
//     -bench R its benchmarks); `npm ci --prefix DIR` needs DIR's
//     package-lock.json; options of the repository's own scripts must
//     appear in the script. Commands that need a model server or the
//     network are not run: the first-hour test (offline_test.go) runs the
//     tour, the HTTP server and the plugin tutorial.
//   - Go blocks must type-check: a whole file as it is, declarations or
//     statements inside a generated package, with the imports their
//     package names imply (the repository's packages and the standard
//     library's) and these givens, which a fragment may use without
//     declaring them: ctx (context.Context), eng (*engine.Engine), ws
//     (*engine.Workspace), logger (*slog.Logger), path and dir (string).
//     A line that is only "..." stands for code left out. Variables
//     declared and not used are allowed. A Go block after a paragraph
//     ending with ":" that names one Go file of the repository (say
//     "from examples/plexus-tool-loc/main.go:") is an excerpt of it
//     instead: each of its code lines (not blank, not a comment, without
//     "..." or "…") must be a line of that file, in the file's order.
//   - JSON blocks (README ```json, and package doc blocks that start with
//     { or [) must be valid JSON, or JSON lines; a package doc block that
//     is neither must show where it leaves something out ("..." or "…").
//   - In the README's text, each inline `plexus ...` names an existing
//     command and flags it has, and each inline `--flag` is a flag of
//     some plexus command.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/doc/comment"
	"go/importer"
	"go/parser"
	"go/token"
	gotypes "go/types"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"mvdan.cc/sh/v3/syntax"
)

// docBlock is one code block of the documentation.
type docBlock struct {
	where string // FILE:LINE, or FILE (block N) for package docs
	lang  string // "sh", "go", "json"; "" when not checked
	text  string
	// para is the text of the paragraph just before the block.
	para string
}

func TestDocBlocks(t *testing.T) {
	blocks := readmeBlocks(t, filepath.Join(repoRoot, "README.md"))
	blocks = append(blocks, packageDocBlocks(t)...)
	counts := map[string]int{}
	var goBlocks []docBlock
	for _, b := range blocks {
		counts[b.lang]++
		switch b.lang {
		case "sh":
			t.Run(b.where, func(t *testing.T) { checkShellBlock(t, b) })
		case "json":
			t.Run(b.where, func(t *testing.T) { checkJSONBlock(t, b) })
		case "go":
			goBlocks = append(goBlocks, b)
		}
	}
	checkGoBlocks(t, goBlocks)
	if counts["sh"] < 10 || counts["go"] < 5 || counts["json"] < 5 {
		t.Errorf("found %v blocks by language; the README alone has more: is the block extraction broken?", counts)
	}
}

// TestDocBlockChecksFail: the checks catch what item 10 of issue 20 found
// and the mistakes they exist for.
func TestDocBlockChecksFail(t *testing.T) {
	for _, b := range []docBlock{
		{where: "unknown command", lang: "sh", text: "bin/plexus modles\n"},
		{where: "unknown flag", lang: "sh", text: "bin/plexus run --modle replay:examples/replay/tour.jsonl hi\n"},
		{where: "missing file", lang: "sh", text: "bin/plexus run --model replay:examples/replay/nowhere.jsonl hi\n"},
		{where: "no such test", lang: "sh", text: "go test -run TestNoSuchThing ./engine/\n"},
		{where: "bad shell", lang: "sh", text: "echo 'unterminated\n"},
		{where: "bad json", lang: "json", text: `{"a": 1,}`},
	} {
		ft := &fakeT{}
		switch b.lang {
		case "sh":
			checkShellBlock(ft, b)
		case "json":
			checkJSONBlock(ft, b)
		}
		if !ft.failed {
			t.Errorf("%s: not caught", b.where)
		}
	}
	undefined := docBlock{where: "must helper", lang: "go", text: "ts := plugintest.StartTool(nil, must(plugins.NewToolset()))\n_ = ts\n"}
	if errs := goBlockErrors(t, []docBlock{undefined}); len(errs[undefined.where]) == 0 {
		t.Error("a call of an undefined must helper was not caught")
	}
	excerpt := docBlock{where: "stale excerpt", lang: "go", text: "func main() { plugins.Serve(plugins.NewTool(countLinez{})) }\n",
		para: "The complete example is examples/plexus-tool-loc/main.go:"}
	if errs := goBlockErrors(t, []docBlock{excerpt}); len(errs[excerpt.where]) == 0 {
		t.Error("an excerpt that is not in its file was not caught")
	}
}

// fakeT records failures for TestDocBlockChecksFail.
type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Helper()               {}
func (f *fakeT) Errorf(string, ...any) { f.failed = true }
func (f *fakeT) Fatalf(string, ...any) { f.failed = true; panic(fakeFatal{}) }

type fakeFatal struct{}

var fenceRe = regexp.MustCompile("^```([a-z]*)\\s*$")

// readmeBlocks returns the fenced code blocks of a Markdown file.
func readmeBlocks(t *testing.T, path string) []docBlock {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(repoRoot, path)
	var out []docBlock
	var para []string
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		m := fenceRe.FindStringSubmatch(lines[i])
		if m == nil {
			if strings.TrimSpace(lines[i]) == "" {
				if len(para) > 0 && !strings.HasPrefix(strings.TrimSpace(lines[i+min(1, len(lines)-1-i)]), "```") {
					para = nil
				}
			} else {
				para = append(para, lines[i])
			}
			continue
		}
		start := i + 1
		j := start
		for j < len(lines) && !strings.HasPrefix(lines[j], "```") {
			j++
		}
		lang := m[1]
		switch lang {
		case "sh", "bash", "shell":
			lang = "sh"
		case "go", "json":
		default:
			lang = ""
		}
		out = append(out, docBlock{where: fmt.Sprintf("%s:%d", rel, start), lang: lang,
			text: strings.Join(lines[start:j], "\n") + "\n", para: strings.Join(para, " ")})
		para = nil
		i = j
	}
	return out
}

// packageDocBlocks returns the code blocks of every package doc comment
// of the repository (non-test files), classified by their first line.
func packageDocBlocks(t *testing.T) []docBlock {
	var out []docBlock
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != repoRoot && (n == "node_modules" || n == "testdata" || strings.HasPrefix(n, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil || f.Doc == nil {
			return nil
		}
		rel, _ := filepath.Rel(repoRoot, p)
		var pr comment.Parser
		doc := pr.Parse(f.Doc.Text())
		n := 0
		for i, blk := range doc.Content {
			c, ok := blk.(*comment.Code)
			if !ok {
				continue
			}
			n++
			para := ""
			if i > 0 {
				para = blockText(doc.Content[i-1])
			}
			out = append(out, docBlock{where: fmt.Sprintf("%s (block %d)", rel, n), lang: docBlockLang(c.Text), text: c.Text, para: para})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// blockText is the plain text of a doc comment paragraph or list.
func blockText(b comment.Block) string {
	var sb strings.Builder
	var text func([]comment.Text)
	text = func(ts []comment.Text) {
		for _, x := range ts {
			switch x := x.(type) {
			case comment.Plain:
				sb.WriteString(string(x))
			case comment.Italic:
				sb.WriteString(string(x))
			case *comment.Link:
				text(x.Text)
			case *comment.DocLink:
				text(x.Text)
			}
		}
	}
	switch b := b.(type) {
	case *comment.Paragraph:
		text(b.Text)
	case *comment.List:
		for _, it := range b.Items {
			for _, c := range it.Content {
				if p, ok := c.(*comment.Paragraph); ok {
					text(p.Text)
				}
			}
		}
	}
	return sb.String()
}

// shellCommands are the first words that make a package doc block a
// shell block.
var shellCommands = []string{"plexus", "bin/plexus", "go", "npm", "node", "curl", "export", "cd", "scripts/test.sh"}

// docBlockLang classifies a package doc code block: JSON, shell, Go, or
// "" (a grammar, an output sample, a table).
func docBlockLang(text string) string {
	s := strings.TrimSpace(text)
	if s == "" {
		return ""
	}
	if s[0] == '[' || s[0] == '{' && (len(s) == 1 || strings.ContainsRune("\"}\n ", rune(s[1]))) {
		return "json"
	}
	first := strings.Fields(s)[0]
	if slices.Contains(shellCommands, first) || regexp.MustCompile(`^[A-Z_]+=`).MatchString(first) {
		return "sh"
	}
	if _, _, err := parseGoBlock(token.NewFileSet(), text); err == nil {
		return "go"
	}
	return ""
}

func checkJSONBlock(t testing.TB, b docBlock) {
	t.Helper()
	defer recoverFake()
	if json.Valid([]byte(b.text)) {
		return
	}
	lines := true
	for _, l := range strings.Split(strings.TrimSpace(b.text), "\n") {
		if !json.Valid([]byte(l)) {
			lines = false
		}
	}
	if lines {
		return
	}
	if !strings.HasPrefix(b.where, "README") && (strings.Contains(b.text, "...") || strings.Contains(b.text, "…")) {
		return // a shape with parts left out, marked as such
	}
	var v any
	err := json.Unmarshal([]byte(b.text), &v)
	t.Errorf("%s: not valid JSON (%v):\n%s", b.where, err, b.text)
}

func recoverFake() {
	if r := recover(); r != nil {
		if _, ok := r.(fakeFatal); !ok {
			panic(r)
		}
	}
}

// checkShellBlock parses a shell block and checks each simple command it
// runs.
func checkShellBlock(t testing.TB, b docBlock) {
	t.Helper()
	defer recoverFake()
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(b.text), b.where)
	if err != nil {
		t.Fatalf("%s: not valid shell: %v\n%s", b.where, err, b.text)
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		ce, ok := n.(*syntax.CallExpr)
		if !ok || len(ce.Args) == 0 {
			return true
		}
		args := make([]string, len(ce.Args))
		for i, w := range ce.Args {
			args[i] = wordValue(w)
		}
		checkCommand(t, b.where, args)
		return true
	})
}

// wordValue is a shell word's value when it is static; $PWD is the
// repository root (the README's commands run there); other expansions
// become "X".
func wordValue(w *syntax.Word) string {
	var sb strings.Builder
	var parts func([]syntax.WordPart)
	parts = func(ps []syntax.WordPart) {
		for _, p := range ps {
			switch p := p.(type) {
			case *syntax.Lit:
				sb.WriteString(p.Value)
			case *syntax.SglQuoted:
				sb.WriteString(p.Value)
			case *syntax.DblQuoted:
				parts(p.Parts)
			case *syntax.ParamExp:
				if p.Param != nil && p.Param.Value == "PWD" {
					sb.WriteString(repoRoot)
				} else {
					sb.WriteString("X")
				}
			default:
				sb.WriteString("X")
			}
		}
	}
	parts(w.Parts)
	return sb.String()
}

// checkCommand checks one simple command of a shell block.
func checkCommand(t testing.TB, where string, args []string) {
	t.Helper()
	for _, a := range args {
		checkRepoPath(t, where, a)
	}
	switch prog := args[0]; {
	case prog == "plexus" || prog == "bin/plexus":
		checkPlexusCommand(t, where, args[1:])
	case prog == "go" && len(args) > 1 && args[1] == "test":
		checkGoTest(t, where, args[2:])
	case prog == "npm":
		for i, a := range args {
			if a == "--prefix" && i+1 < len(args) {
				if _, err := os.Stat(filepath.Join(repoRoot, args[i+1], "package-lock.json")); err != nil {
					t.Errorf("%s: npm --prefix %s: no package-lock.json there", where, args[i+1])
				}
			}
		}
	case strings.HasPrefix(prog, "scripts/") || strings.HasPrefix(prog, ".ci/"):
		script, err := os.ReadFile(filepath.Join(repoRoot, prog))
		if err != nil {
			t.Errorf("%s: %s: %v", where, prog, err)
			return
		}
		for _, a := range args[1:] {
			if strings.HasPrefix(a, "--") && !bytes.Contains(script, []byte(a)) {
				t.Errorf("%s: %s has no option %s", where, prog, a)
			}
		}
	}
}

// checkRepoPath checks that a word naming a path into the repository (its
// first element a top-level entry, or ./) exists; "replay:" and
// "-modfile=" prefixes are taken off, and a trailing "/..." too.
func checkRepoPath(t testing.TB, where, word string) {
	t.Helper()
	for _, prefix := range []string{"replay:", "-modfile="} {
		word = strings.TrimPrefix(word, prefix)
	}
	word = strings.TrimSuffix(word, "/...")
	if root := repoRoot + "/"; strings.HasPrefix(word, root) {
		word = strings.TrimPrefix(word, root)
	}
	if strings.HasPrefix(word, "./") {
		word = strings.TrimPrefix(word, "./")
	} else {
		first, _, ok := strings.Cut(word, "/")
		if !ok || first == "" || strings.ContainsAny(word, " $*{}\"'") {
			return
		}
		if _, err := os.Stat(filepath.Join(repoRoot, first)); err != nil {
			return // not a path into the repository
		}
	}
	if word == "" || word == "..." {
		return
	}
	if _, err := os.Stat(filepath.Join(repoRoot, word)); err != nil {
		t.Errorf("%s: %s does not exist in the repository", where, word)
	}
}

// checkPlexusCommand checks that args name a plexus command, with flags
// it has and arguments it accepts.
func checkPlexusCommand(t testing.TB, where string, args []string) {
	t.Helper()
	root := newRootCmd(strings.NewReader(""), io.Discard, io.Discard)
	cmd, rest, err := root.Find(args)
	if err != nil || cmd == root && len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		t.Errorf("%s: plexus %s: no such command (%v)", where, strings.Join(args, " "), err)
		return
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Errorf("%s: plexus %s: %v", where, strings.Join(args, " "), err)
		return
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
		t.Errorf("%s: plexus %s: %v", where, strings.Join(args, " "), err)
	}
}

// checkGoTest checks that -run and -bench of `go test` match functions of
// the named packages.
func checkGoTest(t testing.TB, where string, args []string) {
	t.Helper()
	var run, bench string
	var pkgs []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-run" || a == "-bench":
			if i+1 < len(args) {
				if a == "-run" {
					run = args[i+1]
				} else {
					bench = args[i+1]
				}
				i++
			}
		case strings.HasPrefix(a, "-run="):
			run = strings.TrimPrefix(a, "-run=")
		case strings.HasPrefix(a, "-bench="):
			bench = strings.TrimPrefix(a, "-bench=")
		case a == "-count" || a == "-benchtime" || a == "-timeout" || a == "-p":
			i++
		case strings.HasPrefix(a, "./"):
			pkgs = append(pkgs, strings.TrimSuffix(strings.TrimPrefix(a, "./"), "/..."))
		}
	}
	for _, pkg := range pkgs {
		funcs := testFuncs(t, filepath.Join(repoRoot, pkg))
		match := func(flag, expr, prefix string) {
			if expr == "" || expr == "^$" || expr == "." {
				return
			}
			top, _, _ := strings.Cut(expr, "/")
			re, err := regexp.Compile(top)
			if err != nil {
				t.Errorf("%s: go test %s %q: %v", where, flag, expr, err)
				return
			}
			for _, f := range funcs {
				if strings.HasPrefix(f, prefix) && re.MatchString(f) {
					return
				}
			}
			t.Errorf("%s: go test %s %q matches no %s function of ./%s", where, flag, expr, prefix, pkg)
		}
		match("-run", run, "")
		match("-bench", bench, "Benchmark")
	}
}

// testFuncs lists the Test, Benchmark, Example and Fuzz functions of the
// package in dir.
func testFuncs(t testing.TB, dir string) []string {
	files, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
	var out []string
	for _, f := range files {
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		for _, d := range af.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil {
				for _, p := range []string{"Test", "Benchmark", "Example", "Fuzz"} {
					if strings.HasPrefix(fd.Name.Name, p) {
						out = append(out, fd.Name.Name)
					}
				}
			}
		}
	}
	return out
}

// goGivens are the variables a Go fragment may use without declaring
// them.
var goGivens = map[string]string{
	"ctx":    "context.Context",
	"eng":    "*engine.Engine",
	"ws":     "*engine.Workspace",
	"logger": "*slog.Logger",
	"path":   "string",
	"dir":    "string",
}

// stdPackages maps the package names Go fragments use to standard
// library import paths.
var stdPackages = map[string]string{
	"context": "context", "json": "encoding/json", "errors": "errors", "fmt": "fmt", "io": "io",
	"slog": "log/slog", "net": "net", "http": "net/http", "os": "os", "exec": "os/exec",
	"filepath": "path/filepath", "strings": "strings", "testing": "testing", "time": "time", "sync": "sync",
	"signal": "os/signal", "syscall": "syscall",
}

// parseGoBlock parses a Go block as a file, declarations or statements,
// returning it as a file of package snippet (statements go inside
// func _() error, so that they may return an error) and its source.
func parseGoBlock(fset *token.FileSet, text string) (*ast.File, string, error) {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if s := strings.TrimSpace(l); s == "..." || s == "…" {
			lines[i] = ""
		}
	}
	text = strings.Join(lines, "\n")
	var firstErr error
	for _, src := range []string{text, "package snippet\n" + text, "package snippet\nfunc _() error {\n" + text + "\nreturn nil\n}\n"} {
		f, err := parser.ParseFile(fset, "snippet.go", src, parser.SkipObjectResolution)
		if err == nil {
			if f.Name.Name != "snippet" {
				src = strings.Replace(src, "package "+f.Name.Name, "package snippet", 1)
				f, err = parser.ParseFile(fset, "snippet.go", src, parser.SkipObjectResolution)
			}
			if err == nil {
				return f, src, nil
			}
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, "", firstErr
}

func checkGoBlocks(t *testing.T, blocks []docBlock) {
	errs := goBlockErrors(t, blocks)
	for _, b := range blocks {
		for _, e := range errs[b.where] {
			t.Errorf("%s: %s\n%s", b.where, e, b.text)
		}
	}
}

// excerptRe finds the Go files a paragraph names.
var excerptRe = regexp.MustCompile(`[A-Za-z0-9_./-]+\.go\b`)

// excerptOf is the repository's Go file that a block is an excerpt of:
// the one Go file its paragraph names when the paragraph ends with ":".
func excerptOf(para string) string {
	para = strings.TrimSpace(para)
	if !strings.HasSuffix(para, ":") {
		return ""
	}
	if i := strings.LastIndex(para, ". "); i >= 0 {
		para = para[i+2:] // the last sentence
	}
	var found []string
	for _, m := range excerptRe.FindAllString(para, -1) {
		if fi, err := os.Stat(filepath.Join(repoRoot, m)); err == nil && !fi.IsDir() && !slices.Contains(found, m) {
			found = append(found, m)
		}
	}
	if len(found) != 1 {
		return ""
	}
	return found[0]
}

// goBlockErrors type-checks Go blocks (or checks excerpts against their
// files) and returns the problems by block.
func goBlockErrors(t *testing.T, blocks []docBlock) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	type parsed struct {
		b       docBlock
		f       *ast.File
		imports map[string]string // name → path
	}
	fset := token.NewFileSet()
	pkgNames := repoPackageNames(t)
	var todo []parsed
	paths := map[string]bool{"context": true, "log/slog": true, modulePath + "/engine": true}
	for _, b := range blocks {
		if file := excerptOf(b.para); file != "" {
			out[b.where] = append(out[b.where], excerptErrors(file, b.text)...)
			continue
		}
		f, _, err := parseGoBlock(fset, b.text)
		if err != nil {
			out[b.where] = append(out[b.where], "does not parse as Go: "+err.Error())
			continue
		}
		p := parsed{b: b, f: f, imports: map[string]string{}}
		for _, im := range f.Imports {
			paths[strings.Trim(im.Path.Value, `"`)] = true
		}
		if len(f.Imports) == 0 {
			ast.Inspect(f, func(n ast.Node) bool {
				if se, ok := n.(*ast.SelectorExpr); ok {
					if id, ok := se.X.(*ast.Ident); ok {
						if path, ok := pkgNames[id.Name]; ok {
							p.imports[id.Name] = path
							paths[path] = true
						} else if path, ok := stdPackages[id.Name]; ok {
							p.imports[id.Name] = path
							paths[path] = true
						}
					}
				}
				return true
			})
		}
		todo = append(todo, p)
	}
	exports := exportData(t, slices.Sorted(func(yield func(string) bool) {
		for p := range paths {
			if !yield(p) {
				return
			}
		}
	}))
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s (go list -export)", path)
		}
		return os.Open(file)
	})
	for _, p := range todo {
		// First without givens, to see which it uses.
		used := map[string]bool{}
		check := func(extra *ast.File) []string {
			var errs []string
			conf := gotypes.Config{Importer: imp, Error: func(err error) {
				msg := err.(gotypes.Error).Msg
				if strings.HasPrefix(msg, "declared and not used") {
					return
				}
				if name, ok := strings.CutPrefix(msg, "undefined: "); ok && goGivens[name] != "" && extra == nil {
					used[name] = true
					return
				}
				errs = append(errs, err.Error())
			}}
			files := []*ast.File{withImports(fset, p.f, p.imports)}
			if extra != nil {
				files = append(files, extra)
			}
			conf.Check("snippet", fset, files, nil)
			return errs
		}
		errs := check(nil)
		if len(used) > 0 {
			var src strings.Builder
			src.WriteString("package snippet\n\nimport (\n\t\"context\"\n\t\"log/slog\"\n\n\t\"" + modulePath + "/engine\"\n)\n\nvar (\n")
			for name := range used {
				fmt.Fprintf(&src, "\t%s %s\n", name, goGivens[name])
			}
			src.WriteString(")\n\nvar _ context.Context\nvar _ *slog.Logger\nvar _ *engine.Engine\n")
			gf, err := parser.ParseFile(fset, "givens.go", src.String(), 0)
			if err != nil {
				t.Fatal(err)
			}
			errs = check(gf)
		}
		out[p.b.where] = append(out[p.b.where], errs...)
	}
	return out
}

// withImports returns f with import declarations for imports added.
func withImports(fset *token.FileSet, f *ast.File, imports map[string]string) *ast.File {
	if len(imports) == 0 {
		return f
	}
	var src bytes.Buffer
	src.WriteString("package snippet\n\nimport (\n")
	names := make([]string, 0, len(imports))
	for n := range imports {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&src, "\t%s %q\n", n, imports[n])
	}
	src.WriteString(")\n")
	imf, err := parser.ParseFile(fset, "imports.go", src.String(), 0)
	if err != nil {
		panic(err)
	}
	g := *f
	g.Decls = append(append([]ast.Decl{}, imf.Decls...), f.Decls...)
	g.Imports = append(append([]*ast.ImportSpec{}, imf.Imports...), f.Imports...)
	return &g
}

// excerptErrors checks that each code line of an excerpt is a line of
// file (trimmed), in order.
func excerptErrors(file, text string) []string {
	data, err := os.ReadFile(filepath.Join(repoRoot, file))
	if err != nil {
		return []string{err.Error()}
	}
	var have []string
	for _, l := range strings.Split(string(data), "\n") {
		have = append(have, strings.TrimSpace(l))
	}
	var errs []string
	at := 0
	for _, l := range strings.Split(text, "\n") {
		s := strings.TrimSpace(l)
		if s == "" || strings.HasPrefix(s, "//") || strings.Contains(s, "...") || strings.Contains(s, "…") {
			continue
		}
		i := slices.Index(have[at:], s)
		if i < 0 {
			if slices.Contains(have, s) {
				errs = append(errs, fmt.Sprintf("excerpt of %s: %q is out of the file's order", file, s))
			} else {
				errs = append(errs, fmt.Sprintf("excerpt of %s: %q is not a line of it", file, s))
			}
			continue
		}
		at += i + 1
	}
	return errs
}

const modulePath = "github.com/plexus-agent/plexus"

// repoPackageNames maps the names of the repository's importable packages
// to their import paths (a name two packages share maps to neither).
func repoPackageNames(t *testing.T) map[string]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.Name}} {{.ImportPath}}", "./...")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	names := map[string]string{}
	dup := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		name, path, _ := strings.Cut(sc.Text(), " ")
		if name == "main" {
			continue
		}
		if _, taken := names[name]; taken {
			dup[name] = true
		}
		names[name] = path
	}
	for n := range dup {
		delete(names, n)
	}
	return names
}

// exportData returns the export data files of the packages, building
// them if needed (go list -export).
func exportData(t *testing.T, paths []string) map[string]string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-export", "-f", "{{.ImportPath}} {{.Export}}"}, paths...)...)
	cmd.Dir = repoRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v\n%s", err, stderr.String())
	}
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if path, file, ok := strings.Cut(sc.Text(), " "); ok && file != "" {
			m[path] = file
		}
	}
	return m
}

// inlineCodeRe finds inline code spans of Markdown text.
var inlineCodeRe = regexp.MustCompile("`([^`\n]+)`")

// flagRe finds long flags.
var flagRe = regexp.MustCompile(`(?:^|[\s\[/(])(--[a-z][a-z0-9-]*)`)

// TestReadmeInlineCommands: each inline `plexus ...` of the README names
// an existing command and only flags it has; each inline `--flag` is a
// flag of some plexus command; the global flags' defaults name the
// variables --help names.
func TestReadmeInlineCommands(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	root := newRootCmd(strings.NewReader(""), io.Discard, io.Discard)
	allFlags := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) { allFlags["--"+f.Name] = true })
		c.PersistentFlags().VisitAll(func(f *pflag.Flag) { allFlags["--"+f.Name] = true })
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	// The global flags' paragraph names the same defaults as --help: every
	// $VARIABLE a flag's usage names.
	text := string(data)
	start := strings.Index(text, "Global flags:")
	end := strings.Index(text[max(start, 0):], "Exit\ncodes")
	if start < 0 || end < 0 {
		t.Fatal("the README has no \"Global flags:\" paragraph ending with the exit codes")
	}
	global := text[start : start+end]
	root.PersistentFlags().VisitAll(func(f *pflag.Flag) {
		if !strings.Contains(global, "`--"+f.Name) {
			return
		}
		for _, v := range regexp.MustCompile(`\$[A-Z_]+`).FindAllString(f.Usage, -1) {
			if !strings.Contains(global, v) {
				t.Errorf("README's global flags: --%s's default names %s in --help (%q), not in the README", f.Name, v, f.Usage)
			}
		}
	})
	inFence := false
	for i, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, m := range inlineCodeRe.FindAllStringSubmatch(line, -1) {
			span := m[1]
			where := fmt.Sprintf("README.md:%d: `%s`", i+1, span)
			switch {
			case strings.HasPrefix(span, "plexus ") || strings.HasPrefix(span, "bin/plexus "):
				checkInlineCommand(t, where, span)
			case strings.HasPrefix(span, "--"):
				for _, f := range flagRe.FindAllStringSubmatch(span, -1) {
					if !allFlags[f[1]] {
						t.Errorf("%s: no plexus command has %s", where, f[1])
					}
				}
			}
		}
	}
}

// checkInlineCommand checks a `plexus SUB [--flag X] ...` span: the
// leading lowercase words (alternatives split at |) name commands, each of
// which has every --flag of the span.
func checkInlineCommand(t *testing.T, where, span string) {
	t.Helper()
	span = strings.ReplaceAll(span, `\|`, "|") // escaped in Markdown tables
	words := strings.Fields(span)[1:]
	var path []string
	for _, w := range words {
		if w == "" || !regexp.MustCompile(`^[a-z][a-z|-]*$`).MatchString(w) {
			break
		}
		path = append(path, w)
	}
	// Expand alternatives: "list|show" gives two commands.
	cmds := [][]string{{}}
	for _, w := range path {
		var next [][]string
		for _, alt := range strings.Split(w, "|") {
			if alt == "" {
				continue
			}
			for _, c := range cmds {
				next = append(next, append(slices.Clone(c), alt))
			}
		}
		cmds = next
	}
	flags := flagRe.FindAllStringSubmatch(span, -1)
	for _, c := range cmds {
		root := newRootCmd(strings.NewReader(""), io.Discard, io.Discard)
		cmd, rest, err := root.Find(c)
		if err != nil {
			t.Errorf("%s: plexus %s: %v", where, strings.Join(c, " "), err)
			continue
		}
		if len(rest) > 0 && len(cmd.Commands()) > 0 {
			t.Errorf("%s: plexus %s has no subcommand %s", where, cmd.Name(), rest[0])
			continue
		}
		for _, f := range flags {
			name := strings.TrimPrefix(f[1], "--")
			if cmd.Flags().Lookup(name) == nil && cmd.InheritedFlags().Lookup(name) == nil {
				t.Errorf("%s: plexus %s has no flag %s", where, strings.Join(c, " "), f[1])
			}
		}
	}
}

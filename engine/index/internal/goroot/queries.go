package goroot

import (
	"cmp"
	"fmt"
	"go/doc"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
)

// newRand returns the generator of a seed. Every draw walks candidates in
// a sorted order, so a seed gives the same queries on the same corpus.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

// draw returns k distinct elements of sorted (all when k ≥ len), in random
// order.
func draw[T any](r *rand.Rand, sorted []T, k int) []T {
	s := slices.Clone(sorted)
	r.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
	return s[:min(k, len(s))]
}

// weighted draws one key with probability proportional to its count.
type weighted struct {
	keys []string
	cum  []int // cumulative counts
}

func newWeighted(counts map[string]int, keep func(string) bool) *weighted {
	w := &weighted{}
	for k := range counts {
		if keep(k) {
			w.keys = append(w.keys, k)
		}
	}
	slices.Sort(w.keys)
	total := 0
	for _, k := range w.keys {
		total += counts[k]
		w.cum = append(w.cum, total)
	}
	return w
}

func (w *weighted) draw(r *rand.Rand) string {
	x := r.IntN(w.cum[len(w.cum)-1])
	i, _ := slices.BinarySearch(w.cum, x+1)
	return w.keys[i]
}

// primaryDecls returns the declarations of primary files that keep
// accepts, with their files, in path and source order.
func (c *Corpus) primaryDecls(keep func(*Decl) bool) []FileDecl {
	var out []FileDecl
	for _, f := range c.Files {
		if !f.Primary() {
			continue
		}
		for i := range f.Decls {
			if keep(&f.Decls[i]) {
				out = append(out, FileDecl{Path: f.Path, Decl: f.Decls[i]})
			}
		}
	}
	return out
}

// FileDecl is a declaration and its file.
type FileDecl struct {
	Path string
	Decl Decl
}

func isCode(d *Decl) bool { return d.Kind == Func || d.Kind == Method || d.Kind == Type }

// names returns the distinct names of primary functions, methods and
// types that keep accepts, sorted.
func (c *Corpus) names(keep func(string) bool) []string {
	set := map[string]bool{}
	for _, fd := range c.primaryDecls(isCode) {
		if keep(fd.Decl.Name) {
			set[fd.Decl.Name] = true
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// SymbolNames draws n distinct names of functions, methods and types
// declared in primary files: half exported, half not (as far as there are
// enough), in random order. init, main and names shorter than three bytes
// are left out.
func (c *Corpus) SymbolNames(n int, seed uint64) []string {
	r := newRand(seed)
	ok := func(s string) bool { return len(s) >= 3 && s != "init" && s != "main" }
	exp := draw(r, c.names(func(s string) bool { return ok(s) && isExported(s) }), n/2)
	unexp := draw(r, c.names(func(s string) bool { return ok(s) && !isExported(s) }), n-len(exp))
	out := append(exp, unexp...)
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func isExported(s string) bool { return s != "" && 'A' <= s[0] && s[0] <= 'Z' }

// Ident is an identifier to look up and the files that define it.
type Ident struct {
	Name string
	// Files are the primary files that declare Name at top level, as a
	// function, method, type, variable or constant, sorted.
	Files []string
}

// ExportedIdents draws n distinct exported names of functions, methods
// and types declared in primary files, with the files that define them.
// Fields and interface methods do not count as definitions.
func (c *Corpus) ExportedIdents(n int, seed uint64) []Ident {
	r := newRand(seed)
	names := draw(r, c.names(isExported), n)
	defs := map[string][]string{}
	for _, fd := range c.primaryDecls(func(*Decl) bool { return true }) {
		if l := defs[fd.Decl.Name]; len(l) == 0 || l[len(l)-1] != fd.Path {
			defs[fd.Decl.Name] = append(l, fd.Path)
		}
	}
	out := make([]Ident, len(names))
	for i, n := range names {
		out[i] = Ident{Name: n, Files: defs[n]}
	}
	return out
}

// QualifiedIdents draws n symbol queries as people write them, with the
// primary files that answer each, in random order: a third plain
// exported names (as ExportedIdents), a third Package.Name for exported
// top-level functions and types of library packages (the files of that
// package, in that directory, that declare Name; main and _test packages
// left out) and a third Type.Method for exported methods (the files that
// declare that method on that receiver type). Where one kind runs short
// the others fill in.
func (c *Corpus) QualifiedIdents(n int, seed uint64) []Ident {
	r := newRand(seed)
	plain := c.ExportedIdents(n, seed)
	type key struct{ query, dir string }
	files := map[key][]string{}
	var pkgQueries, methodQueries []key
	for _, f := range c.Files {
		if !f.Primary() || f.Package == "" || f.Package == "main" || strings.HasSuffix(f.Package, "_test") {
			continue
		}
		dir := pathDir(f.Path)
		for _, d := range f.Decls {
			if !d.Exported() {
				continue
			}
			var k key
			switch {
			case d.Kind == Method && d.Recv != "" && isExported(d.Recv):
				k = key{d.Recv + "." + d.Name, ""}
			case d.Kind == Func || d.Kind == Type:
				k = key{f.Package + "." + d.Name, dir}
			default:
				continue
			}
			if _, ok := files[k]; !ok {
				if k.dir == "" {
					methodQueries = append(methodQueries, k)
				} else {
					pkgQueries = append(pkgQueries, k)
				}
			}
			if l := files[k]; len(l) == 0 || l[len(l)-1] != f.Path {
				files[k] = append(l, f.Path)
			}
		}
	}
	less := func(a, b key) int { return strings.Compare(a.query+"\x00"+a.dir, b.query+"\x00"+b.dir) }
	slices.SortFunc(pkgQueries, less)
	slices.SortFunc(methodQueries, less)
	// Package.Name queries whose package name several directories share
	// (two "template" packages) answer with any of them.
	byQuery := map[string][]string{}
	for _, k := range pkgQueries {
		byQuery[k.query] = append(byQuery[k.query], files[k]...)
	}
	var out []Ident
	seen := map[string]bool{}
	add := func(q string, fs []string) {
		if len(out) < n && !seen[q] {
			seen[q] = true
			fs = slices.Clone(fs)
			slices.Sort(fs)
			out = append(out, Ident{Name: q, Files: slices.Compact(fs)})
		}
	}
	third := n / 3
	for _, k := range draw(r, pkgQueries, third) {
		add(k.query, byQuery[k.query])
	}
	for _, k := range draw(r, methodQueries, third) {
		add(k.query, files[k])
	}
	for _, id := range plain {
		add(id.Name, id.Files)
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func pathDir(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return "."
}

// Literals draws n distinct literal text queries, a mix of what people
// and agents grep code for, in random order:
//
//   - 50% names of functions, methods and types, drawn uniformly among
//     the distinct names (mostly rare: a handful of files);
//   - 20% method receivers as written ("func (b *Buffer)");
//   - 20% qualified calls drawn by how often they occur ("fmt.Errorf("),
//     so common ones come up as often as they are written;
//   - 10% identifiers of at least four bytes drawn by how often they occur
//     ("string", "Errorf"): the heavy tail, which makes p99 meaningful.
func (c *Corpus) Literals(n int, seed uint64) []string {
	r := newRand(seed)
	seen := map[string]bool{}
	var out []string
	take := func(s string) {
		if len(out) < n && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	nNames, nRecv, nCalls := n/2, n/5, n/5
	for _, s := range draw(r, c.names(func(s string) bool { return len(s) >= 4 }), nNames) {
		take(s)
	}
	var recvs []string
	for _, fd := range c.primaryDecls(func(d *Decl) bool { return d.Kind == Method }) {
		recvs = append(recvs, fd.Decl.RecvText)
	}
	slices.Sort(recvs)
	recvs = slices.Compact(recvs)
	for _, s := range draw(r, recvs, nRecv) {
		take(s)
	}
	calls := newWeighted(c.Calls, func(string) bool { return true })
	for want := len(out) + nCalls; len(out) < want; {
		take(calls.draw(r))
	}
	idents := newWeighted(c.Idents, func(s string) bool { return len(s) >= 4 })
	for len(out) < n {
		take(idents.draw(r))
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// Regexps draws n distinct regular expressions (RE2), each with a literal
// part for a trigram index to use, built from declarations of primary
// files in five shapes, in random order:
//
//	func \(\w+ \*?Reader\) Read\w*   methods of a type whose name starts with a word
//	DialContext\(ctx                 calls passing ctx to a function that takes it first
//	&?Request\{                      composite literals of a struct type
//	(?i)parseduration                a name, case-insensitively
//	\.WriteString\(                  calls of a method
func (c *Corpus) Regexps(n int, seed uint64) []string {
	r := newRand(seed)
	sortedUniq := func(keep func(*Decl) bool, f func(*Decl) string) []string {
		var out []string
		for _, fd := range c.primaryDecls(keep) {
			out = append(out, f(&fd.Decl))
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	shapes := [][]string{
		sortedUniq(func(d *Decl) bool { return d.Kind == Method && d.Recv != "" && !strings.Contains(d.RecvText, "[") },
			func(d *Decl) string {
				return fmt.Sprintf(`func \(\w+ \*?%s\) %s\w*`, d.Recv, firstWord(d.Name))
			}),
		sortedUniq(func(d *Decl) bool { return d.CtxFirst }, func(d *Decl) string { return regexp.QuoteMeta(d.Name) + `\(ctx` }),
		sortedUniq(func(d *Decl) bool { return d.Struct && len(d.Name) >= 4 }, func(d *Decl) string { return "&?" + d.Name + `\{` }),
		sortedUniq(func(d *Decl) bool { return isCode(d) && len(d.Name) >= 6 }, func(d *Decl) string { return "(?i)" + strings.ToLower(d.Name) }),
		sortedUniq(func(d *Decl) bool { return d.Kind == Method && isExported(d.Name) }, func(d *Decl) string { return `\.` + d.Name + `\(` }),
	}
	var out []string
	for i, s := range shapes {
		k := n / len(shapes)
		if i < n%len(shapes) {
			k++
		}
		out = append(out, draw(r, s, k)...)
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// firstWord returns a camelCase name's first word ("Read" of "ReadRune";
// the whole name when it has one word).
func firstWord(name string) string {
	for i := 1; i < len(name); i++ {
		if isUpper(name[i]) && !isUpper(name[i-1]) {
			return name[:i]
		}
	}
	return name
}

func isUpper(b byte) bool { return 'A' <= b && b <= 'Z' }

// DocFunc is a documented function or method, for the doc-comment
// evaluation.
type DocFunc struct {
	Path string
	Decl Decl
	// Sentence is the doc comment's first sentence (go/doc's synopsis).
	Sentence string
}

// Key names the function within its file: "Recv.Name" or "Name".
func (d DocFunc) Key() string { return strings.TrimPrefix(d.Decl.Recv+"."+d.Decl.Name, ".") }

// DocFuncs draws n functions and methods of primary files whose doc
// comment has its lines to itself and a first sentence of at least
// minWords words that no other doc comment of the corpus starts with (a
// copy of the function elsewhere would be as right an answer as the
// original). init functions, and functions whose name occurs twice in
// their file, are left out. The result is sorted by path and line.
func (c *Corpus) DocFuncs(n, minWords int, seed uint64) []DocFunc {
	r := newRand(seed)
	var pkg doc.Package
	sentences := map[string]int{}
	var cands []DocFunc
	for _, f := range c.Files {
		if f.ParseErr != nil {
			continue
		}
		keys := map[string]int{}
		for _, d := range f.Decls {
			keys[d.Recv+"."+d.Name]++
		}
		for _, d := range f.Decls {
			if d.Doc == "" {
				continue
			}
			s := pkg.Synopsis(d.Doc)
			sentences[s]++
			if !f.Primary() || (d.Kind != Func && d.Kind != Method) || d.Name == "init" || d.Name == "_" ||
				keys[d.Recv+"."+d.Name] != 1 || !d.DocOwnLines || len(strings.Fields(s)) < minWords {
				continue
			}
			cands = append(cands, DocFunc{Path: f.Path, Decl: d, Sentence: s})
		}
	}
	cands = slices.DeleteFunc(cands, func(d DocFunc) bool { return sentences[d.Sentence] > 1 })
	out := draw(r, cands, n)
	slices.SortFunc(out, func(a, b DocFunc) int {
		return cmp.Or(strings.Compare(a.Path, b.Path), cmp.Compare(a.Decl.Line, b.Decl.Line))
	})
	return out
}

// WithoutName returns a sentence with every whole-word occurrence of name
// removed ("ReadFile reads the named file" → "reads the named file"): a
// query that cannot lean on the function's name.
func WithoutName(sentence, name string) string {
	re := regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`)
	return strings.Join(strings.Fields(re.ReplaceAllString(sentence, "")), " ")
}

// Package goroot loads the Go distribution's source tree
// ($(go env GOROOT)/src) as the corpus of the code index's evaluation and
// benchmarks. It parses every Go file with go/parser and go/ast, apart
// from the index's own syntax layer, so that the ground truth of the
// evaluation does not share the index's mistakes, and it derives query
// sets from the corpus with a fixed seed: nothing is picked by hand.
//
// Every function is deterministic for a given corpus and seed. A Corpus is
// read-only after Load and safe for concurrent use.
package goroot

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// Src returns the source tree of the Go installation on PATH (the
// GOROOT environment variable when set, else `go env GOROOT`), or an error
// saying why there is none.
func Src() (string, error) {
	root := os.Getenv("GOROOT")
	if root == "" {
		out, err := exec.Command("go", "env", "GOROOT").Output()
		if err != nil {
			return "", fmt.Errorf("go env GOROOT: %w", err)
		}
		root = strings.TrimSpace(string(out))
	}
	src := filepath.Join(root, "src")
	fi, err := os.Stat(src)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory", src)
	}
	return src, nil
}

// Kind is what a top-level declaration declares.
type Kind string

// Declaration kinds.
const (
	Func   Kind = "func"
	Method Kind = "method"
	Type   Kind = "type"
	Var    Kind = "var"
	Const  Kind = "const"
)

// Decl is one top-level declaration of a Go file. Lines are 1-based and
// inclusive; offsets are byte offsets into the file.
type Decl struct {
	Name string
	Kind Kind
	// Recv is a method's receiver base type ("Buffer" for
	// "func (b *Buffer[T])"); RecvText is the source from the func keyword
	// to the end of the receiver ("func (b *Buffer[T])").
	Recv, RecvText string
	// Line and EndLine span the declaration without its doc comment.
	Line, EndLine int
	// Doc is the doc comment's text (ast.CommentGroup.Text), "" when there
	// is none; DocLine..DocEndLine are its lines and DocStart, DocEnd its
	// byte range.
	Doc                 string
	DocLine, DocEndLine int
	DocStart, DocEnd    int
	// DocOwnLines is true when the doc comment has its lines to itself
	// (no code before it on its first line or after it on its last), so
	// that deleting those lines deletes exactly the comment.
	DocOwnLines bool
	// CtxFirst is true for a function whose first parameter is named ctx.
	CtxFirst bool
	// Struct is true for a struct type.
	Struct bool
}

// Exported reports whether the declared name is exported.
func (d *Decl) Exported() bool { return token.IsExported(d.Name) }

// File is one Go file of the corpus.
type File struct {
	// Path is slash-separated, relative to the corpus root.
	Path string
	Size int
	// ParseErr is set when go/parser rejects the file (some test data
	// is invalid on purpose); such a file has no declarations.
	ParseErr error
	Decls    []Decl
	// Package is the package clause's name ("" when the file does not
	// parse).
	Package string
}

// Test reports whether the file is a _test.go file.
func (f *File) Test() bool { return strings.HasSuffix(f.Path, "_test.go") }

// TestData reports whether the file is under a testdata directory.
func (f *File) TestData() bool { return hasElem(f.Path, "testdata") }

// Vendor reports whether the file is under a vendor directory.
func (f *File) Vendor() bool { return hasElem(f.Path, "vendor") }

// Primary reports whether the file is library or command code: it parses,
// and is neither a test nor test data. Samples are drawn from primary
// files.
func (f *File) Primary() bool { return f.ParseErr == nil && !f.Test() && !f.TestData() }

func hasElem(p, elem string) bool {
	return strings.HasPrefix(p, elem+"/") || strings.Contains(p, "/"+elem+"/")
}

// Corpus is the parsed Go files of a source tree, with counts of the
// identifiers and qualified calls they use.
type Corpus struct {
	// Root is the tree's directory.
	Root string
	// Files are sorted by Path.
	Files []*File
	// Bytes is the size of all regular files Load walked (Go or not, up to
	// its size cap); GoBytes that of the Go files among them.
	Bytes, GoBytes int64
	// NumFiles counts the regular files walked.
	NumFiles int
	// Idents counts identifier occurrences by name; Calls counts calls
	// written "pkg.Name(" (any identifier before the dot) by that text.
	Idents map[string]int
	Calls  map[string]int
}

// Load walks root and parses its Go files of at most maxSize bytes (the
// index leaves larger files out), on all CPUs. Files that do not parse are
// kept with ParseErr set.
func Load(root string, maxSize int64) (*Corpus, error) {
	c := &Corpus{Root: root, Idents: map[string]int{}, Calls: map[string]int{}}
	var paths []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Size() > maxSize {
			return nil
		}
		c.NumFiles++
		c.Bytes += info.Size()
		if strings.HasSuffix(p, ".go") {
			c.GoBytes += info.Size()
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			paths = append(paths, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walk %s: %w", root, err)
	}
	slices.Sort(paths)
	c.Files = make([]*File, len(paths))

	type counts struct{ idents, calls map[string]int }
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		firstEr error
		next    = make(chan int)
		workers = runtime.GOMAXPROCS(0)
		perW    = make([]counts, workers)
	)
	for w := range workers {
		perW[w] = counts{map[string]int{}, map[string]int{}}
		wg.Go(func() {
			for i := range next {
				f, err := parseFile(root, paths[i], perW[w].idents, perW[w].calls)
				if err != nil {
					mu.Lock()
					if firstEr == nil {
						firstEr = err
					}
					mu.Unlock()
					continue
				}
				c.Files[i] = f
			}
		})
	}
	for i := range paths {
		next <- i
	}
	close(next)
	wg.Wait()
	if firstEr != nil {
		return nil, firstEr
	}
	for _, pc := range perW {
		for k, v := range pc.idents {
			c.Idents[k] += v
		}
		for k, v := range pc.calls {
			c.Calls[k] += v
		}
	}
	return c, nil
}

// File returns the file at path, or nil.
func (c *Corpus) File(p string) *File {
	i, ok := slices.BinarySearchFunc(c.Files, p, func(f *File, p string) int { return strings.Compare(f.Path, p) })
	if !ok {
		return nil
	}
	return c.Files[i]
}

// parseFile reads and parses one file, adding its identifier and call
// counts to idents and calls. Only a read error is returned.
func parseFile(root, rel string, idents, calls map[string]int) (*File, error) {
	src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		return nil, err
	}
	f := &File{Path: rel, Size: len(src)}
	decls, err := ParseDecls(src, func(af *ast.File) {
		f.Package = af.Name.Name
		ast.Inspect(af, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Ident:
				if n.Name != "_" {
					idents[n.Name]++
				}
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
					if x, ok := sel.X.(*ast.Ident); ok {
						calls[x.Name+"."+sel.Sel.Name+"("]++
					}
				}
			}
			return true
		})
	})
	f.Decls, f.ParseErr = decls, err
	return f, nil
}

// ParseDecls parses Go source and returns its top-level declarations in
// source order; visit (if set) sees the syntax tree. A file that does not
// parse gives the parser's error and no declarations.
func ParseDecls(src []byte, visit func(*ast.File)) ([]Decl, error) {
	fset := token.NewFileSet()
	af, err := parser.ParseFile(fset, "", src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	if visit != nil {
		visit(af)
	}
	tf := fset.File(af.Pos())
	line := func(p token.Pos) int { return tf.Line(p) }
	off := func(p token.Pos) int { return tf.Offset(p) }
	// endLine is the line of a node's last byte (End is one past it).
	endLine := func(n ast.Node) int { return tf.Line(n.End() - 1) }
	withDoc := func(d *Decl, doc *ast.CommentGroup) {
		if doc == nil {
			return
		}
		d.Doc = doc.Text()
		d.DocLine, d.DocEndLine = line(doc.Pos()), endLine(doc)
		d.DocStart, d.DocEnd = off(doc.Pos()), off(doc.End())
		lo, hi := lineBounds(src, d.DocStart, d.DocEnd)
		d.DocOwnLines = blank(src[lo:d.DocStart]) && blank(src[d.DocEnd:hi])
	}
	var out []Decl
	for _, decl := range af.Decls {
		switch decl := decl.(type) {
		case *ast.FuncDecl:
			d := Decl{Name: decl.Name.Name, Kind: Func, Line: line(decl.Pos()), EndLine: endLine(decl)}
			if decl.Recv != nil && len(decl.Recv.List) > 0 {
				d.Kind = Method
				d.Recv = recvBase(decl.Recv.List[0].Type)
				d.RecvText = string(src[off(decl.Pos()):off(decl.Recv.End())])
			}
			if ps := decl.Type.Params.List; len(ps) > 0 && len(ps[0].Names) > 0 && ps[0].Names[0].Name == "ctx" {
				d.CtxFirst = true
			}
			withDoc(&d, decl.Doc)
			out = append(out, d)
		case *ast.GenDecl:
			for _, spec := range decl.Specs {
				doc := decl.Doc
				if decl.Lparen.IsValid() {
					doc = nil
				}
				switch s := spec.(type) {
				case *ast.TypeSpec:
					d := Decl{Name: s.Name.Name, Kind: Type, Line: line(s.Pos()), EndLine: endLine(s)}
					_, d.Struct = s.Type.(*ast.StructType)
					if s.Doc != nil {
						doc = s.Doc
					}
					withDoc(&d, doc)
					out = append(out, d)
				case *ast.ValueSpec:
					kind := Var
					if decl.Tok == token.CONST {
						kind = Const
					}
					for _, n := range s.Names {
						if n.Name != "_" {
							out = append(out, Decl{Name: n.Name, Kind: kind, Line: line(s.Pos()), EndLine: endLine(s)})
						}
					}
				}
			}
		}
	}
	return out, nil
}

// recvBase names a receiver type's base type: T for T, *T, T[K], (*T).
func recvBase(x ast.Expr) string {
	for {
		switch t := x.(type) {
		case *ast.Ident:
			return t.Name
		case *ast.StarExpr:
			x = t.X
		case *ast.ParenExpr:
			x = t.X
		case *ast.IndexExpr:
			x = t.X
		case *ast.IndexListExpr:
			x = t.X
		default:
			return ""
		}
	}
}

// lineBounds widens the byte range [from, to) of src to whole lines: from
// the start of from's line to just after the newline ending to's line.
func lineBounds(src []byte, from, to int) (int, int) {
	lo := bytes.LastIndexByte(src[:from], '\n') + 1
	hi := len(src)
	if i := bytes.IndexByte(src[to:], '\n'); i >= 0 {
		hi = to + i + 1
	}
	return lo, hi
}

// blank reports whether b holds only spaces, tabs and line ends.
func blank(b []byte) bool { return len(bytes.Trim(b, " \t\r\n")) == 0 }

// errNoDecl reports a declaration that a rewritten file no longer has.
var errNoDecl = errors.New("declaration not found")

// FindFunc returns the function or method named name with receiver base
// type recv ("" for a function) among decls; there must be exactly one.
func FindFunc(decls []Decl, recv, name string) (Decl, error) {
	var found []Decl
	for _, d := range decls {
		if (d.Kind == Func || d.Kind == Method) && d.Recv == recv && d.Name == name {
			found = append(found, d)
		}
	}
	if len(found) != 1 {
		return Decl{}, fmt.Errorf("%w: %d functions %s", errNoDecl, len(found), strings.TrimPrefix(recv+"."+name, "."))
	}
	return found[0], nil
}

package syntax

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"slices"
)

// goAnalyzer extracts Go symbols and references from one file's AST.
type goAnalyzer struct {
	a     *Analysis
	lines *lineIndex
	base  int // token.File base: offset = int(pos) - base
	size  int
	// defs holds the offsets of identifiers that name a Symbol.
	defs []int32
}

func analyzeGo(a *Analysis, src []byte, lines *lineIndex) {
	fset := token.NewFileSet()
	// The file ParseFile adds to the empty set starts at the set's base.
	g := &goAnalyzer{a: a, lines: lines, size: len(src), base: fset.Base()}
	f, err := parser.ParseFile(fset, "", src, parser.ParseComments|parser.SkipObjectResolution)

	// On a syntax error keep only the declarations that end before the
	// first error: what follows may be misparsed. The rest of the file is
	// chunked by blank lines, and its identifiers are found by scanning.
	limit := token.Pos(g.base + len(src) + 1)
	if err != nil {
		var list scanner.ErrorList
		first := len(src)
		if errors.As(err, &list) {
			for _, e := range list {
				first = min(first, e.Pos.Offset)
			}
		} else {
			first = 0
		}
		limit = token.Pos(g.base + max(first, 0))
	}
	var decls []ast.Decl
	if f != nil {
		decls = f.Decls
		for i, d := range decls {
			if d.End() > limit {
				decls = decls[:i]
				break
			}
		}
	}
	n := countGoSymbols(decls)
	a.Symbols = make([]Symbol, 0, n)
	g.defs = make([]int32, 0, n)
	for _, d := range decls {
		g.decl(d)
	}
	if !slices.IsSorted(g.defs) {
		slices.Sort(g.defs)
	}
	sortSymbols(a.Symbols)

	rc := getRefCollector()
	if err == nil {
		g.walkRefs(f, rc)
	} else {
		g.scanRefs(src, rc)
	}
	a.Refs = rc.refs()
	rc.release()
}

// countGoSymbols returns an upper bound of the symbols decls define, so
// that the symbol slice is allocated once.
func countGoSymbols(decls []ast.Decl) int {
	n := 0
	for _, d := range decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			n++
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.ValueSpec:
					n += len(s.Names)
				case *ast.TypeSpec:
					n++
					var fields *ast.FieldList
					switch t := s.Type.(type) {
					case *ast.StructType:
						fields = t.Fields
					case *ast.InterfaceType:
						fields = t.Methods
					}
					if fields != nil {
						for _, fl := range fields.List {
							n += max(1, len(fl.Names))
						}
					}
				}
			}
		}
	}
	return n
}

func (g *goAnalyzer) off(p token.Pos) int {
	o := int(p) - g.base
	if o < 0 {
		return 0
	}
	if o > g.size {
		return g.size
	}
	return o
}

// lineRange returns the 1-based lines of [from, to).
func (g *goAnalyzer) lineRange(from, to token.Pos) (int, int) {
	s := g.off(from)
	e := g.off(to) - 1
	if e < s {
		e = s
	}
	return g.lines.lineOf(s), g.lines.lineOf(e)
}

// add appends a symbol named by id spanning [from, to); def marks id as a
// definition name, so it is not a reference.
func (g *goAnalyzer) add(id *ast.Ident, kind Kind, container string, from, to token.Pos, def bool) {
	if id == nil || id.Name == "_" || id.Name == "" {
		return
	}
	line, end := g.lineRange(from, to)
	o := g.off(id.Pos())
	nl := g.lines.lineOf(o)
	col := o - int(g.lines.starts[nl-1]) + 1
	g.a.Symbols = append(g.a.Symbols, Symbol{
		Name: id.Name, Kind: kind, Container: container,
		Line: line, EndLine: end, NameLine: nl, Column: col,
	})
	if def {
		g.defs = append(g.defs, int32(o))
	}
}

func (g *goAnalyzer) decl(d ast.Decl) {
	switch d := d.(type) {
	case *ast.FuncDecl:
		from := d.Pos()
		if d.Doc != nil {
			from = d.Doc.Pos()
		}
		kind, container := KindFunction, ""
		if d.Recv != nil {
			kind = KindMethod
			if len(d.Recv.List) > 0 {
				if id := baseTypeIdent(d.Recv.List[0].Type); id != nil {
					container = id.Name
				}
			}
		}
		g.add(d.Name, kind, container, from, d.End(), true)
	case *ast.GenDecl:
		grouped := d.Lparen.IsValid()
		for _, spec := range d.Specs {
			// An ungrouped declaration spans the keyword and the
			// declaration's doc comment; a grouped one, its own spec.
			from, to := d.Pos(), d.End()
			var doc *ast.CommentGroup
			if grouped {
				from, to = spec.Pos(), spec.End()
			} else {
				doc = d.Doc
			}
			switch s := spec.(type) {
			case *ast.TypeSpec:
				if grouped {
					doc = s.Doc
				}
				if doc != nil {
					from = doc.Pos()
				}
				g.typeSpec(s, from, to)
			case *ast.ValueSpec:
				if grouped {
					doc = s.Doc
				}
				if doc != nil {
					from = doc.Pos()
				}
				kind := KindVar
				if d.Tok == token.CONST {
					kind = KindConst
				}
				for _, n := range s.Names {
					g.add(n, kind, "", from, to, true)
				}
			}
		}
	}
}

func (g *goAnalyzer) typeSpec(s *ast.TypeSpec, from, to token.Pos) {
	kind := KindType
	switch s.Type.(type) {
	case *ast.StructType:
		kind = KindStruct
	case *ast.InterfaceType:
		kind = KindInterface
	}
	g.add(s.Name, kind, "", from, to, true)
	if s.Name == nil {
		return
	}
	owner := s.Name.Name
	switch t := s.Type.(type) {
	case *ast.StructType:
		if t.Fields == nil {
			return
		}
		for _, fl := range t.Fields.List {
			ffrom := fl.Pos()
			if fl.Doc != nil {
				ffrom = fl.Doc.Pos()
			}
			if len(fl.Names) == 0 {
				// An embedded field is named by its type; that
				// identifier stays a reference to the type.
				g.add(baseTypeIdent(fl.Type), KindField, owner, ffrom, fl.End(), false)
				continue
			}
			for _, n := range fl.Names {
				g.add(n, KindField, owner, ffrom, fl.End(), true)
			}
		}
	case *ast.InterfaceType:
		if t.Methods == nil {
			return
		}
		for _, fl := range t.Methods.List {
			if len(fl.Names) == 0 {
				continue // embedded interface or type-set term
			}
			ffrom := fl.Pos()
			if fl.Doc != nil {
				ffrom = fl.Doc.Pos()
			}
			for _, n := range fl.Names {
				g.add(n, KindMethod, owner, ffrom, fl.End(), true)
			}
		}
	}
}

// baseTypeIdent returns the identifier naming a type expression's base
// type: T for T, *T, T[K, V], pkg.T, (*T); nil for anything else.
func baseTypeIdent(x ast.Expr) *ast.Ident {
	for {
		switch t := x.(type) {
		case *ast.Ident:
			return t
		case *ast.StarExpr:
			x = t.X
		case *ast.ParenExpr:
			x = t.X
		case *ast.IndexExpr:
			x = t.X
		case *ast.IndexListExpr:
			x = t.X
		case *ast.SelectorExpr:
			return t.Sel
		default:
			return nil
		}
	}
}

// isDef reports whether offset o names a Symbol.
func (g *goAnalyzer) isDef(o int32) bool {
	_, found := slices.BinarySearch(g.defs, o)
	return found
}

// walkRefs records every identifier of f except the package name, "_" and
// symbol names.
func (g *goAnalyzer) walkRefs(f *ast.File, rc *refCollector) {
	pkg := f.Name
	ast.Inspect(f, func(n ast.Node) bool {
		id, ok := n.(*ast.Ident)
		if !ok {
			return true
		}
		if id == pkg || id.Name == "_" {
			return false
		}
		o := int(id.NamePos) - g.base
		if o < 0 || o >= g.size || g.isDef(int32(o)) {
			return false
		}
		rc.add(id.Name, g.lines.lineOf(o))
		return false
	})
}

// scanRefs records identifiers by scanning tokens, for files that do not
// parse. The identifier after the "package" keyword is skipped.
func (g *goAnalyzer) scanRefs(src []byte, rc *refCollector) {
	fset := token.NewFileSet()
	file := fset.AddFile("", -1, len(src))
	var s scanner.Scanner
	s.Init(file, src, nil, 0)
	base := file.Base()
	prev := token.ILLEGAL
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			return
		}
		if tok == token.IDENT && lit != "_" && prev != token.PACKAGE {
			o := int(pos) - base
			if o >= 0 && o < len(src) && !g.isDef(int32(o)) {
				rc.add(lit, g.lines.lineOf(o))
			}
		}
		prev = tok
	}
}

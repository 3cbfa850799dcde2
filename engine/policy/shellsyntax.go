package policy

import (
	"errors"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// This file is the package's only contact with the shell parser,
// mvdan.cc/sh/v3/syntax in bash mode: parsing, printing, and the wording
// of its errors.

// Parsers and printers are not safe for concurrent use; Decide is.
var (
	parsers  = sync.Pool{New: func() any { return syntax.NewParser(syntax.Variant(syntax.LangBash)) }}
	printers = sync.Pool{New: func() any { return syntax.NewPrinter(syntax.Minify(true)) }}
)

// errNUL is the error for text with a NUL byte, which no shell can be
// given.
var errNUL = errors.New("it contains a NUL byte")

// parseShell parses src as bash. Errors are the parser's
// (syntax.ParseError, with a line:column position), or errNUL.
func parseShell(src string) (*syntax.File, error) {
	if strings.IndexByte(src, 0) >= 0 {
		return nil, errNUL
	}
	p := parsers.Get().(*syntax.Parser)
	defer parsers.Put(p)
	return p.Parse(strings.NewReader(src), "")
}

// syntaxProblems name the common parse errors in the words this package
// has always used, ahead of the parser's own message.
var syntaxProblems = []struct{ parser, ours string }{
	{"without closing quote `'`", "unterminated single quote"},
	{"without closing quote `\"`", "unterminated double quote"},
	{"reached EOF without matching", "unclosed $(, ( or backquote"},
	{"encountered `)`", "unbalanced )"},
	{"unclosed here-document", "unterminated here-document"},
}

// describeSyntaxError words a parseShell error for people, as in
// "unterminated single quote: 1:6: reached EOF without closing quote `'`".
func describeSyntaxError(err error) string {
	var pe syntax.ParseError
	if errors.As(err, &pe) {
		for _, p := range syntaxProblems {
			if strings.Contains(pe.Text, p.parser) {
				return p.ours + ": " + err.Error()
			}
		}
	}
	return err.Error()
}

// subMarker stands for a substitution in printed text: a NUL byte, which
// parsed text never holds.
const subMarker = "\x00"

// printed prints n as the parser's printer does with Minify (so that text
// written differently but meaning the same prints the same), each command
// or process substitution in it replaced by subMarker. It returns the text
// and those substitutions, in order.
func printed(n syntax.Node) (string, []syntax.WordPart) {
	var subs []syntax.WordPart
	var undo []func()
	syntax.Walk(n, func(x syntax.Node) bool {
		var parts []syntax.WordPart
		switch x := x.(type) {
		case *syntax.Word:
			parts = x.Parts
		case *syntax.DblQuoted:
			parts = x.Parts
		default:
			return true
		}
		for i, p := range parts {
			switch p.(type) {
			case *syntax.CmdSubst, *syntax.ProcSubst:
				subs = append(subs, p)
				parts[i] = &syntax.Lit{ValuePos: p.Pos(), ValueEnd: p.End(), Value: subMarker}
				undo = append(undo, func() { parts[i] = p })
			}
		}
		return true
	})
	s := printText(n)
	for _, u := range undo {
		u()
	}
	return s, subs
}

// printText prints n as the parser's printer does with Minify.
func printText(n syntax.Node) string {
	pr := printers.Get().(*syntax.Printer)
	defer printers.Put(pr)
	var b strings.Builder
	if err := pr.Print(&b, n); err != nil {
		// Only node types the printer does not know fail; callers pass
		// words, word parts, assignments and commands.
		panic("policy: printing " + err.Error())
	}
	return b.String()
}

// printedArith prints an arithmetic expression as printed does.
func printedArith(x syntax.ArithmExpr) (string, []syntax.WordPart) {
	if x == nil {
		return "", nil
	}
	s, subs := printed(&syntax.ArithmExp{Left: x.Pos(), Right: x.End(), X: x})
	return strings.TrimSuffix(strings.TrimPrefix(s, "$(("), "))"), subs
}

// substitutionsIn lists the command and process substitutions in n,
// outermost only, in order.
func substitutionsIn(n syntax.Node) []syntax.WordPart {
	var subs []syntax.WordPart
	syntax.Walk(n, func(x syntax.Node) bool {
		switch x := x.(type) {
		case *syntax.CmdSubst:
			subs = append(subs, x)
			return false
		case *syntax.ProcSubst:
			subs = append(subs, x)
			return false
		}
		return true
	})
	return subs
}

// ansiC decodes the text of $'…' as bash does, up to a \0.
func ansiC(s string) string {
	// A fresh Config each time: expand's nil default is shared and
	// written to.
	out, _, err := expand.Format(&expand.Config{}, s, nil)
	if err != nil {
		return s
	}
	out, _, _ = strings.Cut(out, "\x00")
	return out
}

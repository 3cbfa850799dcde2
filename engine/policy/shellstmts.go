package policy

import (
	"cmp"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// flattener turns the syntax tree of a command line or a command glob into
// tokens, in source order, and parts. Quotes are removed from words;
// parameter expansions, extended globs and the like stay as the text the
// parser's printer gives them; substitutions are read into parts of their
// own; arithmetic stays as printed text (opRaw). Reserved words and
// control operators become operator tokens.
type flattener struct {
	pattern bool // a command glob: an unquoted * or ? is a wildcard
	src     string

	toks  []token // the whole line
	parts []part
	// cur is the part whose words are being read, -1 for none; parent
	// is the part holding the substitution being read, -1 at the top.
	cur, parent int
	pipe, pipes int // the pipeline being read, and a counter for new ones
	// hidden > 0: reading the commands of a here-document body, which
	// the whole line holds as one token.
	hidden int
	// err is set for a tree this package cannot read faithfully.
	err error
}

// flatten reads a parsed file; src is the text it was parsed from.
func flatten(file *syntax.File, src string, pattern bool) *flattener {
	f := &flattener{pattern: pattern, src: src, cur: -1, parent: -1, toks: make([]token, 0, len(src)/3+4)}
	f.list(file.Stmts, false)
	return f
}

// emit adds t to the whole line and to the current part.
func (f *flattener) emit(t token) {
	f.emitWhole(t)
	f.emitPart(t)
}

func (f *flattener) emitWhole(t token) {
	if f.hidden == 0 {
		f.toks = append(f.toks, t)
	}
}

func (f *flattener) emitPart(t token) {
	if f.cur >= 0 {
		f.parts[f.cur].toks = append(f.parts[f.cur].toks, t)
	}
}

func (f *flattener) op(class opClass, text string) {
	f.emit(token{kind: tkOp, class: class, text: text})
}

// list reads statements, each a pipeline of its own, joined by ; (or the
// & of a statement run in the background). terminated: a reserved word
// follows, which needs a ; before it.
func (f *flattener) list(stmts []*syntax.Stmt, terminated bool) {
	for i, s := range stmts {
		f.pipes++
		f.pipe = f.pipes
		f.stmt(s)
		if !s.Background && (terminated || i < len(stmts)-1) {
			f.op(opControl, ";")
		}
	}
}

// stmt reads one statement.
func (f *flattener) stmt(s *syntax.Stmt) {
	if s.Negated {
		f.op(opKeyword, "!")
	}
	pipe := f.pipe
	switch c := s.Cmd.(type) {
	case nil:
		f.command(s, false, nil)
	case *syntax.CallExpr:
		items := make([]item, 0, len(c.Assigns)+len(c.Args)+len(s.Redirs))
		for _, a := range c.Assigns {
			items = append(items, item{a.Pos(), func() { f.addWord(f.assign(a)) }})
		}
		for _, w := range c.Args {
			items = append(items, item{w.Pos(), func() { f.addWord(f.word(w, true)) }})
		}
		f.command(s, false, items)
	case *syntax.DeclClause:
		f.command(s, false, []item{{c.Pos(), func() {
			f.addWord(f.literalWord(c.Variant.Value))
			for _, a := range c.Args {
				f.addWord(f.assign(a))
			}
		}}})
	case *syntax.LetClause:
		f.command(s, false, []item{{c.Pos(), func() {
			f.addWord(f.literalWord("let"))
			for _, x := range c.Exprs {
				f.addWord(f.arithWord(x))
			}
		}}})
	case *syntax.ArithmCmd:
		f.command(s, true, []item{{c.Pos(), func() {
			text, subs := printedArith(c.X)
			f.raw("(("+text+"))", subs)
		}}})
	case *syntax.TestClause:
		f.command(s, false, []item{{c.Pos(), func() { f.fields(printed(c)) }}})
	case *syntax.BinaryCmd:
		f.stmt(c.X)
		f.op(opControl, c.Op.String())
		if c.Op == syntax.AndStmt || c.Op == syntax.OrStmt {
			f.pipes++
			f.pipe = f.pipes
		}
		f.stmt(c.Y)
		f.compoundRedirs(s, pipe)
	default:
		f.compound(c)
		f.compoundRedirs(s, pipe)
	}
	if s.Background {
		f.op(opControl, "&")
	}
}

// compoundRedirs reads the redirections of a compound command as a part
// of their own.
func (f *flattener) compoundRedirs(s *syntax.Stmt, pipe int) {
	if len(s.Redirs) > 0 {
		f.pipe = pipe
		f.command(s, false, nil)
	}
}

// item is one word (or run of words) of a simple command, or one of its
// redirections, at its offset in the source.
type item struct {
	pos  syntax.Pos
	read func()
}

// command reads a simple command, a part: its words and the statement's
// redirections, in source order.
func (f *flattener) command(s *syntax.Stmt, arith bool, items []item) {
	for _, r := range s.Redirs {
		items = append(items, item{r.Pos(), func() { f.redirect(r) }})
	}
	slices.SortStableFunc(items, func(a, b item) int { return cmp.Compare(a.pos.Offset(), b.pos.Offset()) })
	f.parts = append(f.parts, part{parent: f.parent, pipe: f.pipe, arith: arith, toks: make([]token, 0, 2*len(items))})
	cur := f.cur
	f.cur = len(f.parts) - 1
	for _, it := range items {
		it.read()
	}
	f.cur = cur
}

func (f *flattener) addWord(w string) {
	if f.cur >= 0 {
		f.parts[f.cur].words = append(f.parts[f.cur].words, w)
	}
}

// compound reads a compound command: its reserved words and operators,
// the words it expands, and its statements.
func (f *flattener) compound(c syntax.Command) {
	switch c := c.(type) {
	case *syntax.Subshell:
		f.op(opControl, "(")
		f.list(c.Stmts, false)
		f.op(opControl, ")")
	case *syntax.Block:
		f.op(opKeyword, "{")
		f.list(c.Stmts, true)
		f.op(opKeyword, "}")
	case *syntax.IfClause:
		f.ifClause(c)
	case *syntax.WhileClause:
		kw := "while"
		if c.Until {
			kw = "until"
		}
		f.op(opKeyword, kw)
		f.list(c.Cond, true)
		f.loopBody(c.Do)
	case *syntax.ForClause:
		f.forHeader(c)
		f.op(opControl, ";")
		f.loopBody(c.Do)
	case *syntax.CaseClause:
		f.caseClause(c)
	case *syntax.FuncDecl:
		f.op(opKeyword, funcHeader(c))
		f.nested(c.Body)
	case *syntax.TimeClause:
		kw := "time"
		if c.PosixFormat {
			kw = "time -p"
		}
		f.op(opKeyword, kw)
		if c.Stmt != nil {
			f.nested(c.Stmt)
		}
	case *syntax.CoprocClause:
		kw := "coproc"
		if c.Name != nil {
			kw += " " + printText(c.Name)
		}
		f.op(opKeyword, kw)
		f.nested(c.Stmt)
	default:
		// A command this package does not know: its printed words.
		f.command(&syntax.Stmt{}, false, []item{{c.Pos(), func() { f.fields(printed(c)) }}})
	}
}

// ifClause reads if … then … elif … else … fi.
func (f *flattener) ifClause(c *syntax.IfClause) {
	f.op(opKeyword, "if")
	for {
		f.list(c.Cond, true)
		f.op(opKeyword, "then")
		f.list(c.Then, true)
		if c = c.Else; c == nil {
			break
		}
		if !c.ThenPos.IsValid() {
			f.op(opKeyword, "else")
			f.list(c.Then, true)
			break
		}
		f.op(opKeyword, "elif")
	}
	f.op(opKeyword, "fi")
}

// caseClause reads case WORD in PATTERN | PATTERN ) … ;; esac.
func (f *flattener) caseClause(c *syntax.CaseClause) {
	f.op(opKeyword, "case")
	f.word(c.Word, true)
	f.op(opKeyword, "in")
	for _, it := range c.Items {
		for i, p := range it.Patterns {
			if i > 0 {
				f.op(opKeyword, "|")
			}
			f.word(p, true)
		}
		f.op(opKeyword, ")")
		f.list(it.Stmts, false)
		end := ";;"
		if it.OpPos.IsValid() {
			end = it.Op.String()
		}
		f.op(opKeyword, end)
	}
	f.op(opKeyword, "esac")
}

// funcHeader is the reserved word of a function declaration: "NAME()",
// "function NAME" or "function NAME()".
func funcHeader(c *syntax.FuncDecl) string {
	name := ""
	if c.Name != nil {
		name = c.Name.Value
	}
	if !c.RsrvWord {
		return name + "()"
	}
	if c.Parens {
		return "function " + name + "()"
	}
	return "function " + name
}

// nested reads a statement inside a compound command, a pipeline of its
// own.
func (f *flattener) nested(s *syntax.Stmt) {
	f.pipes++
	f.pipe = f.pipes
	f.stmt(s)
}

func (f *flattener) loopBody(body []*syntax.Stmt) {
	f.op(opKeyword, "do")
	f.list(body, true)
	f.op(opKeyword, "done")
}

// forHeader reads "for NAME in WORDS" or "for ((…))".
func (f *flattener) forHeader(c *syntax.ForClause) {
	kw := "for"
	if c.Select {
		kw = "select"
	}
	switch l := c.Loop.(type) {
	case *syntax.WordIter:
		f.op(opKeyword, kw+" "+l.Name.Value)
		if l.InPos.IsValid() {
			f.op(opKeyword, "in")
			for _, w := range l.Items {
				f.word(w, true)
			}
		}
	case *syntax.CStyleLoop:
		f.op(opKeyword, kw)
		var text strings.Builder
		var subs []syntax.WordPart
		text.WriteString("((")
		for i, x := range []syntax.ArithmExpr{l.Init, l.Cond, l.Post} {
			if i > 0 {
				text.WriteString(";")
			}
			s, more := printedArith(x)
			text.WriteString(s)
			subs = append(subs, more...)
		}
		text.WriteString("))")
		f.raw(text.String(), subs)
	}
}

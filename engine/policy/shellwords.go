package policy

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// This file reads words: literal text with quotes removed, substitutions.

// wordBuf collects one word.
type wordBuf struct {
	lit    strings.Builder // literal text not emitted yet
	text   strings.Builder // the word's text, substitutions as subMark
	pieces int             // tokens emitted for it
	plain  bool            // only literal text so far
	wild   bool            // an unquoted * or ? is a wildcard
}

// startWord starts a word.
func (f *flattener) startWord(wild bool) *wordBuf {
	f.separate()
	return &wordBuf{plain: true, wild: wild && f.pattern}
}

// separate adds a separator where a word follows another one.
func (f *flattener) separate() {
	if f.hidden == 0 && endsWord(f.toks) {
		f.toks = append(f.toks, token{kind: tkSep})
	}
	if f.cur >= 0 && endsWord(f.parts[f.cur].toks) {
		f.parts[f.cur].toks = append(f.parts[f.cur].toks, token{kind: tkSep})
	}
}

// add adds literal text.
func (b *wordBuf) add(s string) {
	b.lit.WriteString(s)
	b.text.WriteString(s)
}

func (f *flattener) flushLiteral(b *wordBuf) {
	if b.lit.Len() > 0 {
		f.emit(token{kind: tkWord, text: b.lit.String()})
		b.lit.Reset()
		b.pieces++
	}
}

// endWord ends a word and returns its text; a word of nothing (quotes
// around nothing) is an empty tkWord.
func (f *flattener) endWord(b *wordBuf) string {
	f.flushLiteral(b)
	if b.pieces == 0 {
		f.emit(token{kind: tkWord})
	}
	return b.text.String()
}

// word reads a word and returns its text. wild: in a command glob, an
// unquoted * or ? in it is a wildcard.
func (f *flattener) word(w *syntax.Word, wild bool) string {
	s, _ := f.wordPlain(w, wild)
	return s
}

// wordPlain is word, also reporting whether the word is literal text only.
func (f *flattener) wordPlain(w *syntax.Word, wild bool) (string, bool) {
	if len(w.Parts) == 1 {
		// Most words are one literal without backslashes or wildcards.
		if l, ok := w.Parts[0].(*syntax.Lit); ok && !strings.ContainsAny(l.Value, `\*?`) {
			f.separate()
			f.emit(token{kind: tkWord, text: l.Value})
			return l.Value, true
		}
	}
	b := f.startWord(wild)
	for _, p := range w.Parts {
		f.wordPart(b, p, false)
	}
	return f.endWord(b), b.plain
}

// literalWord reads a word that is the literal text s.
func (f *flattener) literalWord(s string) string {
	b := f.startWord(false)
	b.add(s)
	return f.endWord(b)
}

// wordPart reads one part of a word; dq: inside double quotes.
func (f *flattener) wordPart(b *wordBuf, p syntax.WordPart, dq bool) {
	switch p := p.(type) {
	case *syntax.Lit:
		if dq {
			b.add(unescapeDouble(p.Value))
			return
		}
		f.unquoted(b, p.Value)
	case *syntax.SglQuoted:
		if p.Dollar {
			b.add(ansiC(p.Value))
			return
		}
		b.add(p.Value)
	case *syntax.DblQuoted:
		for _, q := range p.Parts {
			f.wordPart(b, q, true)
		}
	case *syntax.ParamExp:
		if p.Short && p.Param != nil {
			b.add("$" + p.Param.Value)
			return
		}
		f.printedInto(b, p)
	case *syntax.CmdSubst, *syntax.ProcSubst:
		f.substitutionIn(b, p)
	case *syntax.ArithmExp:
		f.markSubstitution(b)
		f.arithmetic(p)
	default:
		// Extended globs, brace expansions: literal text.
		f.printedInto(b, p)
	}
}

// unquoted reads the text of an unquoted literal: a backslash quotes the
// next character; in a command glob an unquoted * or ? is a wildcard.
func (f *flattener) unquoted(b *wordBuf, s string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			i++
			b.add(s[i : i+1])
		case (c == '*' || c == '?') && b.wild:
			f.flushLiteral(b)
			kind := tkStar
			if c == '?' {
				kind = tkQuest
			}
			f.emit(token{kind: kind})
			b.text.WriteByte(c)
			b.pieces++
			b.plain = false
		default:
			b.add(s[i : i+1])
		}
	}
}

// unescapeDouble removes the backslashes that quote inside double quotes.
func unescapeDouble(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case '$', '`', '"', '\\':
				i++
			case '\n':
				i++
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// printedInto adds n's printed text to a word as literal text, with the
// substitutions in it read as such.
func (f *flattener) printedInto(b *wordBuf, n syntax.Node) {
	text, subs := printed(n)
	f.addPrinted(b, text, subs)
}

// addPrinted adds printed text (see printed) to a word as literal text,
// with the substitutions in it read as such.
func (f *flattener) addPrinted(b *wordBuf, text string, subs []syntax.WordPart) {
	for i, seg := range strings.Split(text, subMarker) {
		b.add(seg)
		if i < len(subs) {
			f.substitutionIn(b, subs[i])
		}
	}
}

// assign reads NAME=value, a word of a simple command or declaration.
func (f *flattener) assign(a *syntax.Assign) string {
	b := f.startWord(true)
	if a.Array != nil {
		f.printedInto(b, a)
		return f.endWord(b)
	}
	if a.Name != nil {
		if a.Index != nil {
			f.printedInto(b, &syntax.Assign{Name: a.Name, Index: a.Index, Naked: true})
		} else {
			b.add(a.Name.Value)
		}
		switch {
		case a.Naked:
		case a.Append:
			b.add("+=")
		default:
			b.add("=")
		}
	}
	if a.Value != nil {
		for _, p := range a.Value.Parts {
			f.wordPart(b, p, false)
		}
	}
	return f.endWord(b)
}

// arithWord reads an argument of let: a word, or printed arithmetic.
func (f *flattener) arithWord(x syntax.ArithmExpr) string {
	if w, ok := x.(*syntax.Word); ok {
		return f.word(w, true)
	}
	b := f.startWord(false)
	text, subs := printedArith(x)
	f.addPrinted(b, text, subs)
	return f.endWord(b)
}

// fields reads printed text as words split at blanks, substitutions
// inside the words they touch.
func (f *flattener) fields(text string, subs []syntax.WordPart) {
	var b *wordBuf
	for i := 0; i < len(text); i++ {
		switch c := text[i]; c {
		case ' ', '\t', '\n':
			if b != nil {
				f.addWord(f.endWord(b))
				b = nil
			}
			continue
		}
		if b == nil {
			b = f.startWord(false)
		}
		if text[i] == subMarker[0] {
			f.substitutionIn(b, subs[0])
			subs = subs[1:]
			continue
		}
		b.add(text[i : i+1])
	}
	if b != nil {
		f.addWord(f.endWord(b))
	}
}

// raw reads printed arithmetic: opRaw tokens, the substitutions in it
// read as such. The part's words are the text's fields.
func (f *flattener) raw(text string, subs []syntax.WordPart) {
	for i, seg := range strings.Split(text, subMarker) {
		if seg != "" {
			f.op(opRaw, seg)
		}
		if i < len(subs) {
			f.substitution(subs[i])
		}
	}
	for _, w := range strings.Fields(strings.ReplaceAll(text, subMarker, string(subMark))) {
		f.addWord(w)
	}
}

// substitutionIn reads a substitution inside a word.
func (f *flattener) substitutionIn(b *wordBuf, p syntax.WordPart) {
	f.markSubstitution(b)
	f.substitution(p)
}

// markSubstitution ends the literal text before a substitution in a word
// and marks the substitution in the word's text.
func (f *flattener) markSubstitution(b *wordBuf) {
	f.flushLiteral(b)
	b.text.WriteRune(subMark)
	b.pieces++
	b.plain = false
}

// substitution reads $(…), `…` (as $(…)), <(…) or >(…): one tkSub in the
// current part, its statements in parts of their own.
func (f *flattener) substitution(p syntax.WordPart) {
	open, stmts := substituted(p)
	f.emitWhole(token{kind: tkOp, class: opSubOpen, text: open})
	f.emitPart(token{kind: tkSub, text: open, aux: ")"})
	f.inside(func() { f.list(stmts, false) })
	f.emitWhole(token{kind: tkOp, class: opSubClose, text: ")"})
}

// substituted returns the opening text and the statements of a command
// or process substitution.
func substituted(p syntax.WordPart) (string, []*syntax.Stmt) {
	switch p := p.(type) {
	case *syntax.CmdSubst:
		return "$(", p.Stmts
	case *syntax.ProcSubst:
		return p.Op.String(), p.Stmts
	}
	return "", nil
}

// arithmetic reads $((…)): one tkSub in the current part, and a part of
// its own, arithmetic, for the expression.
func (f *flattener) arithmetic(a *syntax.ArithmExp) {
	f.emitWhole(token{kind: tkOp, class: opSubOpen, text: "$(("})
	f.emitPart(token{kind: tkSub, text: "$((", aux: "))"})
	f.inside(func() {
		f.pipes++
		f.pipe = f.pipes
		f.command(&syntax.Stmt{}, true, []item{{a.Pos(), func() { f.raw(printedArith(a.X)) }}})
	})
	f.emitWhole(token{kind: tkOp, class: opSubClose, text: "))"})
}

// inside runs read for the inside of a substitution of the current part.
func (f *flattener) inside(read func()) {
	cur, parent, pipe := f.cur, f.parent, f.pipe
	if cur >= 0 {
		f.parent = cur
	}
	f.cur = -1
	read()
	f.cur, f.parent, f.pipe = cur, parent, pipe
}

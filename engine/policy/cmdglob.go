package policy

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// A command glob is read like a shell command line (see the package doc):
// quoting, operators and substitutions as in sh; an unquoted * or ? is a
// wildcard. Both the glob and the command line become sequences of
// elements, and the glob matches when it matches the whole sequence.

// mclass classifies one element of a sequence.
type mclass uint8

const (
	mLit   mclass = iota // one character of a word
	mSep                 // the boundary between two words
	mOp                  // an operator that * does not cross
	mXop                 // an operator or substitution that * crosses
	mStar                // glob: any run of mLit, mSep and mXop
	mQuest               // glob: one mLit
	mWords               // glob: a * that is a whole word after a separator: nothing, or any run from a word boundary
)

// subElem is the s of the element that stands for a substitution.
const subElem = "sub"

// melem is one element: a character (r) or an operator (s).
type melem struct {
	c mclass
	r rune
	s string
}

// crossable reports whether a command glob's * may match operator t: the
// ones that only read input or quiet output (<, <<, <<<, N>&M, >/dev/null)
// and, within one part, a substitution (its commands are judged as parts
// of their own).
func crossable(t token) bool {
	switch t.class {
	case opRedirIn, opRedirDup, opHeredoc, opHeredocBody:
		return true
	case opRedirOut:
		return t.benign
	}
	return false
}

// elemsOf turns tokens into elements.
func elemsOf(toks []token) []melem {
	out := make([]melem, 0, len(toks)*4)
	for _, t := range toks {
		switch t.kind {
		case tkWord:
			for i := 0; i < len(t.text); {
				r, n := utf8.DecodeRuneInString(t.text[i:])
				if r == utf8.RuneError && n == 1 {
					// Keep invalid bytes distinct from each other and
					// from U+FFFD.
					r = utf8.MaxRune + 1 + rune(t.text[i])
				}
				out = append(out, melem{c: mLit, r: r})
				i += n
			}
		case tkSep:
			out = append(out, melem{c: mSep})
		case tkStar:
			out = append(out, melem{c: mStar})
		case tkQuest:
			out = append(out, melem{c: mQuest})
		case tkSub:
			out = append(out, melem{c: mXop, s: subElem})
		case tkOp:
			c := mOp
			if crossable(t) {
				c = mXop
			}
			out = append(out, melem{c: c, s: string(rune('0'+t.class)) + t.text + "\x00" + t.aux})
		}
	}
	return out
}

// cmdGlob is a compiled command glob.
type cmdGlob struct {
	src string
	// whole: the glob has control operators or substitutions, so it is
	// matched against the whole command line rather than each part.
	whole bool
	elems []melem
	// exact: no wildcards.
	exact bool
	// literal counts the elements that are not wildcards.
	literal int
	// prefix is the leading run of non-wildcard elements, for a quick
	// rejection.
	prefix []melem
	// canon is the glob in canonical form, for comparing rules.
	canon string
}

// Limits on command globs.
const maxGlobBytes = 4096

// errBadCommandGlob is wrapped by compileCommandGlob's errors.
var errBadCommandGlob = errors.New("invalid command glob")

// compileCommandGlob compiles a command glob.
func compileCommandGlob(src string) (*cmdGlob, error) {
	if len(src) > maxGlobBytes {
		return nil, fmt.Errorf("%w: longer than %d bytes", errBadCommandGlob, maxGlobBytes)
	}
	if strings.IndexByte(src, 0) >= 0 {
		return nil, fmt.Errorf("%w: it contains a NUL byte", errBadCommandGlob)
	}
	toks, err := lexPattern(src)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errBadCommandGlob, err)
	}
	if len(toks) == 0 {
		return nil, fmt.Errorf("%w: it is empty; leave commands out to match every command", errBadCommandGlob)
	}
	g := &cmdGlob{src: src, exact: true}
	for _, t := range toks {
		if t.kind == tkOp && (t.class == opControl || t.class == opSubOpen || t.class == opSubClose) {
			g.whole = true
		}
	}
	canon, ok := renderTokens(toks)
	if !ok {
		canon = src
	}
	g.canon = canon
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		// A * that is a whole word after a separator also matches no
		// word at all: "go test *" matches "go test".
		if t.kind == tkSep && i+1 < len(toks) && toks[i+1].kind == tkStar &&
			(i+2 == len(toks) || toks[i+2].kind == tkSep || toks[i+2].kind == tkOp && toks[i+2].class != opSubOpen) {
			g.elems = append(g.elems, melem{c: mWords})
			i++
			continue
		}
		g.elems = append(g.elems, elemsOf([]token{t})...)
	}
	for _, e := range g.elems {
		switch e.c {
		case mStar, mQuest, mWords:
			g.exact = false
		default:
			g.literal++
		}
	}
	for _, e := range g.elems {
		if e.c == mStar || e.c == mQuest || e.c == mWords {
			break
		}
		g.prefix = append(g.prefix, e)
	}
	return g, nil
}

// crossOK reports whether a * may match e.
func crossOK(e melem) bool { return e.c == mLit || e.c == mSep || e.c == mXop }

// elemMatch reports whether glob element p matches e.
func elemMatch(p, e melem) bool {
	if p.c == mQuest {
		return e.c == mLit
	}
	return p.c == e.c && p.r == e.r && p.s == e.s
}

// match reports whether the glob matches the whole of t, in time
// proportional to len(g.elems)*len(t).
func (g *cmdGlob) match(t []melem) bool {
	if len(g.prefix) > len(t) {
		return false
	}
	for i, e := range g.prefix {
		if !elemMatch(e, t[i]) {
			return false
		}
	}
	n := len(t)
	prev := make([]bool, n+1)
	cur := make([]bool, n+1)
	prev[0] = true
	for _, p := range g.elems {
		any := false
		switch p.c {
		case mStar:
			cur[0] = prev[0]
			for j := 1; j <= n; j++ {
				cur[j] = prev[j] || cur[j-1] && crossOK(t[j-1])
			}
		case mWords:
			// Nothing, or a run of crossable elements that starts at a
			// word boundary: a separator, or a crossable operator right
			// after the word (go test 2>&1, cat <<EOF).
			cur[0] = prev[0]
			carry := false
			for j := 1; j <= n; j++ {
				e := t[j-1]
				carry = prev[j-1] && (e.c == mSep || e.c == mXop && e.s != subElem) || carry && crossOK(e)
				cur[j] = prev[j] || carry
			}
		default:
			cur[0] = false
			for j := 1; j <= n; j++ {
				cur[j] = prev[j-1] && elemMatch(p, t[j-1])
			}
		}
		for _, v := range cur {
			any = any || v
		}
		if !any {
			return false
		}
		prev, cur = cur, prev
	}
	return prev[n]
}

// wordUnsafe reports whether c must be quoted in a rendered word.
func wordUnsafe(c byte) bool {
	switch c {
	case ' ', '\t', '\r', '\n', '\'', '"', '\\', '`', ';', '&', '|', '<', '>', '(', ')', '*', '?':
		return true
	}
	return c < 0x20 || c == 0x7f
}

// quoteWord renders literal word text so that the lexer reads it back as
// the same literal text (wildcards quoted). A $ needs no quoting: the lexer
// reads only $( and $' specially, and ( and ' are quoted anyway.
func quoteWord(s string) string {
	if s == "" || s[0] == '#' {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	for i := 0; i < len(s); i++ {
		if wordUnsafe(s[i]) {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}

// renderTokens renders tokens as glob text that the lexer reads back (in
// pattern mode) as the same tokens, word text quoted so that it stays
// literal. It fails on tkSub tokens, which have no text.
func renderTokens(toks []token) (string, bool) {
	var b strings.Builder
	space := func() {
		if b.Len() > 0 {
			if c := b.String()[b.Len()-1]; c != ' ' && c != '\n' {
				b.WriteByte(' ')
			}
		}
	}
	for i, t := range toks {
		switch t.kind {
		case tkWord:
			b.WriteString(quoteWord(t.text))
		case tkSep:
			b.WriteByte(' ')
		case tkStar:
			b.WriteByte('*')
		case tkQuest:
			b.WriteByte('?')
		case tkSub:
			return "", false
		case tkOp:
			switch t.class {
			case opSubOpen, opSubClose:
				b.WriteString(t.text)
			case opHeredocBody:
				// Bodies start on the line after their <<; the bodies of
				// several << on one line follow each other.
				if i == 0 || toks[i-1].kind != tkOp || toks[i-1].class != opHeredocBody {
					b.WriteByte('\n')
				}
				b.WriteString(t.text)
				b.WriteString(t.aux)
				b.WriteByte('\n')
			default:
				space()
				b.WriteString(t.text)
				b.WriteByte(' ')
			}
		}
	}
	return strings.TrimRight(b.String(), " "), true
}

// displayTokens renders tokens for people: like renderTokens, with a
// substitution shown as $(…), and cut to at most max runes.
func displayTokens(toks []token, max int) string {
	var b strings.Builder
	for _, t := range toks {
		switch t.kind {
		case tkWord:
			b.WriteString(displayWord(t.text))
		case tkSep:
			b.WriteByte(' ')
		case tkStar:
			b.WriteByte('*')
		case tkQuest:
			b.WriteByte('?')
		case tkSub:
			if t.text == "`" {
				b.WriteString("`…`")
			} else {
				b.WriteString(t.text + "…)")
			}
		case tkOp:
			switch t.class {
			case opHeredocBody:
				b.WriteString(" …" + t.aux + " ")
			case opSubOpen, opSubClose:
				b.WriteString(t.text)
			default:
				b.WriteString(" " + t.text + " ")
			}
		}
	}
	return truncate(strings.Join(strings.Fields(b.String()), " "), max)
}

// displayWord shows word text for people: quoted only when it has blanks,
// quotes or operator characters (not for *, ? or $, which people read
// as they are), a substitution in it shown as $(…).
func displayWord(s string) string {
	if s == "" {
		return "''"
	}
	sub := func(s string) string { return strings.ReplaceAll(s, string(subMark), "$(…)") }
	if strings.ContainsAny(s, " \t\r\n'\"\\`;&|<>()") {
		return sub("'" + strings.ReplaceAll(s, "'", `'\''`) + "'")
	}
	return sub(s)
}

// truncate cuts s to at most max runes, marking the cut with an ellipsis.
func truncate(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max-1]) + "…"
}

// cmdLine is a command line prepared for matching and assessment.
type cmdLine struct {
	toks  []token
	parts []part
	whole []melem   // the whole line
	elems [][]melem // each part
}

// parseLine lexes and splits a command line.
func parseLine(s string) *cmdLine {
	l := &cmdLine{toks: lexCommand(s)}
	l.parts = splitParts(l.toks)
	l.whole = elemsOf(l.toks)
	l.elems = make([][]melem, len(l.parts))
	for i := range l.parts {
		l.elems[i] = elemsOf(l.parts[i].toks)
	}
	return l
}

// hasSubs reports whether the line has substitutions.
func (l *cmdLine) hasSubs() bool {
	for _, t := range l.toks {
		if t.kind == tkOp && t.class == opSubOpen {
			return true
		}
	}
	return false
}

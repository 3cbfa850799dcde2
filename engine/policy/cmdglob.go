package policy

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// A command glob is read like a shell command line (see the package doc
// and shellstmts.go); an unquoted * or ? is a wildcard. Both the glob and the
// command line become sequences of elements, and the glob matches when it
// matches the whole sequence.

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
	toks, err := parsePattern(src)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", errBadCommandGlob, describeSyntaxError(err))
	}
	if len(toks) == 0 {
		return nil, fmt.Errorf("%w: it is empty; leave commands out to match every command", errBadCommandGlob)
	}
	g := &cmdGlob{src: src, exact: true}
	for _, t := range toks {
		if t.kind == tkOp && (t.class == opControl || t.class == opKeyword || t.class == opSubOpen || t.class == opSubClose) {
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
	start := make([]bool, len(t)+1)
	start[0] = true
	end := g.ends(t, start)
	return end != nil && end[len(t)]
}

// search reports whether the glob matches a run of whole words of t,
// which holds the raw words of a line the parser rejected.
func (g *cmdGlob) search(t []melem) bool {
	n := len(t)
	start := make([]bool, n+1)
	for j := range start {
		start[j] = j == 0 || t[j-1].c == mSep
	}
	for j, ok := range g.ends(t, start) {
		if ok && (j == n || t[j].c == mSep) {
			return true
		}
	}
	return false
}

// ends returns, for each j, whether the glob matches t[i:j] for some i
// with start[i]; nil when it matches nowhere. It reuses start.
func (g *cmdGlob) ends(t []melem, start []bool) []bool {
	n := len(t)
	prev, cur := start, make([]bool, n+1)
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
			return nil
		}
		prev, cur = cur, prev
	}
	return prev
}

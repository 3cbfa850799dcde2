package policy

import (
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"
)

// quoteWord renders literal word text so that parsePattern reads it back
// as the same literal text, wildcards quoted: as syntax.Quote does for
// bash, except that the first = stays unquoted (so that NAME=value and
// --flag=value read as written) and let, which the parser reads as
// arithmetic, is always quoted.
func quoteWord(s string) string {
	if s == "let" {
		return "'let'"
	}
	if before, after, ok := strings.Cut(s, "="); ok && before != "" {
		return quoteText(before) + "=" + quoteText(after)
	}
	return quoteText(s)
}

func quoteText(s string) string {
	q, err := syntax.Quote(s, syntax.LangBash)
	if err != nil {
		// Only NUL bytes, which words never hold, fail.
		return singleQuote(s)
	}
	return q
}

// singleQuote quotes s in single quotes, as sh reads it.
func singleQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// writeWordToken writes a word, separator or wildcard, word text as word
// gives it; it reports false for other tokens.
func writeWordToken(b *strings.Builder, t token, word func(string) string) bool {
	switch t.kind {
	case tkWord:
		b.WriteString(word(t.text))
	case tkSep:
		b.WriteByte(' ')
	case tkStar:
		b.WriteByte('*')
	case tkQuest:
		b.WriteByte('?')
	default:
		return false
	}
	return true
}

// renderTokens renders tokens as glob text that parsePattern reads back
// as the same tokens, word text quoted so that it stays literal. It fails
// on tkSub tokens, which have no text.
func renderTokens(toks []token) (string, bool) {
	var r renderer
	for _, t := range toks {
		switch {
		case writeWordToken(&r.b, t, quoteWord):
		case t.kind == tkSub:
			return "", false
		default:
			r.op(t)
		}
	}
	r.depth = 0
	r.flush()
	return strings.TrimRight(r.b.String(), " "), true
}

// renderer writes the glob text of renderTokens. Here-document bodies
// follow the next newline, which it writes for the first ; or & after
// them, or before the end of the substitution, subshell or case item they
// are in (which the parser reads as nested text), or at the end.
type renderer struct {
	b      strings.Builder
	bodies []pendingBody // here-document bodies waiting for a newline
	depth  int           // nested substitutions, subshells and case items
}

type pendingBody struct {
	t     token
	depth int
}

// op writes an operator.
func (r *renderer) op(t token) {
	switch {
	case t.class == opSubOpen:
		r.b.WriteString(t.text)
		r.depth++
	case t.class == opSubClose:
		r.flush()
		r.b.WriteString(t.text)
		r.depth--
	case t.class == opRaw:
		r.b.WriteString(t.text)
	case t.class == opHeredocBody:
		r.bodies = append(r.bodies, pendingBody{t, r.depth})
		r.space()
	case t.class == opHeredoc:
		r.space()
		r.b.WriteString(t.text + t.aux + " ")
	case t.class == opControl && t.text == ";":
		if !r.flush() { // a newline ends the statement as well
			r.spaced(t.text)
		}
	case t.class == opControl && t.text == "&":
		r.spaced(t.text)
		r.flush()
	case t.class == opControl && t.text == "(", t.class == opKeyword && t.text == ")":
		r.spaced(t.text)
		r.depth++
	case t.class == opControl && t.text == ")", t.class == opKeyword && strings.HasPrefix(t.text, ";"):
		r.flush()
		r.spaced(t.text)
		r.depth--
	default:
		r.spaced(t.text)
	}
}

// space writes a blank unless one ends the text.
func (r *renderer) space() {
	if n := r.b.Len(); n > 0 {
		if c := r.b.String()[n-1]; c != ' ' && c != '\n' {
			r.b.WriteByte(' ')
		}
	}
}

// spaced writes text between blanks.
func (r *renderer) spaced(text string) {
	r.space()
	r.b.WriteString(text)
	r.b.WriteByte(' ')
}

// flush writes the bodies pending at the current depth after a newline;
// it reports whether there were any.
func (r *renderer) flush() bool {
	n := len(r.bodies)
	for n > 0 && r.bodies[n-1].depth >= r.depth {
		n--
	}
	if n == len(r.bodies) {
		return false
	}
	r.b.WriteByte('\n')
	for _, h := range r.bodies[n:] {
		r.b.WriteString(h.t.text)
		r.b.WriteString(h.t.aux)
		r.b.WriteByte('\n')
	}
	r.bodies = r.bodies[:n]
	return true
}

// displayTokens renders tokens for people: like renderTokens, with a
// substitution shown as $(…), and cut to at most max runes.
func displayTokens(toks []token, max int) string {
	var b strings.Builder
	for _, t := range toks {
		if writeWordToken(&b, t, displayWord) {
			continue
		}
		switch t.kind {
		case tkSub:
			b.WriteString(t.text + "…" + t.aux)
		case tkOp:
			switch t.class {
			case opHeredoc:
				b.WriteString(" " + t.text + t.aux + " ")
			case opHeredocBody:
				b.WriteString(" …" + t.aux + " ")
			case opSubOpen, opSubClose, opRaw:
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
		return sub(singleQuote(s))
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

package policy

import (
	"errors"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// redirect reads one redirection.
func (f *flattener) redirect(r *syntax.Redirect) {
	op := r.Op.String()
	if r.N != nil {
		op = r.N.Value + op
	}
	class := opRedirOut
	switch r.Op {
	case syntax.RdrIn, syntax.WordHdoc:
		class = opRedirIn
	case syntax.Hdoc, syntax.DashHdoc:
		f.heredoc(r, op)
		return
	case syntax.DplIn, syntax.DplOut:
		if fd := r.Word.Lit(); isDescriptor(fd) {
			f.op(opRedirDup, op+fd)
			f.addRedirect(redirect{op: op + fd, class: opRedirDup})
			return
		}
		if r.Op == syntax.DplIn {
			class = opRedirIn
		}
	}
	f.op(class, op)
	whole, part := len(f.toks)-1, -1
	if f.cur >= 0 {
		part = len(f.parts[f.cur].toks) - 1
	}
	target, plain := f.wordPlain(r.Word, true)
	if class == opRedirOut && plain && quietTarget(target) {
		if f.hidden == 0 {
			f.toks[whole].benign = true
		}
		if part >= 0 {
			f.parts[f.cur].toks[part].benign = true
		}
	}
	f.addRedirect(redirect{op: op, class: class, target: target})
}

// isDescriptor reports whether the word after >& or <& names a file
// descriptor (or closes one, -) rather than a file.
func isDescriptor(s string) bool {
	if s == "-" {
		return true
	}
	s = strings.TrimSuffix(s, "-") // N>&M- moves M
	return s != "" && strings.Trim(s, "0123456789") == ""
}

func (f *flattener) addRedirect(r redirect) {
	if f.cur >= 0 {
		f.parts[f.cur].redirs = append(f.parts[f.cur].redirs, r)
	}
}

// heredoc reads << or <<-: an opHeredoc token with the delimiter as
// written (quoted or not, which decides whether the body is expanded) and
// an opHeredocBody token with the body. Substitutions in an expanded body
// are parts of their own.
func (f *flattener) heredoc(r *syntax.Redirect, op string) {
	delim, quoted := heredocDelimiter(r.Word)
	written := delim
	if quoted {
		written = singleQuote(delim)
	}
	f.emit(token{kind: tkOp, class: opHeredoc, text: op, aux: written})
	body := ""
	if r.Hdoc != nil {
		if start, end := r.Hdoc.Pos().Offset(), r.Hdoc.End().Offset(); start <= end && end <= uint(len(f.src)) {
			body = f.src[start:end]
			// The last line is the delimiter's.
			body = body[:strings.LastIndexByte(body, '\n')+1]
		}
	}
	f.emit(token{kind: tkOp, class: opHeredocBody, text: body, aux: delim})
	f.addRedirect(redirect{op: op, class: opHeredoc, target: body})
	if f.hidden > 0 && f.err == nil {
		f.err = errNestedHeredoc
	}
	if r.Hdoc == nil || quoted {
		return
	}
	f.hidden++
	for _, p := range substitutionsIn(r.Hdoc) {
		_, stmts := substituted(p)
		f.inside(func() { f.list(stmts, false) })
	}
	f.hidden--
}

// errNestedHeredoc is the error for a here-document opened by a command
// substituted in another one's body. The whole line holds the outer body
// as one token, which cannot hold the inner one's (and the parser puts it
// where bash would not).
var errNestedHeredoc = errors.New("a here-document inside a substitution in a here-document's body is not supported")

// heredocDelimiter returns a here-document's delimiter with quotes
// removed, and whether any of it was quoted.
func heredocDelimiter(w *syntax.Word) (string, bool) {
	var b strings.Builder
	quoted := false
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			if strings.Contains(p.Value, `\`) {
				quoted = true
			}
			for i := 0; i < len(p.Value); i++ {
				if p.Value[i] == '\\' && i+1 < len(p.Value) {
					i++
				}
				b.WriteByte(p.Value[i])
			}
		case *syntax.SglQuoted:
			quoted = true
			if p.Dollar {
				b.WriteString(ansiC(p.Value))
			} else {
				b.WriteString(p.Value)
			}
		case *syntax.DblQuoted:
			quoted = true
			for _, q := range p.Parts {
				if l, ok := q.(*syntax.Lit); ok {
					b.WriteString(unescapeDouble(l.Value))
					continue
				}
				b.WriteString(printText(q))
			}
		default:
			b.WriteString(printText(p))
		}
	}
	return b.String(), quoted
}

package policy

import (
	"errors"
	"strings"
)

// This file reads shell command lines well enough to match command globs
// and assess risk: words with quoting removed, operators, substitutions and
// here-documents. It is not a shell: it never expands anything, and it
// never fails on a command line (unbalanced quotes and parentheses end at
// the end of the text). Command globs are read by the same lexer in pattern
// mode, where an unquoted * or ? is a wildcard and syntax errors are
// reported.

// tokKind is what a token is.
type tokKind uint8

const (
	tkWord  tokKind = iota // literal text of a word (or of a piece of one)
	tkSep                  // the boundary between two words
	tkOp                   // an operator; token.class says which
	tkStar                 // pattern mode: an unquoted *
	tkQuest                // pattern mode: an unquoted ?
	tkSub                  // a part's tokens only: one substitution, whose commands are parts of their own
)

// opClass classifies operators.
type opClass uint8

const (
	opNone        opClass = iota
	opControl             // ; & && || | |& ;; ( ) and a newline (as ;)
	opSubOpen             // $( ` <( >(
	opSubClose            // ) or ` that closes a substitution
	opRedirOut            // > >> >| &> &>> <> >&word: writes a file
	opRedirIn             // < <<< <&word: reads a file or a string
	opRedirDup            // N>&M, N<&M, >&-: duplicates or closes a descriptor
	opHeredoc             // << <<-
	opHeredocBody         // the body of a here-document (text), delimiter in aux
)

// token is one lexical unit. Adjacent tokens with no tkSep or control
// operator between them belong to the same word.
type token struct {
	kind  tokKind
	class opClass
	text  string
	aux   string // opHeredocBody: the delimiter
	// benign marks an output redirection to /dev/null, which a command
	// glob's * may cross.
	benign bool
}

// lexFrame is an open substitution or subshell.
type lexFrame struct {
	closer       byte // ')' or '`'
	subshell     bool // a ( subshell rather than a substitution
	resumeDouble bool // it opened inside double quotes
}

// pendingHeredoc is a here-document whose body starts at the next newline.
type pendingHeredoc struct {
	delim     string
	stripTabs bool
}

type lexMode uint8

const (
	modeNormal lexMode = iota
	modeSingle
	modeDouble
	modeANSI // $'...'
)

// lexer turns a command line (or a command glob) into tokens.
type lexer struct {
	s       string
	i       int
	pattern bool
	mode    lexMode

	toks []token
	buf  strings.Builder
	// inWord: a word has started (perhaps empty, as with ''); wordToks
	// counts the tokens already emitted for it; digits: it is so far
	// only unquoted digits (a descriptor number before < or >).
	inWord   bool
	wordToks int
	digits   bool

	stack     []lexFrame
	wantDelim int // 1: the next word is a << delimiter; 2: a <<- one
	heredocs  []pendingHeredoc
	err       error
}

// errors of pattern syntax.
var (
	errUnterminatedSingle = errors.New("unterminated single quote")
	errUnterminatedDouble = errors.New("unterminated double quote")
	errUnclosed           = errors.New("unclosed $(, ( or backquote")
	errUnopened           = errors.New("unbalanced )")
)

// lexCommand returns the normalised tokens of a command line.
func lexCommand(s string) []token {
	l := &lexer{s: s}
	l.run()
	return normalize(l.toks)
}

// lexPattern returns the normalised tokens of a command glob, or a syntax
// error.
func lexPattern(s string) ([]token, error) {
	l := &lexer{s: s, pattern: true}
	l.run()
	if l.err != nil {
		return nil, l.err
	}
	return normalize(l.toks), nil
}

func (l *lexer) fail(err error) {
	if l.err == nil {
		l.err = err
	}
}

func (l *lexer) emit(t token) {
	if t.kind == tkOp {
		// A << delimiter is the word right after the <<, or there is
		// none.
		l.wantDelim = 0
	}
	l.toks = append(l.toks, t)
}

// flush emits the literal text collected so far as a word piece.
func (l *lexer) flush() {
	if l.buf.Len() > 0 {
		l.emit(token{kind: tkWord, text: l.buf.String()})
		l.buf.Reset()
		l.wordToks++
	}
}

// endWord ends the current word, emitting an empty word for ” or "".
func (l *lexer) endWord() {
	if !l.inWord {
		return
	}
	if l.buf.Len() == 0 && l.wordToks == 0 {
		l.emit(token{kind: tkWord})
		l.wordToks++
	}
	word := l.buf.String()
	l.flush()
	if l.wantDelim != 0 {
		l.heredocs = append(l.heredocs, pendingHeredoc{delim: word, stripTabs: l.wantDelim == 2})
		l.wantDelim = 0
	}
	l.inWord, l.wordToks, l.digits = false, 0, false
}

// lit adds literal bytes to the current word.
func (l *lexer) lit(b byte, quoted bool) {
	if !l.inWord {
		l.digits = !quoted && b >= '0' && b <= '9'
	} else {
		l.digits = l.digits && !quoted && b >= '0' && b <= '9'
	}
	l.inWord = true
	l.buf.WriteByte(b)
}

// startQuote marks the current word as started by a quote.
func (l *lexer) startQuote(m lexMode) {
	l.inWord = true
	l.digits = false
	l.mode = m
}

func (l *lexer) peek(k int) byte {
	if l.i+k < len(l.s) {
		return l.s[l.i+k]
	}
	return 0
}

func (l *lexer) op(class opClass, text string) {
	l.emit(token{kind: tkOp, class: class, text: text})
}

// openSub opens a substitution (in the middle of a word or not): its
// commands start with no word, and the word it sits in goes on after it.
func (l *lexer) openSub(text string, closer byte, inDouble bool) {
	l.flush()
	l.stack = append(l.stack, lexFrame{closer: closer, resumeDouble: inDouble})
	l.op(opSubOpen, text)
	l.inWord, l.wordToks, l.digits = false, 0, false
	l.mode = modeNormal
}

// closeFrame closes the innermost frame (its closer was just read).
func (l *lexer) closeFrame() {
	f := l.stack[len(l.stack)-1]
	l.stack = l.stack[:len(l.stack)-1]
	l.endWord()
	if f.subshell {
		l.op(opControl, ")")
		return
	}
	l.op(opSubClose, string(f.closer))
	// The word the substitution sat in goes on.
	l.inWord, l.wordToks, l.digits = true, 1, false
	if f.resumeDouble {
		l.mode = modeDouble
	}
}

func (l *lexer) run() {
	for l.i < len(l.s) {
		c := l.s[l.i]
		switch l.mode {
		case modeSingle:
			if c == '\'' {
				l.mode = modeNormal
			} else {
				l.lit(c, true)
			}
			l.i++
			continue
		case modeANSI:
			switch {
			case c == '\'':
				l.mode = modeNormal
			case c == '\\' && l.i+1 < len(l.s):
				l.i++
				switch e := l.s[l.i]; e {
				case 'n':
					l.lit('\n', true)
				case 't':
					l.lit('\t', true)
				case '\\', '\'', '"':
					l.lit(e, true)
				default:
					l.lit('\\', true)
					l.lit(e, true)
				}
			default:
				l.lit(c, true)
			}
			l.i++
			continue
		case modeDouble:
			l.double(c)
			continue
		}
		l.normal(c)
	}
	l.endWord()
	switch l.mode {
	case modeSingle, modeANSI:
		l.fail(errUnterminatedSingle)
	case modeDouble:
		l.fail(errUnterminatedDouble)
	}
	if len(l.stack) > 0 {
		l.fail(errUnclosed)
	}
}

// double reads one character inside double quotes.
func (l *lexer) double(c byte) {
	switch c {
	case '"':
		l.mode = modeNormal
		l.i++
	case '\\':
		n := l.peek(1)
		switch n {
		case '$', '`', '"', '\\':
			l.lit(n, true)
			l.i += 2
		case '\n':
			l.i += 2
		default:
			l.lit('\\', true)
			l.i++
		}
	case '$':
		if l.peek(1) == '(' {
			l.i += 2
			l.openSub("$(", ')', true)
			return
		}
		l.lit(c, true)
		l.i++
	case '`':
		l.i++
		if n := len(l.stack); n > 0 && l.stack[n-1].closer == '`' {
			// As in sh, the closing backquote of a `…` substitution
			// ends it even inside double quotes.
			l.mode = modeNormal
			l.closeFrame()
			return
		}
		l.openSub("`", '`', true)
	default:
		l.lit(c, true)
		l.i++
	}
}

// normal reads one character outside quotes.
func (l *lexer) normal(c byte) {
	switch c {
	case ' ', '\t', '\r':
		l.endWord()
		if n := len(l.toks); n == 0 || l.toks[n-1].kind != tkSep {
			l.emit(token{kind: tkSep})
		}
		l.i++
	case '\n':
		l.endWord()
		l.i++
		l.readHeredocs()
		l.op(opControl, ";")
	case '\\':
		switch {
		case l.i+1 >= len(l.s):
			l.lit('\\', true)
			l.i++
		case l.s[l.i+1] == '\n':
			l.i += 2
		default:
			l.lit(l.s[l.i+1], true)
			l.i += 2
		}
	case '\'':
		l.startQuote(modeSingle)
		l.i++
	case '"':
		l.startQuote(modeDouble)
		l.i++
	case '$':
		switch l.peek(1) {
		case '(':
			l.i += 2
			l.openSub("$(", ')', false)
		case '\'':
			l.i += 2
			l.startQuote(modeANSI)
		default:
			l.lit(c, false)
			l.i++
		}
	case '`':
		l.i++
		if n := len(l.stack); n > 0 && l.stack[n-1].closer == '`' {
			l.closeFrame()
			return
		}
		l.openSub("`", '`', false)
	case '(':
		l.endWord()
		l.i++
		l.stack = append(l.stack, lexFrame{closer: ')', subshell: true})
		l.op(opControl, "(")
	case ')':
		l.i++
		if n := len(l.stack); n > 0 && l.stack[n-1].closer == ')' {
			l.closeFrame()
			return
		}
		l.fail(errUnopened)
		l.endWord()
		l.op(opControl, ")")
	case ';':
		l.endWord()
		if l.peek(1) == ';' {
			l.i += 2
			l.op(opControl, ";;")
			return
		}
		l.i++
		l.op(opControl, ";")
	case '&':
		l.endWord()
		switch {
		case l.peek(1) == '&':
			l.i += 2
			l.op(opControl, "&&")
		case l.peek(1) == '>' && l.peek(2) == '>':
			l.i += 3
			l.op(opRedirOut, "&>>")
		case l.peek(1) == '>':
			l.i += 2
			l.op(opRedirOut, "&>")
		default:
			l.i++
			l.op(opControl, "&")
		}
	case '|':
		l.endWord()
		switch l.peek(1) {
		case '|':
			l.i += 2
			l.op(opControl, "||")
		case '&':
			l.i += 2
			l.op(opControl, "|&")
		default:
			l.i++
			l.op(opControl, "|")
		}
	case '<', '>':
		l.redirect(c)
	case '#':
		if l.inWord {
			l.lit(c, false)
			l.i++
			return
		}
		for l.i < len(l.s) && l.s[l.i] != '\n' {
			l.i++
		}
	case '*', '?':
		if !l.pattern {
			l.lit(c, false)
			l.i++
			return
		}
		l.flush()
		kind := tkStar
		if c == '?' {
			kind = tkQuest
		}
		l.emit(token{kind: kind})
		l.inWord, l.digits = true, false
		l.wordToks++
		l.i++
	default:
		l.lit(c, false)
		l.i++
	}
}

// redirect reads a redirection or process substitution starting at < or >.
func (l *lexer) redirect(c byte) {
	fd := ""
	if l.inWord && l.digits && l.wordToks == 0 {
		fd = l.buf.String()
		l.buf.Reset()
		l.inWord, l.digits = false, false
	} else {
		l.endWord()
	}
	if l.peek(1) == '(' && fd == "" {
		l.i += 2
		l.stack = append(l.stack, lexFrame{closer: ')'})
		l.op(opSubOpen, string(c)+"(")
		return
	}
	var text string
	class := opRedirOut
	switch {
	case c == '>' && l.peek(1) == '>':
		text = ">>"
	case c == '>' && l.peek(1) == '|':
		text = ">|"
	case c == '>' && l.peek(1) == '&':
		text = ">&"
	case c == '>':
		text = ">"
	case l.peek(1) == '<' && l.peek(2) == '<':
		text, class = "<<<", opRedirIn
	case l.peek(1) == '<' && l.peek(2) == '-':
		text, class = "<<-", opHeredoc
	case l.peek(1) == '<':
		text, class = "<<", opHeredoc
	case l.peek(1) == '&':
		text, class = "<&", opRedirIn
	case l.peek(1) == '>':
		text = "<>"
	default:
		text, class = "<", opRedirIn
	}
	l.i += len(text)
	if text == ">&" || text == "<&" {
		// A descriptor number or - makes it a duplication.
		j := l.i
		for j < len(l.s) && l.s[j] >= '0' && l.s[j] <= '9' {
			j++
		}
		if j == l.i && j < len(l.s) && l.s[j] == '-' {
			j++
		}
		if j > l.i && (j == len(l.s) || isWordEnd(l.s[j])) {
			l.emit(token{kind: tkOp, class: opRedirDup, text: fd + text + l.s[l.i:j]})
			l.i = j
			return
		}
	}
	l.op(class, fd+text)
	if class == opHeredoc {
		l.wantDelim = 1
		if text == "<<-" {
			l.wantDelim = 2
		}
	}
}

// isWordEnd reports whether b ends an unquoted word.
func isWordEnd(b byte) bool {
	switch b {
	case ' ', '\t', '\r', '\n', ';', '&', '|', '<', '>', '(', ')':
		return true
	}
	return false
}

// readHeredocs reads the bodies of pending here-documents, starting at
// l.i (just after a newline), and emits one token per body.
func (l *lexer) readHeredocs() {
	for _, h := range l.heredocs {
		var body strings.Builder
		for l.i < len(l.s) {
			end := strings.IndexByte(l.s[l.i:], '\n')
			line := l.s[l.i:]
			if end >= 0 {
				line = l.s[l.i : l.i+end]
			}
			next := l.i + len(line)
			if end >= 0 {
				next++
			}
			cmp := line
			if h.stripTabs {
				cmp = strings.TrimLeft(line, "\t")
			}
			l.i = next
			if cmp == h.delim {
				break
			}
			body.WriteString(line)
			body.WriteByte('\n')
		}
		l.emit(token{kind: tkOp, class: opHeredocBody, text: body.String(), aux: h.delim})
	}
	l.heredocs = l.heredocs[:0]
	l.wantDelim = 0
}

// wordEnding reports whether t can end a word (a tkSep after it separates
// words).
func wordEnding(t token) bool {
	switch t.kind {
	case tkWord, tkStar, tkQuest, tkSub:
		return true
	case tkOp:
		return t.class == opSubClose
	}
	return false
}

// wordStarting reports whether t can start a word.
func wordStarting(t token) bool {
	switch t.kind {
	case tkWord, tkStar, tkQuest, tkSub:
		return true
	case tkOp:
		return t.class == opSubOpen
	}
	return false
}

// normalize gives equivalent command lines the same tokens: separators
// only between words, no empty commands (a ; at the start or end, after
// another control operator or around a parenthesis), and /dev/null
// redirections marked benign.
func normalize(in []token) []token {
	out := make([]token, 0, len(in))
	for i, t := range in {
		switch {
		case t.kind == tkSep:
			if len(out) == 0 || !wordEnding(out[len(out)-1]) {
				continue
			}
			// The next token that is not a separator must start a word.
			j := i + 1
			for j < len(in) && in[j].kind == tkSep {
				j++
			}
			if j == len(in) || !wordStarting(in[j]) {
				continue
			}
			if out[len(out)-1].kind == tkSep {
				continue
			}
		case t.kind == tkOp && t.class == opControl && t.text == ";":
			if len(out) == 0 {
				continue
			}
			p := out[len(out)-1]
			if p.kind == tkOp && (p.class == opControl && p.text != ")" || p.class == opSubOpen) {
				continue
			}
		case t.kind == tkOp && (t.class == opSubClose || t.class == opControl && t.text == ")"):
			// Drop ; right before a closing parenthesis or backquote.
			for len(out) > 0 && out[len(out)-1].kind == tkOp && out[len(out)-1].class == opControl && out[len(out)-1].text == ";" {
				out = out[:len(out)-1]
			}
		}
		out = append(out, t)
	}
	for len(out) > 0 {
		last := out[len(out)-1]
		if last.kind == tkOp && last.class == opControl && last.text == ";" || last.kind == tkSep {
			out = out[:len(out)-1]
			continue
		}
		break
	}
	for i := range out {
		if out[i].kind != tkOp || out[i].class != opRedirOut {
			continue
		}
		if i+1 < len(out) && out[i+1].kind == tkWord && quietTarget(out[i+1].text) &&
			(i+2 == len(out) || !wordContinues(out[i+2])) {
			out[i].benign = true
		}
	}
	return out
}

// wordContinues reports whether t, right after a word piece, continues
// the same word.
func wordContinues(t token) bool {
	switch t.kind {
	case tkWord, tkStar, tkQuest, tkSub:
		return true
	case tkOp:
		return t.class == opSubOpen
	}
	return false
}

// quietTarget reports whether writing to name discards or shows the
// output rather than changing a file.
func quietTarget(name string) bool {
	switch name {
	case "/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty":
		return true
	}
	return strings.HasPrefix(name, "/dev/fd/")
}

// subMark stands for a substitution inside a word of a part.
const subMark = '\uE000'

// part is one simple command of a command line: the commands joined by
// ; && || | & and the commands inside substitutions are separate parts.
type part struct {
	// toks are the part's own tokens; each substitution in it is one
	// tkSub token, its commands are parts of their own.
	toks []token
	// parent is the index of the part whose substitution holds this one,
	// -1 at the top level.
	parent int
	// pipe identifies the pipeline the part belongs to.
	pipe int

	words  []string // arguments, quotes removed, substitutions as subMark
	redirs []redirect
}

// redirect is one redirection of a part.
type redirect struct {
	op     string
	class  opClass
	target string // the file, the here-string, or the here-document body
}

// splitParts splits normalised tokens into parts, in the order their
// first token appears.
func splitParts(toks []token) []part {
	type level struct {
		cur    int // index of the part being read, -1 for none
		parent int
		pipe   int
	}
	var parts []part
	pipes := 0
	stack := []level{{cur: -1, parent: -1}}
	var heredocOwners []int // parts with a << whose body has not come yet
	current := func() int {
		top := &stack[len(stack)-1]
		if top.cur < 0 {
			parts = append(parts, part{parent: top.parent, pipe: top.pipe})
			top.cur = len(parts) - 1
		}
		return top.cur
	}
	for _, t := range toks {
		switch {
		case t.kind == tkOp && t.class == opControl:
			top := &stack[len(stack)-1]
			top.cur = -1
			if t.text != "|" && t.text != "|&" {
				pipes++
				top.pipe = pipes
			}
		case t.kind == tkOp && t.class == opSubOpen:
			idx := current()
			parts[idx].toks = append(parts[idx].toks, token{kind: tkSub, text: t.text})
			pipes++
			stack = append(stack, level{cur: -1, parent: idx, pipe: pipes})
		case t.kind == tkOp && t.class == opSubClose:
			if len(stack) > 1 {
				stack = stack[:len(stack)-1]
			}
		case t.kind == tkOp && t.class == opHeredocBody:
			idx := -1
			if len(heredocOwners) > 0 {
				idx, heredocOwners = heredocOwners[0], heredocOwners[1:]
			} else {
				idx = current()
			}
			parts[idx].toks = append(parts[idx].toks, t)
		default:
			idx := current()
			parts[idx].toks = append(parts[idx].toks, t)
			if t.kind == tkOp && t.class == opHeredoc {
				heredocOwners = append(heredocOwners, idx)
			}
		}
	}
	for i := range parts {
		parts[i].analyze()
	}
	return parts
}

// analyze fills in words and redirections from toks.
func (p *part) analyze() {
	var w strings.Builder
	inWord := false
	pending := -1      // index in p.redirs of a redirection waiting for its word
	var heredocs []int // indices of << redirections, in order
	bodies := 0        // here-document bodies seen
	endWord := func() {
		if !inWord {
			return
		}
		if pending >= 0 {
			if p.redirs[pending].class != opHeredoc {
				p.redirs[pending].target = w.String()
			}
			pending = -1
		} else {
			p.words = append(p.words, w.String())
		}
		w.Reset()
		inWord = false
	}
	for _, t := range p.toks {
		switch t.kind {
		case tkWord:
			w.WriteString(t.text)
			inWord = true
		case tkStar:
			w.WriteByte('*')
			inWord = true
		case tkQuest:
			w.WriteByte('?')
			inWord = true
		case tkSub:
			w.WriteRune(subMark)
			inWord = true
		case tkSep:
			endWord()
		case tkOp:
			endWord()
			pending = -1
			switch t.class {
			case opRedirOut, opRedirIn, opHeredoc:
				p.redirs = append(p.redirs, redirect{op: t.text, class: t.class})
				pending = len(p.redirs) - 1
				if t.class == opHeredoc {
					heredocs = append(heredocs, pending)
				}
			case opRedirDup:
				p.redirs = append(p.redirs, redirect{op: t.text, class: t.class})
			case opHeredocBody:
				// Bodies come in the order of their << (the target of
				// a << is its body, not its delimiter word).
				if bodies < len(heredocs) {
					p.redirs[heredocs[bodies]].target = t.text
				}
				bodies++
			}
		}
	}
	endWord()
}

package policy

import (
	"strings"
)

// cmdLine is a command line prepared for matching and assessment.
type cmdLine struct {
	// err is why the parser rejected the line. Then toks and parts hold
	// the line's raw words (see rawParts), for deny rules and the risk
	// heuristic.
	err   error
	toks  []token
	parts []part
	whole []melem   // the whole line
	elems [][]melem // each part
}

// parseLine reads a command line with mvdan.cc/sh/v3/syntax (bash). It
// never fails: a line the parser rejects (or that flatten cannot read)
// gets err and its raw words. A line of nothing but blanks and semicolons
// is empty.
func parseLine(s string) *cmdLine {
	l := &cmdLine{}
	if strings.Trim(s, " \t\n;") != "" {
		file, err := parseShell(s)
		var f *flattener
		if err == nil {
			f = flatten(file, s, false)
			err = f.err
		}
		if err != nil {
			l.err = err
			l.toks, l.parts = rawParts(s)
		} else {
			l.toks, l.parts = f.toks, f.parts
		}
	}
	l.whole = elemsOf(l.toks)
	l.elems = make([][]melem, len(l.parts))
	for i := range l.parts {
		l.elems[i] = elemsOf(l.parts[i].toks)
	}
	return l
}

// parsePattern reads a command glob: like a command line, with an unquoted
// * or ? as a wildcard. Errors are parseShell's, or errNestedHeredoc.
func parsePattern(s string) ([]token, error) {
	if strings.Trim(s, " \t\n;") == "" {
		return nil, nil
	}
	file, err := parseShell(s)
	if err != nil {
		return nil, err
	}
	f := flatten(file, s, true)
	return f.toks, f.err
}

// hasSubs reports whether the line has substitutions (or arithmetic).
func (l *cmdLine) hasSubs() bool {
	for _, p := range l.parts {
		if p.parent >= 0 {
			return true
		}
	}
	return false
}

// rawParts splits a line the parser rejects into parts of words, as a
// guess at what a shell would run: quote characters and backslashes are
// dropped, blanks, < and > separate words, and ; & | ( ) ` and newlines
// separate parts. The tokens of the whole line join the parts with ;.
func rawParts(s string) ([]token, []part) {
	s = strings.Map(func(r rune) rune {
		if r == '\'' || r == '"' || r == '\\' {
			return -1
		}
		return r
	}, s)
	var toks []token
	var parts []part
	for i, cmd := range strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(";&|()`\n", r) }) {
		words := strings.FieldsFunc(cmd, func(r rune) bool { return strings.ContainsRune(" \t\r<>", r) })
		if len(words) == 0 {
			continue
		}
		p := part{words: words, parent: -1, pipe: i}
		for j, w := range words {
			if j > 0 {
				p.toks = append(p.toks, token{kind: tkSep})
			}
			p.toks = append(p.toks, token{kind: tkWord, text: w})
		}
		if len(parts) > 0 {
			toks = append(toks, token{kind: tkOp, class: opControl, text: ";"})
		}
		toks = append(toks, p.toks...)
		parts = append(parts, p)
	}
	return toks, parts
}

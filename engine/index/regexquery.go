package index

import (
	"regexp/syntax"
	"slices"
	"strings"
	"unicode/utf8"
)

// query is a boolean condition on the trigrams a file must contain for a
// pattern to match in it: all of tris and all of and, and (when or is not
// empty) at least one of or. The zero query matches every file. It is a
// simplification of the trigram query of Russ Cox's Code Search
// (github.com/google/codesearch, index/regexp.go): literals and their
// concatenations contribute trigrams; alternations become OR; anything
// that may match the empty string contributes nothing.
type query struct {
	tris []trigram
	and  []*query
	or   []*query
}

// matchesAll reports whether q constrains nothing.
func (q *query) matchesAll() bool {
	return q == nil || (len(q.tris) == 0 && len(q.and) == 0 && len(q.or) == 0)
}

// literalQuery requires every trigram of lit. With fold set (a
// case-insensitive match), non-ASCII runes break the literal (their case
// variants are other bytes; the index folds ASCII only), and a literal with
// k or s also admits the files holding the Kelvin sign or the long s.
func literalQuery(lit string, fold bool) *query {
	q := &query{}
	parts := []string{lit}
	if fold {
		parts = strings.FieldsFunc(lit, func(r rune) bool { return r >= utf8.RuneSelf })
	}
	for _, part := range parts {
		for _, t := range trigramsOf(part) {
			if !slices.Contains(q.tris, t) {
				q.tris = append(q.tris, t)
			}
		}
	}
	if fold && len(q.tris) > 0 && strings.ContainsAny(lit, "kKsS") {
		return &query{or: []*query{q, {tris: []trigram{kelvinTrigram}}, {tris: []trigram{longSTrigram}}}}
	}
	return q
}

// regexpQuery computes the trigram condition of a parsed expression.
func regexpQuery(re *syntax.Regexp) *query {
	switch re.Op {
	case syntax.OpLiteral:
		return literalQuery(string(re.Rune), re.Flags&syntax.FoldCase != 0)
	case syntax.OpCapture, syntax.OpPlus:
		return regexpQuery(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return regexpQuery(re.Sub[0])
		}
	case syntax.OpConcat:
		q := &query{}
		// Adjacent literals form one string, so trigrams across them
		// count.
		var run strings.Builder
		fold := false
		flush := func() {
			if run.Len() > 0 {
				q.and = append(q.and, literalQuery(run.String(), fold))
				run.Reset()
			}
		}
		for _, sub := range re.Sub {
			if sub.Op == syntax.OpLiteral {
				f := sub.Flags&syntax.FoldCase != 0
				if run.Len() > 0 && f != fold {
					flush()
				}
				fold = f
				run.WriteString(string(sub.Rune))
				continue
			}
			flush()
			if sq := regexpQuery(sub); !sq.matchesAll() {
				q.and = append(q.and, sq)
			}
		}
		flush()
		return q.simplify()
	case syntax.OpAlternate:
		q := &query{}
		for _, sub := range re.Sub {
			sq := regexpQuery(sub)
			if sq.matchesAll() {
				return &query{} // one branch can match anything
			}
			q.or = append(q.or, sq)
		}
		return q
	}
	return &query{}
}

// simplify drops empty parts and flattens pure-trigram AND parts.
func (q *query) simplify() *query {
	out := &query{tris: q.tris, or: q.or}
	for _, a := range q.and {
		switch {
		case a.matchesAll():
		case len(a.and) == 0 && len(a.or) == 0:
			for _, t := range a.tris {
				if !slices.Contains(out.tris, t) {
					out.tris = append(out.tris, t)
				}
			}
		default:
			out.and = append(out.and, a)
		}
	}
	return out
}

// patternQuery returns the trigram condition of a text query.
func patternQuery(pattern string, regex, caseInsensitive bool) (*query, error) {
	if !regex {
		return literalQuery(pattern, caseInsensitive), nil
	}
	flags := syntax.Perl
	if caseInsensitive {
		flags |= syntax.FoldCase
	}
	re, err := syntax.Parse(pattern, flags)
	if err != nil {
		return nil, err
	}
	return regexpQuery(re.Simplify()), nil
}

// eval returns the sorted documents that satisfy q, or all=true when q
// constrains nothing. lookup returns a trigram's sorted documents; count
// its list length (cheap), used to intersect the shortest lists first.
func (q *query) eval(lookup func(trigram) []uint32, count func(trigram) int) (docs []uint32, all bool) {
	if q.matchesAll() {
		return nil, true
	}
	have := false
	and := func(list []uint32) {
		if !have {
			docs, have = list, true
			return
		}
		docs = intersect(docs, list)
	}
	tris := slices.Clone(q.tris)
	slices.SortFunc(tris, func(a, b trigram) int { return count(a) - count(b) })
	for _, t := range tris {
		and(lookup(t))
		if len(docs) == 0 {
			return docs, false
		}
	}
	for _, sub := range q.and {
		list, subAll := sub.eval(lookup, count)
		if !subAll {
			and(list)
		}
		if have && len(docs) == 0 {
			return docs, false
		}
	}
	if len(q.or) > 0 {
		var any []uint32
		orAll := false
		for _, sub := range q.or {
			list, subAll := sub.eval(lookup, count)
			if subAll {
				orAll = true // one branch constrains nothing
				break
			}
			any = union(any, list)
		}
		if !orAll {
			and(any)
		}
	}
	return docs, !have
}

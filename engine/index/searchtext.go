package index

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"regexp"
	"regexp/syntax"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/workspace"
)

// Text search limits.
const (
	defaultTextLimit = 100
	maxContextLines  = 20
	// maxLineBytes cuts long lines to a window around the match.
	maxLineBytes = 300
)

// snapshot is a consistent view of an index for one search. The maps and
// segments are never mutated after publication (updates replace them), so
// a snapshot stays valid after the lock is released.
type snapshot struct {
	base, delta *segment
	files       map[string]fileEntry
	paths       map[int64][]string
}

func (ix *Index) snap() snapshot {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return snapshot{base: ix.base, delta: ix.delta, files: ix.files, paths: ix.paths}
}

// segments lists the snapshot's segments.
func (s snapshot) segments() []*segment {
	var out []*segment
	for _, seg := range []*segment{s.base, s.delta} {
		if seg != nil {
			out = append(out, seg)
		}
	}
	return out
}

// pathFilter keeps paths under a prefix and matching a glob.
type pathFilter struct {
	prefix string
	glob   *workspace.Glob
}

func newPathFilter(ix *Index, prefix, include string) (pathFilter, error) {
	var f pathFilter
	if prefix != "" && prefix != "." {
		rel, err := ix.fsroot.Resolve(prefix)
		if err != nil {
			return f, fmt.Errorf("%w: path: %v", engine.ErrInvalidRequest, err)
		}
		if rel != "." {
			f.prefix = strings.ReplaceAll(rel, "\\", "/")
		}
	}
	if include != "" {
		g, err := workspace.ParseGlob(include)
		if err != nil {
			return f, fmt.Errorf("%w: include: %v", engine.ErrInvalidRequest, err)
		}
		f.glob = g
	}
	return f, nil
}

func (f pathFilter) match(p string) bool {
	base := p
	if f.prefix != "" {
		if p != f.prefix && !strings.HasPrefix(p, f.prefix+"/") {
			return false
		}
		base = strings.TrimPrefix(strings.TrimPrefix(p, f.prefix), "/")
	}
	return f.glob.MatchUnder(p, base)
}

// textMatcher finds matching lines in a file. Matching is line-oriented,
// as in grep and ripgrep: a match lies within one line.
type textMatcher struct {
	// lit is a literal matched byte for byte; with fold it is ASCII
	// lower-cased and matched against an ASCII-folded copy of the file.
	lit  []byte
	fold bool
	// re is the expression (for case-insensitive literals, the fallback
	// for files holding the Kelvin sign or the long s). req is a literal
	// every match contains (ASCII-folded when reqFold), used to find the
	// lines worth running re on; nil when the expression has none.
	re      *regexp.Regexp
	req     []byte
	reqFold bool
	// needles, when req is nil, are byte strings one of which every
	// match contains (the case variants of a non-ASCII piece): lines
	// holding none are skipped.
	needles [][]byte
	// before, when set with window and an exact req, holds for k = 1,
	// 2, ... the bytes that may stand k bytes before req in a match: an
	// occurrence after any other byte (or too close to the line's start)
	// is passed over without running re.
	before []*[256]bool
	// window, when positive, bounds a match's length in bytes and the
	// expression has no empty-width assertion: a line is first tested on
	// the bytes within window of each needle occurrence, then matched
	// whole only when that finds a match.
	window int
}

func newTextMatcher(q engine.TextQuery) (*textMatcher, error) {
	if q.Pattern == "" {
		return nil, fmt.Errorf("%w: the pattern is empty", engine.ErrInvalidRequest)
	}
	if strings.ContainsRune(q.Pattern, '\n') || q.Regex && strings.Contains(q.Pattern, `\n`) {
		return nil, fmt.Errorf("%w: the pattern spans lines; matches lie within one line, so search for one line of it", engine.ErrInvalidRequest)
	}
	if !q.Regex && !q.CaseInsensitive {
		return &textMatcher{lit: []byte(q.Pattern)}, nil // bytes, valid UTF-8 or not
	}
	if !utf8.ValidString(q.Pattern) {
		return nil, fmt.Errorf("%w: the pattern is not valid UTF-8 (only a case-sensitive literal may hold arbitrary bytes)", engine.ErrInvalidRequest)
	}
	expr := q.Pattern
	if !q.Regex {
		expr = regexp.QuoteMeta(expr)
	}
	flags := "(?m)"
	if q.CaseInsensitive {
		flags = "(?mi)"
	}
	re, err := regexp.Compile(flags + expr)
	if err != nil {
		return nil, fmt.Errorf("%w: the pattern is not a valid regular expression (RE2 syntax): %v", engine.ErrInvalidRequest, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	}
	m := &textMatcher{re: re}
	if !q.Regex && isASCII(q.Pattern) {
		m.lit, m.fold = foldASCII([]byte(q.Pattern)), true
		return m, nil
	}
	if parsed, err := syntax.Parse(flags+expr, syntax.Perl); err == nil {
		parsed = parsed.Simplify()
		if p, ok := requiredPiece(parsed); ok {
			if p.fold {
				m.req, m.reqFold = foldASCII(p.needles[0]), true
			} else if len(p.needles) == 1 {
				m.req = p.needles[0]
			} else {
				m.needles = p.needles
			}
		}
		if n, ok := maxMatchBytes(parsed); ok && n <= maxLineBytes && (m.req != nil || m.needles != nil) {
			m.window = n
			if m.req != nil && !m.reqFold {
				m.before = bytesBefore(parsed, string(m.req))
			}
		}
	}
	return m, nil
}

// A piece is what requiredPiece finds: byte strings one of which every
// match contains; with fold, one ASCII string matched without regard to
// ASCII case.
type piece struct {
	needles [][]byte
	fold    bool
}

// score ranks pieces: longer needles are rarer, fewer variants cheaper,
// and non-ASCII bytes (rare in code) rarer still; an ASCII-folded one
// costs a folded copy of each file.
func (p piece) score() float64 {
	short, nonASCII := math.MaxInt, true
	for _, n := range p.needles {
		short = min(short, len(n))
		if isASCII(string(n)) {
			nonASCII = false
		}
	}
	sc := float64(short) - 0.1*float64(len(p.needles))
	if nonASCII {
		sc += 2
	}
	if p.fold {
		sc -= 0.5
	}
	return sc
}

// maxFoldVariants bounds the case variants a piece may have.
const maxFoldVariants = 8

// requiredPiece finds the best piece every match of re contains.
func requiredPiece(re *syntax.Regexp) (piece, bool) {
	var best piece
	found := false
	consider := func(p piece, ok bool) {
		if ok && (!found || p.score() > best.score()) {
			best, found = p, true
		}
	}
	switch re.Op {
	case syntax.OpLiteral:
		for _, p := range literalPieces(re.Rune, re.Flags&syntax.FoldCase != 0) {
			consider(p, true)
		}
	case syntax.OpCapture, syntax.OpPlus:
		return requiredPiece(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return requiredPiece(re.Sub[0])
		}
	case syntax.OpConcat:
		// Adjacent literals of one case mode form one run.
		var run []rune
		fold := false
		flush := func() {
			for _, p := range literalPieces(run, fold) {
				consider(p, true)
			}
			run = nil
		}
		for _, sub := range re.Sub {
			if sub.Op == syntax.OpLiteral {
				f := sub.Flags&syntax.FoldCase != 0
				if len(run) > 0 && f != fold {
					flush()
				}
				run, fold = append(run, sub.Rune...), f
				continue
			}
			flush()
			consider(requiredPiece(sub))
		}
		flush()
	}
	return best, found
}

// literalPieces returns the pieces of a literal run: the run itself when
// case is kept; with fold, each ASCII stretch (matched folded), each
// non-ASCII rune with its case variants, and the whole run's variants
// when there are few.
func literalPieces(run []rune, fold bool) []piece {
	if len(run) == 0 {
		return nil
	}
	if !fold {
		return []piece{{needles: [][]byte{[]byte(string(run))}}}
	}
	var out []piece
	start := -1
	for i := 0; i <= len(run); i++ {
		if i < len(run) && run[i] < utf8.RuneSelf {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			out = append(out, piece{needles: [][]byte{[]byte(string(run[start:i]))}, fold: true})
			start = -1
		}
		if i < len(run) {
			out = append(out, piece{needles: foldVariants(run[i : i+1])})
		}
	}
	if all := foldVariants(run); len(all) <= maxFoldVariants && len(run) > 1 {
		out = append(out, piece{needles: all})
	}
	return out
}

// foldVariants returns the UTF-8 spellings of run under simple case
// folding (unicode.SimpleFold), as regexp's (?i) matches them; more than
// maxFoldVariants+1 are not enumerated.
func foldVariants(run []rune) [][]byte {
	out := [][]byte{nil}
	for _, r := range run {
		orbit := []rune{r}
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			orbit = append(orbit, f)
		}
		var next [][]byte
		for _, prefix := range out {
			for _, v := range orbit {
				next = append(next, utf8.AppendRune(slices.Clone(prefix), v))
			}
		}
		out = next
		if len(out) > maxFoldVariants {
			return out
		}
	}
	return out
}

// maxBefore bounds how many bytes before a literal bytesBefore checks.
const maxBefore = 8

// bytesBefore returns, for k = 1, 2, ..., the bytes that may stand k
// bytes before the case-kept literal lit in a match of the concatenation
// re, from the single-character elements that precede lit (nil when none
// does). The byte k before lit belongs to one of the k elements before it:
// it is that element's last byte, or an inner byte (0x80 and up) of a
// multi-byte one.
func bytesBefore(re *syntax.Regexp, lit string) []*[256]bool {
	if re.Op != syntax.OpConcat {
		return nil
	}
	for j := 1; j < len(re.Sub); j++ {
		sub := re.Sub[j]
		if sub.Op != syntax.OpLiteral || sub.Flags&syntax.FoldCase != 0 || string(sub.Rune) != lit {
			continue
		}
		var elems []*syntax.Regexp // nearest first
		for i := j - 1; i >= 0 && len(elems) < maxBefore; i-- {
			if !singleChars(re.Sub[i], &elems) {
				break
			}
		}
		var out []*[256]bool
		var acc [256]bool
		for _, e := range elems {
			last := lastBytes(e)
			if last == nil {
				break
			}
			for b, ok := range last {
				acc[b] = acc[b] || ok
			}
			if multiByte(e) {
				for b := 0x80; b <= 0xFF; b++ {
					acc[b] = true
				}
			}
			set := acc
			out = append(out, &set)
			if len(out) == maxBefore {
				break
			}
		}
		return out
	}
	return nil
}

// singleChars appends the one-character elements re is made of, last
// first, and reports whether re is wholly such (a character class, a
// literal, or a fixed repetition or concatenation of them).
func singleChars(re *syntax.Regexp, elems *[]*syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpCharClass:
		*elems = append(*elems, re)
		return true
	case syntax.OpLiteral:
		for i := len(re.Rune) - 1; i >= 0; i-- {
			*elems = append(*elems, &syntax.Regexp{Op: syntax.OpLiteral, Rune: re.Rune[i : i+1], Flags: re.Flags})
		}
		return true
	case syntax.OpCapture:
		return singleChars(re.Sub[0], elems)
	case syntax.OpRepeat:
		if re.Min != re.Max || re.Min < 1 {
			return false
		}
		for i := 0; i < re.Min && len(*elems) < maxBefore; i++ {
			if !singleChars(re.Sub[0], elems) {
				return false
			}
		}
		return true
	case syntax.OpConcat:
		for i := len(re.Sub) - 1; i >= 0 && len(*elems) < maxBefore; i-- {
			if !singleChars(re.Sub[i], elems) {
				return false
			}
		}
		return true
	}
	return false
}

// multiByte reports whether a one-character element can match a
// multi-byte rune.
func multiByte(re *syntax.Regexp) bool {
	if re.Op == syntax.OpLiteral {
		if re.Flags&syntax.FoldCase != 0 {
			return true // a case variant may be multi-byte (K, ſ)
		}
		return len(re.Rune) > 0 && re.Rune[0] >= utf8.RuneSelf
	}
	for i := 1; i < len(re.Rune); i += 2 {
		if re.Rune[i] >= utf8.RuneSelf {
			return true
		}
	}
	return false
}

// lastBytes returns the set of bytes a match of re (which cannot be
// empty) can end with, or nil when unknown.
func lastBytes(re *syntax.Regexp) *[256]bool {
	switch re.Op {
	case syntax.OpCapture, syntax.OpPlus:
		return lastBytes(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return lastBytes(re.Sub[0])
		}
	case syntax.OpConcat:
		// Simplify writes x{3} as xxx, a nested concatenation.
		if len(re.Sub) > 0 {
			return lastBytes(re.Sub[len(re.Sub)-1])
		}
	case syntax.OpLiteral:
		if len(re.Rune) == 0 {
			return nil
		}
		var set [256]bool
		r := re.Rune[len(re.Rune)-1]
		orbit := []rune{r}
		if re.Flags&syntax.FoldCase != 0 {
			for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
				orbit = append(orbit, f)
			}
		}
		for _, v := range orbit {
			b := utf8.AppendRune(nil, v)
			set[b[len(b)-1]] = true
		}
		return &set
	case syntax.OpCharClass:
		var set [256]bool
		for i := 0; i+1 < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], re.Rune[i+1]
			for r := lo; r <= hi && r < utf8.RuneSelf; r++ {
				set[r] = true
			}
			if hi >= utf8.RuneSelf {
				// A multi-byte rune ends with a continuation byte.
				for b := 0x80; b <= 0xBF; b++ {
					set[b] = true
				}
			}
		}
		return &set
	}
	return nil
}

// maxMatchBytes returns the most bytes a match of re can span, and false
// when that is unbounded or re holds an empty-width assertion (which a
// window cut from the line could decide otherwise).
func maxMatchBytes(re *syntax.Regexp) (int, bool) {
	switch re.Op {
	case syntax.OpEmptyMatch:
		return 0, true
	case syntax.OpLiteral:
		n := 0
		for _, r := range re.Rune {
			if re.Flags&syntax.FoldCase != 0 {
				n += utf8.UTFMax
			} else {
				n += utf8.RuneLen(r)
			}
		}
		return n, true
	case syntax.OpCharClass, syntax.OpAnyCharNotNL, syntax.OpAnyChar:
		return utf8.UTFMax, true
	case syntax.OpCapture:
		return maxMatchBytes(re.Sub[0])
	case syntax.OpQuest:
		return maxMatchBytes(re.Sub[0])
	case syntax.OpRepeat:
		if re.Max < 0 {
			return 0, false
		}
		n, ok := maxMatchBytes(re.Sub[0])
		return n * re.Max, ok
	case syntax.OpConcat, syntax.OpAlternate:
		total := 0
		for _, sub := range re.Sub {
			n, ok := maxMatchBytes(sub)
			if !ok {
				return 0, false
			}
			if re.Op == syntax.OpConcat {
				total += n
			} else {
				total = max(total, n)
			}
		}
		return total, true
	}
	return 0, false // star, plus, assertions
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// foldASCII returns a copy of b with ASCII letters lower-cased; every other
// byte, and so every offset, is unchanged.
func foldASCII(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		out[i] = fold(c)
	}
	return out
}

// hasLookalikes reports whether data holds the Kelvin sign or the long s,
// the non-ASCII runes a case-insensitive k or s matches.
func hasLookalikes(data []byte) bool {
	return bytes.Contains(data, []byte("\u212a")) || bytes.Contains(data, []byte("\u017f"))
}

// lines walks data's lines that may match, calling fn with each line's
// start and end offsets (end excludes the newline); fn returns false to
// stop.
func (m *textMatcher) lines(data []byte, fn func(start, end int) bool) {
	needle, hay := m.req, data
	switch {
	case m.lit != nil:
		needle = m.lit
		if m.fold {
			hay = foldASCII(data)
		}
	case m.reqFold:
		hay = foldASCII(data)
	}
	if needle == nil && m.needles != nil {
		m.linesOfNeedles(data, fn)
		return
	}
	if needle == nil { // every line is a candidate
		// A final newline ends the last line; it does not start another.
		for start := 0; start < len(data); {
			end := len(data)
			if nl := bytes.IndexByte(data[start:], '\n'); nl >= 0 {
				end = start + nl
			}
			if !fn(start, end) || end == len(data) {
				return
			}
			start = end + 1
		}
		return
	}
	for from := 0; from < len(data); {
		i := bytes.Index(hay[from:], needle)
		if i < 0 {
			return
		}
		pos := from + i
		start := bytes.LastIndexByte(data[:pos], '\n') + 1
		end := len(data)
		if nl := bytes.IndexByte(data[pos:], '\n'); nl >= 0 {
			end = pos + nl
		}
		if !fn(start, end) {
			return
		}
		from = end + 1
	}
}

// linesOfNeedles is lines for a set of needles: the lines holding one.
func (m *textMatcher) linesOfNeedles(data []byte, fn func(start, end int) bool) {
	next := make([]int, len(m.needles)) // next occurrence of each, or -1
	find := func(i, from int) {
		if next[i] < 0 {
			return
		}
		if j := bytes.Index(data[from:], m.needles[i]); j >= 0 {
			next[i] = from + j
		} else {
			next[i] = -1
		}
	}
	for i := range next {
		find(i, 0)
	}
	for {
		pos := -1
		for _, p := range next {
			if p >= 0 && (pos < 0 || p < pos) {
				pos = p
			}
		}
		if pos < 0 {
			return
		}
		start := bytes.LastIndexByte(data[:pos], '\n') + 1
		end := len(data)
		if nl := bytes.IndexByte(data[pos:], '\n'); nl >= 0 {
			end = pos + nl
		}
		if !fn(start, end) || end >= len(data) {
			return
		}
		for i, p := range next {
			if p >= 0 && p <= end {
				find(i, end+1)
			}
		}
	}
}

// fitsBefore reports whether the bytes before pos in line can precede
// the literal in a match (m.before).
func (m *textMatcher) fitsBefore(line []byte, pos int) bool {
	for k, set := range m.before {
		if pos-k-1 < 0 || !set[line[pos-k-1]] {
			return false
		}
	}
	return true
}

// windowMatch reports whether line may hold a match, testing only the
// bytes within m.window of each occurrence of the needle (or needles).
func (m *textMatcher) windowMatch(line []byte) bool {
	var needles [][]byte
	hay := line
	if m.req != nil {
		needles = [][]byte{m.req}
		if m.reqFold {
			hay = foldASCII(line)
		}
	} else {
		needles = m.needles
	}
	for _, n := range needles {
		for from := 0; from < len(hay); {
			i := bytes.Index(hay[from:], n)
			if i < 0 {
				break
			}
			pos := from + i
			if !m.fitsBefore(line, pos) {
				from = pos + 1
				continue
			}
			lo, hi := max(0, pos-m.window), min(len(line), pos+len(n)+m.window)
			if m.re.Match(line[lo:hi]) {
				return true
			}
			from = pos + 1
		}
	}
	return false
}

// matchFile returns the matching lines of data (one match per line: its
// first), at most limit.
func (m *textMatcher) matchFile(path string, data []byte, ctxLines, limit int) []engine.TextMatch {
	var out []engine.TextMatch
	useRE := m.lit == nil
	needle := m.req
	if m.lit != nil {
		needle = m.lit
	}
	if (m.fold || m.reqFold) && bytes.ContainsAny(needle, "ks") && hasLookalikes(data) {
		// Folding ASCII alone would miss a Kelvin sign or a long s: let
		// the expression see every line.
		return (&textMatcher{re: m.re}).matchFile(path, data, ctxLines, limit)
	}
	lineNo, counted := 1, 0
	m.lines(data, func(start, end int) bool {
		line := data[start:end]
		col := 0
		if useRE {
			if m.window > 0 && (m.before != nil || len(line) > 2*m.window) && !m.windowMatch(line) {
				return true
			}
			loc := m.re.FindIndex(line)
			if loc == nil {
				return true
			}
			col = loc[0]
		} else if m.fold {
			col = bytes.Index(foldASCII(line), m.lit)
		} else {
			col = bytes.Index(line, m.lit)
		}
		if col < 0 {
			return true
		}
		lineNo += bytes.Count(data[counted:start], []byte{'\n'})
		counted = start
		tm := engine.TextMatch{
			Path: path, Line: lineNo,
			Column: utf8.RuneCount(line[:col]) + 1,
			Text:   cutLine(line, col),
		}
		if ctxLines > 0 {
			tm.Before = linesBefore(data, start, ctxLines)
			tm.After = linesAfter(data, end, ctxLines)
		}
		out = append(out, tm)
		return len(out) < limit
	})
	return out
}

// cutLine trims a long line to a window around offset, marking cuts.
func cutLine(line []byte, offset int) string {
	line = bytes.TrimRight(line, "\r")
	if len(line) <= maxLineBytes {
		return string(line)
	}
	from := max(0, offset-maxLineBytes/3)
	for from > 0 && !utf8.RuneStart(line[from]) {
		from--
	}
	to := min(len(line), from+maxLineBytes)
	for to < len(line) && !utf8.RuneStart(line[to]) {
		to++
	}
	s := string(line[from:to])
	if from > 0 {
		s = "…" + s
	}
	if to < len(line) {
		s += "…"
	}
	return s
}

func linesBefore(data []byte, lineStart, n int) []string {
	var out []string
	end := lineStart - 1 // the newline ending the previous line
	for i := 0; i < n && end >= 0; i++ {
		start := bytes.LastIndexByte(data[:end], '\n') + 1
		out = append(out, cutLine(data[start:end], 0))
		end = start - 1
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

func linesAfter(data []byte, lineEnd, n int) []string {
	var out []string
	start := lineEnd + 1
	for i := 0; i < n && start < len(data); i++ {
		end := len(data)
		if nl := bytes.IndexByte(data[start:], '\n'); nl >= 0 {
			end = start + nl
		}
		out = append(out, cutLine(data[start:end], 0))
		start = end + 1
	}
	return out
}

// candidatePaths returns the sorted live paths whose content may match tq.
func (s snapshot) candidatePaths(tq *query, f pathFilter) []string {
	contents := map[int64]bool{}
	for _, seg := range s.segments() {
		docs, all := tq.eval(
			func(t trigram) []uint32 { return seg.trigramDocs(nil, t) },
			seg.trigramCount,
		)
		if all {
			for _, d := range seg.docs {
				contents[d.content] = true
			}
			continue
		}
		for _, doc := range docs {
			contents[seg.docs[doc].content] = true
		}
	}
	var out []string
	for c := range contents {
		for _, p := range s.paths[c] {
			if f.match(p) {
				out = append(out, p)
			}
		}
	}
	sort.Strings(out)
	return out
}

// SearchText answers a literal or regular-expression query from the
// trigram index, verifying each candidate file's current contents. Matches
// come in path order, one per matching line; onMatch (if set) sees each as
// soon as it is verified.
func (ix *Index) SearchText(ctx context.Context, q engine.TextQuery, onMatch func(engine.TextMatch)) (engine.TextResult, error) {
	res := engine.TextResult{Matches: []engine.TextMatch{}}
	m, err := newTextMatcher(q)
	if err != nil {
		return res, err
	}
	limit := q.Limit
	switch {
	case limit < 0:
		limit = math.MaxInt
	case limit == 0:
		limit = defaultTextLimit
	}
	ctxLines := min(max(q.ContextLines, 0), maxContextLines)
	tq, err := patternQuery(q.Pattern, q.Regex, q.CaseInsensitive)
	if err != nil {
		return res, fmt.Errorf("%w: %v", engine.ErrInvalidRequest, err)
	}
	f, err := newPathFilter(ix, q.Path, q.Include)
	if err != nil {
		return res, err
	}
	snap := ix.snap()
	paths := snap.candidatePaths(tq, f)

	// A file gives at most one match more than the limit: enough to know
	// that the limit cut the result.
	perFile := limit
	if perFile < math.MaxInt {
		perFile++
	}
	err = ix.verify(ctx, snap, paths, func(p string, data []byte) []engine.TextMatch {
		return m.matchFile(p, data, ctxLines, perFile)
	}, func(ms []engine.TextMatch) bool {
		res.FilesSearched++
		for _, tm := range ms {
			if len(res.Matches) == limit {
				res.Truncated = true
				return false
			}
			res.Matches = append(res.Matches, tm)
			if onMatch != nil {
				onMatch(tm)
			}
		}
		return true
	})
	return res, err
}

// verify reads paths with the index's workers and calls match on each
// file's data; emit sees every file's results (possibly none) in path
// order and stops the search by returning false. Files that cannot be read (deleted meanwhile) are
// skipped.
func (ix *Index) verify(ctx context.Context, s snapshot, paths []string, match func(string, []byte) []engine.TextMatch, emit func([]engine.TextMatch) bool) error {
	if len(paths) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type slot struct {
		ms   []engine.TextMatch
		done chan struct{}
	}
	slots := make([]slot, len(paths))
	for i := range slots {
		slots[i].done = make(chan struct{})
	}
	next := make(chan int)
	workers := min(ix.svc.opts.Workers, len(paths))
	for w := 0; w < workers; w++ {
		go func() {
			for i := range next {
				if ctx.Err() == nil {
					if data, err := ix.readContent(paths[i], s.files[paths[i]]); err == nil {
						slots[i].ms = match(paths[i], data)
					}
				}
				close(slots[i].done)
			}
		}()
	}
	go func() {
		defer close(next)
		for i := range paths {
			select {
			case next <- i:
			case <-ctx.Done():
				for ; i < len(paths); i++ {
					close(slots[i].done)
				}
				return
			}
		}
	}()
	for i := range slots {
		select {
		case <-slots[i].done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if !emit(slots[i].ms) {
			cancel()
			return nil
		}
	}
	return ctx.Err()
}

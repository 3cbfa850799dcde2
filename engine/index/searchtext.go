package index

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"regexp"
	"regexp/syntax"
	"sort"
	"strings"
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
		if lit, fold := requiredLiteral(parsed.Simplify()); len(lit) >= 2 && (!fold || isASCII(lit)) {
			m.req, m.reqFold = []byte(lit), fold
			if fold {
				m.req = foldASCII(m.req)
			}
		}
	}
	return m, nil
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

// requiredLiteral returns the longest literal that every match of re
// contains, and whether it is matched case-insensitively; "" if none.
func requiredLiteral(re *syntax.Regexp) (string, bool) {
	switch re.Op {
	case syntax.OpLiteral:
		return string(re.Rune), re.Flags&syntax.FoldCase != 0
	case syntax.OpCapture, syntax.OpPlus:
		return requiredLiteral(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return requiredLiteral(re.Sub[0])
		}
	case syntax.OpConcat:
		best, bestFold := "", false
		run, runFold := "", false
		consider := func(s string, f bool) {
			if len(s) > len(best) {
				best, bestFold = s, f
			}
		}
		for _, sub := range re.Sub {
			if sub.Op == syntax.OpLiteral {
				f := sub.Flags&syntax.FoldCase != 0
				if run != "" && f != runFold {
					consider(run, runFold)
					run = ""
				}
				run, runFold = run+string(sub.Rune), f
				continue
			}
			consider(run, runFold)
			run = ""
			consider(requiredLiteral(sub))
		}
		consider(run, runFold)
		return best, bestFold
	}
	return "", false
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

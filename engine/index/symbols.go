package index

import (
	"context"
	"fmt"
	"math"
	"path"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/index/syntax"
)

// symbolTable indexes the definitions of a segment for name search.
type symbolTable struct {
	syms []symRef
	// byNorm maps a normalised name (lower case, no '_' or '-') to the
	// symbols with that name.
	byNorm map[string][]int32
	// norms are the distinct normalised names, sorted, for prefix search.
	norms []string
	// words are the distinct words of all names (splitWords), sorted;
	// wordNorms[i] lists the normalised names that contain words[i].
	words     []string
	wordNorms [][]string
}

// symRef points at one definition in a segment.
type symRef struct {
	seg *segment
	doc uint32
	sym uint32
}

func (r symRef) info() *symbolInfo { return &r.seg.docs[r.doc].symbols[r.sym] }

// normName lower-cases a name and drops '_' and '-', so readFile,
// read_file and ReadFile meet.
func normName(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if r == '_' || r == '-' {
			continue
		}
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		} else if r >= 0x80 {
			r = []rune(strings.ToLower(string(r)))[0]
		}
		b.WriteRune(r)
	}
	return b.String()
}

// buildSymbolTable indexes the definitions of the given segments. It does
// not look at which contents are live: searches map hits to live paths,
// so a table stays valid (for the segments it was built from) across
// catalog changes.
func buildSymbolTable(segs ...*segment) *symbolTable {
	t := &symbolTable{byNorm: map[string][]int32{}}
	wordSet := map[string]map[string]bool{}
	for _, seg := range segs {
		if seg == nil {
			continue
		}
		for di := range seg.docs {
			d := &seg.docs[di]
			for si := range d.symbols {
				name := seg.str(d.symbols[si].name)
				n := normName(name)
				if n == "" {
					continue
				}
				if _, ok := t.byNorm[n]; !ok {
					t.norms = append(t.norms, n)
					splitWords(name, func(w string) {
						if wordSet[w] == nil {
							wordSet[w] = map[string]bool{}
						}
						wordSet[w][n] = true
					})
				}
				t.byNorm[n] = append(t.byNorm[n], int32(len(t.syms)))
				t.syms = append(t.syms, symRef{seg: seg, doc: uint32(di), sym: uint32(si)})
			}
		}
	}
	sort.Strings(t.norms)
	for w := range wordSet {
		t.words = append(t.words, w)
	}
	sort.Strings(t.words)
	t.wordNorms = make([][]string, len(t.words))
	for i, w := range t.words {
		for n := range wordSet[w] {
			t.wordNorms[i] = append(t.wordNorms[i], n)
		}
	}
	return t
}

// prefixRange returns the half-open range of sorted strs starting with p.
func prefixRange(strs []string, p string) (int, int) {
	lo := sort.SearchStrings(strs, p)
	hi := lo
	for hi < len(strs) && strings.HasPrefix(strs[hi], p) {
		hi++
	}
	return lo, hi
}

// Match tiers and their base scores.
const (
	scoreExact  = 3.0
	scorePrefix = 2.0
	scoreFuzzy  = 1.0
	// maxPrefixNames bounds the names a prefix or fuzzy query considers.
	maxCandidateNames = 4000
)

// fuzzyScore matches query words against a name's words in order, each
// query word a prefix of a later name word (camelCase and snake_case
// aware: "rdFile" and "read_f" both reach ReadFile); a single short
// lower-case query also matches as an acronym of word initials ("rf").
// It returns a quality in (0, 1], or 0 for no match.
func fuzzyScore(qwords []string, acronym string, name string) float64 {
	var nwords []string
	splitWords(name, func(w string) { nwords = append(nwords, w) })
	if len(nwords) == 0 {
		return 0
	}
	j, skipped := 0, 0
	for _, qw := range qwords {
		for j < len(nwords) && !strings.HasPrefix(nwords[j], qw) {
			j++
			skipped++
		}
		if j == len(nwords) {
			j = -1
			break
		}
		j++
	}
	if j >= 0 {
		return 1 / float64(1+skipped+len(nwords)-len(qwords))
	}
	if acronym != "" && len(acronym) <= len(nwords) {
		k := 0
		for _, w := range nwords {
			if k < len(acronym) && w[0] == acronym[k] {
				k++
			}
		}
		if k == len(acronym) {
			return 0.5 / float64(1+len(nwords)-len(acronym))
		}
	}
	return 0
}

// kindBoost prefers types and functions to members and variables.
func kindBoost(kind string) float64 {
	switch kind {
	case "type", "struct", "interface", "class", "enum", "trait", "function":
		return 0.15
	case "method", "constructor", "macro", "module":
		return 0.1
	case "const", "var":
		return 0.05
	}
	return 0
}

// pathPenalty lowers definitions in tests, test data and vendored code.
func pathPenalty(p string) float64 {
	pen := 0.0
	base := path.Base(p)
	if strings.HasSuffix(base, "_test.go") || strings.HasPrefix(base, "test_") || strings.Contains(base, ".test.") || strings.Contains(base, ".spec.") {
		pen += 0.2
	}
	for _, seg := range []string{"testdata/", "vendor/", "node_modules/", "third_party/"} {
		if strings.HasPrefix(p, seg) || strings.Contains(p, "/"+seg) {
			pen += 0.2
		}
	}
	return pen
}

// SearchSymbols finds definitions by name: exact (case-insensitive, with
// '_' and '-' ignored; an exact-case match scores higher), then prefix,
// then fuzzy. A qualified query, Package.Name or Type.Method (also
// Package.Type.Method, and :: or # instead of the dot), keeps the
// definitions whose container (the method's type) or package (for Go,
// the directory's name, which is the package's by convention) match the
// qualifiers, when any does. Within a tier, definitions rank by
// importance (importance): exported ones, outside tests, test data,
// vendored and internal code, types and functions above members, those
// the workspace refers to most as Package.Name, shorter names above
// longer. With IncludeRefs, references to the exact name follow the
// definitions.
func (ix *Index) SearchSymbols(ctx context.Context, q engine.SymbolQuery) ([]engine.SymbolHit, error) {
	full := strings.TrimSpace(q.Query)
	if full == "" {
		return nil, fmt.Errorf("%w: the symbol query is empty", engine.ErrInvalidRequest)
	}
	query, quals := splitQualified(full)
	limit := q.Limit
	if limit <= 0 {
		limit = 20
	}
	f, err := newPathFilter(ix, q.Path, "")
	if err != nil {
		return nil, err
	}
	s := ix.snap()
	if len(quals) > 0 {
		hits, err := ix.searchQualified(ctx, s, f, q, query, quals, limit)
		if err != nil || len(hits) > 0 {
			return hits, err
		}
		// Nothing fits the qualifiers: search the whole query as a name.
		query = full
	}
	qn := normName(query)
	var qwords []string
	splitWords(query, func(w string) { qwords = append(qwords, w) })
	acronym := ""
	if len(qwords) == 1 && len(query) <= 5 && strings.ToLower(query) == query {
		acronym = query
	}
	var hits []engine.SymbolHit
	for _, t := range ix.symbolTables(s) {
		hits = append(hits, t.search(s, f, q, query, qn, qwords, acronym, limit)...)
	}
	ix.rankImportance(s, hits, limit)
	sortHits(hits)
	if q.IncludeRefs && len(hits) < limit {
		refs, err := ix.references(ctx, s, query, f, limit-len(hits))
		if err != nil {
			return nil, err
		}
		hits = append(hits, refs...)
	}
	if len(hits) > limit {
		hits = hits[:limit]
	}
	return hits, nil
}

// splitQualified splits Package.Name, Type.Method and
// Package.Type.Method (or :: and # for the dots) into the name and its
// qualifiers, outermost first; anything else is a plain name.
func splitQualified(q string) (string, []string) {
	q = strings.NewReplacer("::", ".", "#", ".").Replace(q)
	parts := strings.Split(q, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return q, nil
	}
	for _, p := range parts {
		if p == "" || strings.IndexFunc(p, func(r rune) bool { return !isIdentRune(r) }) >= 0 {
			return q, nil
		}
	}
	return parts[len(parts)-1], parts[:len(parts)-1]
}

func isIdentRune(r rune) bool {
	return r == '_' || r == '$' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

// searchQualified answers a qualified query: the hits of the name whose
// container or package match the qualifiers. Hits come in the usual
// order; only the exact and prefix tiers are searched.
func (ix *Index) searchQualified(ctx context.Context, s snapshot, f pathFilter, q engine.SymbolQuery, name string, quals []string, limit int) ([]engine.SymbolHit, error) {
	qn := normName(name)
	var all []engine.SymbolHit
	for _, t := range ix.symbolTables(s) {
		// Ask for more than the limit: the qualifiers drop most.
		all = append(all, t.search(s, f, q, name, qn, nil, "", max(limit, maxCandidateNames))...)
	}
	var hits []engine.SymbolHit
	for _, h := range all {
		if h.Match != "fuzzy" && qualifiersFit(h, quals) {
			hits = append(hits, h)
		}
	}
	if len(hits) == 0 && len(quals) == 1 {
		// The package of a file at the workspace's root is not in its
		// path (Go names it in the package clause: the root of
		// google.golang.org/grpc is package grpc): a top-level
		// definition there fits any package qualifier.
		for _, h := range all {
			if h.Match != "fuzzy" && h.Container == "" && !strings.Contains(h.Path, "/") {
				hits = append(hits, h)
			}
		}
	}
	ix.rankImportance(s, hits, limit)
	sortHits(hits)
	if q.IncludeRefs && len(hits) < limit {
		refs, err := ix.references(ctx, s, name, f, limit-len(hits))
		if err != nil {
			return nil, err
		}
		hits = append(hits, refs...)
	}
	if len(hits) > limit {
		hits = hits[:limit]
	}
	return hits, nil
}

// qualifiersFit reports whether a definition fits the qualifiers of a
// query: the last is its container (a method's type) or its package,
// and with two, the first is the package. Comparisons ignore case, '_'
// and '-'.
func qualifiersFit(h engine.SymbolHit, quals []string) bool {
	pkg := normName(symbolPackage(h.Path))
	container := normName(h.Container)
	last := normName(quals[len(quals)-1])
	if len(quals) == 2 {
		return container == last && pkg == normName(quals[0])
	}
	return container == last || (container == "" && pkg == last)
}

// symbolPackage is the package a definition at path belongs to, as a
// qualified name writes it: the directory's name (Go's convention: the
// package of net/http/cookie.go is http), or for a file at the root the
// file's name without extension (Python's module). A major-version
// directory (v2) names the one above it.
func symbolPackage(p string) string {
	dir := path.Dir(p)
	if dir == "." {
		return strings.TrimSuffix(path.Base(p), path.Ext(p))
	}
	base := path.Base(dir)
	if len(base) >= 2 && base[0] == 'v' && strings.Trim(base[1:], "0123456789") == "" && path.Dir(dir) != "." {
		base = path.Base(path.Dir(dir))
	}
	return base
}

// Importance weights (added to a hit's score, within its tier).
const (
	importExported  = 0.1
	importTopLevel  = 0.05
	importInternal  = 0.05
	importMaxRefs   = 0.3
	importRefsScale = 0.04
	// importRefHits bounds how many hits get a reference count.
	importRefHits = 16
)

// rankImportance adds to each hit's score what makes a definition more
// likely the one meant: exported (Go: an upper-case initial; elsewhere
// no leading underscore), top level (no container), outside internal
// packages, and referred to as Package.Name by many files
// (estimateRefs, an upper bound, log-scaled; counted for the best
// importRefHits top-level definitions). Test, test data and vendored
// code are already lowered by pathPenalty.
func (ix *Index) rankImportance(s snapshot, hits []engine.SymbolHit, limit int) {
	counted := 0
	refs := map[string]int{}
	for i := range hits {
		h := &hits[i]
		if exported(h.Name, h.Language) {
			h.Score += importExported
		}
		if h.Container == "" {
			h.Score += importTopLevel
		}
		if strings.HasPrefix(h.Path, "internal/") || strings.Contains(h.Path, "/internal/") {
			h.Score -= importInternal
		}
	}
	if len(hits) < 2 {
		return
	}
	order := make([]int, len(hits))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return hits[order[a]].Score > hits[order[b]].Score })
	for _, i := range order {
		h := &hits[i]
		// Only what others can name counts: a top-level, exported
		// definition outside tests and test data (a copy of a package in
		// testdata is not what its importers refer to).
		if h.Container != "" || counted == importRefHits || !exported(h.Name, h.Language) || pathPenalty(h.Path) > 0 {
			continue
		}
		ref := symbolPackage(h.Path) + "." + h.Name
		n, ok := refs[ref]
		if !ok {
			n = s.estimateRefs(ref)
			refs[ref] = n
			counted++
		}
		h.Score += min(importMaxRefs, importRefsScale*math.Log2(1+float64(n)))
	}
}

// exported reports whether a name is visible outside its package or
// module, by the language's convention.
func exported(name, lang string) bool {
	if name == "" {
		return false
	}
	r, _ := utf8.DecodeRuneInString(name)
	if lang == "go" {
		return unicode.IsUpper(r)
	}
	return r != '_'
}

// estimateRefs returns an upper bound of the contents that hold lit: in
// each segment, those holding its two rarest trigrams (the shortest
// posting lists, so that the estimate stays cheap for any name).
func (s snapshot) estimateRefs(lit string) int {
	tris := trigramsOf(lit)
	if len(tris) == 0 {
		return 0
	}
	n := 0
	for _, seg := range s.segments() {
		slices.SortFunc(tris, func(a, b trigram) int { return seg.trigramCount(a) - seg.trigramCount(b) })
		docs := seg.trigramDocs(nil, tris[0])
		if len(tris) > 1 && len(docs) > 0 {
			docs = intersect(docs, seg.trigramDocs(nil, tris[1]))
		}
		n += len(docs)
	}
	return n
}

// matchTier orders match kinds: exact before prefix before fuzzy, whatever
// the boosts within a tier.
var matchTier = map[string]int{"exact": 0, "prefix": 1, "fuzzy": 2}

// search returns the table's hits for a query, mapped to the snapshot's
// live paths.
func (t *symbolTable) search(s snapshot, f pathFilter, q engine.SymbolQuery, query, qn string, qwords []string, acronym string, limit int) []engine.SymbolHit {
	scores := map[string]float64{} // normalised name → tier score
	if _, ok := t.byNorm[qn]; ok {
		scores[qn] = scoreExact
	}
	lo, hi := prefixRange(t.norms, qn)
	for i := lo; i < hi && i < lo+maxCandidateNames; i++ {
		if _, ok := scores[t.norms[i]]; !ok {
			scores[t.norms[i]] = scorePrefix + 0.5*float64(len(qn))/float64(len(t.norms[i]))
		}
	}
	enough := 0
	for n := range scores {
		enough += len(t.byNorm[n])
	}
	if len(qwords) > 0 && enough < limit {
		seen := 0
		wlo, whi := prefixRange(t.words, qwords[0])
		if acronym != "" {
			wlo, whi = prefixRange(t.words, acronym[:1])
		}
		for wi := wlo; wi < whi && seen < maxCandidateNames; wi++ {
			for _, n := range t.wordNorms[wi] {
				if _, ok := scores[n]; ok {
					continue
				}
				seen++
				first := t.syms[t.byNorm[n][0]]
				if fs := fuzzyScore(qwords, acronym, first.seg.str(first.info().name)); fs > 0 {
					scores[n] = scoreFuzzy + 0.5*fs
				}
			}
		}
	}
	var hits []engine.SymbolHit
	for n, score := range scores {
		match := "fuzzy"
		switch {
		case score >= scoreExact:
			match = "exact"
		case score >= scorePrefix:
			match = "prefix"
		}
		for _, si := range t.byNorm[n] {
			ref := t.syms[si]
			sy := ref.info()
			d := &ref.seg.docs[ref.doc]
			kind := ref.seg.str(sy.kind)
			if q.Kind != "" && kind != q.Kind {
				continue
			}
			paths := s.paths[d.content]
			if len(paths) == 0 {
				continue // no live path holds this content any more
			}
			name := ref.seg.str(sy.name)
			sc := score + kindBoost(kind)
			if name == query {
				sc += 0.2
			}
			sc -= 0.001 * float64(len(name))
			for _, p := range paths {
				if !f.match(p) {
					continue
				}
				hits = append(hits, engine.SymbolHit{
					Name: name, Kind: kind, Container: ref.seg.str(sy.container), Path: p,
					Language: ref.seg.str(d.lang), StartLine: int(sy.line), EndLine: int(sy.end),
					Definition: true, Match: match, Score: sc - pathPenalty(p),
				})
			}
		}
	}
	return hits
}

func sortHits(hits []engine.SymbolHit) {
	sort.SliceStable(hits, func(i, j int) bool {
		if ti, tj := matchTier[hits[i].Match], matchTier[hits[j].Match]; ti != tj {
			return ti < tj
		}
		if hits[i].Score != hits[j].Score {
			return hits[i].Score > hits[j].Score
		}
		if hits[i].Path != hits[j].Path {
			return hits[i].Path < hits[j].Path
		}
		return hits[i].StartLine < hits[j].StartLine
	})
}

// warmSymbols builds the symbol tables of the current state in the
// background, so the first symbol search after a build or a load does not
// wait for it (the base table of Go's source tree takes about 0.4 s).
func (ix *Index) warmSymbols() {
	svc := ix.svc
	if !svc.opts.Background {
		return
	}
	svc.bgWG.Add(1)
	go func() {
		defer svc.bgWG.Done()
		if svc.bg.Err() == nil {
			ix.symbolTables(ix.snap())
		}
	}()
}

// symbolTables returns the symbol tables of the snapshot's base and delta
// segments, building each on first use. The base table (the big one)
// survives changes that only touch the delta.
func (ix *Index) symbolTables(s snapshot) []*symbolTable {
	ix.symMu.Lock()
	defer ix.symMu.Unlock()
	if ix.baseSyms == nil || ix.baseSymsFor != s.base {
		ix.baseSyms, ix.baseSymsFor = buildSymbolTable(s.base), s.base
	}
	if ix.deltaSyms == nil || ix.deltaSymsFor != s.delta {
		ix.deltaSyms, ix.deltaSymsFor = buildSymbolTable(s.delta), s.delta
	}
	return []*symbolTable{ix.baseSyms, ix.deltaSyms}
}

// references returns up to limit references to name: the contents whose
// trigrams contain it, their stored references read back.
func (ix *Index) references(ctx context.Context, s snapshot, name string, f pathFilter, limit int) ([]engine.SymbolHit, error) {
	var hits []engine.SymbolHit
	for _, p := range s.candidatePaths(literalQuery(name, false), f) {
		e := s.files[p]
		blob, err := ix.svc.analysisBlob(ctx, e.content)
		if err != nil {
			return nil, err
		}
		an, err := decodeAnalysis(blob, true)
		if err != nil {
			return nil, err
		}
		i, ok := slices.BinarySearchFunc(an.refs, name, func(r syntax.Ref, n string) int { return strings.Compare(r.Name, n) })
		if !ok {
			continue
		}
		lang := ix.langOf(s, e.content)
		for _, l := range an.refs[i].Lines {
			hits = append(hits, engine.SymbolHit{Name: name, Kind: "reference", Path: p, Language: lang,
				StartLine: int(l), EndLine: int(l), Match: "exact", Score: 0})
			if len(hits) == limit {
				return hits, nil
			}
		}
	}
	return hits, nil
}

func (ix *Index) langOf(s snapshot, content int64) string {
	for _, seg := range s.segments() {
		if d, ok := seg.byContent[content]; ok {
			return seg.str(seg.docs[d].lang)
		}
	}
	return ""
}

package index

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode"

	"github.com/plexus-agent/plexus/engine"
)

var _ engine.Retriever = (*Service)(nil)

// Retrieval parameters.
const (
	// rrfK is reciprocal rank fusion's constant (Cormack, Clarke and
	// Büttcher, "Reciprocal Rank Fusion outperforms Condorcet and
	// individual Rank Learning Methods", SIGIR 2009): score = Σ 1/(k+rank).
	rrfK = 60
	// stageDepth is how many results each stage contributes to fusion.
	stageDepth = 40
	// rerankCandidates is how many fused results the reranker orders.
	rerankCandidates = 50
	// maxSnippetLines cuts long chunks when packing.
	maxSnippetLines = 80
	// maxSnippets bounds the packed snippets whatever the budget.
	maxSnippets = 12
	// charsPerToken estimates tokens from text length (a common rule of
	// thumb for code and English with BPE tokenisers).
	charsPerToken = 4
)

// Retrieve implements engine.Retriever: symbol search for identifiers the
// request names, BM25 text search over chunks, vector search when
// embeddings are available, reciprocal rank fusion of the three lists, a
// feature-based rerank, and packing of the best chunks into the token
// budget.
func (s *Service) Retrieve(ctx context.Context, req engine.RetrievalRequest, emit func(engine.RetrievalEvent)) (engine.RetrievalResult, error) {
	ix, err := s.ready(ctx, req.Root)
	if err != nil {
		return engine.RetrievalResult{}, err
	}
	return ix.Retrieve(ctx, req, emit)
}

// candidate is a chunk found by at least one stage.
type candidate struct {
	scoredChunk
	rrf     float64
	sources []string
	named   bool // the request names the chunk's symbol
	final   float64
}

// Retrieve runs retrieval on this workspace; see Service.Retrieve.
func (ix *Index) Retrieve(ctx context.Context, req engine.RetrievalRequest, emit func(engine.RetrievalEvent)) (engine.RetrievalResult, error) {
	if emit == nil {
		emit = func(engine.RetrievalEvent) {}
	}
	s := ix.snap()
	all := pathFilter{}
	fused := map[string]*candidate{}
	add := func(source string, list []scoredChunk) {
		for rank, c := range list {
			key := fmt.Sprintf("%s:%d", c.path, c.key.seg.docs[c.key.doc].chunks[c.key.chunk].start)
			cand := fused[key]
			if cand == nil {
				cand = &candidate{scoredChunk: c}
				fused[key] = cand
			}
			cand.rrf += 1 / float64(rrfK+rank+1)
			cand.sources = append(cand.sources, source)
		}
	}

	// 1. Symbols the request names.
	idents := queryIdentifiers(req.Query)
	symList, found := ix.symbolChunks(s, idents)
	add("symbol", symList)
	msg := "the request names no known symbol"
	if len(found) > 0 {
		msg = fmt.Sprintf("%d definitions of %s", len(symList), strings.Join(found, ", "))
	}
	emit(engine.RetrievalEvent{Stage: engine.StageSymbolSearch, Count: len(symList), Message: msg})
	if err := ctx.Err(); err != nil {
		return engine.RetrievalResult{}, err
	}

	// 2. BM25 over identifier-split words.
	textList := s.bm25(req.Query, all, stageDepth)
	add("text", textList)
	emit(engine.RetrievalEvent{Stage: engine.StageTextSearch, Count: len(textList),
		Message: fmt.Sprintf("%d chunks match the request's words (BM25)", len(textList))})

	// 3. Vectors, when there are any.
	vecList, err := ix.vectorRank(ctx, engine.ChunkQuery{Query: req.Query, Limit: stageDepth})
	if err != nil {
		if ctx.Err() != nil {
			return engine.RetrievalResult{}, ctx.Err()
		}
		why := err.Error()
		var skip *vectorSkip
		if errors.As(err, &skip) {
			why = skip.reason
		}
		emit(engine.RetrievalEvent{Stage: engine.StageVectorSearch, Count: 0, Message: "skipped: " + why})
	} else {
		add("vector", vecList)
		emit(engine.RetrievalEvent{Stage: engine.StageVectorSearch, Count: len(vecList),
			Message: fmt.Sprintf("%d chunks by embedding similarity (%s)", len(vecList), ix.svc.opts.EmbedLabel)})
	}

	// 4. Fuse and rerank.
	cands := make([]*candidate, 0, len(fused))
	named := map[string]bool{}
	for _, id := range idents {
		named[normName(id)] = true
	}
	for _, c := range fused {
		name := c.key.seg.str(c.key.seg.docs[c.key.doc].chunks[c.key.chunk].name)
		if name != "" {
			last := name[strings.LastIndexByte(name, '.')+1:]
			c.named = named[normName(last)] || named[normName(name)]
		}
		cands = append(cands, c)
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].rrf != cands[j].rrf {
			return cands[i].rrf > cands[j].rrf
		}
		return cands[i].path < cands[j].path
	})
	if len(cands) > rerankCandidates {
		cands = cands[:rerankCandidates]
	}
	rerank(cands, queryTerms(req.Query))
	how := "features"
	if ix.svc.opts.Reranker != nil {
		if err := ix.modelRerank(ctx, req.Query, cands); err != nil {
			if ctx.Err() != nil {
				return engine.RetrievalResult{}, ctx.Err()
			}
			how = fmt.Sprintf("features (the model reranker %s failed: %v)", ix.svc.opts.RerankLabel, err)
		} else {
			how = "features, then " + ix.svc.opts.RerankLabel
		}
	}
	res := ix.pack(cands, req.TokenBudget)
	emit(engine.RetrievalEvent{Stage: engine.StageReranking, Count: len(cands),
		Message: fmt.Sprintf("reranked %d candidates by %s; packed %d snippets (%d of %d tokens)", len(cands), how, len(res.Snippets), res.Tokens, req.TokenBudget)})
	return res, nil
}

// rerank orders candidates by a weighted sum of features (weights set by
// hand on this repository and Go's source tree):
//
//	1.0 × RRF score relative to the best
//	0.3 × share of the three stages that found it
//	0.5 × the request names the chunk's symbol
//	0.2 × share of the request's terms in the file path
//	−1.0 × path penalty (tests, test data, vendored code)
//	−0.1 × the chunk is longer than maxSnippetLines (packing will cut it)
func rerank(cands []*candidate, terms []string) {
	if len(cands) == 0 {
		return
	}
	best := cands[0].rrf
	for _, c := range cands {
		f := c.rrf / best
		f += 0.3 * float64(len(uniq(c.sources))) / 3
		if c.named {
			f += 0.5
		}
		if len(terms) > 0 {
			lp := strings.ToLower(c.path)
			n := 0
			for _, t := range terms {
				if strings.Contains(lp, t) {
					n++
				}
			}
			f += 0.2 * float64(n) / float64(len(terms))
		}
		f -= pathPenalty(c.path)
		ch := c.key.seg.docs[c.key.doc].chunks[c.key.chunk]
		if ch.end-ch.start+1 > maxSnippetLines {
			f -= 0.1
		}
		c.final = f
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].final > cands[j].final })
}

func uniq(ss []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// pack takes reranked candidates in order while they fit the budget,
// skipping chunks that overlap one already taken. Long chunks are cut to
// maxSnippetLines.
func (ix *Index) pack(cands []*candidate, budget int) engine.RetrievalResult {
	var res engine.RetrievalResult
	files := map[string][]byte{}
	type span struct{ start, end int }
	taken := map[string][]span{}
	for _, c := range cands {
		if len(res.Snippets) == maxSnippets || budget-res.Tokens < 32 {
			break
		}
		d := &c.key.seg.docs[c.key.doc]
		ch := d.chunks[c.key.chunk]
		start, end := int(ch.start), int(ch.end)
		overlaps := false
		for _, sp := range taken[c.path] {
			if start <= sp.end && sp.start <= end {
				overlaps = true
			}
		}
		if overlaps {
			continue
		}
		data, ok := files[c.path]
		if !ok {
			data, _ = ix.fsroot.FS().ReadFile(c.path)
			files[c.path] = data
		}
		if data == nil {
			continue
		}
		if end-start+1 > maxSnippetLines {
			end = start + maxSnippetLines - 1
		}
		text := string(lineRange(data, lineStarts(data), start, end))
		if end < int(ch.end) {
			text += fmt.Sprintf("… (%d more lines)\n", int(ch.end)-end)
		}
		tokens := (len(text) + charsPerToken - 1) / charsPerToken
		if res.Tokens+tokens > budget {
			continue
		}
		res.Tokens += tokens
		taken[c.path] = append(taken[c.path], span{start, end})
		res.Snippets = append(res.Snippets, engine.Snippet{
			Path: c.path, StartLine: start, EndLine: int(ch.end), Language: c.key.seg.str(d.lang),
			Kind: c.key.seg.str(ch.kind), Name: c.key.seg.str(ch.name), Text: text, Score: c.final, Sources: uniq(c.sources),
		})
	}
	return res
}

// queryIdentifiers picks the words of a request that may name symbols:
// `backquoted` spans, and tokens shaped like identifiers (several words by
// case or underscores, digits, or a capital letter: ReadFile, read_file,
// utf8, Cart). Plain lower-case words are English, not symbols ("returns
// a new cookie jar" names no symbol "cookie"); backquote them to search
// for them as symbols.
func queryIdentifiers(q string) []string {
	var out []string
	seen := map[string]bool{}
	addTok := func(t string) {
		t = strings.Trim(t, "._()")
		if len(t) < 3 || seen[t] || stopwords[strings.ToLower(t)] {
			return
		}
		seen[t] = true
		out = append(out, t)
	}
	for i := 0; ; {
		a := strings.IndexByte(q[i:], '`')
		if a < 0 {
			break
		}
		b := strings.IndexByte(q[i+a+1:], '`')
		if b < 0 {
			break
		}
		for _, part := range strings.FieldsFunc(q[i+a+1:i+a+1+b], func(r rune) bool { return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_') }) {
			addTok(part)
		}
		i += a + b + 2
	}
	forEachIdent([]byte(q), func(t string) {
		words := 0
		splitWords(t, func(string) { words++ })
		if words > 1 || strings.ContainsAny(t, "_0123456789") || unicode.IsUpper(rune(t[0])) {
			addTok(t)
		}
	})
	if len(out) > 16 {
		out = out[:16]
	}
	return out
}

// symbolChunks returns, for each identifier the symbol table knows
// exactly, the chunks holding its definitions (best definitions first),
// and the identifiers found.
func (ix *Index) symbolChunks(s snapshot, idents []string) ([]scoredChunk, []string) {
	if len(idents) == 0 {
		return nil, nil
	}
	tables := ix.symbolTables(s)
	var out []scoredChunk
	var found []string
	seen := map[chunkKey]bool{}
	for _, id := range idents {
		var refs []symRef
		for _, t := range tables {
			for _, si := range t.byNorm[normName(id)] {
				refs = append(refs, t.syms[si])
			}
		}
		if len(refs) == 0 || len(refs) > 200 { // a name defined everywhere says little
			continue
		}
		found = append(found, id)
		for _, r := range refs {
			sy := r.info()
			d := &r.seg.docs[r.doc]
			ci := sort.Search(len(d.chunks), func(i int) bool { return d.chunks[i].end >= sy.line })
			if ci == len(d.chunks) {
				continue
			}
			k := chunkKey{r.seg, r.doc, uint32(ci)}
			if seen[k] {
				continue
			}
			seen[k] = true
			score := kindBoost(r.seg.str(sy.kind))
			if r.seg.str(sy.name) == id {
				score += 0.2
			}
			for _, p := range s.paths[d.content] {
				out = append(out, scoredChunk{key: k, path: p, score: score - pathPenalty(p)})
			}
		}
	}
	sortScored(out)
	if len(out) > stageDepth {
		out = out[:stageDepth]
	}
	return out, found
}

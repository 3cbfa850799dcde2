package index

import (
	"container/heap"
	"context"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/plexus-agent/plexus/engine"
)

// BM25 parameters (Robertson and Zaragoza, "The Probabilistic Relevance
// Framework: BM25 and Beyond", 2009): the usual k1 = 1.2, b = 0.75.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
	// nameBoost multiplies the score of a chunk whose symbol name contains
	// a query term; pathBoost of one whose file path does.
	nameBoost = 0.5
	pathBoost = 0.25
	// rerankDepth is how many BM25 leaders get the boosts applied.
	rerankDepth = 200
)

// chunkKey names one chunk of one segment.
type chunkKey struct {
	seg   *segment
	doc   uint32
	chunk uint32
}

// scoredChunk is a ranked chunk with its path.
type scoredChunk struct {
	key   chunkKey
	path  string
	score float64
}

// bm25 ranks the chunks of a snapshot for a query: BM25 over the
// identifier-split terms of each chunk, then boosts for query terms in the
// chunk's symbol name and in its file's path, over the top rerankDepth.
// Stale contents (no live path) and paths the filter rejects are left out.
func (s snapshot) bm25(query string, f pathFilter, limit int) []scoredChunk {
	terms := queryTerms(query)
	if len(terms) == 0 {
		return nil
	}
	n, total := 0, int64(0)
	for _, seg := range s.segments() {
		n += seg.chunks
		total += seg.termTotal
	}
	if n == 0 {
		return nil
	}
	avgdl := float64(total) / float64(n)
	scores := map[chunkKey]float64{}
	for _, t := range terms {
		df := 0
		lists := make([][]byte, 0, 2)
		for _, seg := range s.segments() {
			l := seg.termList(t)
			lists = append(lists, l)
			df += postingCount(l)
		}
		if df == 0 {
			continue
		}
		idf := math.Log(1 + (float64(n)-float64(df)+0.5)/(float64(df)+0.5))
		for i, seg := range s.segments() {
			decodeTermList(lists[i], func(e termEntry) {
				c := seg.docs[e.doc].chunks[e.chunk]
				tf := float64(e.tf)
				dl := float64(c.terms)
				scores[chunkKey{seg, e.doc, e.chunk}] += idf * tf * (bm25K1 + 1) / (tf + bm25K1*(1-bm25B+bm25B*dl/avgdl))
			})
		}
	}
	// Keep the rerankDepth best in a min-heap rather than sorting every
	// scored chunk.
	h := &chunkHeap{}
	for k, sc := range scores {
		if h.Len() == rerankDepth && sc <= (*h)[0].score {
			continue
		}
		for _, p := range s.paths[k.seg.docs[k.doc].content] {
			if !f.match(p) {
				continue
			}
			c := scoredChunk{key: k, path: p, score: sc}
			if h.Len() < rerankDepth {
				heap.Push(h, c)
			} else if less(c, (*h)[0]) {
				(*h)[0] = c
				heap.Fix(h, 0)
			}
		}
	}
	out := []scoredChunk(*h)
	sortScored(out)
	for i := range out {
		c := out[i].key.chunk
		d := &out[i].key.seg.docs[out[i].key.doc]
		name := strings.ToLower(out[i].key.seg.str(d.chunks[c].name))
		lp := strings.ToLower(out[i].path)
		boost := 1.0
		for _, t := range terms {
			if name != "" && strings.Contains(name, t) {
				boost += nameBoost / float64(len(terms))
			}
			if strings.Contains(lp, t) {
				boost += pathBoost / float64(len(terms))
			}
		}
		out[i].score *= boost
	}
	sortScored(out)
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

// less orders ranked chunks: higher score first, then path, then chunk.
func less(a, b scoredChunk) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	if a.path != b.path {
		return a.path < b.path
	}
	return a.key.chunk < b.key.chunk
}

func sortScored(cs []scoredChunk) {
	sort.Slice(cs, func(i, j int) bool { return less(cs[i], cs[j]) })
}

// chunkHeap is a min-heap of ranked chunks: the root is the worst kept.
type chunkHeap []scoredChunk

func (h chunkHeap) Len() int           { return len(h) }
func (h chunkHeap) Less(i, j int) bool { return less(h[j], h[i]) }
func (h chunkHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *chunkHeap) Push(x any)        { *h = append(*h, x.(scoredChunk)) }
func (h *chunkHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// SearchChunks ranks chunks against a natural-language query with BM25
// (see snapshot.bm25) and returns them with their text.
func (ix *Index) SearchChunks(ctx context.Context, q engine.ChunkQuery) ([]engine.ChunkHit, error) {
	if strings.TrimSpace(q.Query) == "" {
		return nil, fmt.Errorf("%w: the query is empty", engine.ErrInvalidRequest)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 10
	}
	f, err := newPathFilter(ix, q.Path, "")
	if err != nil {
		return nil, err
	}
	ranked := ix.snap().bm25(q.Query, f, limit)
	return ix.chunkHits(ranked, true), ctx.Err()
}

// chunkHits turns ranked chunks into hits, reading each chunk's text when
// withText (a file that cannot be read keeps its hit, without text).
func (ix *Index) chunkHits(ranked []scoredChunk, withText bool) []engine.ChunkHit {
	hits := make([]engine.ChunkHit, 0, len(ranked))
	files := map[string][]byte{}
	for _, r := range ranked {
		d := &r.key.seg.docs[r.key.doc]
		c := d.chunks[r.key.chunk]
		h := engine.ChunkHit{
			Path: r.path, StartLine: int(c.start), EndLine: int(c.end),
			Language: r.key.seg.str(d.lang), Kind: r.key.seg.str(c.kind), Name: r.key.seg.str(c.name), Score: r.score,
		}
		if withText {
			data, ok := files[r.path]
			if !ok {
				data, _ = ix.fsroot.FS().ReadFile(r.path)
				files[r.path] = data
			}
			if data != nil {
				h.Text = string(lineRange(data, lineStarts(data), h.StartLine, h.EndLine))
			}
		}
		hits = append(hits, h)
	}
	return hits
}

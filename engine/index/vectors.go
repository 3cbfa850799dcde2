package index

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/index/vector"
)

// vectorState is a workspace's embeddings: a matrix of the vectors of its
// live chunks (keyed by chunk-text hash, so unchanged chunks are never
// embedded again), filled in the background after each index update.
type vectorState struct {
	mu      sync.Mutex
	matrix  *vector.Matrix
	ids     map[[32]byte]uint32 // chunk hash → matrix id
	hashes  [][32]byte          // matrix id → chunk hash
	running bool
	again   bool // another update came while running
	done    int  // chunks with vectors
	total   int  // live chunks
	err     error
	// loadedBase and loadedDelta are the segments whose stored vectors
	// loadVectors last put in the matrix.
	loadedBase, loadedDelta *segment
}

// embeddingBatch is how many chunks are embedded between matrix updates.
const embeddingBatch = 512

// kickEmbedding starts (or re-arms) the background embedding of the
// workspace's chunks. It never blocks: lexical search does not wait.
func (ix *Index) kickEmbedding() {
	svc := ix.svc
	if svc.opts.Embedder == nil || !svc.opts.Background {
		return
	}
	v := &ix.vec
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.running {
		v.again = true
		return
	}
	v.running = true
	svc.bgWG.Add(1)
	go func() {
		defer svc.bgWG.Done()
		for {
			err := ix.embedOnce(svc.bg)
			v.mu.Lock()
			if svc.bg.Err() == nil {
				v.err = err
			}
			if err != nil && svc.bg.Err() == nil {
				svc.log.Warn("embedding stopped", "workspace", ix.root, "model", svc.opts.EmbedModel, "error", err)
			}
			if !v.again || err != nil || svc.bg.Err() != nil {
				v.running, v.again = false, false
				v.mu.Unlock()
				return
			}
			v.again = false
			v.mu.Unlock()
		}
	}()
}

// Embed computes the embeddings of every live chunk that lacks one, in the
// calling goroutine, until done or ctx ends; Status().Vectors shows its
// progress meanwhile. It returns the vector status afterwards. Without an
// embedder it returns engine.ErrUnsupported.
func (ix *Index) Embed(ctx context.Context) (VectorStatus, error) {
	if ix.svc.opts.Embedder == nil {
		return ix.vectorStatus(), fmt.Errorf("%w: no embedding model is configured", engine.ErrUnsupported)
	}
	v := &ix.vec
	for {
		v.mu.Lock()
		if !v.running {
			v.running = true
			v.mu.Unlock()
			break
		}
		v.mu.Unlock()
		select { // a background run is active; wait for it
		case <-ctx.Done():
			return ix.vectorStatus(), ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	err := ix.embedOnce(ctx)
	v.mu.Lock()
	v.running = false
	if ctx.Err() == nil {
		v.err = err // an interruption is not a reason to skip vectors
	}
	v.mu.Unlock()
	return ix.vectorStatus(), err
}

// embedOnce brings the matrix up to date with the live chunks: vectors
// already stored are loaded, the rest are embedded through the embedder in
// batches.
func (ix *Index) embedOnce(ctx context.Context) error {
	return ix.fillVectors(ctx, true)
}

// loadVectors puts the stored vectors of live chunks into the matrix,
// computing none; it does the work once per index state.
func (ix *Index) loadVectors(ctx context.Context) error {
	s := ix.snap()
	v := &ix.vec
	v.mu.Lock()
	done := v.loadedBase == s.base && v.loadedDelta == s.delta
	v.mu.Unlock()
	if done {
		return nil
	}
	if err := ix.fillVectors(ctx, false); err != nil {
		return err
	}
	v.mu.Lock()
	v.loadedBase, v.loadedDelta = s.base, s.delta
	v.mu.Unlock()
	return nil
}

// fillVectors loads stored vectors of live chunks missing from the matrix
// and, with compute, embeds the chunks that have none.
func (ix *Index) fillVectors(ctx context.Context, compute bool) error {
	svc, v := ix.svc, &ix.vec
	s := ix.snap()
	type loc struct {
		path       string
		start, end int
	}
	live := map[[32]byte]loc{}
	for _, seg := range s.segments() {
		for _, d := range seg.docs {
			ps := s.paths[d.content]
			if len(ps) == 0 {
				continue
			}
			for _, c := range d.chunks {
				live[c.hash] = loc{ps[0], int(c.start), int(c.end)}
			}
		}
	}
	v.mu.Lock()
	var missing [][32]byte
	for h := range live {
		if _, ok := v.ids[h]; !ok {
			missing = append(missing, h)
		}
	}
	v.total = len(live)
	v.done = len(live) - len(missing)
	v.mu.Unlock()
	if len(missing) == 0 {
		return nil
	}
	sort.Slice(missing, func(i, j int) bool { return live[missing[i]].path < live[missing[j]].path })
	key := svc.storeKey()
	files := map[string][]byte{}
	for lo := 0; lo < len(missing); lo += embeddingBatch {
		batch := missing[lo:min(lo+embeddingBatch, len(missing))]
		stored, err := svc.vectors.Get(ctx, key, batch)
		if err != nil {
			return err
		}
		var items []vector.Item
		for _, h := range batch {
			if _, ok := stored[h]; ok || !compute {
				continue
			}
			l := live[h]
			data, ok := files[l.path]
			if !ok {
				data, _ = ix.fsroot.FS().ReadFile(l.path)
				clear(files) // keep one file's bytes at a time
				files[l.path] = data
			}
			if data == nil {
				continue
			}
			items = append(items, vector.Item{Hash: h, Text: string(lineRange(data, lineStarts(data), l.start, l.end))})
		}
		if len(items) > 0 {
			if _, err := vector.Backfill(ctx, svc.opts.Embedder, svc.opts.EmbedModel, svc.vectors, items, vector.BackfillOptions{StoreKey: key}); err != nil {
				return err
			}
			fresh, err := svc.vectors.Get(ctx, key, batch)
			if err != nil {
				return err
			}
			stored = fresh
		}
		if err := v.add(stored, svc.opts.VectorPrecision); err != nil {
			return err
		}
	}
	return nil
}

// storeKey names the embedder's vectors in the store: PROVIDER:MODEL, so
// two providers serving a model of the same name never share vectors.
func (s *Service) storeKey() string {
	if s.opts.EmbedLabel != "" {
		return s.opts.EmbedLabel
	}
	return s.opts.EmbedModel
}

// add puts vectors into the matrix, creating it at the first vector's
// dimension.
func (v *vectorState) add(vecs map[[32]byte][]float32, prec vector.Precision) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	for h, vec := range vecs {
		if _, ok := v.ids[h]; ok {
			continue
		}
		if v.matrix == nil {
			m, err := vector.NewMatrix(len(vec), prec)
			if err != nil {
				return err
			}
			v.matrix, v.ids = m, map[[32]byte]uint32{}
		}
		id := uint32(len(v.hashes))
		if err := v.matrix.Add(id, vec); err != nil {
			return fmt.Errorf("embedding of dimension %d does not fit the index's %d: %w", len(vec), v.matrix.Dim(), err)
		}
		v.ids[h] = id
		v.hashes = append(v.hashes, h)
		v.done++
	}
	return nil
}

// vectorSkip says why vector search cannot run; it matches
// engine.ErrUnsupported.
type vectorSkip struct{ reason string }

func (e *vectorSkip) Error() string        { return "vector search is unavailable: " + e.reason }
func (e *vectorSkip) Is(target error) bool { return target == engine.ErrUnsupported }

// VectorStatus reports the embeddings of a workspace.
type VectorStatus struct {
	// Model is PROVIDER:MODEL of the embedder, "" when none is set.
	Model string `json:"model"`
	// Embedded of Total live chunks have vectors.
	Embedded int  `json:"embedded"`
	Total    int  `json:"total"`
	Running  bool `json:"running"`
	// Skipped says why the vector stage cannot run, or "".
	Skipped string `json:"skipped,omitempty"`
}

func (ix *Index) vectorStatus() VectorStatus {
	svc := ix.svc
	if svc.opts.Embedder == nil {
		return VectorStatus{Skipped: "no embedding model is configured"}
	}
	v := &ix.vec
	v.mu.Lock()
	defer v.mu.Unlock()
	st := VectorStatus{Model: svc.opts.EmbedLabel, Embedded: v.done, Total: v.total, Running: v.running}
	if v.err != nil {
		st.Skipped = v.err.Error()
	}
	return st
}

// SearchVectors ranks the live chunks by cosine similarity between their
// embeddings and the query's (exact top-k over the whole matrix). It
// returns engine.ErrUnsupported, saying why, when no embedder is set, the
// embedder cannot embed, or no chunk has a vector yet.
func (ix *Index) SearchVectors(ctx context.Context, q engine.ChunkQuery) ([]engine.ChunkHit, error) {
	ranked, err := ix.vectorRank(ctx, q)
	if err != nil {
		return nil, err
	}
	return ix.chunkHits(ranked, true), nil
}

func (ix *Index) vectorRank(ctx context.Context, q engine.ChunkQuery) ([]scoredChunk, error) {
	if strings.TrimSpace(q.Query) == "" {
		return nil, fmt.Errorf("%w: the query is empty", engine.ErrInvalidRequest)
	}
	if ix.svc.opts.Embedder != nil {
		if err := ix.loadVectors(ctx); err != nil {
			return nil, err
		}
	}
	st := ix.vectorStatus()
	switch {
	case st.Skipped != "" && st.Embedded == 0:
		return nil, &vectorSkip{st.Skipped}
	case st.Embedded == 0 && st.Running:
		return nil, &vectorSkip{fmt.Sprintf("embeddings are being computed (%d of %d chunks); text and symbol search work meanwhile", st.Embedded, st.Total)}
	case st.Embedded == 0:
		return nil, &vectorSkip{fmt.Sprintf("no chunk has an embedding from %s yet; embed them first (plexus index)", st.Model)}
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 10
	}
	f, err := newPathFilter(ix, q.Path, "")
	if err != nil {
		return nil, err
	}
	resp, err := ix.svc.opts.Embedder.Embed(ctx, engine.EmbedRequest{Model: ix.svc.opts.EmbedModel, Inputs: []string{q.Query}})
	if err != nil {
		if errors.Is(err, engine.ErrUnsupported) || errors.Is(err, engine.ErrModelNotFound) {
			return nil, &vectorSkip{fmt.Sprintf("%s cannot embed: %v", ix.svc.opts.EmbedLabel, err)}
		}
		return nil, err
	}
	if len(resp.Vectors) != 1 {
		return nil, fmt.Errorf("embedding the query: the provider returned %d vectors for 1 input", len(resp.Vectors))
	}
	s := ix.snap()
	locs := ix.chunksByHash(s)
	v := &ix.vec
	v.mu.Lock()
	hits, err := v.matrix.SearchFilter(resp.Vectors[0], limit*4, func(id uint32) bool {
		_, ok := locs[v.hashes[id]]
		return ok
	})
	hashes := v.hashes
	v.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", engine.ErrInvalidRequest, err)
	}
	var out []scoredChunk
	for _, h := range hits {
		for _, k := range locs[hashes[h.ID]] {
			for _, p := range s.paths[k.seg.docs[k.doc].content] {
				if f.match(p) {
					out = append(out, scoredChunk{key: k, path: p, score: float64(h.Score)})
				}
			}
		}
		if len(out) >= limit {
			break
		}
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// chunksByHash maps each live chunk's hash to where it is, cached per
// snapshot.
func (ix *Index) chunksByHash(s snapshot) map[[32]byte][]chunkKey {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.hashMap != nil && ix.hashMapBase == s.base && ix.hashMapDelta == s.delta {
		return ix.hashMap
	}
	m := map[[32]byte][]chunkKey{}
	for _, seg := range s.segments() {
		for di, d := range seg.docs {
			if len(s.paths[d.content]) == 0 {
				continue
			}
			for ci, c := range d.chunks {
				m[c.hash] = append(m[c.hash], chunkKey{seg, uint32(di), uint32(ci)})
			}
		}
	}
	ix.hashMap, ix.hashMapBase, ix.hashMapDelta = m, s.base, s.delta
	return m
}

// SearchVectors implements engine.Searcher.
func (s *Service) SearchVectors(ctx context.Context, root string, q engine.ChunkQuery) ([]engine.ChunkHit, error) {
	ix, err := s.ready(ctx, root)
	if err != nil {
		return nil, err
	}
	return ix.SearchVectors(ctx, q)
}

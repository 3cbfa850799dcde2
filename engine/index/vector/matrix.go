package vector

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
)

// Precision selects how a Matrix stores its vectors.
type Precision int

const (
	// Float32 stores each unit vector as dim float32 values: 4·dim bytes a
	// row. Scores are the float32 dot products of the unit vectors, exact
	// up to float32 rounding: an error below dim·2⁻²⁴ (5·10⁻⁵ at 768
	// dimensions), far less in practice.
	Float32 Precision = iota
	// Int8 stores each unit vector x as dim int8 values q and one float32
	// scale s (symmetric per-vector quantisation): s = max|xᵢ|/127 and
	// qᵢ = round(xᵢ/s), so |xᵢ − s·qᵢ| ≤ s/2. That is dim+4 bytes a row,
	// about a quarter of Float32. The query is not quantised (it stays a
	// float32 unit vector y), so the score error comes from the stored
	// vector alone: |Δscore| = |Σ (xᵢ − s·qᵢ)·yᵢ| ≤ (s/2)·‖y‖₁ ≤ (s/2)·√dim,
	// and, the rounding errors being independent and uniform on
	// [−s/2, s/2], typically s/√12 ≈ 3·10⁻⁴ for a random 768-dimensional
	// unit vector (s ≈ 0.0011). Ranks whose exact scores differ by less
	// than that can swap; BenchmarkSearch200kx768 measures the top-10
	// overlap with Float32 on random data.
	Int8
)

// String returns "float32" or "int8".
func (p Precision) String() string {
	switch p {
	case Float32:
		return "float32"
	case Int8:
		return "int8"
	}
	return fmt.Sprintf("Precision(%d)", int(p))
}

// Hit is one search result: a caller id and its cosine similarity to the
// query, in [-1, 1] (0 when either vector is zero).
type Hit struct {
	ID    uint32
	Score float32
}

// parallelMinWork is the number of multiply-adds (rows × dim) below which a
// search runs on the calling goroutine alone, and the least work each extra
// worker gets; at about 0.3 ns per multiply-add (BenchmarkDot) that is
// some 40 µs, far above the microsecond it costs to start a goroutine.
const parallelMinWork = 1 << 17

// Matrix holds N vectors of one dimension under caller ids and answers
// exact top-k cosine-similarity queries. Vectors are scaled to unit length
// when added (a zero vector stays zero and scores 0), so a score is a dot
// product. Rows live in one contiguous slice per matrix; Remove moves the
// last row into the hole. A Matrix is safe for concurrent use: searches run
// in parallel with each other and exclude Add and Remove.
type Matrix struct {
	dim  int
	prec Precision

	mu    sync.RWMutex
	ids   []uint32       // row -> id
	rowOf map[uint32]int // id -> row
	f32   []float32      // Float32: row r is f32[r*dim : (r+1)*dim]
	i8    []int8         // Int8: row r is i8[r*dim : (r+1)*dim]
	scale []float32      // Int8: row r's scale s
}

// NewMatrix returns an empty matrix of dim-long vectors stored at prec. It
// fails when dim < 1 or prec is not Float32 or Int8.
func NewMatrix(dim int, prec Precision) (*Matrix, error) {
	if dim < 1 {
		return nil, fmt.Errorf("new matrix: dimension %d is not positive", dim)
	}
	if prec != Float32 && prec != Int8 {
		return nil, fmt.Errorf("new matrix: unknown precision %d", int(prec))
	}
	return &Matrix{dim: dim, prec: prec, rowOf: make(map[uint32]int)}, nil
}

// Dim returns the length of the matrix's vectors.
func (m *Matrix) Dim() int { return m.dim }

// Precision returns how the matrix stores its vectors.
func (m *Matrix) Precision() Precision { return m.prec }

// Len returns the number of vectors held.
func (m *Matrix) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.ids)
}

// Grow reserves room for n more vectors, so that adding a known number of
// vectors allocates once instead of doubling its slices as it goes.
func (m *Matrix) Grow(n int) {
	if n <= 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ids = slices.Grow(m.ids, n)
	switch m.prec {
	case Float32:
		m.f32 = slices.Grow(m.f32, n*m.dim)
	case Int8:
		m.i8 = slices.Grow(m.i8, n*m.dim)
		m.scale = slices.Grow(m.scale, n)
	}
}

// MemoryBytes returns the bytes allocated for the vectors, their scales
// and the row ids (slice capacities), plus an estimate of 16 bytes a row
// for the id-to-row map.
func (m *Matrix) MemoryBytes() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return cap(m.f32)*4 + cap(m.i8) + cap(m.scale)*4 + cap(m.ids)*4 + len(m.rowOf)*16
}

// Add stores vec under id, replacing the vector id had. vec must be Dim()
// long (ErrDimMismatch) and finite (ErrInvalidVector); it is copied, scaled
// to unit length and, for Int8, quantised.
func (m *Matrix) Add(id uint32, vec []float32) error {
	unit, err := m.unit(vec)
	if err != nil {
		return fmt.Errorf("add vector %d: %w", id, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.rowOf[id]
	if !ok {
		r = len(m.ids)
		m.ids = append(m.ids, id)
		m.rowOf[id] = r
		switch m.prec {
		case Float32:
			m.f32 = append(m.f32, make([]float32, m.dim)...)
		case Int8:
			m.i8 = append(m.i8, make([]int8, m.dim)...)
			m.scale = append(m.scale, 0)
		}
	}
	lo, hi := r*m.dim, (r+1)*m.dim
	switch m.prec {
	case Float32:
		for i, x := range unit {
			m.f32[lo+i] = float32(x)
		}
	case Int8:
		m.scale[r] = quantizeInt8(m.i8[lo:hi], unit)
	}
	return nil
}

// Remove deletes id's vector and reports whether id was present. The last
// row moves into the freed row; memory is kept for later Adds.
func (m *Matrix) Remove(id uint32) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.rowOf[id]
	if !ok {
		return false
	}
	delete(m.rowOf, id)
	last := len(m.ids) - 1
	if r != last {
		moved := m.ids[last]
		m.ids[r] = moved
		m.rowOf[moved] = r
		switch m.prec {
		case Float32:
			copy(m.f32[r*m.dim:(r+1)*m.dim], m.f32[last*m.dim:])
		case Int8:
			copy(m.i8[r*m.dim:(r+1)*m.dim], m.i8[last*m.dim:])
			m.scale[r] = m.scale[last]
		}
	}
	m.ids = m.ids[:last]
	switch m.prec {
	case Float32:
		m.f32 = m.f32[:last*m.dim]
	case Int8:
		m.i8 = m.i8[:last*m.dim]
		m.scale = m.scale[:last]
	}
	return true
}

// Search returns the k vectors most similar to query (cosine similarity),
// best first; equal scores rank the smaller id first. It scans every row,
// so the answer is exact for Float32 (and exact over the quantised vectors
// for Int8), splitting the rows across GOMAXPROCS goroutines when there are
// enough of them to pay. It returns min(k, Len()) hits, none when k ≤ 0.
// query must be Dim() long (ErrDimMismatch) and finite (ErrInvalidVector);
// it need not be unit length. A zero query scores every row 0.
func (m *Matrix) Search(query []float32, k int) ([]Hit, error) {
	return m.search(query, k, nil, 0)
}

// SearchFilter is Search over the rows whose id keep accepts. keep is
// called once per row, from several goroutines at once for large matrices,
// so it must be safe for concurrent use and fast.
func (m *Matrix) SearchFilter(query []float32, k int, keep func(id uint32) bool) ([]Hit, error) {
	return m.search(query, k, keep, 0)
}

// search is Search with a filter and a worker count (0 means choose from
// GOMAXPROCS and the size of the scan).
func (m *Matrix) search(query []float32, k int, keep func(uint32) bool, workers int) ([]Hit, error) {
	unit, err := m.unit(query)
	if err != nil {
		return nil, fmt.Errorf("search: query: %w", err)
	}
	if k <= 0 {
		return nil, nil
	}
	q := make([]float32, m.dim)
	for i, x := range unit {
		q[i] = float32(x)
	}
	var scan func(lo, hi int, t *topK)
	switch m.prec {
	case Float32:
		scan = func(lo, hi int, t *topK) { m.scanFloat32(q, lo, hi, keep, t) }
	case Int8:
		scan = func(lo, hi int, t *topK) { m.scanInt8(q, lo, hi, keep, t) }
	}

	m.mu.RLock()
	defer m.mu.RUnlock()
	n := len(m.ids)
	k = min(k, n)
	if k == 0 {
		return nil, nil
	}
	if workers <= 0 {
		workers = min(runtime.GOMAXPROCS(0), max(1, n*m.dim/parallelMinWork))
	}
	workers = min(workers, n)
	if workers == 1 {
		t := newTopK(k)
		scan(0, n, t)
		return t.sorted(), nil
	}
	heaps := make([]*topK, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := w*n/workers, (w+1)*n/workers
		heaps[w] = newTopK(k)
		wg.Go(func() { scan(lo, hi, heaps[w]) })
	}
	wg.Wait()
	all := make([]Hit, 0, workers*k)
	for _, t := range heaps {
		all = append(all, t.h...)
	}
	slices.SortFunc(all, compareHits)
	return all[:min(k, len(all))], nil
}

// scanFloat32 offers rows [lo, hi) to t, scored against the unit query q.
// The caller holds m.mu.
func (m *Matrix) scanFloat32(q []float32, lo, hi int, keep func(uint32) bool, t *topK) {
	d := m.dim
	for r := lo; r < hi; r++ {
		id := m.ids[r]
		if keep != nil && !keep(id) {
			continue
		}
		s := dotFloat32(q, m.f32[r*d:(r+1)*d])
		if len(t.h) == t.k && s < t.h[0].Score {
			continue
		}
		t.offer(Hit{ID: id, Score: s})
	}
}

// scanInt8 offers rows [lo, hi) to t, scored against the unit query q. The
// caller holds m.mu.
func (m *Matrix) scanInt8(q []float32, lo, hi int, keep func(uint32) bool, t *topK) {
	d := m.dim
	for r := lo; r < hi; r++ {
		id := m.ids[r]
		if keep != nil && !keep(id) {
			continue
		}
		s := m.scale[r] * dotInt8(m.i8[r*d:(r+1)*d], q)
		if len(t.h) == t.k && s < t.h[0].Score {
			continue
		}
		t.offer(Hit{ID: id, Score: s})
	}
}

// unit validates vec against the matrix and returns it scaled to unit
// length in float64 (all zeros for the zero vector).
func (m *Matrix) unit(vec []float32) ([]float64, error) {
	if len(vec) != m.dim {
		return nil, fmt.Errorf("%w: length %d, matrix dimension %d", ErrDimMismatch, len(vec), m.dim)
	}
	return unitVector(vec)
}

// unitVector returns vec scaled to unit length in float64, all zeros for
// the zero vector, or ErrInvalidVector for an empty or non-finite vector.
func unitVector(vec []float32) ([]float64, error) {
	if err := checkFinite(vec); err != nil {
		return nil, err
	}
	out := make([]float64, len(vec))
	var sum float64
	for i, x := range vec {
		out[i] = float64(x)
		sum += out[i] * out[i]
	}
	if sum == 0 {
		return out, nil
	}
	inv := 1 / math.Sqrt(sum)
	for i := range out {
		out[i] *= inv
	}
	return out, nil
}

// checkFinite returns ErrInvalidVector, naming the first bad component,
// when vec is empty or holds a NaN or an infinity.
func checkFinite(vec []float32) error {
	if len(vec) == 0 {
		return fmt.Errorf("%w: empty", ErrInvalidVector)
	}
	for i, x := range vec {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("%w: component %d is %v", ErrInvalidVector, i, x)
		}
	}
	return nil
}

// quantizeInt8 writes round(xᵢ/s) to dst, with s = max|xᵢ|/127, and
// returns s (0 for the zero vector, whose dst is all zeros).
func quantizeInt8(dst []int8, x []float64) float32 {
	var maxAbs float64
	for _, v := range x {
		maxAbs = max(maxAbs, math.Abs(v))
	}
	if maxAbs == 0 {
		clear(dst)
		return 0
	}
	s := maxAbs / 127
	for i, v := range x {
		dst[i] = int8(max(-127, min(127, math.Round(v/s))))
	}
	return float32(s)
}

// compareHits orders hits best first: higher score, then smaller id.
func compareHits(a, b Hit) int {
	switch {
	case a.Score > b.Score:
		return -1
	case a.Score < b.Score:
		return 1
	case a.ID < b.ID:
		return -1
	case a.ID > b.ID:
		return 1
	}
	return 0
}

// worse reports whether a ranks below b (lower score, or equal score and a
// larger id).
func worse(a, b Hit) bool {
	return a.Score < b.Score || (a.Score == b.Score && a.ID > b.ID)
}

// topK keeps the k best hits offered to it in a binary min-heap whose root
// h[0] is the worst hit kept, so a new hit costs one comparison when it
// does not qualify and O(log k) when it replaces the root.
type topK struct {
	k int
	h []Hit
}

func newTopK(k int) *topK { return &topK{k: k, h: make([]Hit, 0, k)} }

// offer considers x for the top k.
func (t *topK) offer(x Hit) {
	if len(t.h) < t.k {
		t.h = append(t.h, x)
		// Sift up.
		i := len(t.h) - 1
		for i > 0 {
			p := (i - 1) / 2
			if !worse(t.h[i], t.h[p]) {
				break
			}
			t.h[i], t.h[p] = t.h[p], t.h[i]
			i = p
		}
		return
	}
	if !worse(t.h[0], x) {
		return
	}
	t.h[0] = x
	// Sift down.
	i, n := 0, len(t.h)
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && worse(t.h[c+1], t.h[c]) {
			c++
		}
		if !worse(t.h[c], t.h[i]) {
			break
		}
		t.h[i], t.h[c] = t.h[c], t.h[i]
		i = c
	}
}

// sorted returns the kept hits best first.
func (t *topK) sorted() []Hit {
	slices.SortFunc(t.h, compareHits)
	return t.h
}

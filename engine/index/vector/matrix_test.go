package vector

import (
	"errors"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// reference is the brute-force answer: every vector's cosine similarity to
// query in float64, best first, ties by smaller id; keep filters ids.
func reference(vecs map[uint32][]float32, query []float32, keep func(uint32) bool) []refHit {
	q, _ := unitVector(query)
	var out []refHit
	for id, v := range vecs {
		if keep != nil && !keep(id) {
			continue
		}
		u, _ := unitVector(v)
		var s float64
		for i := range u {
			s += u[i] * q[i]
		}
		out = append(out, refHit{id, s})
	}
	slices.SortFunc(out, func(a, b refHit) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		}
		return int(a.id) - int(b.id)
	})
	return out
}

type refHit struct {
	id    uint32
	score float64
}

// randomVectors returns n random dim-long vectors under ids 0..n-1.
func randomVectors(rng *rand.Rand, n, dim int) map[uint32][]float32 {
	out := make(map[uint32][]float32, n)
	for i := range n {
		out[uint32(i)] = randomVector(rng, dim)
	}
	return out
}

func matrixOf(t *testing.T, dim int, prec Precision, vecs map[uint32][]float32) *Matrix {
	t.Helper()
	m, err := NewMatrix(dim, prec)
	if err != nil {
		t.Fatal(err)
	}
	for id, v := range vecs {
		if err := m.Add(id, v); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// checkExact fails unless got is the top len(want) of ref up to float32
// rounding: each hit's score is its exact score, the scores descend like
// the reference's, and an id differs from the reference's only where the
// two exact scores are within tolerance (a near tie).
func checkExact(t *testing.T, got []Hit, ref []refHit, k int) {
	t.Helper()
	const tol = 1e-5
	if want := min(k, len(ref)); len(got) != want {
		t.Fatalf("got %d hits, want %d", len(got), want)
	}
	exact := make(map[uint32]float64, len(ref))
	for _, r := range ref {
		exact[r.id] = r.score
	}
	for i, h := range got {
		if math.Abs(float64(h.Score)-exact[h.ID]) > tol {
			t.Errorf("hit %d: id %d score %v, exact %v", i, h.ID, h.Score, exact[h.ID])
		}
		if math.Abs(float64(h.Score)-ref[i].score) > tol {
			t.Errorf("hit %d: score %v, reference rank %d has %v", i, h.Score, i, ref[i].score)
		}
		if h.ID != ref[i].id && math.Abs(exact[h.ID]-ref[i].score) > tol {
			t.Errorf("hit %d: id %d, want %d", i, h.ID, ref[i].id)
		}
		if i > 0 && compareHits(got[i-1], h) > 0 {
			t.Errorf("hits %d and %d out of order: %v, %v", i-1, i, got[i-1], h)
		}
	}
}

func TestMatrixFloat32IsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	// n·dim is twice parallelMinWork, so Search itself splits the scan
	// when GOMAXPROCS > 1.
	const n, dim = 6000, 48
	vecs := randomVectors(rng, n, dim)
	m := matrixOf(t, dim, Float32, vecs)
	for range 5 {
		q := randomVector(rng, dim)
		ref := reference(vecs, q, nil)
		for _, k := range []int{1, 10, 100} {
			got, err := m.Search(q, k)
			if err != nil {
				t.Fatal(err)
			}
			checkExact(t, got, ref, k)
			// Any split of the rows gives the same hits.
			for _, workers := range []int{1, 2, 3, 7} {
				split, err := m.search(q, k, nil, workers)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(split, got) {
					t.Errorf("k=%d: %d workers gave %v, Search gave %v", k, workers, split, got)
				}
			}
		}
	}
}

func TestMatrixInt8Recall(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	const n, dim, k, queries = 20000, 128, 10, 20
	vecs := randomVectors(rng, n, dim)
	m := matrixOf(t, dim, Int8, vecs)
	if got, want := m.MemoryBytes(), n*(dim+4+4); got < want || got > 3*want {
		t.Errorf("MemoryBytes = %d, want about %d", got, want)
	}
	var found int
	for range queries {
		q := randomVector(rng, dim)
		ref := reference(vecs, q, nil)
		got, err := m.Search(q, k)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != k {
			t.Fatalf("got %d hits, want %d", len(got), k)
		}
		top := map[uint32]bool{}
		for _, r := range ref[:k] {
			top[r.id] = true
		}
		exact := map[uint32]float64{}
		for _, r := range ref {
			exact[r.id] = r.score
		}
		uq, _ := unitVector(q)
		var l1 float64
		for _, x := range uq {
			l1 += math.Abs(x)
		}
		for _, h := range got {
			if top[h.ID] {
				found++
			}
			// The documented bound: |Δscore| ≤ (s/2)·‖y‖₁ (plus float32
			// rounding).
			s := float64(m.scale[m.rowOf[h.ID]])
			if d := math.Abs(float64(h.Score) - exact[h.ID]); d > s/2*l1+1e-5 {
				t.Errorf("id %d: score %v off the exact %v by %v, bound %v", h.ID, h.Score, exact[h.ID], d, s/2*l1)
			}
		}
	}
	recall := float64(found) / (k * queries)
	t.Logf("int8 recall@10 on %d×%d random vectors: %.3f", n, dim, recall)
	if recall < 0.9 {
		t.Errorf("recall@10 = %.3f, want ≥ 0.9", recall)
	}
}

func TestMatrixRemoveAndReplace(t *testing.T) {
	for _, prec := range []Precision{Float32, Int8} {
		t.Run(prec.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 3))
			const n, dim = 50, 16
			vecs := randomVectors(rng, n, dim)
			m := matrixOf(t, dim, prec, vecs)

			// Remove the first, a middle and the last row, and one twice.
			for _, id := range []uint32{0, 25, 49, 25} {
				_, present := vecs[id]
				if got := m.Remove(id); got != present {
					t.Errorf("Remove(%d) = %v, want %v", id, got, present)
				}
				delete(vecs, id)
			}
			if m.Remove(1000) {
				t.Error("Remove of an unknown id reported true")
			}
			// Replace one vector: its id now scores 1 against the new one.
			repl := randomVector(rng, dim)
			if err := m.Add(7, repl); err != nil {
				t.Fatal(err)
			}
			vecs[7] = repl
			if m.Len() != len(vecs) {
				t.Errorf("Len = %d, want %d", m.Len(), len(vecs))
			}
			got, err := m.Search(repl, n)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(vecs) {
				t.Fatalf("got %d hits, want all %d", len(got), len(vecs))
			}
			if got[0].ID != 7 || math.Abs(float64(got[0].Score)-1) > 0.01 {
				t.Errorf("best hit for the replacement vector = %v, want id 7 with score 1", got[0])
			}
			for _, h := range got {
				if _, ok := vecs[h.ID]; !ok {
					t.Errorf("removed id %d was found", h.ID)
				}
			}
			if prec == Float32 {
				checkExact(t, got, reference(vecs, repl, nil), n)
			} else {
				// Each hit scores its own vector, within the quantisation
				// bound (s/2)·√dim ≤ (1/254)·4.
				exact := map[uint32]float64{}
				for _, r := range reference(vecs, repl, nil) {
					exact[r.id] = r.score
				}
				for _, h := range got {
					if d := math.Abs(float64(h.Score) - exact[h.ID]); d > 4.0/254 {
						t.Errorf("id %d scored %v, exact %v", h.ID, h.Score, exact[h.ID])
					}
				}
			}
			// Removing everything leaves an empty matrix that still works.
			for id := range vecs {
				m.Remove(id)
			}
			if got, err := m.Search(repl, 5); err != nil || len(got) != 0 || m.Len() != 0 {
				t.Errorf("after removing all: Search = %v, %v; Len = %d", got, err, m.Len())
			}
			if err := m.Add(3, repl); err != nil {
				t.Fatal(err)
			}
			if got, _ := m.Search(repl, 5); len(got) != 1 || got[0].ID != 3 {
				t.Errorf("after re-adding: Search = %v", got)
			}
		})
	}
}

func TestMatrixEdgeCases(t *testing.T) {
	for _, prec := range []Precision{Float32, Int8} {
		t.Run(prec.String(), func(t *testing.T) {
			m, err := NewMatrix(3, prec)
			if err != nil {
				t.Fatal(err)
			}
			q := []float32{1, 0, 0}
			if got, err := m.Search(q, 10); err != nil || got != nil {
				t.Errorf("empty matrix: Search = %v, %v; want no hits", got, err)
			}
			vecs := map[uint32][]float32{
				10: {2, 0, 0},  // same direction as q
				11: {-1, 0, 0}, // opposite
				12: {0, 5, 0},  // orthogonal
				13: {0, 0, 0},  // zero vector: scores 0
				14: {0, 0, 3},  // orthogonal, ties with 12 and 13
			}
			for id, v := range vecs {
				if err := m.Add(id, v); err != nil {
					t.Fatal(err)
				}
			}
			got, err := m.Search(q, 100) // k > N
			if err != nil {
				t.Fatal(err)
			}
			want := []Hit{{10, 1}, {12, 0}, {13, 0}, {14, 0}, {11, -1}}
			if !slices.Equal(got, want) {
				t.Errorf("Search = %v, want %v", got, want)
			}
			for _, k := range []int{0, -1} {
				if got, err := m.Search(q, k); err != nil || got != nil {
					t.Errorf("k=%d: Search = %v, %v; want no hits", k, got, err)
				}
			}
			// A zero query scores everything 0; ties rank by id.
			got, err = m.Search([]float32{0, 0, 0}, 3)
			if err != nil {
				t.Fatal(err)
			}
			if want := []Hit{{10, 0}, {11, 0}, {12, 0}}; !slices.Equal(got, want) {
				t.Errorf("zero query: Search = %v, want %v", got, want)
			}
			// The query's length does not matter.
			got, err = m.Search([]float32{1e-20, 0, 0}, 1)
			if err != nil || len(got) != 1 || got[0] != (Hit{10, 1}) {
				t.Errorf("tiny query: Search = %v, %v", got, err)
			}
		})
	}
}

func TestMatrixErrors(t *testing.T) {
	if _, err := NewMatrix(0, Float32); err == nil {
		t.Error("NewMatrix(0) succeeded")
	}
	if _, err := NewMatrix(4, Precision(7)); err == nil {
		t.Error("NewMatrix with an unknown precision succeeded")
	}
	m, err := NewMatrix(2, Float32)
	if err != nil {
		t.Fatal(err)
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	tests := []struct {
		name string
		vec  []float32
		want error
	}{
		{"short", []float32{1}, ErrDimMismatch},
		{"long", []float32{1, 2, 3}, ErrDimMismatch},
		{"empty", nil, ErrDimMismatch},
		{"NaN", []float32{nan, 1}, ErrInvalidVector},
		{"infinity", []float32{1, inf}, ErrInvalidVector},
	}
	for _, tt := range tests {
		if err := m.Add(1, tt.vec); !errors.Is(err, tt.want) {
			t.Errorf("Add(%s) = %v, want %v", tt.name, err, tt.want)
		}
		if _, err := m.Search(tt.vec, 1); !errors.Is(err, tt.want) {
			t.Errorf("Search(%s) = %v, want %v", tt.name, err, tt.want)
		}
	}
	if m.Len() != 0 {
		t.Errorf("rejected Adds stored %d vectors", m.Len())
	}
}

func TestMatrixSearchFilter(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	const n, dim = 4000, 40
	vecs := randomVectors(rng, n, dim)
	m := matrixOf(t, dim, Float32, vecs)
	even := func(id uint32) bool { return id%2 == 0 }
	q := randomVector(rng, dim)
	got, err := m.SearchFilter(q, 20, even)
	if err != nil {
		t.Fatal(err)
	}
	checkExact(t, got, reference(vecs, q, even), 20)
	none, err := m.SearchFilter(q, 20, func(uint32) bool { return false })
	if err != nil || len(none) != 0 {
		t.Errorf("filter rejecting all: %v, %v", none, err)
	}
}

func TestMatrixGrowKeepsContents(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	vecs := randomVectors(rng, 20, 8)
	m := matrixOf(t, 8, Int8, vecs)
	before := m.MemoryBytes()
	m.Grow(1000)
	if m.MemoryBytes() < before+1000*8 {
		t.Errorf("Grow(1000) took MemoryBytes from %d to %d", before, m.MemoryBytes())
	}
	q := randomVector(rng, 8)
	got, err := m.Search(q, 20)
	if err != nil || len(got) != 20 {
		t.Fatalf("Search after Grow = %d hits, %v", len(got), err)
	}
	ref := reference(vecs, q, nil)
	if got[0].ID != ref[0].id {
		t.Errorf("best hit after Grow = %d, want %d", got[0].ID, ref[0].id)
	}
}

// TestMatrixConcurrentUse runs searches alongside adds and removes (which
// move rows); the race detector checks the locking, and every hit of every
// search must carry its own id's score, which a search reading a row
// while it moves would break.
func TestMatrixConcurrentUse(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	const n, dim = 2000, 32
	vecs := randomVectors(rng, n, dim)
	m := matrixOf(t, dim, Float32, vecs)
	all := maps.Clone(vecs)
	extra := map[uint32][]float32{}
	for id, v := range randomVectors(rng, 200, dim) {
		extra[id+n] = v
		all[id+n] = v
	}
	queries := make([][]float32, 8)
	for i := range queries {
		queries[i] = randomVector(rng, dim)
	}
	var wg sync.WaitGroup
	for _, q := range queries {
		exact := map[uint32]float64{}
		for _, r := range reference(all, q, nil) {
			exact[r.id] = r.score
		}
		wg.Go(func() {
			for range 10 {
				got, err := m.Search(q, 10)
				if err != nil || len(got) != 10 {
					t.Errorf("Search = %d hits, %v", len(got), err)
					return
				}
				for _, h := range got {
					if math.Abs(float64(h.Score)-exact[h.ID]) > 1e-5 {
						t.Errorf("id %d scored %v, its vector scores %v", h.ID, h.Score, exact[h.ID])
					}
				}
			}
		})
	}
	wg.Go(func() {
		for id, v := range extra {
			if err := m.Add(id, v); err != nil {
				t.Error(err)
			}
			m.Remove(id - n)
		}
	})
	wg.Wait()
	if m.Len() != n {
		t.Errorf("Len = %d, want %d", m.Len(), n)
	}
}

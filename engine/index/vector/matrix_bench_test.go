package vector

import (
	"math/rand/v2"
	"runtime"
	"testing"
)

// randomVector returns a vector of dim standard normal components: its
// direction is uniform on the sphere, the hardest case for quantised
// ranking because the top scores of random data lie close together.
func randomVector(rng *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// buildRandomMatrix returns a matrix of n random vectors with ids 0..n-1,
// the same vectors for the same seed whatever prec is.
func buildRandomMatrix(tb testing.TB, n, dim int, prec Precision, seed uint64) *Matrix {
	tb.Helper()
	m, err := NewMatrix(dim, prec)
	if err != nil {
		tb.Fatal(err)
	}
	m.Grow(n)
	rng := rand.New(rand.NewPCG(seed, 0))
	v := make([]float32, dim)
	for i := range n {
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		if err := m.Add(uint32(i), v); err != nil {
			tb.Fatal(err)
		}
	}
	return m
}

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkSearch200kx768 measures one exact top-10 search over 200,000
// random 768-dimensional vectors at each precision, on all cores and on
// one. It reports the matrix's own size (matrix-bytes), the growth of the
// live heap while building it (heap-bytes), and for int8 the mean top-10
// overlap with float32 over 50 random queries (top10-overlap, 1 = same
// ids).
func BenchmarkSearch200kx768(b *testing.B) {
	const n, dim, k, seed = 200_000, 768, 10, 1
	rng := rand.New(rand.NewPCG(2, 0))
	queries := make([][]float32, 50)
	for i := range queries {
		queries[i] = randomVector(rng, dim)
	}

	matrices := map[Precision]*Matrix{}
	heapBytes := map[Precision]uint64{}
	for _, prec := range []Precision{Float32, Int8} {
		before := heapInUse()
		matrices[prec] = buildRandomMatrix(b, n, dim, prec, seed)
		heapBytes[prec] = heapInUse() - before
	}

	var overlap float64
	for _, q := range queries {
		exact, err := matrices[Float32].Search(q, k)
		if err != nil {
			b.Fatal(err)
		}
		approx, err := matrices[Int8].Search(q, k)
		if err != nil {
			b.Fatal(err)
		}
		overlap += float64(countCommonIDs(exact, approx)) / k
	}
	overlap /= float64(len(queries))

	for _, prec := range []Precision{Float32, Int8} {
		m := matrices[prec]
		for _, workers := range []int{0, 1} {
			name := prec.String()
			if workers == 1 {
				name += "-1worker"
			}
			b.Run(name, func(b *testing.B) {
				i := 0
				for b.Loop() {
					if _, err := m.search(queries[i%len(queries)], k, nil, workers); err != nil {
						b.Fatal(err)
					}
					i++
				}
				// After the loop: b.Loop's first call resets the metrics.
				b.ReportMetric(float64(m.MemoryBytes()), "matrix-bytes")
				b.ReportMetric(float64(heapBytes[prec]), "heap-bytes")
				if prec == Int8 {
					b.ReportMetric(overlap, "top10-overlap")
				}
			})
		}
	}
	runtime.KeepAlive(matrices)
}

// countCommonIDs counts the ids present in both a and b.
func countCommonIDs(a, b []Hit) int {
	in := make(map[uint32]bool, len(a))
	for _, h := range a {
		in[h.ID] = true
	}
	n := 0
	for _, h := range b {
		if in[h.ID] {
			n++
		}
	}
	return n
}

// BenchmarkDot measures the two inner kernels on one 768-long row.
func BenchmarkDot(b *testing.B) {
	const dim = 768
	rng := rand.New(rand.NewPCG(3, 0))
	x, y := randomVector(rng, dim), randomVector(rng, dim)
	b.Run("float32", func(b *testing.B) {
		var s float32
		for b.Loop() {
			s += dotFloat32(x, y)
		}
		sink = float64(s)
	})
	b.Run("int8", func(b *testing.B) {
		ux, _ := unitVector(x)
		uy, _ := unitVector(y)
		a := make([]int8, dim)
		quantizeInt8(a, ux)
		q := make([]float32, dim)
		for i, v := range uy {
			q[i] = float32(v)
		}
		var s float32
		for b.Loop() {
			s += dotInt8(a, q)
		}
		sink = float64(s)
	})
}

var sink float64

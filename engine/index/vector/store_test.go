package vector

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	_ "modernc.org/sqlite"
)

// openDB opens (creating) the SQLite database at path the way the index
// does: WAL journal, a busy timeout, and a table of its own beside ours.
func openDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec("CREATE TABLE IF NOT EXISTS chunks (id INTEGER PRIMARY KEY, text TEXT)"); err != nil {
		t.Fatal(err)
	}
	return db
}

func newTestStore(t testing.TB) (*Store, *sql.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "index.db")
	db := openDB(t, path)
	s, err := NewStore(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return s, db, path
}

// checkCount fails unless Count(model) equals the rows in the table.
func checkCount(t *testing.T, s *Store, db *sql.DB, model string, want int) {
	t.Helper()
	var rows int
	if err := db.QueryRow("SELECT count(*) FROM vector_embeddings WHERE model = ?", model).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	n, err := s.Count(context.Background(), model)
	if err != nil || n != want || rows != want {
		t.Errorf("Count(%s) = %d, %v; table rows %d; want %d", model, n, err, rows, want)
	}
}

func hashOf(s string) [32]byte { return sha256.Sum256([]byte(s)) }

// testVector returns a deterministic dim-long vector for i.
func testVector(i, dim int) []float32 {
	v := make([]float32, dim)
	for j := range v {
		v[j] = float32(math.Sin(float64(i*dim+j+1))) * float32(i+1)
	}
	return v
}

// equalBits reports whether a and b hold the same float32 bit patterns.
func equalBits(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

func TestStoreRoundTripAndReopen(t *testing.T) {
	ctx := context.Background()
	s, db, path := newTestStore(t)

	// Values that a lossy encoding would change.
	special := []float32{0, float32(math.Copysign(0, -1)), math.SmallestNonzeroFloat32, -math.MaxFloat32, 1e-30, 3.14159265}
	want := map[string]map[[32]byte][]float32{
		"ollama:nomic-embed-text": {hashOf("a"): special, hashOf("b"): testVector(1, 6)},
		"openai:text-embedding-3": {hashOf("a"): testVector(2, 3)},
	}
	for model, vecs := range want {
		if err := s.Put(ctx, model, vecs); err != nil {
			t.Fatal(err)
		}
	}
	check := func(s *Store) {
		t.Helper()
		for model, vecs := range want {
			hashes := slices.Collect(maps.Keys(vecs))
			got, err := s.Get(ctx, model, hashes)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(vecs) {
				t.Errorf("%s: Get returned %d vectors, want %d", model, len(got), len(vecs))
			}
			for h, v := range vecs {
				if !equalBits(got[h], v) {
					t.Errorf("%s: vector %x = %v, want %v", model, h[:4], got[h], v)
				}
			}
			n, err := s.Count(ctx, model)
			if err != nil || n != len(vecs) {
				t.Errorf("%s: Count = %d, %v, want %d", model, n, err, len(vecs))
			}
			dim, err := s.Dim(ctx, model)
			if err != nil || dim != len(vecs[hashes[0]]) {
				t.Errorf("%s: Dim = %d, %v, want %d", model, dim, err, len(vecs[hashes[0]]))
			}
		}
	}
	check(s)

	// Reopen the file: the vectors persisted, and NewStore on existing
	// tables is a no-op.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := NewStore(ctx, openDB(t, path))
	if err != nil {
		t.Fatal(err)
	}
	check(s2)
	if n, err := s2.Count(ctx, "no-such-model"); err != nil || n != 0 {
		t.Errorf("Count(unknown model) = %d, %v, want 0", n, err)
	}
	if d, err := s2.Dim(ctx, "no-such-model"); err != nil || d != 0 {
		t.Errorf("Dim(unknown model) = %d, %v, want 0", d, err)
	}
}

func TestStoreGetAndMissing(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newTestStore(t)
	const model, dim, stored = "m", 2, 13_000
	vecs := make(map[[32]byte][]float32, stored)
	for i := range stored {
		vecs[hashOf(fmt.Sprint(i))] = testVector(i, dim)
	}
	if err := s.Put(ctx, model, vecs); err != nil {
		t.Fatal(err)
	}
	// A hash stored only under another model counts as missing.
	if err := s.Put(ctx, "other", map[[32]byte][]float32{hashOf("only other"): {1}}); err != nil {
		t.Fatal(err)
	}

	// request returns n hashes: every third one unstored (one of them
	// stored under the other model), then the first two again.
	request := func(n int) [][32]byte {
		var out [][32]byte
		for i := range n {
			switch {
			case i == 0:
				out = append(out, hashOf("only other"))
			case i%3 == 0:
				out = append(out, hashOf(fmt.Sprint("unstored", i)))
			default:
				out = append(out, hashOf(fmt.Sprint(i)))
			}
		}
		return append(out, out[:min(2, len(out))]...)
	}
	// The sizes take each lookup path: IN lists below scanMinHashes, IN
	// lists because the model holds many more rows than asked for, and a
	// range scan of the model.
	for _, n := range []int{0, 1, 2*lookupBatch - 1, 1200, 7000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var hashes [][32]byte
			if n > 0 {
				hashes = request(n)
			}
			wantVecs := map[[32]byte][]float32{}
			var wantMissing [][32]byte
			for _, h := range hashes {
				if v, ok := vecs[h]; ok {
					wantVecs[h] = v
				} else if !slices.Contains(wantMissing, h) {
					wantMissing = append(wantMissing, h)
				}
			}
			got, err := s.Get(ctx, model, hashes)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(wantVecs) {
				t.Errorf("Get returned %d vectors, want %d", len(got), len(wantVecs))
			}
			for h, v := range wantVecs {
				if !equalBits(got[h], v) {
					t.Fatalf("vector %x = %v, want %v", h[:4], got[h], v)
				}
			}
			missing, err := s.Missing(ctx, model, hashes)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(missing, wantMissing) {
				t.Errorf("Missing returned %d hashes, want the %d unstored ones in order", len(missing), len(wantMissing))
			}
		})
	}
}

func TestStorePutIsIdempotent(t *testing.T) {
	ctx := context.Background()
	s, db, _ := newTestStore(t)
	vecs := map[[32]byte][]float32{hashOf("x"): testVector(1, 8), hashOf("y"): testVector(2, 8)}
	for range 3 {
		if err := s.Put(ctx, "m", vecs); err != nil {
			t.Fatal(err)
		}
	}
	checkCount(t, s, db, "m", 2)
	// A new vector for a stored hash replaces the old one.
	newer := testVector(9, 8)
	if err := s.Put(ctx, "m", map[[32]byte][]float32{hashOf("x"): newer}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "m", [][32]byte{hashOf("x"), hashOf("y")})
	if err != nil {
		t.Fatal(err)
	}
	if !equalBits(got[hashOf("x")], newer) || !equalBits(got[hashOf("y")], vecs[hashOf("y")]) {
		t.Errorf("after replacing x: got %v", got)
	}
	checkCount(t, s, db, "m", 2)
	// One Put replacing one vector and adding another.
	if err := s.Put(ctx, "m", map[[32]byte][]float32{hashOf("y"): newer, hashOf("z"): newer}); err != nil {
		t.Fatal(err)
	}
	checkCount(t, s, db, "m", 3)
	if err := s.Put(ctx, "m", nil); err != nil {
		t.Errorf("Put(nil) = %v", err)
	}
}

func TestStorePutRejects(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newTestStore(t)
	if err := s.Put(ctx, "m", map[[32]byte][]float32{hashOf("first"): testVector(0, 4)}); err != nil {
		t.Fatal(err)
	}
	nan := float32(math.NaN())
	inf := float32(math.Inf(-1))
	tests := []struct {
		name string
		vecs map[[32]byte][]float32
		want error
	}{
		{"empty vector", map[[32]byte][]float32{hashOf("a"): {}}, ErrInvalidVector},
		{"NaN", map[[32]byte][]float32{hashOf("a"): {1, nan, 0, 0}}, ErrInvalidVector},
		{"infinity", map[[32]byte][]float32{hashOf("a"): {1, 0, 0, inf}}, ErrInvalidVector},
		{"lengths differ in one call", map[[32]byte][]float32{hashOf("a"): {1, 2, 3, 4}, hashOf("b"): {1, 2, 3}}, ErrDimMismatch},
		{"length differs from the stored one", map[[32]byte][]float32{hashOf("a"): {1, 2, 3}, hashOf("b"): {4, 5, 6}}, ErrDimMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Put(ctx, "m", tt.vecs)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Put = %v, want %v", err, tt.want)
			}
			if n, _ := s.Count(ctx, "m"); n != 1 {
				t.Errorf("a rejected Put wrote vectors: Count = %d, want 1", n)
			}
		})
	}
}

func TestStoreDelete(t *testing.T) {
	ctx := context.Background()
	s, db, _ := newTestStore(t)
	var hashes [][32]byte
	vecs := map[[32]byte][]float32{}
	for i := range 10 {
		h := hashOf(fmt.Sprint(i))
		hashes = append(hashes, h)
		vecs[h] = testVector(i, 4)
	}
	if err := s.Put(ctx, "m", vecs); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "keep", vecs); err != nil {
		t.Fatal(err)
	}
	// Unknown and repeated hashes are ignored.
	if err := s.Delete(ctx, "m", append(hashes[:3:3], hashOf("never stored"), hashes[0])); err != nil {
		t.Fatal(err)
	}
	checkCount(t, s, db, "m", 7)
	missing, err := s.Missing(ctx, "m", hashes)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(missing, hashes[:3]) {
		t.Errorf("after deleting 3: Missing = %d hashes, want the first 3", len(missing))
	}
	// While vectors remain the dimension stays fixed.
	if err := s.Put(ctx, "m", map[[32]byte][]float32{hashOf("z"): {1, 2}}); !errors.Is(err, ErrDimMismatch) {
		t.Errorf("Put of another length with vectors left = %v, want ErrDimMismatch", err)
	}
	// Deleting the rest frees the dimension.
	if err := s.Delete(ctx, "m", hashes); err != nil {
		t.Fatal(err)
	}
	if d, _ := s.Dim(ctx, "m"); d != 0 {
		t.Errorf("Dim after deleting all = %d, want 0", d)
	}
	checkCount(t, s, db, "m", 0)
	if err := s.Put(ctx, "m", map[[32]byte][]float32{hashOf("z"): {1, 2}}); err != nil {
		t.Errorf("Put of a new length after deleting all = %v", err)
	}
	// DeleteModel clears one model only.
	if err := s.DeleteModel(ctx, "keep"); err != nil {
		t.Fatal(err)
	}
	checkCount(t, s, db, "keep", 0)
	if d, _ := s.Dim(ctx, "keep"); d != 0 {
		t.Errorf("Dim after DeleteModel = %d", d)
	}
	checkCount(t, s, db, "m", 1)
}

// TestStoreConcurrentWriters runs Puts from several goroutines, as the
// index's workers would, each on its own pooled connection of a WAL
// database: every Put must succeed (waiting on the busy timeout) and every
// vector must land.
func TestStoreConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	s, db, _ := newTestStore(t)
	const writers, puts, per = 4, 10, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers*puts+writers)
	for w := range writers {
		wg.Go(func() {
			for p := range puts {
				vecs := map[[32]byte][]float32{}
				for i := range per {
					vecs[hashOf(fmt.Sprint(w, p, i))] = testVector(i, 16)
				}
				if err := s.Put(ctx, "m", vecs); err != nil {
					errs <- err
				}
				// Interleave writes to another table of the same database.
				if _, err := db.ExecContext(ctx, "INSERT INTO chunks (text) VALUES (?)", "x"); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	checkCount(t, s, db, "m", writers*puts*per)
}

func TestStoreSchemaRefusesBadBlobs(t *testing.T) {
	ctx := context.Background()
	s, db, _ := newTestStore(t)
	if err := s.Put(ctx, "m", map[[32]byte][]float32{hashOf("a"): {1, 2}}); err != nil {
		t.Fatal(err)
	}
	// The CHECK constraints keep malformed rows out of the table.
	for _, stmt := range []string{
		"UPDATE vector_embeddings SET vec = x'0000' WHERE model = 'm'",
		"UPDATE vector_embeddings SET hash = x'00' WHERE model = 'm'",
		"UPDATE vector_embeddings SET dim = 0, vec = x'' WHERE model = 'm'",
	} {
		if _, err := db.ExecContext(ctx, stmt); err == nil {
			t.Errorf("%s: accepted", stmt)
		}
	}
	if _, err := s.Get(ctx, "m", [][32]byte{hashOf("a")}); err != nil {
		t.Errorf("Get after the refused update = %v", err)
	}
}

// BenchmarkStoreGet100k measures, over 100,000 stored 768-dimensional
// vectors (a 300 MB table), Get of all of them and Missing of 1,000,
// 10,000 and all of them, in one call each.
func BenchmarkStoreGet100k(b *testing.B) {
	const n, dim = 100_000, 768
	ctx := context.Background()
	s, _, _ := newTestStore(b)
	hashes := make([][32]byte, n)
	v := testVector(1, dim)
	for start := 0; start < n; start += 10_000 {
		vecs := make(map[[32]byte][]float32, 10_000)
		for i := start; i < start+10_000; i++ {
			hashes[i] = hashOf(fmt.Sprint(i))
			vecs[hashes[i]] = v
		}
		if err := s.Put(ctx, "m", vecs); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("Get", func(b *testing.B) {
		for b.Loop() {
			got, err := s.Get(ctx, "m", hashes)
			if err != nil || len(got) != n {
				b.Fatal(len(got), err)
			}
		}
	})
	for _, n := range []int{1000, 10_000, n} {
		b.Run(fmt.Sprint("Missing", n), func(b *testing.B) {
			for b.Loop() {
				got, err := s.Missing(ctx, "m", hashes[:n])
				if err != nil || len(got) != 0 {
					b.Fatal(len(got), err)
				}
			}
		})
	}
}

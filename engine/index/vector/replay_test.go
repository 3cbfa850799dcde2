package vector_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/index/vector"
	"github.com/plexus-agent/plexus/models/replay"
)

var chunks = []string{
	"func parseConfig(path string) (*Config, error) { // reads the JSON config file",
	"func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) { // checks the password",
	"func sortUsersByName(users []User) { slices.SortFunc(users, byName) }",
	"type Cache struct { mu sync.Mutex; entries map[string]entry } // an LRU cache",
}

func openStore(t testing.TB) *vector.Store {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "index.db")+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := vector.NewStore(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func items(texts []string) ([]vector.Item, [][32]byte) {
	var out []vector.Item
	var hashes [][32]byte
	for _, s := range texts {
		h := sha256.Sum256([]byte(s))
		out = append(out, vector.Item{Hash: h, Text: s})
		hashes = append(hashes, h)
	}
	return out, hashes
}

// TestBackfillWithReplayProvider runs Backfill against the real replay
// provider, in process: the stored vectors are exactly the provider's, a
// second run embeds nothing, and a Matrix loaded from the store ranks the
// chunk that shares the query's words first.
func TestBackfillWithReplayProvider(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	p := replay.New()
	its, hashes := items(chunks)

	stats, err := vector.Backfill(ctx, p, "any-model", store, its, vector.BackfillOptions{BatchSize: 3, StoreKey: "replay:any-model"})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Embedded != len(chunks) || stats.Batches != 2 || stats.Dim != replay.EmbedDimension {
		t.Errorf("stats = %+v, want %d embedded in 2 batches of dimension %d", stats, len(chunks), replay.EmbedDimension)
	}

	direct, err := p.Embed(ctx, engine.EmbedRequest{Model: "any-model", Inputs: chunks})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := store.Get(ctx, "replay:any-model", hashes)
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range hashes {
		if !slices.Equal(stored[h], direct.Vectors[i]) {
			t.Errorf("stored vector of chunk %d differs from the provider's", i)
		}
	}

	again, err := vector.Backfill(ctx, p, "any-model", store, its, vector.BackfillOptions{StoreKey: "replay:any-model"})
	if err != nil || again.Batches != 0 || again.Present != len(chunks) {
		t.Errorf("second run: stats = %+v, %v; want nothing embedded", again, err)
	}

	for _, prec := range []vector.Precision{vector.Float32, vector.Int8} {
		m, err := vector.NewMatrix(replay.EmbedDimension, prec)
		if err != nil {
			t.Fatal(err)
		}
		for i, h := range hashes {
			if err := m.Add(uint32(i), stored[h]); err != nil {
				t.Fatal(err)
			}
		}
		q, err := p.Embed(ctx, engine.EmbedRequest{Model: "any-model", Inputs: []string{"parse the JSON config file"}})
		if err != nil {
			t.Fatal(err)
		}
		hits, err := m.Search(q.Vectors[0], 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != 2 || hits[0].ID != 0 || hits[0].Score <= hits[1].Score {
			t.Errorf("%v: hits = %v, want chunk 0 (parseConfig) clearly first", prec, hits)
		}
	}
}

// Example embeds a workspace's chunks with a model provider, then loads
// them into a Matrix and searches it.
func Example() {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:example?mode=memory")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // one connection: the in-memory database is per connection
	store, err := vector.NewStore(ctx, db)
	if err != nil {
		fmt.Println(err)
		return
	}

	its, hashes := items(chunks)
	model := replay.New() // any engine.Model; replay embeds offline
	stats, err := vector.Backfill(ctx, model, "embed", store, its, vector.BackfillOptions{})
	if err != nil {
		fmt.Println(err) // an errors.Is(err, engine.ErrUnsupported) error is the provider's own words
		return
	}
	fmt.Printf("embedded %d chunks of %d dimensions\n", stats.Embedded, stats.Dim)

	vecs, err := store.Get(ctx, "embed", hashes)
	if err != nil {
		fmt.Println(err)
		return
	}
	m, err := vector.NewMatrix(stats.Dim, vector.Int8)
	if err != nil {
		fmt.Println(err)
		return
	}
	m.Grow(len(hashes))
	for i, h := range hashes {
		if err := m.Add(uint32(i), vecs[h]); err != nil {
			fmt.Println(err)
			return
		}
	}
	q, err := model.Embed(ctx, engine.EmbedRequest{Model: "embed", Inputs: []string{"LRU cache"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	hits, err := m.Search(q.Vectors[0], 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(chunks[hits[0].ID][:12])
	// Output:
	// embedded 4 chunks of 256 dimensions
	// type Cache s
}

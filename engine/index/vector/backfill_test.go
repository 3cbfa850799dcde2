package vector

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/plexus-agent/plexus/engine"
)

// fakeModel is an engine.Model whose Embed answers with fakeVector of each
// input and records every call; answer, when set, replaces the answer of
// the given call (1-based).
type fakeModel struct {
	dim    int
	answer func(ctx context.Context, call int, req engine.EmbedRequest) (engine.EmbedResponse, error)

	mu       sync.Mutex
	calls    int
	requests []engine.EmbedRequest
}

var _ engine.Model = (*fakeModel)(nil)

func (f *fakeModel) ListModels(context.Context) ([]engine.ModelInfo, error) {
	return []engine.ModelInfo{{Name: "fake", Capabilities: []string{"embedding"}}}, nil
}

func (f *fakeModel) Chat(context.Context, engine.ChatRequest, func(engine.ChatChunk) error) error {
	return &engine.ModelError{Provider: "fake", Kind: engine.ErrUnsupported, Message: "fake does not chat"}
}

func (f *fakeModel) Embed(ctx context.Context, req engine.EmbedRequest) (engine.EmbedResponse, error) {
	f.mu.Lock()
	f.calls++
	call := f.calls
	f.requests = append(f.requests, engine.EmbedRequest{Model: req.Model, Inputs: slices.Clone(req.Inputs)})
	f.mu.Unlock()
	if f.answer != nil {
		return f.answer(ctx, call, req)
	}
	return f.vectors(req), nil
}

// vectors is the default answer: one fakeVector per input.
func (f *fakeModel) vectors(req engine.EmbedRequest) engine.EmbedResponse {
	resp := engine.EmbedResponse{PromptTokens: int64(len(req.Inputs))}
	for _, in := range req.Inputs {
		resp.Vectors = append(resp.Vectors, fakeVector(in, f.dim))
	}
	return resp
}

// inputs returns every input sent, in order.
func (f *fakeModel) inputs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.requests {
		out = append(out, r.Inputs...)
	}
	return out
}

func (f *fakeModel) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// fakeVector is a deterministic dim-long vector for text.
func fakeVector(text string, dim int) []float32 {
	h := fnv.New64a()
	h.Write([]byte(text))
	seed := h.Sum64()
	v := make([]float32, dim)
	for i := range v {
		seed = seed*6364136223846793005 + 1442695040888963407
		v[i] = float32(int32(seed>>32)) / math.MaxInt32
	}
	return v
}

// textItems returns one item per text, keyed by the text's SHA-256.
func textItems(texts ...string) []Item {
	out := make([]Item, len(texts))
	for i, s := range texts {
		out[i] = Item{Hash: hashOf(s), Text: s}
	}
	return out
}

func numbered(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s %d", prefix, i)
	}
	return out
}

func TestBackfillEmbedsOnlyWhatIsMissing(t *testing.T) {
	ctx := context.Background()
	store, _, _ := newTestStore(t)
	texts := numbered("func f", 100)
	m := &fakeModel{dim: 8}
	var progress [][2]int
	opts := BackfillOptions{BatchSize: 16, Progress: func(done, total int) { progress = append(progress, [2]int{done, total}) }}

	stats, err := Backfill(ctx, m, "fake-embed", store, textItems(texts...), opts)
	if err != nil {
		t.Fatal(err)
	}
	want := BackfillStats{Items: 100, Embedded: 100, Batches: 7, PromptTokens: 100, Dim: 8}
	if stats != want {
		t.Errorf("first run: stats = %+v, want %+v", stats, want)
	}
	if m.callCount() != 7 || !slices.Equal(m.inputs(), texts) {
		t.Errorf("first run: %d calls sending %d inputs, want 7 calls sending the 100 texts in order", m.callCount(), len(m.inputs()))
	}
	wantProgress := [][2]int{{0, 100}, {16, 100}, {32, 100}, {48, 100}, {64, 100}, {80, 100}, {96, 100}, {100, 100}}
	if !slices.Equal(progress, wantProgress) {
		t.Errorf("progress = %v, want %v", progress, wantProgress)
	}
	got, err := store.Get(ctx, "fake-embed", []([32]byte){hashOf(texts[0]), hashOf(texts[99])})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{texts[0], texts[99]} {
		if !equalBits(got[hashOf(s)], fakeVector(s, 8)) {
			t.Errorf("stored vector of %q is not the model's", s)
		}
	}

	// Nothing changed: nothing is embedded again.
	progress = nil
	m2 := &fakeModel{dim: 8}
	stats, err = Backfill(ctx, m2, "fake-embed", store, textItems(texts...), opts)
	if err != nil {
		t.Fatal(err)
	}
	if want := (BackfillStats{Items: 100, Present: 100}); stats != want || m2.callCount() != 0 || progress != nil {
		t.Errorf("second run: stats = %+v, %d calls, progress %v; want %+v, no calls, no progress", stats, m2.callCount(), progress, want)
	}

	// Three chunks edited, five added: exactly those eight are embedded.
	edited := slices.Clone(texts)
	var changed []string
	for _, i := range []int{3, 50, 97} {
		edited[i] += " // edited"
		changed = append(changed, edited[i])
	}
	added := numbered("type T", 5)
	changed = append(changed, added...)
	m3 := &fakeModel{dim: 8}
	stats, err = Backfill(ctx, m3, "fake-embed", store, textItems(append(edited, added...)...), opts)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Embedded != 8 || stats.Present != 97 || m3.callCount() != 1 || !slices.Equal(m3.inputs(), changed) {
		t.Errorf("third run: stats = %+v, inputs %q; want the 8 changed texts in one call", stats, m3.inputs())
	}
	if n, _ := store.Count(ctx, "fake-embed"); n != 108 {
		t.Errorf("Count = %d, want 108", n)
	}
}

func TestBackfillResumesAfterInterruption(t *testing.T) {
	ctx := context.Background()
	store, _, _ := newTestStore(t)
	texts := numbered("chunk", 100)
	outage := &engine.ModelError{Provider: "ollama", Kind: engine.ErrModelUnavailable, Message: "connection refused"}
	m := &fakeModel{dim: 8}
	m.answer = func(_ context.Context, call int, req engine.EmbedRequest) (engine.EmbedResponse, error) {
		if call == 3 {
			return engine.EmbedResponse{}, outage
		}
		return m.vectors(req), nil
	}
	stats, err := Backfill(ctx, m, "e", store, textItems(texts...), BackfillOptions{BatchSize: 16})
	if !errors.Is(err, engine.ErrModelUnavailable) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Backfill = %v, want the provider's unavailable error", err)
	}
	if stats.Embedded != 32 || stats.Batches != 2 {
		t.Errorf("interrupted run: stats = %+v, want 32 embedded in 2 batches", stats)
	}
	if n, _ := store.Count(ctx, "e"); n != 32 {
		t.Errorf("interrupted run stored %d vectors, want 32", n)
	}

	m2 := &fakeModel{dim: 8}
	stats, err = Backfill(ctx, m2, "e", store, textItems(texts...), BackfillOptions{BatchSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Present != 32 || stats.Embedded != 68 || !slices.Equal(m2.inputs(), texts[32:]) {
		t.Errorf("resumed run: stats = %+v, sent %d inputs; want exactly the 68 not yet stored", stats, len(m2.inputs()))
	}
	if n, _ := store.Count(ctx, "e"); n != 100 {
		t.Errorf("Count = %d, want 100", n)
	}
}

func TestBackfillRejectsBadAnswers(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	const dim, batch = 4, 3
	good := func(n int) [][]float32 {
		out := make([][]float32, n)
		for i := range out {
			out[i] = []float32{1, 2, 3, 4}
		}
		return out
	}
	tests := []struct {
		name string
		// second is the answer to the second call; the first is good.
		second func(n int) [][]float32
		want   string
	}{
		{"no vectors", func(int) [][]float32 { return nil }, "0 vectors for 3 inputs"},
		{"too few", func(n int) [][]float32 { return good(n - 1) }, "2 vectors for 3 inputs"},
		{"too many", func(n int) [][]float32 { return good(n + 1) }, "4 vectors for 3 inputs"},
		{"empty vector", func(n int) [][]float32 { v := good(n); v[1] = []float32{}; return v }, "vector 1 is empty"},
		{"NaN", func(n int) [][]float32 { v := good(n); v[2] = []float32{1, nan, 3, 4}; return v }, "component 1 is NaN"},
		{"infinity", func(n int) [][]float32 { v := good(n); v[0] = []float32{1, 2, 3, inf}; return v }, "component 3 is +Inf"},
		{"lengths differ in a batch", func(n int) [][]float32 { v := good(n); v[1] = []float32{1, 2}; return v }, "vector 1 has 2 dimensions, earlier ones 4"},
		{"length differs from the first batch", func(n int) [][]float32 {
			v := make([][]float32, n)
			for i := range v {
				v[i] = []float32{1, 2, 3, 4, 5}
			}
			return v
		}, "vector 0 has 5 dimensions, earlier ones 4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			store, _, _ := newTestStore(t)
			m := &fakeModel{dim: dim}
			m.answer = func(_ context.Context, call int, req engine.EmbedRequest) (engine.EmbedResponse, error) {
				if call == 2 {
					return engine.EmbedResponse{Vectors: tt.second(len(req.Inputs))}, nil
				}
				return m.vectors(req), nil
			}
			stats, err := Backfill(ctx, m, "e", store, textItems(numbered("x", 9)...), BackfillOptions{BatchSize: batch})
			if !errors.Is(err, ErrBadEmbedding) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Backfill = %v, want ErrBadEmbedding saying %q", err, tt.want)
			}
			if !strings.Contains(err.Error(), "items 4-6 of 9") {
				t.Errorf("error %q does not name the batch", err)
			}
			if m.callCount() != 2 || stats.Embedded != batch {
				t.Errorf("calls = %d, stats = %+v; want to stop after the bad second call", m.callCount(), stats)
			}
			if n, _ := store.Count(ctx, "e"); n != batch {
				t.Errorf("stored %d vectors, want only the good first batch's %d", n, batch)
			}
		})
	}
}

func TestBackfillDimensionChangedUnderTheModel(t *testing.T) {
	ctx := context.Background()
	store, _, _ := newTestStore(t)
	if err := store.Put(ctx, "e", map[[32]byte][]float32{hashOf("old"): {1, 2, 3, 4}}); err != nil {
		t.Fatal(err)
	}
	_, err := Backfill(ctx, &fakeModel{dim: 8}, "e", store, textItems("new"), BackfillOptions{})
	if !errors.Is(err, ErrDimMismatch) {
		t.Fatalf("Backfill = %v, want ErrDimMismatch", err)
	}
	if n, _ := store.Count(ctx, "e"); n != 1 {
		t.Errorf("Count = %d, want 1", n)
	}
}

func TestBackfillPassesThroughCannotEmbed(t *testing.T) {
	tests := []struct {
		name string
		err  error
		kind error
	}{
		{"unsupported", &engine.ModelError{Provider: "ollama", Kind: engine.ErrUnsupported, Message: `"llama3.2" does not support embeddings`}, engine.ErrUnsupported},
		{"model not found", &engine.ModelError{Provider: "ollama", Kind: engine.ErrModelNotFound, Message: `model "nomic-embed-text" not found, try pulling it first`}, engine.ErrModelNotFound},
		{"wrapped sentinel", fmt.Errorf("openai: %w: this model cannot embed", engine.ErrUnsupported), engine.ErrUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			store, _, _ := newTestStore(t)
			m := &fakeModel{dim: 4}
			m.answer = func(context.Context, int, engine.EmbedRequest) (engine.EmbedResponse, error) {
				return engine.EmbedResponse{}, tt.err
			}
			stats, err := Backfill(ctx, m, "e", store, textItems(numbered("x", 100)...), BackfillOptions{})
			if err != tt.err || !errors.Is(err, tt.kind) {
				t.Fatalf("Backfill = %v, want the provider's error itself (%v)", err, tt.err)
			}
			if m.callCount() != 1 || stats.Embedded != 0 {
				t.Errorf("calls = %d, stats = %+v; want to stop after the first call", m.callCount(), stats)
			}
		})
	}
}

func TestBackfillCancellation(t *testing.T) {
	texts := numbered("chunk", 40)
	tests := []struct {
		name string
		// answer runs for every call; cancel ends the run's context.
		answer func(ctx context.Context, cancel context.CancelFunc, call int, m *fakeModel, req engine.EmbedRequest) (engine.EmbedResponse, error)
		// cancelFirst cancels before Backfill starts.
		cancelFirst bool
		wantCalls   int
		wantStored  int
	}{
		{
			name:        "before the start",
			cancelFirst: true,
			wantCalls:   0, wantStored: 0,
		},
		{
			name: "during a call, the provider returning the context's error",
			answer: func(ctx context.Context, cancel context.CancelFunc, call int, m *fakeModel, req engine.EmbedRequest) (engine.EmbedResponse, error) {
				if call == 2 {
					cancel()
					return engine.EmbedResponse{}, &engine.ModelError{Provider: "ollama", Kind: engine.ErrModelUnavailable, Message: ctx.Err().Error()}
				}
				return m.vectors(req), nil
			},
			wantCalls: 2, wantStored: 10,
		},
		{
			name: "during a call that still succeeds",
			answer: func(_ context.Context, cancel context.CancelFunc, call int, m *fakeModel, req engine.EmbedRequest) (engine.EmbedResponse, error) {
				if call == 2 {
					cancel()
				}
				return m.vectors(req), nil
			},
			wantCalls: 2, wantStored: 10,
		},
		{
			name: "while the provider blocks until cancelled",
			answer: func(ctx context.Context, cancel context.CancelFunc, call int, m *fakeModel, req engine.EmbedRequest) (engine.EmbedResponse, error) {
				if call == 3 {
					time.AfterFunc(20*time.Millisecond, cancel)
					<-ctx.Done()
					return engine.EmbedResponse{}, ctx.Err()
				}
				return m.vectors(req), nil
			},
			wantCalls: 3, wantStored: 20,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store, _, _ := newTestStore(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			m := &fakeModel{dim: 4}
			if tt.answer != nil {
				m.answer = func(ctx context.Context, call int, req engine.EmbedRequest) (engine.EmbedResponse, error) {
					return tt.answer(ctx, cancel, call, m, req)
				}
			}
			if tt.cancelFirst {
				cancel()
			}
			start := time.Now()
			_, err := Backfill(ctx, m, "e", store, textItems(texts...), BackfillOptions{BatchSize: 10})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Backfill = %v, want context.Canceled", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("Backfill took %v to notice the cancellation", d)
			}
			if m.callCount() != tt.wantCalls {
				t.Errorf("calls = %d, want %d", m.callCount(), tt.wantCalls)
			}
			if n, _ := store.Count(context.Background(), "e"); n != tt.wantStored {
				t.Errorf("stored %d vectors, want %d", n, tt.wantStored)
			}
		})
	}
}

func TestBackfillInputs(t *testing.T) {
	ctx := context.Background()
	long := strings.Repeat("é", 10_000)
	longASCII := strings.Repeat("a", DefaultMaxInputChars+1000)

	t.Run("truncation", func(t *testing.T) {
		for _, tt := range []struct {
			name     string
			max      int
			text     string
			wantSent string
		}{
			{"limit in characters, not bytes", 100, long, strings.Repeat("é", 100)},
			{"default limit", 0, longASCII, longASCII[:DefaultMaxInputChars]},
			{"no limit", -1, longASCII, longASCII},
			{"at the limit", 100, strings.Repeat("é", 100), strings.Repeat("é", 100)},
		} {
			t.Run(tt.name, func(t *testing.T) {
				store, _, _ := newTestStore(t)
				m := &fakeModel{dim: 4}
				stats, err := Backfill(ctx, m, "e", store, textItems(tt.text), BackfillOptions{MaxInputChars: tt.max})
				if err != nil {
					t.Fatal(err)
				}
				sent := m.inputs()
				if len(sent) != 1 || sent[0] != tt.wantSent || !utf8.ValidString(sent[0]) {
					t.Fatalf("sent %d inputs, first of %d characters; want one of %d", len(sent), utf8.RuneCountInString(sent[0]), utf8.RuneCountInString(tt.wantSent))
				}
				if wantCut := tt.wantSent != tt.text; (stats.Truncated == 1) != wantCut {
					t.Errorf("Truncated = %d, cut %v", stats.Truncated, wantCut)
				}
				// The vector is stored under the full text's hash.
				if missing, _ := store.Missing(ctx, "e", [][32]byte{hashOf(tt.text)}); len(missing) != 0 {
					t.Error("the vector is not stored under the item's hash")
				}
			})
		}
	})

	t.Run("blank texts, repeats, default batch size, store key", func(t *testing.T) {
		store, _, _ := newTestStore(t)
		m := &fakeModel{dim: 4}
		texts := numbered("c", 70)
		items := textItems(texts...)
		items = append(items, Item{Hash: hashOf("blank"), Text: " \n\t"}, Item{Hash: hashOf("empty")})
		// A repeated hash is embedded once, with the first item's text.
		items = append(items, Item{Hash: hashOf(texts[5]), Text: "a different text"})
		stats, err := Backfill(ctx, m, "nomic-embed-text", store, items, BackfillOptions{StoreKey: "ollama:nomic-embed-text"})
		if err != nil {
			t.Fatal(err)
		}
		want := BackfillStats{Items: 72, Skipped: 2, Embedded: 70, Batches: 3, PromptTokens: 70, Dim: 4}
		if stats != want {
			t.Errorf("stats = %+v, want %+v", stats, want)
		}
		if !slices.Equal(m.inputs(), texts) {
			t.Errorf("sent %q, want the 70 texts once each", m.inputs())
		}
		var sizes []int
		for _, r := range m.requests {
			sizes = append(sizes, len(r.Inputs))
			if r.Model != "nomic-embed-text" {
				t.Errorf("request model = %q, want the model name", r.Model)
			}
		}
		if !slices.Equal(sizes, []int{32, 32, 6}) {
			t.Errorf("batch sizes = %v, want [32 32 6]", sizes)
		}
		if n, _ := store.Count(ctx, "ollama:nomic-embed-text"); n != 70 {
			t.Errorf("Count(store key) = %d, want 70", n)
		}
		if n, _ := store.Count(ctx, "nomic-embed-text"); n != 0 {
			t.Errorf("Count(model name) = %d, want 0", n)
		}
		// Blank texts stay unembedded: the next run skips them again
		// without a call.
		m2 := &fakeModel{dim: 4}
		stats, err = Backfill(ctx, m2, "nomic-embed-text", store, items, BackfillOptions{StoreKey: "ollama:nomic-embed-text"})
		if err != nil || m2.callCount() != 0 || stats.Skipped != 2 || stats.Present != 70 {
			t.Errorf("second run: stats = %+v, %v, %d calls", stats, err, m2.callCount())
		}
	})
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		s     string
		limit int
		want  string
		cut   bool
	}{
		{"", 0, "", false},
		{"abc", 0, "", true},
		{"abc", 3, "abc", false},
		{"abc", 2, "ab", true},
		{"héllo", 2, "hé", true},
		{"日本語", 2, "日本", true},
		{"日本語", 3, "日本語", false},
		{"日本語", -1, "日本語", false},
	}
	for _, tt := range tests {
		got, cut := truncate(tt.s, tt.limit)
		if got != tt.want || cut != tt.cut {
			t.Errorf("truncate(%q, %d) = %q, %v; want %q, %v", tt.s, tt.limit, got, cut, tt.want, tt.cut)
		}
	}
}

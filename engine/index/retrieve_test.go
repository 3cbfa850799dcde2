package index

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/internal/testtree"
	"github.com/plexus-agent/plexus/models/replay"
)

func retrieve(t *testing.T, svc *Service, root, query string, budget int) (engine.RetrievalResult, []engine.RetrievalEvent) {
	t.Helper()
	var events []engine.RetrievalEvent
	res, err := svc.Retrieve(context.Background(), engine.RetrievalRequest{Root: root, Query: query, TokenBudget: budget},
		func(ev engine.RetrievalEvent) { events = append(events, ev) })
	if err != nil {
		t.Fatal(err)
	}
	return res, events
}

func stages(events []engine.RetrievalEvent) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.Stage)
	}
	return out
}

func TestRetrieveFusesAndPacks(t *testing.T) {
	svc, ix, dir := newTestIndex(t, repo)
	build(t, ix, BuildOptions{})
	res, events := retrieve(t, svc, dir, "how is the cart's TotalQuantity computed?", 400)
	if !slices.Equal(stages(events), []string{"symbol_search", "text_search", "vector_search", "reranking"}) {
		t.Fatalf("stages %v", events)
	}
	if events[0].Count == 0 || !strings.Contains(events[0].Message, "TotalQuantity") {
		t.Errorf("symbol stage: %+v", events[0])
	}
	if !strings.HasPrefix(events[2].Message, "skipped: ") || events[2].Count != 0 {
		t.Errorf("vector stage without an embedder: %+v", events[2])
	}
	if len(res.Snippets) == 0 || res.Snippets[0].Name != "Cart.TotalQuantity" || !slices.Contains(res.Snippets[0].Sources, "symbol") {
		t.Fatalf("snippets: %+v", res.Snippets)
	}
	if res.Tokens > 400 || res.Tokens == 0 {
		t.Errorf("tokens %d for a budget of 400", res.Tokens)
	}
	total := 0
	for _, s := range res.Snippets {
		total += (len(s.Text) + charsPerToken - 1) / charsPerToken
		if !strings.Contains(repo[s.Path], strings.TrimSuffix(s.Text, "\n")) {
			t.Errorf("snippet %s:%d-%d is not the file's text: %q", s.Path, s.StartLine, s.EndLine, s.Text)
		}
	}
	if total != res.Tokens {
		t.Errorf("tokens %d, snippets hold %d", res.Tokens, total)
	}
	// A small budget packs fewer snippets, never more than it allows.
	small, _ := retrieve(t, svc, dir, "how is the cart's TotalQuantity computed?", 60)
	if small.Tokens > 60 || len(small.Snippets) >= len(res.Snippets) {
		t.Errorf("budget 60: %d snippets, %d tokens", len(small.Snippets), small.Tokens)
	}
}

func TestRetrieveWithVectors(t *testing.T) {
	dir := t.TempDir()
	testtree.Write(t, dir, repo)
	svc, err := Open(context.Background(), Options{Path: filepath.Join(t.TempDir(), "i.db"),
		Embedder: replay.New(), EmbedModel: "any", EmbedLabel: "replay:any"})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	ix, _ := svc.Workspace(context.Background(), dir)
	build(t, ix, BuildOptions{})
	if _, err := ix.SearchVectors(context.Background(), engine.ChunkQuery{Query: "discount"}); err == nil || !strings.Contains(err.Error(), "no chunk has an embedding") {
		t.Errorf("before embedding: %v", err)
	}
	vs, err := ix.Embed(context.Background())
	if err != nil || vs.Embedded == 0 || vs.Embedded != vs.Total || vs.Model != "replay:any" {
		t.Fatalf("embed: %+v %v", vs, err)
	}
	hits, err := ix.SearchVectors(context.Background(), engine.ChunkQuery{Query: "apply discount percent price"})
	if err != nil || len(hits) == 0 || hits[0].Path != "pricing/discount.py" {
		t.Fatalf("vector hits: %+v %v", hits, err)
	}
	_, events := retrieve(t, svc, dir, "apply a discount percent to the price", 500)
	if events[2].Count == 0 || !strings.Contains(events[2].Message, "replay:any") {
		t.Errorf("vector stage: %+v", events[2])
	}
	// A second Embed embeds nothing: unchanged chunks keep their vectors.
	st, _ := ix.Embed(context.Background())
	if st.Embedded != vs.Embedded {
		t.Errorf("re-embedding changed the count: %+v", st)
	}
	// A fresh process loads the stored vectors without embedding.
	path := svc.DBPath()
	svc.Close()
	counter := &countingModel{Model: replay.New()}
	svc2, _ := Open(context.Background(), Options{Path: path, Embedder: counter, EmbedModel: "any", EmbedLabel: "replay:any"})
	defer svc2.Close()
	ix2, _ := svc2.Workspace(context.Background(), dir)
	if _, err := ix2.SearchVectors(context.Background(), engine.ChunkQuery{Query: "discount"}); err != nil {
		t.Fatal(err)
	}
	if counter.inputs != 1 { // the query only
		t.Errorf("the reopened index embedded %d inputs, want just the query", counter.inputs)
	}
}

// countingModel counts embedded inputs.
type countingModel struct {
	engine.Model
	mu     sync.Mutex
	inputs int
}

func (c *countingModel) Embed(ctx context.Context, req engine.EmbedRequest) (engine.EmbedResponse, error) {
	c.mu.Lock()
	c.inputs += len(req.Inputs)
	c.mu.Unlock()
	return c.Model.Embed(ctx, req)
}

func TestModelReranker(t *testing.T) {
	script := filepath.Join(t.TempDir(), "rerank.jsonl")
	// The scripted reranker puts the feature ranking's third candidate first.
	os.WriteFile(script, []byte(`{"text": "{\"order\": [2, 0]}"}`+"\n"), 0o644)
	dir := t.TempDir()
	testtree.Write(t, dir, repo)
	open := func(opts Options) (*Service, []engine.Snippet, []engine.RetrievalEvent) {
		opts.Path = filepath.Join(t.TempDir(), "i.db")
		svc, err := Open(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { svc.Close() })
		res, events := retrieve(t, svc, dir, "cart items quantity", 10000)
		return svc, res.Snippets, events
	}
	_, plain, _ := open(Options{})
	_, ranked, events := open(Options{Reranker: replay.New(), RerankModel: script, RerankLabel: "replay:rerank"})
	if len(plain) < 3 || ranked[0].Path != plain[2].Path || ranked[0].StartLine != plain[2].StartLine || ranked[1].StartLine != plain[0].StartLine {
		t.Fatalf("model rerank did not apply the order [2, 0]:\nplain %v\nranked %v", names(plain), names(ranked))
	}
	if !strings.Contains(events[3].Message, "then replay:rerank") {
		t.Errorf("reranking message: %q", events[3].Message)
	}
	// A reranker that fails leaves the feature order and says so.
	_, fallback, events := open(Options{Reranker: replay.New(), RerankModel: filepath.Join(t.TempDir(), "missing.jsonl"), RerankLabel: "replay:missing"})
	if !slices.Equal(names(fallback), names(plain)) || !strings.Contains(events[3].Message, "failed") {
		t.Errorf("failed reranker: %v, %q", names(fallback), events[3].Message)
	}
}

func names(snips []engine.Snippet) []string {
	var out []string
	for _, s := range snips {
		out = append(out, s.Path+":"+s.Name)
	}
	return out
}

// capture records the model calls a turn makes.
type capture struct {
	engine.Model
	mu   sync.Mutex
	reqs []engine.ChatRequest
}

func (c *capture) Chat(ctx context.Context, req engine.ChatRequest, on func(engine.ChatChunk) error) error {
	c.mu.Lock()
	c.reqs = append(c.reqs, req)
	c.mu.Unlock()
	return c.Model.Chat(ctx, req, on)
}

// TestTurnPacksRetrievedSnippets runs a turn on the replay model with the
// index as the engine's retriever: the turn shows the retrieval stages and
// the model's first call carries the packed snippets.
func TestTurnPacksRetrievedSnippets(t *testing.T) {
	svc, ix, dir := newTestIndex(t, repo)
	build(t, ix, BuildOptions{})
	script := filepath.Join(t.TempDir(), "answer.jsonl")
	os.WriteFile(script, []byte(`{"text": "TotalQuantity sums the quantities of the items."}`+"\n"), 0o644)
	model := &capture{Model: replay.New()}
	eng, err := engine.New(engine.Options{
		Models: map[string]engine.Model{"replay": model}, Model: engine.ModelRef{Provider: "replay", Name: script},
		Searcher: svc, Retriever: svc,
	})
	if err != nil {
		t.Fatal(err)
	}
	ws, _ := eng.OpenWorkspace(dir)
	sess, _ := eng.NewSession(ws, "")
	var stagesSeen []string
	res, err := sess.Run(context.Background(), engine.TurnInput{Message: "How does TotalQuantity count the items in a Cart?"}, engine.TurnOptions{
		OnEvent: func(e engine.Event) {
			if r, ok := e.Data.(*engine.RetrievalEvent); ok {
				stagesSeen = append(stagesSeen, r.Stage)
			}
		},
	})
	if err != nil || res.Status != engine.TurnCompleted {
		t.Fatalf("%+v %v", res, err)
	}
	if !slices.Equal(stagesSeen, []string{"symbol_search", "text_search", "vector_search", "reranking"}) || res.Metadata.RetrievedSnippets == 0 {
		t.Errorf("stages %v, metadata %+v", stagesSeen, res.Metadata)
	}
	first := model.reqs[0].Messages
	ctxMsg := first[len(first)-2]
	if ctxMsg.Role != engine.RoleSystem || !strings.Contains(ctxMsg.Content, "(method Cart.TotalQuantity)") || !strings.Contains(ctxMsg.Content, "n += it.Quantity") {
		t.Errorf("the model was not given the snippet:\n%s", ctxMsg.Content)
	}
}

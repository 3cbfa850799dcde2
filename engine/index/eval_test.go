package index_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/index"
	"github.com/plexus-agent/plexus/engine/index/internal/goroot"
	"github.com/plexus-agent/plexus/models/replay"
)

// Evaluation parameters. The seeds are arbitrary and fixed, so that a run
// on one Go version always asks the same questions.
const (
	evalIdents     = 200
	evalIdentsSeed = 20240601
	evalDocs       = 100
	evalDocsSeed   = 20240602
	// evalDocWords is the fewest words a first sentence needs to be a
	// query: shorter ones ("Len returns the length.") say too little.
	evalDocWords = 5
	evalK        = 10
	// maxFileSize is the index's default size cap.
	maxFileSize = 1 << 20
	// evalMinMRR is the target for identifier → defining file.
	evalMinMRR = 0.9
	// evalMinLexicalRecall is the floor for lexical recall@10 on the
	// doc-comment queries. Chance is 10 in some 100,000 chunks. On go1.26
	// BM25 finds 0.82 of the functions, and 0.47 when the query leaves out
	// the function's name: a first sentence usually starts with the name,
	// which only identifier splitting ("ReadFile" → read, file, readfile)
	// and the name boost turn into a match. 0.7 is three standard errors
	// (0.04 at n = 100) below the measured figure, leaving room for
	// another Go release's corpus, and well above what remains when the
	// name stops helping.
	evalMinLexicalRecall = 0.7
	// evalMinVectorSelf is the floor for finding a function's chunk from
	// its own source with SearchVectors: near-identical text, so anything
	// below means hits are mapped to the wrong chunks.
	evalMinVectorSelf = 0.9
)

// identResult is the identifier evaluation's outcome.
type identResult struct {
	N         int     `json:"n"`
	MRR       float64 `json:"mrr"`
	RecallAt1 float64 `json:"recall_at_1"`
	RecallAt5 float64 `json:"recall_at_5"`
	// Ambiguous counts names that several primary files define.
	Ambiguous int `json:"ambiguous"`
	// Misses lists the names whose defining file was not ranked first.
	Misses []identMiss `json:"misses,omitempty"`
}

type identMiss struct {
	Name  string   `json:"name"`
	Rank  int      `json:"rank"` // 0: not in the hits
	Want  []string `json:"want"`
	Top   []string `json:"top"`
	Kinds []string `json:"top_kinds"`
}

// docMode is one way of searching for a documented function.
type docMode struct {
	Name string `json:"name"`
	// Recall is the share of functions found in the top evalK.
	Recall float64 `json:"recall_at_10"`
	// MRR is the mean reciprocal rank within the top evalK.
	MRR float64 `json:"mrr_at_10"`
	// RecallNoName is Recall when the query leaves out the function's
	// name, so that only the description can find it.
	RecallNoName float64 `json:"recall_at_10_without_name"`
	// Misses are the paths and functions not found (full queries).
	Misses []string `json:"misses,omitempty"`
}

// evalReport is what TestQualityGoroot logs and writes to
// $PLEXUS_EVAL_OUT.
type evalReport struct {
	GoVersion  string        `json:"go_version"`
	Corpus     string        `json:"corpus"`
	Files      int           `json:"files"`
	Bytes      int64         `json:"bytes"`
	Build      time.Duration `json:"build_ns"`
	Embed      time.Duration `json:"embed_ns"`
	Chunks     int           `json:"chunks"`
	Identifier identResult   `json:"identifier"`
	DocQueries int           `json:"doc_queries"`
	Doc        []docMode     `json:"doc"`
	// VectorSelf is SearchVectors' recall@10 when each function's own
	// source is the query (a check that vector hits map back to their
	// chunks); VectorSelfMisses are the functions it missed.
	VectorSelf       float64  `json:"vector_self_recall_at_10"`
	VectorSelfMisses []string `json:"vector_self_misses,omitempty"`
	// VectorsSkipped says why the vector stages did not run, or "".
	VectorsSkipped string `json:"vectors_skipped,omitempty"`
	// Phases are the test's steps and their wall-clock times.
	Phases []lap `json:"phases"`
}

// lap is one step of a test and its wall-clock time.
type lap struct {
	Name     string        `json:"name"`
	Duration time.Duration `json:"duration_ns"`
}

// laps times the steps of a test, from its creation.
type laps struct {
	last time.Time
	laps []lap
}

func newLaps() *laps { return &laps{last: time.Now()} }

// lap records the time since the previous lap under name.
func (l *laps) lap(name string) {
	now := time.Now()
	l.laps = append(l.laps, lap{name, now.Sub(l.last)})
	l.last = now
}

// docTarget is a function whose doc comment was stripped, and where it is
// in the stripped copy.
type docTarget struct {
	goroot.DocFunc
	Line, EndLine int
	// Source is the function's text in the copy.
	Source string
}

// TestQualityGoroot evaluates search quality on the Go source tree. It
// copies $(go env GOROOT)/src into a temporary directory, removing the doc
// comments of 100 functions drawn with a fixed seed, indexes the copy and
// measures:
//
//   - identifier → defining file: for 200 exported names of functions,
//     methods and types declared in library and command code (not tests
//     or test data), the rank of the first file that declares the name at
//     top level (per go/ast; fields and interface methods do not count)
//     among the distinct files of SearchSymbols' hits (default limit);
//     MRR and recall@1/@5;
//   - doc comment → function: for each stripped function, its doc
//     comment's first sentence as the query; a function is found when a
//     result of the top 10 overlaps its lines. Recall@10 for SearchChunks
//     (BM25), for Retrieve without vectors (symbols + BM25), for
//     SearchVectors and for Retrieve with vectors (hybrid), the vectors
//     being the replay provider's hashed bag of words. Each is also asked
//     without the function's name in the sentence.
//
// The identifier evaluation runs on the copy too: removing 100 doc
// comments changes no definition, and one build instead of two saves a
// minute under -race. The whole tree is copied (all files, not only Go),
// not only the packages of the sampled functions, so that every query
// competes with the real corpus's 100,000 chunks, duplicates and test
// data included.
//
// Under the race detector (CI runs go test -race ./...) the vector stages
// are left out: embedding 100,000 chunks and 300 exact vector searches
// take over ten minutes there on two cores, past go test's default
// timeout. Run without -race for every figure.
//
// Skipped with -short or without the source tree. The figures are logged
// and, when PLEXUS_EVAL_OUT is set, written there as JSON.
func TestQualityGoroot(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the evaluation indexes the Go source tree")
	}
	src, err := goroot.Src()
	if err != nil {
		t.Skipf("no Go source tree: %v", err)
	}
	ctx := context.Background()
	laps := newLaps()
	corpus, err := goroot.Load(src, maxFileSize)
	if err != nil {
		t.Fatal(err)
	}
	idents := corpus.ExportedIdents(evalIdents, evalIdentsSeed)
	docs := corpus.DocFuncs(evalDocs, evalDocWords, evalDocsSeed)
	if len(idents) != evalIdents || len(docs) != evalDocs {
		t.Fatalf("the corpus gave %d identifiers and %d documented functions, want %d and %d", len(idents), len(docs), evalIdents, evalDocs)
	}
	laps.lap("parse the corpus (go/parser), draw samples")

	dir := filepath.Join(t.TempDir(), "src")
	targets, err := stripCopy(src, dir, docs)
	if err != nil {
		t.Fatal(err)
	}
	laps.lap("copy the tree, strip doc comments")
	rep := evalReport{GoVersion: runtime.Version(), Corpus: src, Files: corpus.NumFiles, Bytes: corpus.Bytes, DocQueries: len(targets)}
	dbPath := filepath.Join(t.TempDir(), "index.db")

	// Lexical stages, without an embedder.
	svc, err := index.Open(ctx, index.Options{Path: dbPath})
	if err != nil {
		t.Fatal(err)
	}
	ix, err := svc.Workspace(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := ix.Build(ctx, index.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rep.Build = st.Duration
	laps.lap("build the index")
	rep.Chunks = ix.Status().Chunks
	t.Logf("indexed %d files (%.0f MB) in %v: %d chunks, %d symbols", st.Files, float64(st.Bytes)/1e6, st.Duration.Round(time.Millisecond), rep.Chunks, ix.Status().Symbols)

	rep.Identifier, err = evalIdentifiers(ctx, ix, idents)
	if err != nil {
		t.Fatal(err)
	}
	laps.lap("identifier queries")
	bm25 := func(q string) ([]hitSpan, error) {
		hits, err := ix.SearchChunks(ctx, engine.ChunkQuery{Query: q, Limit: evalK})
		return chunkSpans(hits), err
	}
	retrieve := func(svc *index.Service) func(string) ([]hitSpan, error) {
		return func(q string) ([]hitSpan, error) {
			res, err := svc.Retrieve(ctx, engine.RetrievalRequest{Root: dir, Query: q, TokenBudget: 1 << 20}, nil)
			var out []hitSpan
			for _, s := range res.Snippets {
				out = append(out, hitSpan{s.Path, s.StartLine, s.EndLine})
			}
			return out, err
		}
	}
	for _, m := range []struct {
		name   string
		search func(string) ([]hitSpan, error)
	}{{"lexical (SearchChunks, BM25)", bm25}, {"Retrieve without vectors (symbols + BM25)", retrieve(svc)}} {
		mode, err := scoreDocs(m.name, targets, m.search, nil)
		if err != nil {
			t.Fatal(err)
		}
		rep.Doc = append(rep.Doc, mode)
		laps.lap(m.name)
	}
	if err := svc.Close(); err != nil {
		t.Fatal(err)
	}

	// Vector stages: the same database with an embedder.
	if goroot.Race {
		rep.VectorsSkipped = "the race detector is on"
	} else if err := evalVectors(ctx, t, &rep, laps, dbPath, dir, targets, retrieve); err != nil {
		t.Fatal(err)
	}
	rep.Phases = laps.laps

	logReport(t, rep)
	if out := os.Getenv("PLEXUS_EVAL_OUT"); out != "" {
		data, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(out, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := rep.Identifier.MRR; got < evalMinMRR {
		t.Errorf("identifier → defining file: MRR %.3f, want ≥ %.2f", got, evalMinMRR)
	}
	if got := rep.Doc[0].Recall; got < evalMinLexicalRecall {
		t.Errorf("doc comment → function: lexical recall@%d %.2f, want ≥ %.2f", evalK, got, evalMinLexicalRecall)
	}
	if rep.VectorsSkipped == "" && rep.VectorSelf < evalMinVectorSelf {
		t.Errorf("SearchVectors found %.2f of the functions from their own source, want ≥ %.2f: vector hits do not map back to their chunks", rep.VectorSelf, evalMinVectorSelf)
	}
}

// evalVectors embeds every chunk of the index in dbPath with the replay
// provider and adds the doc-comment figures of SearchVectors and of
// Retrieve with vectors to r, and the vector plumbing check.
func evalVectors(ctx context.Context, t *testing.T, r *evalReport, laps *laps, dbPath, dir string, targets []docTarget, retrieve func(*index.Service) func(string) ([]hitSpan, error)) error {
	svc, err := index.Open(ctx, index.Options{Path: dbPath, Embedder: replay.New(), EmbedModel: "eval", EmbedLabel: "replay:eval"})
	if err != nil {
		return err
	}
	defer svc.Close()
	ix, err := svc.Workspace(ctx, dir)
	if err != nil {
		return err
	}
	start := time.Now()
	if st, err := ix.Build(ctx, index.BuildOptions{}); err != nil || st.Full || st.Read != 0 {
		return fmt.Errorf("reopened index rebuilt (%+v, %v)", st, err)
	}
	if err := embedAll(t, ix); err != nil {
		return err
	}
	r.Embed = time.Since(start)
	laps.lap("embed every chunk")
	vectors := func(q string) ([]hitSpan, error) {
		hits, err := ix.SearchVectors(ctx, engine.ChunkQuery{Query: q, Limit: evalK})
		return chunkSpans(hits), err
	}
	for _, m := range []struct {
		name   string
		search func(string) ([]hitSpan, error)
	}{{"vectors (SearchVectors, replay bag of words)", vectors}, {"hybrid (Retrieve: symbols + BM25 + vectors)", retrieve(svc)}} {
		mode, err := scoreDocs(m.name, targets, m.search, nil)
		if err != nil {
			return err
		}
		r.Doc = append(r.Doc, mode)
		laps.lap(m.name)
	}

	// A check of the vector plumbing rather than of the embedder: a
	// function's own source must find its chunk.
	self, err := scoreDocs("vectors, the function's own source as the query", targets, func(q string) ([]hitSpan, error) { return vectors(q) }, func(tg docTarget) string { return tg.Source })
	if err != nil {
		return err
	}
	r.VectorSelf, r.VectorSelfMisses = self.Recall, self.Misses
	laps.lap("vector check")
	return nil
}

// stripCopy copies the tree src to dst without the doc comments of docs,
// and returns where each function is in the copy (parsed again with
// go/parser).
func stripCopy(src, dst string, docs []goroot.DocFunc) ([]docTarget, error) {
	byPath := map[string][]goroot.Decl{}
	for _, d := range docs {
		byPath[d.Path] = append(byPath[d.Path], d.Decl)
	}
	edit := map[string]func([]byte) ([]byte, error){}
	for p, decls := range byPath {
		edit[p] = func(data []byte) ([]byte, error) { return goroot.StripDocs(data, decls) }
	}
	if err := goroot.CopyTree(src, dst, edit); err != nil {
		return nil, err
	}
	var out []docTarget
	for _, p := range slices.Sorted(maps.Keys(byPath)) {
		data, err := os.ReadFile(filepath.Join(dst, filepath.FromSlash(p)))
		if err != nil {
			return nil, err
		}
		decls, err := goroot.ParseDecls(data, nil)
		if err != nil {
			return nil, fmt.Errorf("%s no longer parses without its doc comments: %w", p, err)
		}
		for _, d := range docs {
			if d.Path != p {
				continue
			}
			nd, err := goroot.FindFunc(decls, d.Decl.Recv, d.Decl.Name)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			if nd.Doc != "" {
				return nil, fmt.Errorf("%s: %s still has a doc comment", p, d.Key())
			}
			lines := strings.SplitAfter(string(data), "\n")
			src := strings.Join(lines[nd.Line-1:nd.EndLine], "")
			out = append(out, docTarget{DocFunc: d, Line: nd.Line, EndLine: nd.EndLine, Source: src})
		}
	}
	return out, nil
}

// evalIdentifiers ranks, for each name, the files of SearchSymbols' hits
// (default limit) and finds the first that defines the name.
func evalIdentifiers(ctx context.Context, ix *index.Index, idents []goroot.Ident) (identResult, error) {
	res := identResult{N: len(idents)}
	for _, id := range idents {
		if len(id.Files) > 1 {
			res.Ambiguous++
		}
		hits, err := ix.SearchSymbols(ctx, engine.SymbolQuery{Query: id.Name})
		if err != nil {
			return res, fmt.Errorf("symbol search %q: %w", id.Name, err)
		}
		var files, kinds []string
		for _, h := range hits {
			if !slices.Contains(files, h.Path) {
				files = append(files, h.Path)
				kinds = append(kinds, h.Kind+" "+h.Name)
			}
		}
		rank := 0
		for i, f := range files {
			if slices.Contains(id.Files, f) {
				rank = i + 1
				break
			}
		}
		if rank > 0 {
			res.MRR += 1 / float64(rank)
		}
		if rank == 1 {
			res.RecallAt1++
		}
		if rank >= 1 && rank <= 5 {
			res.RecallAt5++
		}
		if rank != 1 {
			res.Misses = append(res.Misses, identMiss{Name: id.Name, Rank: rank, Want: id.Files, Top: files[:min(3, len(files))], Kinds: kinds[:min(3, len(kinds))]})
		}
	}
	n := float64(len(idents))
	res.MRR, res.RecallAt1, res.RecallAt5 = res.MRR/n, res.RecallAt1/n, res.RecallAt5/n
	return res, nil
}

// hitSpan is a result's file and lines.
type hitSpan struct {
	path       string
	start, end int
}

func chunkSpans(hits []engine.ChunkHit) []hitSpan {
	out := make([]hitSpan, len(hits))
	for i, h := range hits {
		out[i] = hitSpan{h.Path, h.StartLine, h.EndLine}
	}
	return out
}

// scoreDocs asks search for each target's first sentence, with and without
// the function's name, and scores the top evalK results. With query set,
// it asks query(target) instead, once.
func scoreDocs(name string, targets []docTarget, search func(string) ([]hitSpan, error), query func(docTarget) string) (docMode, error) {
	m := docMode{Name: name}
	rank := func(q string, tg docTarget) (int, error) {
		hits, err := search(q)
		if err != nil {
			return 0, fmt.Errorf("%s: %q: %w", name, q, err)
		}
		for i, h := range hits[:min(evalK, len(hits))] {
			if h.path == tg.Path && h.start <= tg.EndLine && tg.Line <= h.end {
				return i + 1, nil
			}
		}
		return 0, nil
	}
	for _, tg := range targets {
		q := tg.Sentence
		if query != nil {
			q = query(tg)
		}
		r, err := rank(q, tg)
		if err != nil {
			return m, err
		}
		if r > 0 {
			m.Recall++
			m.MRR += 1 / float64(r)
		} else {
			m.Misses = append(m.Misses, tg.Path+" "+tg.Key())
		}
		if query != nil {
			continue
		}
		r, err = rank(goroot.WithoutName(tg.Sentence, tg.Decl.Name), tg)
		if err != nil {
			return m, err
		}
		if r > 0 {
			m.RecallNoName++
		}
	}
	n := float64(len(targets))
	m.Recall, m.MRR, m.RecallNoName = m.Recall/n, m.MRR/n, m.RecallNoName/n
	return m, nil
}

// embedAll embeds every live chunk, within a limit below the test's
// deadline, and checks that none is left without a vector.
func embedAll(t *testing.T, ix *index.Index) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	if d, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(context.Background(), d.Add(-time.Minute))
	}
	defer cancel()
	v, err := ix.Embed(ctx)
	if err != nil {
		return fmt.Errorf("embedding: %w (%d of %d chunks)", err, v.Embedded, v.Total)
	}
	if v = ix.Status().Vectors; v.Total == 0 || v.Embedded != v.Total {
		return fmt.Errorf("embedding finished with %d of %d chunks embedded", v.Embedded, v.Total)
	}
	return nil
}

func logReport(t *testing.T, r evalReport) {
	var b strings.Builder
	fmt.Fprintf(&b, "\nGo source tree evaluation (%s, %d files, %.0f MB; build %v, embedding %v, %d chunks)\n",
		r.GoVersion, r.Files, float64(r.Bytes)/1e6, r.Build.Round(time.Millisecond), r.Embed.Round(time.Millisecond), r.Chunks)
	id := r.Identifier
	fmt.Fprintf(&b, "identifier → defining file (%d exported names, %d defined in several files)\n", id.N, id.Ambiguous)
	fmt.Fprintf(&b, "  MRR %.3f (target ≥ %.2f)   recall@1 %.3f   recall@5 %.3f\n", id.MRR, evalMinMRR, id.RecallAt1, id.RecallAt5)
	for _, m := range id.Misses {
		fmt.Fprintf(&b, "    miss %-28s rank %d, defined in %v; top %v %v\n", m.Name, m.Rank, m.Want, m.Top, m.Kinds)
	}
	fmt.Fprintf(&b, "doc comment → function (%d functions, first sentence as the query)\n", r.DocQueries)
	fmt.Fprintf(&b, "  %-46s %10s %10s %22s\n", "mode", "recall@10", "MRR@10", "recall@10 without name")
	for _, m := range r.Doc {
		fmt.Fprintf(&b, "  %-46s %10.2f %10.3f %22.2f\n", m.Name, m.Recall, m.MRR, m.RecallNoName)
	}
	if r.VectorsSkipped != "" {
		fmt.Fprintf(&b, "  vector stages skipped: %s\n", r.VectorsSkipped)
	} else {
		fmt.Fprintf(&b, "  check: SearchVectors with each function's own source as the query finds %.2f in the top 10\n", r.VectorSelf)
		fmt.Fprintf(&b, "  vector check misses: %v\n", r.VectorSelfMisses)
	}
	fmt.Fprintf(&b, "  lexical misses: %v\n", r.Doc[0].Misses)
	fmt.Fprintf(&b, "phases:\n")
	for _, p := range r.Phases {
		fmt.Fprintf(&b, "  %-50s %v\n", p.Name, p.Duration.Round(time.Millisecond))
	}
	t.Log(b.String())
}

// Symbol evaluation on a corpus the ranking was not tuned on.
const (
	envEvalCorpus   = "PLEXUS_EVAL_CORPUS"
	evalSymbolsSeed = 20261127
	// evalMinSymbolMRR is issue 16's goal for identifier → defining file
	// with package-qualified queries included.
	evalMinSymbolMRR = 0.95
)

// TestSymbolMRR measures symbol search on the Go tree named by
// PLEXUS_EVAL_CORPUS (by hand, not in CI: it indexes the tree), for
// example golang.org/x/tools from the module cache:
//
//	go mod download golang.org/x/tools@v0.52.0
//	PLEXUS_EVAL_CORPUS=$(go env GOMODCACHE)/golang.org/x/tools@v0.52.0 \
//	  go test -run TestSymbolMRR -v ./engine/index/
//
// 200 queries are drawn with a fixed seed (goroot.Corpus.QualifiedIdents):
// a third plain exported names, a third Package.Name, a third
// Type.Method. For each, the rank of the first file that answers it
// (go/ast is the ground truth: a file of that package declaring the name
// at top level, or declaring that method on that type) among the distinct
// files of SearchSymbols' hits (default limit); MRR and recall@1 are
// logged with the misses, and MRR must reach evalMinSymbolMRR.
func TestSymbolMRR(t *testing.T) {
	root := os.Getenv(envEvalCorpus)
	if root == "" {
		t.Skipf("set %s to a Go source tree to evaluate symbol search on it", envEvalCorpus)
	}
	ctx := context.Background()
	corpus, err := goroot.Load(root, maxFileSize)
	if err != nil {
		t.Fatal(err)
	}
	idents := corpus.QualifiedIdents(evalIdents, evalSymbolsSeed)
	qualified := 0
	for _, id := range idents {
		if strings.Contains(id.Name, ".") {
			qualified++
		}
	}
	_, ix, st := buildIndex(t, t.TempDir(), root)
	t.Logf("index of %s: %d files in %v", root, st.Files, st.Duration.Round(time.Millisecond))
	res, err := evalIdentifiers(ctx, ix, idents)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range res.Misses {
		t.Logf("miss %-40s rank %d: want %v, top %v %v", m.Name, m.Rank, m.Want[:min(3, len(m.Want))], m.Top, m.Kinds)
	}
	t.Logf("symbol MRR %.3f, recall@1 %.3f, recall@5 %.3f over %d queries (%d qualified)", res.MRR, res.RecallAt1, res.RecallAt5, res.N, qualified)
	if res.MRR < evalMinSymbolMRR {
		t.Errorf("symbol MRR %.3f, want at least %.2f", res.MRR, evalMinSymbolMRR)
	}
}

package search

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/internal/testtree"
)

func newTools(t testing.TB, opts Options) *Tools {
	t.Helper()
	tl := New(opts)
	t.Cleanup(func() { tl.Close() })
	return tl
}

// fakeHost is an engine.ToolHost with an index of canned answers. It
// records the queries it gets.
type fakeHost struct {
	mu      sync.Mutex
	queries []any

	symbols  []engine.SymbolHit
	text     engine.TextResult // its Matches are streamed, then returned
	chunks   []engine.ChunkHit
	vectors  []engine.ChunkHit
	err      error // every search method's error, when set
	textErr  error // SearchText's error after streaming, when set
	approval engine.ApprovalDecision
}

// noIndexHost answers every search as an engine without an index does.
func noIndexHost() *fakeHost {
	return &fakeHost{err: fmt.Errorf("%w: this engine has no code index; run plexus index", engine.ErrUnsupported)}
}

var _ engine.ToolHost = (*fakeHost)(nil)

func (h *fakeHost) record(q any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.queries = append(h.queries, q)
}

func (h *fakeHost) RequestApproval(context.Context, engine.ActionApproval) (engine.ApprovalDecision, error) {
	return h.approval, nil
}

func (h *fakeHost) SearchSymbols(_ context.Context, q engine.SymbolQuery) ([]engine.SymbolHit, error) {
	h.record(q)
	return h.symbols, h.err
}

func (h *fakeHost) SearchText(_ context.Context, q engine.TextQuery, onMatch func(engine.TextMatch)) (engine.TextResult, error) {
	h.record(q)
	if h.err != nil {
		return engine.TextResult{}, h.err
	}
	for _, m := range h.text.Matches {
		onMatch(m)
	}
	if h.textErr != nil {
		return engine.TextResult{}, h.textErr
	}
	return h.text, nil
}

func (h *fakeHost) SearchChunks(_ context.Context, q engine.ChunkQuery) ([]engine.ChunkHit, error) {
	h.record(q)
	return h.chunks, h.err
}

func (h *fakeHost) SearchVectors(_ context.Context, q engine.ChunkQuery) ([]engine.ChunkHit, error) {
	h.record(q)
	return h.vectors, h.err
}

// callResult is one Invoke with its updates.
type callResult struct {
	res     engine.ToolResult
	err     error
	updates []engine.ToolUpdate
}

// matches returns the texts streamed on MatchStream.
func (c callResult) matches(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, u := range c.updates {
		if u.Output != nil {
			if u.Output.Stream != MatchStream {
				t.Errorf("output on stream %q, want %q", u.Output.Stream, MatchStream)
			}
			out = append(out, u.Output.Text)
		}
	}
	return out
}

// invoke runs a call; host may be nil (a host without callbacks).
func invoke(ctx context.Context, tl *Tools, ws string, host engine.ToolHost, tool, args string) callResult {
	var c callResult
	var mu sync.Mutex
	req := engine.InvokeRequest{CallID: "call_1", Tool: tool, Args: json.RawMessage(args), WorkspaceRoot: ws, Host: host}
	c.res, c.err = tl.Invoke(ctx, req, func(u engine.ToolUpdate) {
		mu.Lock()
		defer mu.Unlock()
		c.updates = append(c.updates, u)
	})
	return c
}

// mustOK invokes a call that must succeed and decodes its content into out.
func mustOK(t *testing.T, tl *Tools, ws string, host engine.ToolHost, tool, args string, out any) callResult {
	t.Helper()
	c := invoke(context.Background(), tl, ws, host, tool, args)
	if c.err != nil {
		t.Fatalf("%s %s: %v", tool, args, c.err)
	}
	if err := json.Unmarshal(c.res.Content, out); err != nil {
		t.Fatalf("%s result %s: %v", tool, c.res.Content, err)
	}
	return c
}

// wantToolError checks that err is a *engine.ToolError with code whose
// message contains every one of parts.
func wantToolError(t *testing.T, err error, code engine.ToolErrorCode, parts ...string) {
	t.Helper()
	var te *engine.ToolError
	if !errors.As(err, &te) {
		t.Fatalf("err = %v (%T), want *engine.ToolError %s", err, err, code)
	}
	if te.Code != code {
		t.Errorf("code = %s, want %s (message %q)", te.Code, code, te.Message)
	}
	for _, p := range parts {
		if !strings.Contains(te.Message, p) {
			t.Errorf("message %q does not contain %q", te.Message, p)
		}
	}
}

// keysOf returns the sorted keys of a JSON object.
func keysOf(t *testing.T, raw json.RawMessage) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("result %s: %v", raw, err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func TestSpecs(t *testing.T) {
	tl := newTools(t, Options{MaxSearchFileBytes: 3 << 20})
	specs, err := tl.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	wants := []struct {
		name     string
		args     any
		required []string
	}{
		{SearchSymbolsTool, symbolArgs{}, []string{"query"}},
		{SearchTextTool, textArgs{}, nil},
		{VectorSearchTool, vectorArgs{}, []string{"query"}},
	}
	if len(specs) != len(wants) {
		t.Fatalf("got %d specs, want %d", len(specs), len(wants))
	}
	for i, w := range wants {
		s := specs[i]
		t.Run(w.name, func(t *testing.T) {
			if s.Name != w.name || s.Risk != engine.RiskLow || !s.ReadOnly || s.NeedsApproval {
				t.Errorf("spec = %s risk %s read-only %v approval %v", s.Name, s.Risk, s.ReadOnly, s.NeedsApproval)
			}
			if len(s.Description) < 100 {
				t.Errorf("description too short for a model: %q", s.Description)
			}
			var schema struct {
				Schema     string                    `json:"$schema"`
				Type       string                    `json:"type"`
				Properties map[string]map[string]any `json:"properties"`
				Required   []string                  `json:"required"`
				Additional *bool                     `json:"additionalProperties"`
				OneOf      any                       `json:"oneOf"`
			}
			if err := json.Unmarshal(s.InputSchema, &schema); err != nil {
				t.Fatalf("schema: %v", err)
			}
			if schema.Schema != "https://json-schema.org/draft/2020-12/schema" || schema.Type != "object" || schema.Additional == nil || *schema.Additional {
				t.Errorf("schema header = %q %q additionalProperties %v", schema.Schema, schema.Type, schema.Additional)
			}
			if schema.OneOf != nil {
				t.Error("top-level oneOf: OpenAI-compatible servers refuse it")
			}
			if !slices.Equal(schema.Required, w.required) {
				t.Errorf("required = %q, want %q", schema.Required, w.required)
			}
			// The schema's properties are exactly the fields the decoder accepts.
			var tags []string
			rt := reflect.TypeOf(w.args)
			for i := range rt.NumField() {
				tags = append(tags, rt.Field(i).Tag.Get("json"))
			}
			var props []string
			for name, p := range schema.Properties {
				props = append(props, name)
				if d, _ := p["description"].(string); d == "" {
					t.Errorf("property %s has no description", name)
				}
			}
			slices.Sort(tags)
			slices.Sort(props)
			if !slices.Equal(tags, props) {
				t.Errorf("schema properties %q, decoder fields %q", props, tags)
			}
		})
	}
	if !strings.Contains(specs[1].Description, "3 MiB") {
		t.Errorf("search_text description does not state the fallback's size limit:\n%s", specs[1].Description)
	}
}

// indexFixture is a small workspace with a symlinked directory.
func indexFixture(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	testtree.Write(t, ws, map[string]string{"tools/fs/read.go": "package fs\n", "engine/engine.go": "package engine\n"})
	testtree.Symlink(t, "tools/fs", filepath.Join(ws, "fslink"))
	return ws
}

func TestSearchSymbols(t *testing.T) {
	ws := indexFixture(t)
	hits := []engine.SymbolHit{
		{Name: "ReadFile", Kind: "function", Path: "tools/fs/read.go", Language: "go", StartLine: 3, EndLine: 9, Definition: true, Match: "exact", Score: 10},
		{Name: "ReadFile", Kind: "function", Path: "tools/fs/fs.go", Language: "go", StartLine: 20, EndLine: 20, Match: "exact", Score: 5},
		{Name: "readFileLines", Kind: "function", Path: "tools/fs/read.go", Language: "go", StartLine: 30, EndLine: 40, Definition: true, Match: "prefix", Score: 2},
	}
	tests := []struct {
		name    string
		args    string
		hits    []engine.SymbolHit
		want    engine.SymbolQuery
		summary string
	}{
		{"every field", `{"query":"ReadFile","kind":"function","path":"./tools/fs/","include_refs":true,"limit":5}`, hits,
			engine.SymbolQuery{Query: "ReadFile", Kind: "function", Path: "tools/fs", IncludeRefs: true, Limit: 5},
			"3 symbols for ReadFile (2 exact, 1 reference)"},
		{"defaults", `{"query":"readf"}`, hits[2:],
			engine.SymbolQuery{Query: "readf", Limit: DefaultSymbolResults}, "1 symbol for readf (0 exact)"},
		{"absolute path inside", `{"query":"x","path":"` + filepath.Join(ws, "engine") + `"}`, nil,
			engine.SymbolQuery{Query: "x", Path: "engine", Limit: DefaultSymbolResults}, "no symbols for x"},
		{"symlinked directory: where the files are", `{"query":"x","path":"fslink"}`, nil,
			engine.SymbolQuery{Query: "x", Path: "tools/fs", Limit: DefaultSymbolResults}, "no symbols for x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := newTools(t, Options{})
			host := &fakeHost{symbols: tt.hits}
			var got SymbolsResult
			c := mustOK(t, tl, ws, host, SearchSymbolsTool, tt.args, &got)
			if !reflect.DeepEqual(host.queries, []any{tt.want}) {
				t.Errorf("host got %+v, want %+v", host.queries, tt.want)
			}
			want := tt.hits
			if want == nil {
				want = []engine.SymbolHit{}
			}
			if !reflect.DeepEqual(got.Symbols, want) {
				t.Errorf("symbols = %+v, want %+v", got.Symbols, want)
			}
			if k := keysOf(t, c.res.Content); !slices.Equal(k, []string{"symbols"}) {
				t.Errorf("result keys %q", k)
			}
			if c.res.Summary != tt.summary {
				t.Errorf("summary = %q, want %q", c.res.Summary, tt.summary)
			}
		})
	}
}

func TestSearchTextWithIndex(t *testing.T) {
	ws := indexFixture(t)
	matches := []engine.TextMatch{
		{Path: "engine/engine.go", Line: 1, Column: 1, Text: "package engine"},
		{Path: "tools/fs/read.go", Line: 1, Column: 9, Text: "package fs", Before: []string{"// a"}, After: []string{"", "import ("}},
	}
	tl := newTools(t, Options{})
	host := &fakeHost{text: engine.TextResult{Matches: matches, FilesSearched: 7, Truncated: true}}
	var got TextResult
	c := mustOK(t, tl, ws, host, SearchTextTool,
		`{"pattern":"package","regex":true,"case_insensitive":true,"path":"fslink","include":"*.go","context_lines":2,"limit":2}`, &got)
	want := engine.TextQuery{Pattern: "package", Regex: true, CaseInsensitive: true, Path: "tools/fs", Include: "*.go", ContextLines: 2, Limit: 2}
	if !reflect.DeepEqual(host.queries, []any{want}) {
		t.Errorf("host got %+v, want %+v", host.queries, want)
	}
	if !reflect.DeepEqual(got, TextResult{Matches: matches, FilesSearched: 7, Truncated: true}) {
		t.Errorf("result = %+v", got)
	}
	// The shape the tour's template and the front-ends read.
	if k := keysOf(t, c.res.Content); !slices.Equal(k, []string{"files_searched", "matches", "truncated"}) {
		t.Errorf("result keys %q", k)
	}
	if streamed, want := c.matches(t), []string{"engine/engine.go:1:1: package engine", "tools/fs/read.go:1:9: package fs"}; !slices.Equal(streamed, want) {
		t.Errorf("streamed %q, want %q", streamed, want)
	}
	if c.res.Summary != "2 matches in 2 files (truncated)" {
		t.Errorf("summary = %q", c.res.Summary)
	}

	// Literal and case-sensitive by default; the index's limit is the default.
	host = &fakeHost{}
	mustOK(t, tl, ws, host, SearchTextTool, `{"pattern":"a(b"}`, &got)
	if want := (engine.TextQuery{Pattern: "a(b", Limit: DefaultTextResults}); !reflect.DeepEqual(host.queries, []any{want}) {
		t.Errorf("host got %+v, want %+v", host.queries, want)
	}
	if got.Matches == nil || len(got.Matches) != 0 {
		t.Errorf("matches = %#v, want []", got.Matches)
	}
}

func TestSearchTextQuery(t *testing.T) {
	ws := indexFixture(t)
	hits := []engine.ChunkHit{{Path: "engine/engine.go", StartLine: 1, EndLine: 30, Language: "go", Kind: "function", Name: "New", Score: 4.5, Text: "func New() {}"}}
	tl := newTools(t, Options{})
	host := &fakeHost{chunks: hits}
	var got ChunksResult
	c := mustOK(t, tl, ws, host, SearchTextTool, `{"query":"how is the engine created","path":"engine","limit":3}`, &got)
	if want := (engine.ChunkQuery{Query: "how is the engine created", Path: "engine", Limit: 3}); !reflect.DeepEqual(host.queries, []any{want}) {
		t.Errorf("host got %+v, want %+v", host.queries, want)
	}
	if !reflect.DeepEqual(got.Chunks, hits) || c.res.Summary != `1 chunk for "how is the engine created"` {
		t.Errorf("result %+v, summary %q", got, c.res.Summary)
	}
	if k := keysOf(t, c.res.Content); !slices.Equal(k, []string{"chunks"}) {
		t.Errorf("result keys %q", k)
	}
	host = &fakeHost{}
	mustOK(t, tl, ws, host, SearchTextTool, `{"query":"retries"}`, &got)
	if want := (engine.ChunkQuery{Query: "retries", Limit: DefaultChunkResults}); !reflect.DeepEqual(host.queries, []any{want}) {
		t.Errorf("host got %+v, want %+v", host.queries, want)
	}
}

func TestVectorSearch(t *testing.T) {
	ws := indexFixture(t)
	hits := []engine.ChunkHit{{Path: "tools/fs/read.go", StartLine: 1, EndLine: 1, Language: "go", Score: 0.9}, {Path: "engine/engine.go", StartLine: 1, EndLine: 1, Language: "go", Score: 0.5}}
	tl := newTools(t, Options{})
	host := &fakeHost{vectors: hits}
	var got ChunksResult
	long := strings.Repeat("word ", 20)
	c := mustOK(t, tl, ws, host, VectorSearchTool, `{"query":"`+long+`","limit":2}`, &got)
	if want := (engine.ChunkQuery{Query: long, Limit: 2}); !reflect.DeepEqual(host.queries, []any{want}) {
		t.Errorf("host got %+v, want %+v", host.queries, want)
	}
	if !reflect.DeepEqual(got.Chunks, hits) {
		t.Errorf("chunks = %+v", got.Chunks)
	}
	if want := `2 chunks similar to "` + long[:60] + `…"`; c.res.Summary != want {
		t.Errorf("summary = %q, want %q", c.res.Summary, want)
	}
}

// TestHostErrors: the host's errors become tool errors that keep its
// words; without an index, only a pattern search_text falls back.
func TestHostErrors(t *testing.T) {
	ws := indexFixture(t)
	unsupported := fmt.Errorf("%w: no embedding model is configured", engine.ErrUnsupported)
	tests := []struct {
		name  string
		err   error
		tool  string
		args  string
		code  engine.ToolErrorCode
		parts []string
	}{
		{"symbols without index", unsupported, SearchSymbolsTool, `{"query":"x"}`, engine.ToolCodeFailed,
			[]string{"search_symbols is not available: ", unsupported.Error(), "search_text with a pattern"}},
		{"vectors without embeddings", unsupported, VectorSearchTool, `{"query":"x"}`, engine.ToolCodeFailed,
			[]string{"vector_search is not available: ", unsupported.Error(), "search_text"}},
		{"query without index", unsupported, SearchTextTool, `{"query":"x"}`, engine.ToolCodeFailed,
			[]string{"search_text with query is not available: ", unsupported.Error(), "with a pattern"}},
		{"workspace not indexed", fmt.Errorf("%w: %s is not indexed", engine.ErrNotFound, ws), SearchSymbolsTool, `{"query":"x"}`, engine.ToolCodeFailed,
			[]string{"is not indexed", "search_text with a pattern"}},
		{"invalid request", fmt.Errorf("%w: kind %q is unknown; kinds are function, type", engine.ErrInvalidRequest, "fn"), SearchSymbolsTool, `{"query":"x","kind":"fn"}`,
			engine.ToolCodeInvalidInput, []string{`kind "fn" is unknown; kinds are function, type`}},
		{"invalid regex from the index", fmt.Errorf("%w: bad pattern", engine.ErrInvalidRequest), SearchTextTool, `{"pattern":"x"}`,
			engine.ToolCodeInvalidInput, []string{"search_text: ", "bad pattern"}},
		{"permission", fmt.Errorf("%w: nope", engine.ErrPermissionDenied), VectorSearchTool, `{"query":"x"}`, engine.ToolCodePermissionDenied, []string{"nope"}},
		{"timeout", fmt.Errorf("%w: index busy", engine.ErrTimeout), SearchTextTool, `{"query":"x"}`, engine.ToolCodeTimeout, []string{"index busy"}},
		{"unclassified", errors.New("shard 3 is corrupt"), SearchTextTool, `{"pattern":"x"}`, engine.ToolCodeFailed, []string{"the code index failed: shard 3 is corrupt"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := newTools(t, Options{})
			c := invoke(context.Background(), tl, ws, &fakeHost{err: tt.err}, tt.tool, tt.args)
			wantToolError(t, c.err, tt.code, tt.parts...)
		})
	}
	// Without host callbacks the index tools say so.
	tl := newTools(t, Options{})
	for _, args := range []struct{ tool, args string }{{SearchSymbolsTool, `{"query":"x"}`}, {VectorSearchTool, `{"query":"x"}`}, {SearchTextTool, `{"query":"x"}`}} {
		c := invoke(context.Background(), tl, ws, nil, args.tool, args.args)
		wantToolError(t, c.err, engine.ToolCodeFailed, "no callbacks")
	}
	// Matches already streamed are not streamed again by a fallback.
	host := &fakeHost{text: engine.TextResult{Matches: []engine.TextMatch{{Path: "engine/engine.go", Line: 1, Column: 1, Text: "package engine"}}}, textErr: unsupported}
	c := invoke(context.Background(), tl, ws, host, SearchTextTool, `{"pattern":"package"}`)
	wantToolError(t, c.err, engine.ToolCodeFailed, unsupported.Error())
	if n := len(c.matches(t)); n != 1 {
		t.Errorf("%d matches streamed, want the 1 from the index", n)
	}
}

// TestFallback: without an index, a pattern search_text walks the files
// and answers in the index's shape.
func TestFallback(t *testing.T) {
	ws := indexFixture(t)
	testtree.Write(t, ws, map[string]string{".gitignore": "*.bin\n", "big.bin": "package\n"})
	hosts := map[string]engine.ToolHost{
		"no index":              noIndexHost(),
		"workspace not indexed": &fakeHost{err: fmt.Errorf("%w: not indexed", engine.ErrNotFound)},
		"no callbacks":          nil,
	}
	for name, host := range hosts {
		t.Run(name, func(t *testing.T) {
			tl := newTools(t, Options{})
			var got TextResult
			c := mustOK(t, tl, ws, host, SearchTextTool, `{"pattern":"package","context_lines":1}`, &got)
			want := TextResult{
				Matches: []engine.TextMatch{
					{Path: "engine/engine.go", Line: 1, Column: 1, Text: "package engine"},
					{Path: "tools/fs/read.go", Line: 1, Column: 1, Text: "package fs"},
				},
				FilesSearched: 3, // .gitignore too
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("result %+v\nwant   %+v", got, want)
			}
			if k := keysOf(t, c.res.Content); !slices.Equal(k, []string{"files_searched", "matches", "truncated"}) {
				t.Errorf("result keys %q", k)
			}
			if streamed, want := c.matches(t), []string{"engine/engine.go:1:1: package engine", "tools/fs/read.go:1:1: package fs"}; !slices.Equal(streamed, want) {
				t.Errorf("streamed %q, want %q", streamed, want)
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	ws := indexFixture(t)
	tl := newTools(t, Options{})
	tests := []struct {
		tool  string
		args  string
		parts []string
	}{
		{SearchSymbolsTool, `{}`, []string{`missing required field "query"`}},
		{SearchSymbolsTool, `{"query":"  "}`, []string{`"query"`, "white space"}},
		{SearchSymbolsTool, `{"query":"x","name":"y"}`, []string{`unknown field "name"`, "query, kind, path, include_refs, limit"}},
		{SearchSymbolsTool, `{"query":"x","limit":0}`, []string{`"limit"`, "between 1 and 200"}},
		{SearchSymbolsTool, `{"query":"x","include_refs":"yes"}`, []string{`"include_refs"`, "true or false"}},
		{SearchTextTool, `{}`, []string{`exactly one of "pattern"`, "neither"}},
		{SearchTextTool, `{"pattern":"a","query":"b"}`, []string{`exactly one of "pattern"`, "not both"}},
		{SearchTextTool, `{"pattern":""}`, []string{`missing required field "pattern"`}},
		{SearchTextTool, `{"pattern":"a(b","regex":true}`, []string{`"pattern"`, "not a valid RE2", "regex false"}},
		{SearchTextTool, `{"pattern":"a","limit":1001}`, []string{`"limit"`, "between 1 and 1000"}},
		{SearchTextTool, `{"pattern":"a","context_lines":11}`, []string{`"context_lines"`, "between 0 and 10"}},
		{SearchTextTool, `{"pattern":"a","include":"[x"}`, []string{`"include"`, "not a valid glob"}},
		{SearchTextTool, `{"pattern":"a","literal":true}`, []string{`unknown field "literal"`}},
		{SearchTextTool, `{"pattern":"a","max_results":5}`, []string{`unknown field "max_results"`}},
		{SearchTextTool, `{"query":"a","regex":true,"include":"*.go"}`, []string{`"include", "regex" only apply to a pattern search`}},
		{SearchTextTool, `{"query":"a","limit":101}`, []string{`"limit"`, "between 1 and 100 for a query search"}},
		{SearchTextTool, `{"query":7}`, []string{`"query"`, "a string"}},
		{VectorSearchTool, `{"query":"x","kind":"function"}`, []string{`unknown field "kind"`}},
		{VectorSearchTool, `{"query":null}`, []string{`missing required field "query"`}},
		{VectorSearchTool, `["x"]`, []string{"must be a JSON object", "an array"}},
	}
	for _, tt := range tests {
		t.Run(tt.tool+" "+tt.args, func(t *testing.T) {
			host := &fakeHost{}
			c := invoke(context.Background(), tl, ws, host, tt.tool, tt.args)
			wantToolError(t, c.err, engine.ToolCodeInvalidInput, append([]string{tt.tool + ":"}, tt.parts...)...)
			if len(host.queries) != 0 {
				t.Errorf("the host was asked %+v for invalid input", host.queries)
			}
		})
	}
}

func TestInvokeErrors(t *testing.T) {
	ws := t.TempDir()
	tl := newTools(t, Options{})
	ctx := context.Background()
	host := &fakeHost{}

	c := invoke(ctx, tl, ws, host, "read_file", `{}`)
	wantToolError(t, c.err, engine.ToolCodeUnknownTool, `"read_file"`, "search_symbols, search_text and vector_search")

	c = invoke(ctx, tl, "", host, SearchSymbolsTool, `{"query":"a"}`)
	wantToolError(t, c.err, engine.ToolCodeFailed, "without a workspace root")

	c = invoke(ctx, tl, "relative/dir", host, SearchSymbolsTool, `{"query":"a"}`)
	wantToolError(t, c.err, engine.ToolCodeFailed, "relative workspace root")

	c = invoke(ctx, tl, filepath.Join(ws, "missing"), host, SearchSymbolsTool, `{"query":"a"}`)
	wantToolError(t, c.err, engine.ToolCodeNotFound, "does not exist")

	c = invoke(ctx, tl, ws, host, SearchSymbolsTool, `{"query":"a","path":"nope"}`)
	wantToolError(t, c.err, engine.ToolCodeNotFound, `"nope" does not exist`)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	c = invoke(cctx, tl, ws, host, SearchTextTool, `{"pattern":"a"}`)
	wantToolError(t, c.err, engine.ToolCodeCancelled)
	if len(host.queries) != 0 {
		t.Errorf("the host was asked %+v", host.queries)
	}
}

package search

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/tools/internal/toolkit"
)

// SymbolsResult is the content of a search_symbols result.
type SymbolsResult struct {
	// Symbols are the hits as the index ranked them: exact, then prefix,
	// then fuzzy matches, definitions before references.
	Symbols []engine.SymbolHit `json:"symbols"`
}

// ChunksResult is the content of a vector_search result and of a
// search_text result in query mode.
type ChunksResult struct {
	// Chunks are the hits, best first.
	Chunks []engine.ChunkHit `json:"chunks"`
}

type symbolArgs struct {
	Query       *string `json:"query"`
	Kind        *string `json:"kind"`
	Path        *string `json:"path"`
	IncludeRefs *bool   `json:"include_refs"`
	Limit       *int    `json:"limit"`
}

type vectorArgs struct {
	Query *string `json:"query"`
	Path  *string `json:"path"`
	Limit *int    `json:"limit"`
}

// Hints that follow the host's words when a tool cannot reach an index.
const (
	symbolsHint = "Use search_text with a pattern (the symbol's name, or a regular expression such as \"func ReadFile\" with regex true) to search the files without the index."
	queryHint   = "Use search_text with a pattern instead; it searches the files without the index."
	vectorHint  = "Use search_text with query (ranked keyword search over the index) or with pattern (exact text; works without the index)."
)

func (t *Tools) searchSymbols(ctx context.Context, c call, raw []byte) (engine.ToolResult, error) {
	const tool = SearchSymbolsTool
	var a symbolArgs
	if err := toolkit.DecodeArgs(tool, raw, t.fields[tool], &a); err != nil {
		return engine.ToolResult{}, err
	}
	query, err := requiredText(tool, "query", a.Query, "the symbol name or part of it")
	if err != nil {
		return engine.ToolResult{}, err
	}
	limit, err := limitArg(tool, a.Limit, DefaultSymbolResults, MaxSymbolResults, "")
	if err != nil {
		return engine.ToolResult{}, err
	}
	p, err := t.resolve(tool, c.root, deref(a.Path))
	if err != nil {
		return engine.ToolResult{}, err
	}
	if c.host == nil {
		return engine.ToolResult{}, noCallbacks(tool, symbolsHint)
	}
	q := engine.SymbolQuery{Query: query, Kind: strings.TrimSpace(deref(a.Kind)), Path: p.indexPath(),
		IncludeRefs: a.IncludeRefs != nil && *a.IncludeRefs, Limit: limit}
	hits, err := c.host.SearchSymbols(ctx, q)
	if err != nil {
		return engine.ToolResult{}, hostError(ctx, tool, err, symbolsHint)
	}
	if hits == nil {
		hits = []engine.SymbolHit{}
	}
	return engine.JSONResult(SymbolsResult{Symbols: hits}, symbolsSummary(query, hits))
}

func (t *Tools) vectorSearch(ctx context.Context, c call, raw []byte) (engine.ToolResult, error) {
	const tool = VectorSearchTool
	var a vectorArgs
	if err := toolkit.DecodeArgs(tool, raw, t.fields[tool], &a); err != nil {
		return engine.ToolResult{}, err
	}
	query, err := requiredText(tool, "query", a.Query, "a question or description in words")
	if err != nil {
		return engine.ToolResult{}, err
	}
	limit, err := limitArg(tool, a.Limit, DefaultChunkResults, MaxChunkResults, "")
	if err != nil {
		return engine.ToolResult{}, err
	}
	p, err := t.resolve(tool, c.root, deref(a.Path))
	if err != nil {
		return engine.ToolResult{}, err
	}
	if c.host == nil {
		return engine.ToolResult{}, noCallbacks(tool, vectorHint)
	}
	hits, err := c.host.SearchVectors(ctx, engine.ChunkQuery{Query: query, Path: p.indexPath(), Limit: limit})
	if err != nil {
		return engine.ToolResult{}, hostError(ctx, tool, err, vectorHint)
	}
	return chunksResult(hits, "similar to", query)
}

// searchChunks is search_text in query mode.
func searchChunks(ctx context.Context, c call, query string, p resolved, limit int) (engine.ToolResult, error) {
	const tool = SearchTextTool
	if c.host == nil {
		return engine.ToolResult{}, noCallbacks(tool+" with query", queryHint)
	}
	hits, err := c.host.SearchChunks(ctx, engine.ChunkQuery{Query: query, Path: p.indexPath(), Limit: limit})
	if err != nil {
		return engine.ToolResult{}, hostError(ctx, tool+" with query", err, queryHint)
	}
	return chunksResult(hits, "for", query)
}

func chunksResult(hits []engine.ChunkHit, prep, query string) (engine.ToolResult, error) {
	if hits == nil {
		hits = []engine.ChunkHit{}
	}
	summary := fmt.Sprintf("%s %s %s", plural(len(hits), "chunk", "chunks"), prep, quoteShort(query))
	if len(hits) == 0 {
		summary = fmt.Sprintf("no chunks %s %s", prep, quoteShort(query))
	}
	return engine.JSONResult(ChunksResult{Chunks: hits}, summary)
}

// symbolsSummary is "12 symbols for ReadFile (3 exact)", with the number
// of references when there are any.
func symbolsSummary(query string, hits []engine.SymbolHit) string {
	if len(hits) == 0 {
		return "no symbols for " + shorten(query)
	}
	exact, refs := 0, 0
	for _, h := range hits {
		if h.Match == "exact" {
			exact++
		}
		if !h.Definition {
			refs++
		}
	}
	s := fmt.Sprintf("%s for %s (%d exact", plural(len(hits), "symbol", "symbols"), shorten(query), exact)
	if refs > 0 {
		s += ", " + plural(refs, "reference", "references")
	}
	return s + ")"
}

// noCallbacks is the error of an index search in a call that came without
// host callbacks.
func noCallbacks(what, hint string) *engine.ToolError {
	return engine.ToolErrorf(engine.ToolCodeFailed, "%s is not available: the host offers this call no callbacks, so the engine's code index cannot be reached. %s", what, hint)
}

// requiredText returns a required string argument, which must not be
// empty or only spaces.
func requiredText(tool, field string, v *string, what string) (string, error) {
	if v == nil || *v == "" {
		return "", toolkit.Missing(tool, field, what)
	}
	if strings.TrimSpace(*v) == "" {
		return "", toolkit.Invalid(tool, field, "is only white space; give %s", what)
	}
	return *v, nil
}

// limitArg validates a limit argument; mode, when not empty, says which
// kind of search the bounds are for.
func limitArg(tool string, v *int, def, limit int, mode string) (int, error) {
	if v == nil {
		return def, nil
	}
	if *v < 1 || *v > limit {
		if mode != "" {
			return 0, toolkit.Invalid(tool, "limit", "must be between 1 and %d for %s, not %d", limit, mode, *v)
		}
		return 0, toolkit.Invalid(tool, "limit", "must be between 1 and %d, not %d", limit, *v)
	}
	return *v, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// shorten cuts s to 60 characters for a summary line.
func shorten(s string) string {
	const max = 60
	if utf8.RuneCountInString(s) > max {
		return string([]rune(s)[:max]) + "…"
	}
	return s
}

// quoteShort quotes s for a summary line, cut to 60 characters.
func quoteShort(s string) string { return fmt.Sprintf("%q", shorten(s)) }

package unixrpc

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/creachadair/jrpc2"

	"github.com/plexus-agent/plexus/engine"
)

// Search methods (beyond the contract): the workspace index, answered by
// the engine's Searcher, the code path of the search tools and of the
// HTTP front-end's /v1/workspaces/{id}/search.
const (
	methodSearchText    = "search.text"
	methodSearchSymbols = "search.symbols"
	// methodSearchMatches carries streamed text matches.
	methodSearchMatches = "search.matches"
)

// Defaults and bounds of the search methods.
const (
	defaultTextMatches   = 100
	defaultSymbolHits    = 20
	maxSymbolHits        = 1000
	searchBatchMatches   = 1000
	searchBatchBytes     = 1 << 20
	maxSearchContextLine = 20
)

// searchTextParams are search.text's params. Limit nil means
// defaultTextMatches, 0 every match.
type searchTextParams struct {
	Pattern         *string `json:"pattern"`
	Regex           bool    `json:"regex"`
	CaseInsensitive bool    `json:"case_insensitive"`
	Path            string  `json:"path"`
	Include         string  `json:"include"`
	ContextLines    int     `json:"context_lines"`
	Limit           *int    `json:"limit"`
	Stream          bool    `json:"stream"`
	WorkspaceRoot   string  `json:"workspace_root"`
}

// searchTextResult is search.text's result. Matches is left out when
// they were streamed.
type searchTextResult struct {
	Matches       []engine.TextMatch `json:"matches,omitempty"`
	MatchCount    int                `json:"match_count"`
	FilesSearched int                `json:"files_searched"`
	Truncated     bool               `json:"truncated"`
}

// searchMatchesParams is one search.matches notification.
type searchMatchesParams struct {
	RequestID string             `json:"request_id"`
	Matches   []engine.TextMatch `json:"matches"`
}

type searchSymbolsParams struct {
	Query         *string `json:"query"`
	Kind          string  `json:"kind"`
	Path          string  `json:"path"`
	IncludeRefs   bool    `json:"include_refs"`
	Limit         *int    `json:"limit"`
	WorkspaceRoot string  `json:"workspace_root"`
}

type searchSymbolsResult struct {
	Symbols []engine.SymbolHit `json:"symbols"`
}

// searchRoot returns the workspace a search request names: the server's,
// or with Options.AnyWorkspace the existing directory workspace_root.
func (c *conn) searchRoot(root string) (string, error) {
	ws := c.srv.opts.Workspace.Root
	if root == "" {
		return ws, nil
	}
	if !filepath.IsAbs(root) {
		return "", rpcError(CodeInvalidParams, "workspace_root must be an absolute path", map[string]any{"field": "workspace_root"})
	}
	if !c.srv.opts.AnyWorkspace {
		if real, err := filepath.EvalSymlinks(root); err != nil || real != ws {
			return "", rpcError(CodeInvalidParams, fmt.Sprintf("this server searches %s only", ws), reasonData(reasonWorkspace, "field", "workspace_root"))
		}
	}
	return root, nil
}

func (c *conn) searcher() (engine.Searcher, error) {
	s := c.srv.opts.Engine.Searcher()
	if s == nil {
		return nil, rpcError(CodeAgentError, "this server has no code index", nil)
	}
	return s, nil
}

// searchText answers search.text. With stream true the matches go out as
// search.matches notifications (at most 1000 matches or about 1 MiB each),
// all written before the result, which then holds the counts only.
func (c *conn) searchText(ctx context.Context, req *jrpc2.Request) (any, error) {
	var p searchTextParams
	if err := decodeParams(req, &p); err != nil {
		return nil, err
	}
	if p.Pattern == nil || *p.Pattern == "" {
		return nil, rpcError(CodeInvalidParams, "pattern is required and must not be empty", map[string]any{"field": "pattern"})
	}
	if p.ContextLines < 0 || p.ContextLines > maxSearchContextLine {
		return nil, rpcError(CodeInvalidParams, fmt.Sprintf("context_lines must be 0 to %d", maxSearchContextLine), map[string]any{"field": "context_lines"})
	}
	q := engine.TextQuery{Pattern: *p.Pattern, Regex: p.Regex, CaseInsensitive: p.CaseInsensitive, Path: p.Path,
		Include: p.Include, ContextLines: p.ContextLines, Limit: defaultTextMatches}
	if p.Limit != nil {
		switch {
		case *p.Limit < 0:
			return nil, rpcError(CodeInvalidParams, "limit must be 0 (every match) or more", map[string]any{"field": "limit"})
		case *p.Limit == 0:
			q.Limit = engine.NoLimit
		default:
			q.Limit = *p.Limit
		}
	}
	root, err := c.searchRoot(p.WorkspaceRoot)
	if err != nil {
		return nil, err
	}
	s, err := c.searcher()
	if err != nil {
		return nil, err
	}
	var batch []engine.TextMatch
	size := 0
	flush := func() {
		if len(batch) > 0 {
			c.send(note{method: methodSearchMatches, params: searchMatchesParams{RequestID: req.ID(), Matches: batch}})
			batch, size = nil, 0
		}
	}
	var onMatch func(engine.TextMatch)
	if p.Stream {
		onMatch = func(m engine.TextMatch) {
			batch = append(batch, m)
			size += len(m.Path) + len(m.Text) + 64
			if len(batch) == searchBatchMatches || size >= searchBatchBytes {
				flush()
			}
		}
	}
	res, err := s.SearchText(ctx, root, q, onMatch)
	if err != nil {
		return nil, rpcError(engineCode(err), err.Error(), nil)
	}
	out := searchTextResult{MatchCount: len(res.Matches), FilesSearched: res.FilesSearched, Truncated: res.Truncated}
	if !p.Stream {
		out.Matches = res.Matches
		return out, nil
	}
	flush()
	// The result goes out after every notification of the request.
	written := make(chan struct{})
	if c.out.push(outItem{written: written}) {
		select {
		case <-written:
		case <-ctx.Done():
			return nil, rpcError(CodeCancelled, "the connection closed", nil)
		}
	}
	return out, nil
}

// searchSymbols answers search.symbols.
func (c *conn) searchSymbols(ctx context.Context, req *jrpc2.Request) (any, error) {
	var p searchSymbolsParams
	if err := decodeParams(req, &p); err != nil {
		return nil, err
	}
	if p.Query == nil || *p.Query == "" {
		return nil, rpcError(CodeInvalidParams, "query is required and must not be empty", map[string]any{"field": "query"})
	}
	q := engine.SymbolQuery{Query: *p.Query, Kind: p.Kind, Path: p.Path, IncludeRefs: p.IncludeRefs, Limit: defaultSymbolHits}
	if p.Limit != nil {
		if *p.Limit < 1 || *p.Limit > maxSymbolHits {
			return nil, rpcError(CodeInvalidParams, fmt.Sprintf("limit must be 1 to %d", maxSymbolHits), map[string]any{"field": "limit"})
		}
		q.Limit = *p.Limit
	}
	root, err := c.searchRoot(p.WorkspaceRoot)
	if err != nil {
		return nil, err
	}
	s, err := c.searcher()
	if err != nil {
		return nil, err
	}
	hits, err := s.SearchSymbols(ctx, root, q)
	if err != nil {
		return nil, rpcError(engineCode(err), err.Error(), nil)
	}
	if hits == nil {
		hits = []engine.SymbolHit{}
	}
	return searchSymbolsResult{Symbols: hits}, nil
}

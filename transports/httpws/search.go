package httpws

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/plexus-agent/plexus/engine"
)

// schemaSearch is the search request's schema (components/schemas).
const schemaSearch = "SearchRequest"

// Search defaults (the OpenAPI description states them).
const (
	defaultSearchMatches = 100
	defaultSearchSymbols = 20
)

// searchRequest is POST .../search's body, validated by SearchRequest.
type searchRequest struct {
	Mode            string `json:"mode"`
	Pattern         string `json:"pattern"`
	Regex           bool   `json:"regex"`
	CaseInsensitive bool   `json:"case_insensitive"`
	Include         string `json:"include"`
	ContextLines    int    `json:"context_lines"`
	Query           string `json:"query"`
	Kind            string `json:"kind"`
	IncludeRefs     bool   `json:"include_refs"`
	Path            string `json:"path"`
	Limit           *int   `json:"limit"`
}

type searchResponse struct {
	WorkspaceID   string             `json:"workspace_id"`
	Mode          string             `json:"mode"`
	Matches       []engine.TextMatch `json:"matches,omitempty"`
	MatchCount    *int               `json:"match_count,omitempty"`
	FilesSearched *int               `json:"files_searched,omitempty"`
	Truncated     *bool              `json:"truncated,omitempty"`
	Symbols       []engine.SymbolHit `json:"symbols,omitempty"`
}

// searchDone is the closing line of a streamed text search.
type searchDone struct {
	MatchCount    int  `json:"match_count"`
	FilesSearched int  `json:"files_searched"`
	Truncated     bool `json:"truncated"`
}

// handleSearch answers POST /v1/workspaces/{workspace_id}/search from the
// engine's Searcher, the code index the search tools use.
func (s *Server) handleSearch(w http.ResponseWriter, r *http.Request, ws *engine.Workspace, rec engine.WorkspaceRecord) {
	searcher := s.eng.Searcher()
	if searcher == nil {
		writeError(w, http.StatusNotImplemented, codeIndexFailed, "this server has no code index", nil)
		return
	}
	var req searchRequest
	if !s.readBody(w, r, schemaSearch, &req) {
		return
	}
	ctx := r.Context()
	if req.Mode == "symbols" {
		q := engine.SymbolQuery{Query: req.Query, Kind: req.Kind, Path: req.Path, IncludeRefs: req.IncludeRefs, Limit: defaultSearchSymbols}
		if req.Limit != nil {
			q.Limit = *req.Limit
		}
		hits, err := searcher.SearchSymbols(ctx, ws.Root, q)
		if err != nil {
			writeEngineError(w, err)
			return
		}
		if hits == nil {
			hits = []engine.SymbolHit{}
		}
		n := len(hits)
		writeJSON(w, http.StatusOK, searchResponse{WorkspaceID: ws.ID, Mode: "symbols", Symbols: hits, MatchCount: &n})
		return
	}
	q := engine.TextQuery{Pattern: req.Pattern, Regex: req.Regex, CaseInsensitive: req.CaseInsensitive, Path: req.Path,
		Include: req.Include, ContextLines: req.ContextLines, Limit: defaultSearchMatches}
	if req.Limit != nil {
		q.Limit = *req.Limit
		if q.Limit == 0 {
			q.Limit = engine.NoLimit
		}
	}
	if strings.Contains(r.Header.Get("Accept"), "application/x-ndjson") {
		s.streamSearch(w, r, searcher, ws.Root, q)
		return
	}
	res, err := searcher.SearchText(ctx, ws.Root, q, nil)
	if err != nil {
		writeEngineError(w, err)
		return
	}
	n, files := len(res.Matches), res.FilesSearched
	writeJSON(w, http.StatusOK, searchResponse{WorkspaceID: ws.ID, Mode: "text", Matches: res.Matches,
		MatchCount: &n, FilesSearched: &files, Truncated: &res.Truncated})
}

// streamSearch writes a text search as NDJSON: a line per match as it is
// verified, then the summary. An error before the first match is an
// ordinary error response; after it, an error line.
func (s *Server) streamSearch(w http.ResponseWriter, r *http.Request, searcher engine.Searcher, root string, q engine.TextQuery) {
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	started := false
	start := func() {
		if !started {
			started = true
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.WriteHeader(http.StatusOK)
		}
	}
	n := 0
	res, err := searcher.SearchText(r.Context(), root, q, func(m engine.TextMatch) {
		start()
		enc.Encode(struct {
			Match engine.TextMatch `json:"match"`
		}{m})
		if n++; n%256 == 0 {
			rc.Flush()
		}
	})
	if err != nil {
		if !started {
			writeEngineError(w, err)
			return
		}
		_, code := engineStatus(err)
		enc.Encode(map[string]any{"error": map[string]string{"code": code, "message": err.Error()}})
		return
	}
	start()
	enc.Encode(map[string]any{"done": searchDone{MatchCount: len(res.Matches), FilesSearched: res.FilesSearched, Truncated: res.Truncated}})
}

package search

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/workspace"
	"github.com/plexus-agent/plexus/tools/internal/toolkit"
)

// MatchStream is the ToolOutput stream on which search_text sends each
// match as "path:line:column: text".
const MatchStream = "match"

// TextResult is the content of a search_text result in pattern mode,
// from the index or the fallback alike.
type TextResult struct {
	// Matches are the matching lines, one per line: in path, then line
	// order from the fallback; in the index's order from the index.
	Matches []engine.TextMatch `json:"matches"`
	// FilesSearched counts the files whose contents were read.
	FilesSearched int `json:"files_searched"`
	// Truncated is true when there were more matching lines than limit;
	// the search stopped there.
	Truncated bool `json:"truncated"`
	// FilesSkipped counts files the fallback left out as binary, larger
	// than its size limit, or unreadable; absent when none (and always
	// from the index).
	FilesSkipped int `json:"files_skipped,omitempty"`
	// Unreadable names directories the fallback could not list, with the
	// reason; absent when none.
	Unreadable []string `json:"unreadable,omitempty"`
}

type textArgs struct {
	Pattern         *string `json:"pattern"`
	Query           *string `json:"query"`
	Regex           *bool   `json:"regex"`
	CaseInsensitive *bool   `json:"case_insensitive"`
	Path            *string `json:"path"`
	Include         *string `json:"include"`
	ContextLines    *int    `json:"context_lines"`
	Limit           *int    `json:"limit"`
}

// textQuery is a validated pattern search.
type textQuery struct {
	q       engine.TextQuery // Path is the index path
	p       resolved
	m       matcher
	include *workspace.Glob
}

func (t *Tools) searchText(ctx context.Context, c call, raw []byte) (engine.ToolResult, error) {
	const tool = SearchTextTool
	var a textArgs
	if err := toolkit.DecodeArgs(tool, raw, t.fields[tool], &a); err != nil {
		return engine.ToolResult{}, err
	}
	switch {
	case a.Pattern != nil && a.Query != nil:
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeInvalidInput,
			"%s: give exactly one of \"pattern\" (find exact text or a regular expression, line by line) or \"query\" (rank code chunks against a question in words), not both", tool)
	case a.Pattern == nil && a.Query == nil:
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeInvalidInput,
			"%s: give exactly one of \"pattern\" (find exact text or a regular expression, line by line) or \"query\" (rank code chunks against a question in words); neither was given", tool)
	case a.Query != nil:
		return t.queryMode(ctx, c, a)
	}
	tq, err := t.patternQuery(c, a)
	if err != nil {
		return engine.ToolResult{}, err
	}
	if c.host != nil {
		res, streamed, err := indexText(ctx, c, tq.q)
		switch {
		case err == nil:
			return engine.JSONResult(res, res.summary())
		case !noIndex(err) || streamed > 0:
			return engine.ToolResult{}, hostError(ctx, tool, err, "")
		}
		t.opts.Logger.Debug("search_text: searching the files without the index", "reason", err.Error())
	}
	res, err := t.walkSearch(ctx, c.root, tq, c.onUpdate)
	if err != nil {
		return engine.ToolResult{}, err
	}
	return engine.JSONResult(res, res.summary())
}

// queryMode is search_text with query: chunks ranked by the index.
func (t *Tools) queryMode(ctx context.Context, c call, a textArgs) (engine.ToolResult, error) {
	const tool = SearchTextTool
	var patternOnly []string
	for name, set := range map[string]bool{
		"regex": a.Regex != nil, "case_insensitive": a.CaseInsensitive != nil,
		"include": a.Include != nil, "context_lines": a.ContextLines != nil,
	} {
		if set {
			patternOnly = append(patternOnly, strconv.Quote(name))
		}
	}
	if len(patternOnly) > 0 {
		slices.Sort(patternOnly)
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeInvalidInput,
			"%s: %s only apply to a pattern search; a query search takes query, path and limit", tool, strings.Join(patternOnly, ", "))
	}
	query, err := requiredText(tool, "query", a.Query, "a question or description in words")
	if err != nil {
		return engine.ToolResult{}, err
	}
	limit, err := limitArg(tool, a.Limit, DefaultChunkResults, MaxChunkResults, "a query search")
	if err != nil {
		return engine.ToolResult{}, err
	}
	p, err := t.resolve(tool, c.root, deref(a.Path))
	if err != nil {
		return engine.ToolResult{}, err
	}
	return searchChunks(ctx, c, query, p, limit)
}

// patternQuery validates the arguments of a pattern search.
func (t *Tools) patternQuery(c call, a textArgs) (textQuery, error) {
	const tool = SearchTextTool
	if *a.Pattern == "" {
		return textQuery{}, toolkit.Missing(tool, "pattern", "the text or, with regex true, the regular expression to search for")
	}
	regex, ci := a.Regex != nil && *a.Regex, a.CaseInsensitive != nil && *a.CaseInsensitive
	m, err := compileSearch(*a.Pattern, regex, ci)
	if err != nil {
		return textQuery{}, toolkit.Invalid(tool, "pattern", "is not a valid RE2 regular expression: %v; escape special characters, or leave regex false to search for the text as written", err)
	}
	limit, err := limitArg(tool, a.Limit, DefaultTextResults, MaxTextResults, "")
	if err != nil {
		return textQuery{}, err
	}
	contextLines := deref(a.ContextLines)
	if contextLines < 0 || contextLines > MaxContextLines {
		return textQuery{}, toolkit.Invalid(tool, "context_lines", "must be between 0 and %d, not %d", MaxContextLines, contextLines)
	}
	var include *workspace.Glob
	if a.Include != nil {
		if include, err = newGlob(tool, "include", *a.Include); err != nil {
			return textQuery{}, err
		}
	}
	p, err := t.resolve(tool, c.root, deref(a.Path))
	if err != nil {
		return textQuery{}, err
	}
	q := engine.TextQuery{
		Pattern: *a.Pattern, Regex: regex, CaseInsensitive: ci, Path: p.indexPath(),
		Include: deref(a.Include), ContextLines: contextLines, Limit: limit,
	}
	return textQuery{q: q, p: p, m: m, include: include}, nil
}

// indexText runs a pattern search on the index through the host,
// streaming each match. It returns how many matches it streamed.
func indexText(ctx context.Context, c call, q engine.TextQuery) (TextResult, int, error) {
	var mu sync.Mutex // the host may report matches from several goroutines
	streamed := 0
	res, err := c.host.SearchText(ctx, q, func(m engine.TextMatch) {
		mu.Lock()
		defer mu.Unlock()
		streamed++
		c.onUpdate(matchUpdate(m))
	})
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		return TextResult{}, streamed, err
	}
	out := TextResult{Matches: res.Matches, FilesSearched: res.FilesSearched, Truncated: res.Truncated}
	if out.Matches == nil {
		out.Matches = []engine.TextMatch{}
	}
	return out, streamed, nil
}

// matchUpdate is the update that streams one match.
func matchUpdate(m engine.TextMatch) engine.ToolUpdate {
	return engine.ToolUpdate{Output: &engine.ToolOutput{Stream: MatchStream, Text: formatMatch(m)}}
}

// formatMatch formats m as the match stream does: "path:line:column: text".
func formatMatch(m engine.TextMatch) string {
	return fmt.Sprintf("%s:%d:%d: %s", m.Path, m.Line, m.Column, m.Text)
}

func (r TextResult) summary() string {
	files := map[string]bool{}
	for _, m := range r.Matches {
		files[m.Path] = true
	}
	var s string
	if len(r.Matches) == 0 {
		s = "no matches in " + plural(r.FilesSearched, "file", "files")
	} else {
		s = fmt.Sprintf("%s in %s", plural(len(r.Matches), "match", "matches"), plural(len(files), "file", "files"))
	}
	if r.Truncated {
		s += " (truncated)"
	}
	if r.FilesSkipped > 0 {
		s += fmt.Sprintf(", %s skipped", plural(r.FilesSkipped, "file", "files"))
	}
	return s
}

package engine

import "context"

// Searcher answers searches over a workspace's code index. The index
// (engine/index) implements it; the engine hands it to tool plugins through
// host callbacks (ToolHost), so built-in and third-party tools search the
// same index. root is the workspace's absolute root. Implementations are
// safe for concurrent use. Errors: ErrInvalidRequest for a bad query (an
// invalid regular expression names the problem), ErrNotFound when root is
// not a workspace the index knows.
type Searcher interface {
	// SearchSymbols finds definitions (and, when asked, references) by
	// name: exact matches first, then prefix, then fuzzy (camelCase and
	// snake_case aware), definitions before references.
	SearchSymbols(ctx context.Context, root string, q SymbolQuery) ([]SymbolHit, error)
	// SearchText finds a literal or a regular expression, line by line,
	// calling onMatch (may be nil) for each match as it is verified.
	SearchText(ctx context.Context, root string, q TextQuery, onMatch func(TextMatch)) (TextResult, error)
	// SearchChunks ranks code chunks (a function, a type) against a
	// natural-language query with BM25 over identifier-split words.
	SearchChunks(ctx context.Context, root string, q ChunkQuery) ([]ChunkHit, error)
	// SearchVectors ranks chunks by embedding similarity to the query.
	// When no embedding model is available it returns ErrUnsupported,
	// saying why.
	SearchVectors(ctx context.Context, root string, q ChunkQuery) ([]ChunkHit, error)
}

// SymbolQuery asks for symbols by name.
type SymbolQuery struct {
	// Query is a name or part of one ("ReadFile", "readf", "read_file").
	Query string `json:"query"`
	// Kind keeps only symbols of this kind ("function", "type", ...).
	Kind string `json:"kind,omitempty"`
	// Path keeps only symbols under this workspace-relative path prefix.
	Path string `json:"path,omitempty"`
	// IncludeRefs adds references to exact matches.
	IncludeRefs bool `json:"include_refs,omitempty"`
	// Limit caps the hits (default 20).
	Limit int `json:"limit,omitempty"`
}

// SymbolHit is one definition or reference.
type SymbolHit struct {
	Name      string `json:"name"`
	Kind      string `json:"kind"`
	Container string `json:"container,omitempty"`
	// Path is workspace-relative, slash-separated.
	Path     string `json:"path"`
	Language string `json:"language"`
	// StartLine and EndLine are 1-based, inclusive.
	StartLine  int  `json:"start_line"`
	EndLine    int  `json:"end_line"`
	Definition bool `json:"definition"`
	// Match is "exact", "prefix" or "fuzzy".
	Match string  `json:"match"`
	Score float64 `json:"score"`
}

// TextQuery is a literal or regular-expression search.
type TextQuery struct {
	// Pattern is the literal text, or an RE2 expression when Regex.
	Pattern         string `json:"pattern"`
	Regex           bool   `json:"regex,omitempty"`
	CaseInsensitive bool   `json:"case_insensitive,omitempty"`
	// Path keeps only files under this workspace-relative prefix.
	Path string `json:"path,omitempty"`
	// Include keeps only files whose path matches this glob ("*.go",
	// "src/**/*.ts").
	Include string `json:"include,omitempty"`
	// ContextLines of text before and after each match (default 0).
	ContextLines int `json:"context_lines,omitempty"`
	// Limit caps the matches: 0 means the default, 100; NoLimit (any
	// negative value) asks for every match. There is no other cap.
	Limit int `json:"limit,omitempty"`
}

// NoLimit as TextQuery.Limit asks for every match.
const NoLimit = -1

// TextMatch is one matching line.
type TextMatch struct {
	Path string `json:"path"`
	// Line and Column are 1-based; Column counts characters.
	Line   int      `json:"line"`
	Column int      `json:"column"`
	Text   string   `json:"text"`
	Before []string `json:"before,omitempty"`
	After  []string `json:"after,omitempty"`
}

// TextResult is a text search's outcome.
type TextResult struct {
	Matches []TextMatch `json:"matches"`
	// FilesSearched counts the files read to verify candidates.
	FilesSearched int `json:"files_searched"`
	// Truncated is true when Limit cut the matches: more lines match.
	Truncated bool `json:"truncated"`
}

// ChunkQuery is a natural-language query over code chunks.
type ChunkQuery struct {
	Query string `json:"query"`
	// Path keeps only chunks under this workspace-relative prefix.
	Path string `json:"path,omitempty"`
	// Limit caps the hits (default 10).
	Limit int `json:"limit,omitempty"`
}

// ChunkHit is one ranked chunk of code.
type ChunkHit struct {
	Path string `json:"path"`
	// StartLine and EndLine are 1-based, inclusive.
	StartLine int    `json:"start_line"`
	EndLine   int    `json:"end_line"`
	Language  string `json:"language"`
	// Kind and Name describe the symbol the chunk holds, when it holds one.
	Kind  string  `json:"kind,omitempty"`
	Name  string  `json:"name,omitempty"`
	Score float64 `json:"score"`
	// Text is the chunk's source.
	Text string `json:"text,omitempty"`
}

// Searcher returns the engine's code index (Options.Searcher), or nil
// when it has none. Front-ends serve their search requests through it,
// the same index and code path as the search tools' host callbacks.
func (e *Engine) Searcher() Searcher { return e.opts.Searcher }

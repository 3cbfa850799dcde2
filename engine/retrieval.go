package engine

import (
	"context"
	"fmt"
	"strings"
)

// Retriever gathers code context for a turn (DESIGN.md step 2): symbol,
// text and vector search over the workspace index, fused, reranked and
// packed into a token budget. engine/index implements it.
type Retriever interface {
	// Retrieve searches the workspace at req.Root for req.Query. It calls
	// emit for each stage as it finishes, in order: symbol_search,
	// text_search, vector_search (with a "skipped: ..." message when no
	// embedding model is available), reranking.
	Retrieve(ctx context.Context, req RetrievalRequest, emit func(RetrievalEvent)) (RetrievalResult, error)
}

// RetrievalRequest is one retrieval.
type RetrievalRequest struct {
	// Root is the workspace's absolute root.
	Root  string
	Query string
	// TokenBudget bounds the packed snippets, in estimated tokens.
	TokenBudget int
}

// RetrievalResult is the packed context.
type RetrievalResult struct {
	Snippets []Snippet
	// Tokens is the estimate of the snippets' size in tokens.
	Tokens int
}

// Snippet is one piece of code chosen for the model's context.
type Snippet struct {
	Path string `json:"path"`
	// StartLine and EndLine are 1-based, inclusive.
	StartLine int     `json:"start_line"`
	EndLine   int     `json:"end_line"`
	Language  string  `json:"language"`
	Kind      string  `json:"kind,omitempty"`
	Name      string  `json:"name,omitempty"`
	Text      string  `json:"text"`
	Score     float64 `json:"score"`
	// Sources are the stages that found it: "symbol", "text", "vector".
	Sources []string `json:"sources"`
}

// Retrieval stages, as the WebSocket contract names them.
const (
	StageSymbolSearch = "symbol_search"
	StageTextSearch   = "text_search"
	StageVectorSearch = "vector_search"
	StageReranking    = "reranking"
)

// RetrievalEvent reports one retrieval stage: how many results it found
// and a message for people.
type RetrievalEvent struct {
	Stage   string `json:"stage"`
	Count   int    `json:"results_count"`
	Message string `json:"message"`
}

// EventKind implements EventData.
func (*RetrievalEvent) EventKind() string { return "retrieval" }

// contextMessage formats packed snippets as the message that precedes the
// user's in the model's conversation.
func contextMessage(snips []Snippet) string {
	var b strings.Builder
	b.WriteString("Code from the workspace that may be relevant to the request (found by searching the index; read the files for more):\n")
	for _, s := range snips {
		fmt.Fprintf(&b, "\n%s:%d-%d", s.Path, s.StartLine, s.EndLine)
		if s.Name != "" {
			fmt.Fprintf(&b, " (%s %s)", s.Kind, s.Name)
		}
		fmt.Fprintf(&b, "\n```%s\n%s", s.Language, s.Text)
		if !strings.HasSuffix(s.Text, "\n") {
			b.WriteByte('\n')
		}
		b.WriteString("```\n")
	}
	return b.String()
}

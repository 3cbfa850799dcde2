package index

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/plexus-agent/plexus/engine"
)

// modelRerankDepth is how many of the feature-ranked candidates the model
// reranker sees.
const modelRerankDepth = 12

// rerankSchema constrains the model's answer (Ollama's format, OpenAI's
// response_format): the candidates' numbers, most relevant first.
var rerankSchema = json.RawMessage(`{"type":"object","properties":{"order":{"type":"array","items":{"type":"integer"}}},"required":["order"]}`)

// modelRerank asks the reranker model to order the leading candidates by
// relevance to the query. Candidates it does not mention keep their order
// after those it does; numbers out of range or repeated are ignored. On any
// failure the feature order stands and the error says why.
func (ix *Index) modelRerank(ctx context.Context, query string, cands []*candidate) error {
	svc := ix.svc
	n := min(len(cands), modelRerankDepth)
	if n < 2 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Request: %s\n\nCode chunks found in the workspace:\n", query)
	files := map[string][]byte{}
	for i, c := range cands[:n] {
		ch := c.key.seg.docs[c.key.doc].chunks[c.key.chunk]
		data, ok := files[c.path]
		if !ok {
			data, _ = ix.fsroot.FS().ReadFile(c.path)
			files[c.path] = data
		}
		head := string(lineRange(data, lineStarts(data), int(ch.start), min(int(ch.end), int(ch.start)+7)))
		fmt.Fprintf(&b, "\n[%d] %s:%d-%d %s\n%s", i, c.path, ch.start, ch.end, c.key.seg.str(ch.name), head)
	}
	b.WriteString("\nAnswer with the numbers of the chunks most relevant to the request, most relevant first, as {\"order\": [...]}.")
	var text strings.Builder
	err := svc.opts.Reranker.Chat(ctx, engine.ChatRequest{
		Model: svc.opts.RerankModel,
		Messages: []engine.Message{
			{Role: engine.RoleSystem, Content: "You rank code search results by relevance. Reply with JSON only."},
			{Role: engine.RoleUser, Content: b.String()},
		},
		Options: engine.ChatOptions{Format: rerankSchema, MaxTokens: 200},
	}, func(c engine.ChatChunk) error {
		text.WriteString(c.Text)
		return nil
	})
	if err != nil {
		return err
	}
	var ans struct {
		Order []int `json:"order"`
	}
	raw := strings.TrimSpace(text.String())
	if i := strings.IndexByte(raw, '{'); i > 0 { // tolerate a preamble
		raw = raw[i:]
	}
	if err := json.Unmarshal([]byte(raw), &ans); err != nil {
		return fmt.Errorf("the reranker's answer is not {\"order\": [...]}: %.80q", text.String())
	}
	ordered := make([]*candidate, 0, len(cands))
	used := make([]bool, n)
	for _, i := range ans.Order {
		if i >= 0 && i < n && !used[i] {
			used[i] = true
			ordered = append(ordered, cands[i])
		}
	}
	if len(ordered) == 0 {
		return fmt.Errorf("the reranker named no candidate: %.80q", text.String())
	}
	for i := 0; i < n; i++ {
		if !used[i] {
			ordered = append(ordered, cands[i])
		}
	}
	ordered = append(ordered, cands[n:]...)
	copy(cands, ordered)
	return nil
}

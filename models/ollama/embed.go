package ollama

import (
	"context"

	"github.com/ollama/ollama/api"

	"github.com/plexus-agent/plexus/engine"
)

// Embed embeds req.Inputs in one /api/embed call and returns one vector per
// input, in input order; inputs longer than the model's context are
// truncated by Ollama. No inputs is no call and no vectors. Errors are
// *engine.ModelError (engine.ErrModelNotFound for an unknown model,
// engine.ErrUnsupported where the server says the model cannot embed).
func (p *Provider) Embed(ctx context.Context, req engine.EmbedRequest) (engine.EmbedResponse, error) {
	if req.Model == "" {
		return engine.EmbedResponse{}, invalidf("no model named; give an Ollama embedding model such as nomic-embed-text")
	}
	if len(req.Inputs) == 0 {
		return engine.EmbedResponse{Vectors: [][]float32{}}, nil
	}
	base, client := p.current()
	resp, err := client.Embed(ctx, &api.EmbedRequest{Model: req.Model, Input: req.Inputs})
	if err != nil {
		return engine.EmbedResponse{}, classify(ctx, base, err)
	}
	if len(resp.Embeddings) != len(req.Inputs) {
		return engine.EmbedResponse{}, modelError(nil, "the Ollama server at %s returned %d embeddings for %d inputs", base, len(resp.Embeddings), len(req.Inputs))
	}
	return engine.EmbedResponse{Vectors: resp.Embeddings, PromptTokens: int64(resp.PromptEvalCount)}, nil
}

package ollama

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"

	"github.com/ollama/ollama/api"

	"github.com/plexus-agent/plexus/engine"
)

// showConcurrency bounds the /api/show calls ListModels makes at once.
const showConcurrency = 4

// ListModels lists the server's models (/api/tags) with their capabilities
// and context length (/api/show) and whether they are loaded (/api/ps), in
// the server's order. What /api/show said also refreshes what Chat knows
// of each model. See the package doc for what it does when the server
// does not report capabilities. Errors are *engine.ModelError.
func (p *Provider) ListModels(ctx context.Context) ([]engine.ModelInfo, error) {
	base, client := p.current()
	tags, err := client.List(ctx)
	if err != nil {
		return nil, classify(ctx, base, err)
	}
	loaded := map[string]bool{}
	running, err := client.ListRunning(ctx)
	var status api.StatusError
	switch {
	case errors.As(err, &status) && status.StatusCode == http.StatusNotFound:
		// A server without /api/ps (before 0.1.38): nothing is known loaded.
	case err != nil:
		return nil, classify(ctx, base, err)
	default:
		for _, m := range running.Models {
			for _, name := range []string{m.Name, m.Model} {
				if name != "" {
					loaded[name] = true
				}
			}
		}
	}

	infos := make([]engine.ModelInfo, len(tags.Models))
	keep := make([]bool, len(tags.Models))
	errs := make([]error, len(tags.Models))
	sem := make(chan struct{}, showConcurrency)
	var wg sync.WaitGroup
	for i, m := range tags.Models {
		infos[i] = engine.ModelInfo{
			Name: m.Name, Family: m.Details.Family, ParameterSize: m.Details.ParameterSize,
			SizeBytes: m.Size, Loaded: loaded[m.Name] || (m.Model != "" && loaded[m.Model]),
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			show, err := client.Show(ctx, &api.ShowRequest{Model: m.Name})
			var status api.StatusError
			switch {
			case errors.As(err, &status) && status.StatusCode == http.StatusNotFound:
				return // removed since /api/tags
			case err != nil:
				errs[i] = err
				return
			}
			keep[i] = true
			facts := factsFromShow(show)
			p.facts.put(factsKey{base.String(), m.Name}, facts)
			infos[i].Capabilities = listedCapabilities(facts.capabilities)
			infos[i].ContextLength = int64(facts.contextLength)
			if infos[i].Family == "" {
				infos[i].Family = show.Details.Family
			}
		}()
	}
	wg.Wait()
	out := make([]engine.ModelInfo, 0, len(infos))
	for i := range infos {
		if errs[i] != nil {
			return nil, classify(ctx, base, errs[i])
		}
		if keep[i] {
			out = append(out, infos[i])
		}
	}
	return out, nil
}

// contextLength returns the trained context length from /api/show's
// model_info (<general.architecture>.context_length), or 0.
func contextLength(info map[string]any) int64 {
	arch, _ := info["general.architecture"].(string)
	if n, ok := info[arch+".context_length"].(float64); ok && arch != "" && n > 0 {
		return int64(n)
	}
	return 0
}

// listedCapabilities is what ListModels reports for a model: the server's
// capabilities, plus engine.CapabilityConstrainedTools for a chat model
// without "tools", whose tool calls Chat makes through grammar-constrained
// decoding.
func listedCapabilities(server []string) []string {
	if !slices.Contains(server, engine.CapabilityCompletion) || slices.Contains(server, engine.CapabilityTools) {
		return server
	}
	return append(slices.Clip(server), engine.CapabilityConstrainedTools)
}

package ollama

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ollama/ollama/api"
)

// factsTTL is how long what /api/show said about a model is used before
// Chat asks again. ListModels refreshes every model it lists.
const factsTTL = 5 * time.Minute

// modelFacts is what Chat needs to know about a model.
type modelFacts struct {
	// capabilities as /api/show reports them; nil when the server does not
	// say (before 0.6.4) or could not be asked.
	capabilities []string
	// contextLength is the trained context length in tokens; 0 if unknown.
	contextLength int
	// numCtxParam is the num_ctx of the model's Modelfile; 0 if unset.
	numCtxParam int
	// noTools is set when the server refused tools for the model
	// (`... does not support tools`).
	noTools bool
}

// withoutTools reports whether the model is known not to take tools.
func (f modelFacts) withoutTools() bool {
	return f.noTools || (f.capabilities != nil && !slices.Contains(f.capabilities, "tools"))
}

// factsFromShow reads an /api/show reply.
func factsFromShow(show *api.ShowResponse) modelFacts {
	f := modelFacts{contextLength: int(contextLength(show.ModelInfo))}
	for _, c := range show.Capabilities {
		f.capabilities = append(f.capabilities, string(c))
	}
	for _, line := range strings.Split(show.Parameters, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 2 && fields[0] == "num_ctx" {
			if n, err := strconv.Atoi(fields[1]); err == nil && n > 0 {
				f.numCtxParam = n
			}
		}
	}
	return f
}

// factsKey names a model on a server.
type factsKey struct{ host, model string }

type factsEntry struct {
	facts   modelFacts
	fetched time.Time
}

// factsCache caches modelFacts per (server, model) for factsTTL, and
// remembers the largest automatic num_ctx sent for each (see numCtxFor).
// Its zero value is ready; it is safe for concurrent use.
type factsCache struct {
	mu      sync.Mutex
	now     func() time.Time // nil means time.Now
	entries map[factsKey]factsEntry
	numCtx  map[factsKey]int
}

func (c *factsCache) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// get returns the cached facts of key if they are fresh.
func (c *factsCache) get(key factsKey) (modelFacts, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || c.clock().Sub(e.fetched) >= factsTTL {
		return modelFacts{}, false
	}
	return e.facts, true
}

// put stores fresh facts of key.
func (c *factsCache) put(key factsKey, f modelFacts) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[factsKey]factsEntry{}
	}
	c.entries[key] = factsEntry{facts: f, fetched: c.clock()}
}

// markNoTools records that the server refused tools for key's model; it
// lasts as long as the facts would.
func (c *factsCache) markNoTools(key factsKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[factsKey]factsEntry{}
	}
	e, ok := c.entries[key]
	if !ok {
		e.fetched = c.clock()
	}
	e.facts.noTools = true
	c.entries[key] = e
}

// forget drops what is known of key's model (it was not found).
func (c *factsCache) forget(key factsKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, key)
	delete(c.numCtx, key)
}

// ratchet returns the larger of n and the largest automatic num_ctx sent
// for key before, capped at limit when limit > 0, and remembers it.
func (c *factsCache) ratchet(key factsKey, n, limit int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.numCtx == nil {
		c.numCtx = map[factsKey]int{}
	}
	n = max(n, c.numCtx[key])
	if limit > 0 {
		n = min(n, limit)
	}
	c.numCtx[key] = n
	return n
}

// factsOf returns what is known about model on the server at base,
// asking /api/show when the cache has nothing fresh. A failed /api/show
// gives empty facts (the chat call then reports the model's real error),
// except that a cancelled or expired ctx returns ctx's error.
func (p *Provider) factsOf(ctx context.Context, base *url.URL, client *api.Client, model string) (modelFacts, error) {
	key := factsKey{base.String(), model}
	if f, ok := p.facts.get(key); ok {
		return f, nil
	}
	show, err := client.Show(ctx, &api.ShowRequest{Model: model})
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			return modelFacts{}, err
		}
		return modelFacts{}, nil
	}
	f := factsFromShow(show)
	p.facts.put(key, f)
	return f, nil
}

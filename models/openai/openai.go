// Package openai is a model provider for OpenAI's API and the servers that
// speak it: vLLM, LM Studio, llama.cpp's llama-server, Ollama's /v1
// endpoint and others. It uses github.com/sashabaranov/go-openai.
//
// Settings (plugins.Configurer), each falling back to an environment
// variable when absent or empty:
//
//	base_url  the API root, ending in /v1 for most servers
//	          (default $OPENAI_BASE_URL, else https://api.openai.com/v1;
//	          Ollama: http://127.0.0.1:11434/v1, LM Studio:
//	          http://127.0.0.1:1234/v1, llama-server:
//	          http://127.0.0.1:8080/v1, vLLM: http://127.0.0.1:8000/v1)
//	api_key   the bearer token (default $OPENAI_API_KEY)
//
// Without an API key no Authorization header is sent, which is what local
// servers expect: Ollama, LM Studio, and llama-server or vLLM started
// without --api-key ignore the header or require its absence.
//
// With neither an API key nor a base URL (setting or environment) the
// provider is not configured: every call fails at once with
// engine.ErrNotConfigured, saying what to set, and nothing is contacted,
// so a local tool never reaches api.openai.com unasked.
//
// Chat streams (server-sent events) with stream_options.include_usage and
// reports, in order: text deltas as they come, then each tool call once,
// complete (deltas are joined by their index; a delta with a new id at a
// taken index starts a new call, as some servers send several complete
// calls at index 0), then usage when the server sent it, then the done
// reason: the server's finish_reason ("function_call" reported as
// "tool_calls"; "tool_calls" or "stop" when the server sent none). A
// stream that ends without a finish_reason is an error. Reasoning text
// some servers stream separately (reasoning_content) is not reported.
//
// Options map onto the request: Temperature and TopP (0 is sent as the
// smallest positive float32, because the client library omits zero
// values), Seed, MaxTokens as max_tokens (max_completion_tokens for
// OpenAI's reasoning models, o1/o3/o4/gpt-5, which refuse max_tokens),
// Stop, and Format as response_format: a JSON Schema object becomes
// {"type": "json_schema", "json_schema": {"name": "response", "schema":
// ..., "strict": false}}, the JSON string "json" becomes {"type":
// "json_object"}. NumCtx and KeepAlive have no OpenAI equivalent and are
// ignored. A message with empty content and no tool calls is sent with
// content " ", because the client library omits empty content and servers
// then reject the message.
//
// ListModels lists /models by id. The API does not say what a model can
// do, so Capabilities, ContextLength and the other details are left
// empty. Embed posts to /embeddings, at most 256 inputs per request.
//
// Errors are *engine.ModelError with Provider "openai" and the server's
// own words as Message:
//   - HTTP 404 with an error body, or error code model_not_found:
//     engine.ErrModelNotFound.
//   - HTTP 404 without an error body (the path does not exist):
//     engine.ErrModelUnavailable, with a hint to check the base URL.
//   - HTTP 400 saying tools (or the operation) are not supported, and 501:
//     engine.ErrUnsupported; other 400 and 422: engine.ErrInvalidRequest.
//   - HTTP 401: no Kind; the message says the API key is missing or wrong
//     and how to set it (OPENAI_API_KEY or --openai-api-key).
//   - A server that cannot be reached (connection refused, DNS, TLS),
//     and HTTP 502, 503, 504: engine.ErrModelUnavailable; unreachable
//     servers get a message naming the base URL and how to fix it (start
//     the server, or set OPENAI_BASE_URL or --openai-base-url).
//
// When ctx ends, calls return ctx.Err().
package openai

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"

	oai "github.com/sashabaranov/go-openai"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/plugins"
)

// ProviderName is the provider name in the errors of this package.
const ProviderName = "openai"

// DefaultBaseURL is OpenAI's API root, used when neither the base_url
// setting nor OPENAI_BASE_URL is set.
const DefaultBaseURL = "https://api.openai.com/v1"

// Environment variables giving the defaults of the settings.
const (
	EnvBaseURL = "OPENAI_BASE_URL"
	EnvAPIKey  = "OPENAI_API_KEY"
)

// Provider talks to one OpenAI-compatible server. It implements
// engine.Model and plugins.Configurer and is safe for concurrent use;
// Configure may run while calls are in flight (they finish with the
// settings they started with).
type Provider struct {
	httpClient *http.Client

	mu      sync.RWMutex
	baseURL string
	apiKey  string
	client  *oai.Client
	err     error // invalid base URL from the environment
	// configured: an API key or a base URL was given.
	configured bool
}

var (
	_ engine.Model       = (*Provider)(nil)
	_ plugins.Configurer = (*Provider)(nil)
)

// New returns a Provider configured from OPENAI_BASE_URL (default
// DefaultBaseURL) and OPENAI_API_KEY. An invalid OPENAI_BASE_URL makes
// every call fail with an error saying so, until Configure sets a valid
// base_url.
func New() *Provider {
	p := &Provider{httpClient: &http.Client{}}
	p.err = p.apply(map[string]string{})
	return p
}

// Serve serves a new Provider as a model plugin; call it from main.
func Serve() { plugins.ServeModel(New()) }

// Configure applies the settings "base_url" and "api_key"; an absent or
// empty value means the environment's default (see the package doc).
// Unknown keys and a base_url that is not an absolute http or https URL
// are errors, and leave the previous settings in place.
func (p *Provider) Configure(_ context.Context, settings map[string]string) error {
	for k := range settings {
		if k != "base_url" && k != "api_key" {
			return fmt.Errorf("openai: unknown setting %q; the settings are base_url (for example http://127.0.0.1:11434/v1) and api_key", k)
		}
	}
	return p.apply(settings)
}

func (p *Provider) apply(settings map[string]string) error {
	base := settings["base_url"]
	from := "the base_url setting"
	if base == "" {
		base, from = os.Getenv(EnvBaseURL), EnvBaseURL
	}
	if base == "" {
		base = DefaultBaseURL
	}
	key := settings["api_key"]
	if key == "" {
		key = os.Getenv(EnvAPIKey)
	}
	base = strings.TrimRight(strings.TrimSpace(base), "/")
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("openai: %s is %q, not an http or https URL; give the API root, for example http://127.0.0.1:11434/v1 or %s", from, base, DefaultBaseURL)
	}
	cfg := oai.DefaultConfig(key)
	cfg.BaseURL = base
	cfg.HTTPClient = p.httpClient
	p.mu.Lock()
	p.baseURL, p.apiKey, p.client, p.err = base, key, oai.NewClientWithConfig(cfg), nil
	p.configured = key != "" || from == "the base_url setting" || os.Getenv(EnvBaseURL) != ""
	p.mu.Unlock()
	return nil
}

// errNotConfigured is what every call returns without an API key or a
// base URL.
var errNotConfigured = &engine.ModelError{Provider: ProviderName, Kind: engine.ErrNotConfigured, Message: "not configured: " +
	"set OPENAI_API_KEY (or --openai-api-key) to use " + DefaultBaseURL + ", or OPENAI_BASE_URL (or --openai-base-url) " +
	"for a local OpenAI-compatible server, for example http://127.0.0.1:11434/v1"}

// conn is the settings one call runs with.
type conn struct {
	client  *oai.Client
	baseURL string
	hasKey  bool
}

func (p *Provider) conn() (conn, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.err != nil {
		return conn{}, &engine.ModelError{Provider: ProviderName, Kind: engine.ErrModelUnavailable, Message: strings.TrimPrefix(p.err.Error(), "openai: ")}
	}
	if !p.configured {
		return conn{}, errNotConfigured
	}
	return conn{client: p.client, baseURL: p.baseURL, hasKey: p.apiKey != ""}, nil
}

// ListModels lists the server's models by id, in the server's order, with
// no capabilities (the API does not report them).
func (p *Provider) ListModels(ctx context.Context) ([]engine.ModelInfo, error) {
	c, err := p.conn()
	if err != nil {
		return nil, err
	}
	list, err := c.client.ListModels(ctx)
	if err != nil {
		return nil, c.classify(ctx, "list models", err)
	}
	out := make([]engine.ModelInfo, 0, len(list.Models))
	for _, m := range list.Models {
		out = append(out, engine.ModelInfo{Name: m.ID})
	}
	return out, nil
}

// embedBatch caps the inputs of one /embeddings request.
const embedBatch = 256

// Embed returns one vector per input, in input order, from /embeddings,
// sending at most 256 inputs per request. PromptTokens sums the server's
// counts. No inputs means no request and an empty response.
func (p *Provider) Embed(ctx context.Context, req engine.EmbedRequest) (engine.EmbedResponse, error) {
	out := engine.EmbedResponse{Vectors: make([][]float32, 0, len(req.Inputs))}
	if len(req.Inputs) == 0 {
		return out, nil
	}
	c, err := p.conn()
	if err != nil {
		return engine.EmbedResponse{}, err
	}
	for start := 0; start < len(req.Inputs); start += embedBatch {
		batch := req.Inputs[start:min(start+embedBatch, len(req.Inputs))]
		res, err := c.client.CreateEmbeddings(ctx, oai.EmbeddingRequestStrings{Input: batch, Model: oai.EmbeddingModel(req.Model)})
		if err != nil {
			return engine.EmbedResponse{}, c.classify(ctx, "embed", err)
		}
		vecs := make([][]float32, len(batch))
		for _, d := range res.Data {
			if d.Index < 0 || d.Index >= len(batch) || vecs[d.Index] != nil {
				return engine.EmbedResponse{}, &engine.ModelError{Provider: ProviderName,
					Message: fmt.Sprintf("the server's embeddings are malformed: index %d for a batch of %d inputs", d.Index, len(batch))}
			}
			vecs[d.Index] = d.Embedding
		}
		for i, v := range vecs {
			if v == nil {
				return engine.EmbedResponse{}, &engine.ModelError{Provider: ProviderName,
					Message: fmt.Sprintf("the server returned %d embeddings for %d inputs (none for input %d)", len(res.Data), len(batch), start+i)}
			}
		}
		out.Vectors = append(out.Vectors, vecs...)
		out.PromptTokens += int64(res.Usage.PromptTokens)
	}
	return out, nil
}

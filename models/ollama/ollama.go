// Package ollama is the Ollama model provider: engine.Model over Ollama's
// native HTTP API (/api/chat, /api/embed, /api/tags, /api/show, /api/ps),
// through the github.com/ollama/ollama/api client.
//
// # Settings
//
// Configure takes one key:
//
//   - host: the Ollama server's base URL, with OLLAMA_HOST's syntax
//     ("http://gpu-box:11434", "gpu-box" (port 11434), ":8080",
//     "https://ollama.example.com" (port 443), "ollama.com"). Unset or empty
//     means the OLLAMA_HOST environment variable of the plugin process,
//     and without it http://127.0.0.1:11434.
//
// Any other key is an error, so a misspelt setting does not go unnoticed.
//
// # Models
//
// ListModels lists /api/tags and asks /api/show about each model (up to
// four at a time) for its capabilities ("completion", "tools",
// "embedding", "vision", "insert", "thinking", as the server names them)
// and its trained context length (model_info's <architecture>.context_length).
// Servers older than 0.6.4 report no capabilities; the list then has none
// rather than a guess. A model removed between the two calls is left out.
// Loaded comes from /api/ps.
//
// # Chat
//
// Chat streams /api/chat: each piece of text as it arrives, each tool call
// when Ollama has parsed it (Ollama sends the whole reply at once when
// tools are given), then usage (prompt_eval_count, eval_count) and the done
// reason. A reply with tool calls ends with "tool_calls" where Ollama says
// "stop", as other providers do. Tool calls without an id from Ollama get
// "call_0", "call_1", ... in reply order. Text a thinking model marks as
// thinking is not forwarded.
//
// Messages map one to one. A tool message's tool_name is its ToolName or,
// when empty, the name of the assistant tool call its ToolCallID answers.
// Options map to temperature, top_p, seed, num_predict (MaxTokens), num_ctx
// (NumCtx) and stop; KeepAlive to keep_alive (negative keeps the model
// loaded indefinitely); Format, a JSON Schema or "json", to format.
//
// Tool input schemas are converted into Ollama's tool parameter type:
// properties (nested objects keep their properties), required (top level),
// type (one or a list), description, enum, anyOf, items (kept whole, so
// arrays of objects survive with every keyword) and $defs. Local "$ref"s
// ("#/$defs/x", "#/definitions/x") are inlined first, oneOf becomes anyOf
// and const a one-value enum. Keywords Ollama's type has no field for
// (required of nested objects, additionalProperties, bounds, patterns,
// defaults) are dropped there, as they would be by Ollama itself.
//
// # Errors
//
// Every error is a *engine.ModelError with Provider "ollama" whose Message
// is Ollama's own words, classified by Kind:
//
//   - engine.ErrModelNotFound: HTTP 404 naming the model
//     (`model "x" not found, try pulling it first`).
//   - engine.ErrUnsupported: `... does not support tools` (or chat,
//     embeddings, ...).
//   - engine.ErrModelUnavailable: no server at the host (the message names
//     the address and how to fix it), a connection cut during the call, or
//     HTTP 503 (server busy).
//   - engine.ErrInvalidRequest: other HTTP 400s, and requests this package
//     cannot translate (an unknown role, tool arguments that are not an
//     object, a schema that is not JSON).
//   - nil: anything else, with the message verbatim.
//
// Cancelling ctx returns an error matching ctx.Err() with errors.Is, and an
// error returned by Chat's onChunk is returned as it is.
package ollama

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"

	"github.com/ollama/ollama/api"
	"github.com/ollama/ollama/envconfig"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/plugins"
)

// ProviderName is the provider name in the errors this package returns.
const ProviderName = "ollama"

// SettingHost is the settings key of the server's base URL.
const SettingHost = "host"

var (
	_ engine.Model       = (*Provider)(nil)
	_ plugins.Configurer = (*Provider)(nil)
)

// Provider is engine.Model over one Ollama server. It is safe for
// concurrent use, Configure included (calls in flight keep the server they
// started with).
type Provider struct {
	mu     sync.RWMutex
	base   *url.URL
	client *api.Client
	facts  factsCache // per (server, model)
}

// New returns a Provider for the server OLLAMA_HOST names, or
// http://127.0.0.1:11434 when it is unset. It does not contact the server.
func New() *Provider {
	p := &Provider{}
	p.use(envconfig.Host())
	return p
}

// Serve serves a Provider as a Plexus model plugin; call it from main.
func Serve() { plugins.ServeModel(New()) }

// Configure applies settings (see the package doc), replacing earlier ones:
// a key absent now is back to its default. It returns an error naming the
// key for an unknown key or an unusable host, and then changes nothing.
func (p *Provider) Configure(_ context.Context, settings map[string]string) error {
	base := envconfig.Host()
	for _, k := range sortedKeys(settings) {
		v := settings[k]
		switch k {
		case SettingHost:
			if strings.TrimSpace(v) == "" {
				continue
			}
			u, err := ParseHost(v)
			if err != nil {
				return fmt.Errorf("ollama setting %s: %w", SettingHost, err)
			}
			base = u
		default:
			return fmt.Errorf("ollama: unknown setting %q (the ollama provider takes: %s)", k, SettingHost)
		}
	}
	p.use(base)
	return nil
}

// Host returns the base URL of the server p talks to.
func (p *Provider) Host() string {
	base, _ := p.current()
	return base.String()
}

func (p *Provider) use(base *url.URL) {
	client := api.NewClient(base, &http.Client{})
	p.mu.Lock()
	p.base, p.client = base, client
	p.mu.Unlock()
}

func (p *Provider) current() (*url.URL, *api.Client) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.base, p.client
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

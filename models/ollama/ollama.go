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
// A chat model without "tools" is listed with "constrained_tools" as well
// (engine.CapabilityConstrainedTools): Chat makes its tool calls through
// constrained decoding, so turns can use it.
// Servers older than 0.6.4 report no capabilities; the list then has none
// rather than a guess. A model removed between the two calls is left out.
// Loaded comes from /api/ps.
//
// # Chat
//
// Chat streams /api/chat: each piece of text as it arrives, each tool call
// when Ollama has parsed it (Ollama sends the whole reply at once when
// tools are given), then usage (prompt_eval_count, eval_count; summed when
// a reply took two calls, see below) and the done reason. A reply with
// tool calls ends with "tool_calls" where Ollama says "stop", as other
// providers do. Tool calls without an id from Ollama get "call_0",
// "call_1", ... in reply order. Text a thinking model marks as thinking is
// not forwarded.
//
// Messages map one to one. A tool message's tool_name is its ToolName or,
// when empty, the name of the assistant tool call its ToolCallID answers.
// Options map to temperature, top_p, seed, num_predict (MaxTokens), num_ctx
// (see below) and stop; KeepAlive to keep_alive (negative keeps the model
// loaded indefinitely); Format, a JSON Schema or "json", to format.
//
// # What Chat knows of a model
//
// Chat asks /api/show about a model the first time it is used and keeps
// its capabilities, trained context length and Modelfile num_ctx per
// (server, model) for five minutes; ListModels refreshes every model it
// lists, a "does not support tools" answer marks the model as without
// tools, and "model not found" forgets it. A failed /api/show is not
// cached: the chat call goes ahead and reports the model's own error.
//
// # Tool calling without native tools
//
// A model whose capabilities lack "tools" (its template has no .Tools) is
// not sent tools. Chat describes them in the system message instead (name,
// description, argument schema; appended to the first system message, or
// a new one) with the reply format, and sends as format a JSON Schema that
// admits exactly one tool call or an answer:
//
//	{"anyOf": [
//	  {"type": "object", "required": ["name", "arguments"], "properties": {
//	    "name": {"const": "<tool>"}, "arguments": <the tool's argument schema>}},
//	  ... one branch per tool ...,
//	  {"type": "object", "required": ["answer"], "properties": {"answer": {"type": "string"}}}]}
//
// Ollama turns it into a llama.cpp grammar, so even a model that never
// learnt tool calling writes a call of an offered tool whose arguments
// match its schema. The argument schemas keep what the grammar enforces
// (type, properties, required, items, enum, const, anyOf/oneOf, local
// $refs inlined, additionalProperties, min/maxItems, min/maxLength,
// integer bounds); pattern, format and the like are dropped, since
// llama.cpp fails on some of them, and a property without constraints
// admits any value. A schema over 6 KB (Ollama 0.6.5 cuts grammars at
// 32 KB), or one the server cannot compile ("invalid JSON schema"), is
// replaced by a single branch with "name" an enum of the tools and
// "arguments" any object. The reply is held until it is complete: a call
// becomes a ToolCall chunk ("call_0", done reason "tool_calls"), an answer
// becomes its text with Ollama's done reason, and anything else (a reply
// cut short by num_predict) is forwarded as the text it is. A caller's own
// Format is sent instead of the schema, and the reply is parsed the same
// way.
//
// Earlier turns are rendered for such a template, which has no .ToolCalls:
// an assistant's tool calls become its content, {"name": ..., "arguments":
// ...} per line as the model would write them, and a tool result becomes
// a user message "Result of tool NAME (call ID):\n...".
//
// A server that reports no capabilities (before 0.6.4) is sent tools; when
// it answers HTTP 400 "... does not support tools" the call is made again
// this way, and the model is remembered as without tools.
//
// # Tool calls written as text
//
// When a model offered tools replies without native tool calls, Chat
// parses its text for calls written as text, in these formats:
//
//   - <tool_call>{"name": ..., "arguments": {...}}</tool_call>, repeated
//     for several calls, the last closing tag optional (Qwen, Hermes);
//   - a whole reply that is one object {"name": ..., "arguments": {...}}
//     ("parameters" for "arguments", arguments as a JSON string holding an
//     object, and "id" and "type" keys are accepted) or an array of them,
//     bare or in one ``` or ```json fence;
//   - [TOOL_CALLS][{...}, ...] and [TOOL_CALLS]NAME[ARGS]{...} (Mistral);
//   - <function=NAME>{...}</function> (Llama 3.1);
//   - <|python_tag|>{"name": ..., "parameters": {...}}, several separated
//     by ";" (Llama 3.1 and 3.2; Python-syntax calls are not parsed).
//
// A parsed call must name an offered tool and have an object as
// arguments; the markers (<tool_call>, [TOOL_CALLS], <function=,
// <|python_tag|>) may follow ordinary text, which is forwarded as text,
// but a bare or fenced object counts only as the whole reply, so an answer
// that merely contains JSON stays text. While the reply streams, text is
// held back only as long as it may still be such a call: a reply that
// starts with "{", "[{", a ``` fence of those info strings or a marker is
// held to its end, and other text streams except from a marker on (and a
// tail that may begin one). A reply that is written as a call but cannot
// be parsed (an unknown tool, broken JSON, arguments that are not an
// object), of which nothing was forwarded, is asked again once without
// tools as above; otherwise it is forwarded as text.
//
// # Context size
//
// With ChatOptions.NumCtx 0, num_ctx is sized from the request: its
// messages and tool definitions as JSON, at 3 bytes a token (English prose
// runs about 4 bytes a token; code and JSON run denser, and estimating low
// would let Ollama silently drop the oldest messages), plus MaxTokens or
// 1024 tokens for the reply. That is rounded up to a power-of-two multiple
// of the floor, 8192 tokens or the model's own Modelfile num_ctx, and
// capped at the model's trained context length. Per (server, model) it
// never shrinks below the largest automatic size sent before, since Ollama
// reloads a model whose num_ctx changes. An explicit NumCtx is sent as it
// is, capped at the trained context length when that is known.
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
//   - engine.ErrUnsupported: `... does not support chat` (or embeddings,
//     ...; a refusal of tools is not an error, see above).
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

package ollama

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/internal/ollamatest"
)

// validArgs checks that args is valid against the input schema of the
// tool named name among tools, with a real JSON Schema validator.
func validArgs(t *testing.T, tools []engine.ToolSpec, name string, args json.RawMessage) {
	t.Helper()
	i := slices.IndexFunc(tools, func(s engine.ToolSpec) bool { return s.Name == name })
	if i < 0 {
		t.Fatalf("tool call of %q, which was not offered", name)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(tools[i].InputSchema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("tool.json", doc); err != nil {
		t.Fatal(err)
	}
	schema, err := c.Compile("tool.json")
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		t.Fatalf("arguments %s are not JSON: %v", args, err)
	}
	if _, ok := inst.(map[string]any); !ok {
		t.Errorf("arguments %s are not an object", args)
	}
	if err := schema.Validate(inst); err != nil {
		t.Errorf("arguments %s of %s do not match its schema: %v", args, name, err)
	}
}

// TestConstrainedToolCall is the done-when test of constrained tool
// calling: a model whose template has no tools, given two tools, calls one
// of them with valid arguments, through the real server's grammar.
func TestConstrainedToolCall(t *testing.T) {
	p, srv := provider(t)
	models, err := p.ListModels(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(models, func(m engine.ModelInfo) bool { return m.Name == srv.ChatModel })
	if i < 0 || models[i].HasCapability("tools") || !models[i].HasCapability("completion") || !models[i].HasCapability("constrained_tools") {
		t.Fatalf("%s is not listed with completion and constrained_tools, without tools: %+v", srv.ChatModel, models)
	}

	chunks, err := collect(t, p, engine.ChatRequest{
		Model:    srv.ChatModel,
		Messages: []engine.Message{{Role: engine.RoleUser, Content: "What is the weather in Paris?"}},
		Tools:    weatherTools,
		Options:  greedy(96),
	})
	if err != nil {
		t.Fatal(err)
	}
	r := summarize(t, chunks)
	if len(r.calls) != 1 || len(r.deltas) != 0 {
		t.Fatalf("tool calls %+v and text %q, want one call and no text", r.calls, r.deltas)
	}
	call := r.calls[0]
	validArgs(t, weatherTools, call.Name, call.Args)
	if call.ID != "call_0" || r.done != "tool_calls" {
		t.Errorf("call id %s, done %q; want call_0, tool_calls", call.ID, r.done)
	}
	t.Logf("constrained call: %s %s (usage %+v)", call.Name, call.Args, r.usage)
}

// TestConstrainedAfterRefusal plays a server that reports no capabilities
// (before 0.6.4): the provider sends tools, the server refuses them with
// `does not support tools`, and the call is made again constrained.
func TestConstrainedAfterRefusal(t *testing.T) {
	p, srv := provider(t)
	key := factsKey{p.Host(), srv.ChatModel}
	p.facts.put(key, modelFacts{contextLength: ollamatest.ContextLength}) // capabilities unknown
	chunks, err := collect(t, p, engine.ChatRequest{
		Model:    srv.ChatModel,
		Messages: []engine.Message{{Role: engine.RoleUser, Content: "Plan a trip to Rome."}},
		Tools:    weatherTools,
		Options:  greedy(96),
	})
	if err != nil {
		t.Fatal(err)
	}
	r := summarize(t, chunks)
	if len(r.calls) != 1 || r.done != "tool_calls" {
		t.Fatalf("tool calls %+v, text %q, done %q; want one call, tool_calls", r.calls, r.deltas, r.done)
	}
	validArgs(t, weatherTools, r.calls[0].Name, r.calls[0].Args)
	if f, ok := p.facts.get(key); !ok || !f.noTools {
		t.Errorf("facts after the refusal: %+v, %v; want noTools", f, ok)
	}
}

// TestNumCtxReachesServer observes num_ctx through the real server's
// prompt truncation: Ollama drops the oldest messages that do not fit
// num_ctx, and the tiny models count one prompt token per byte.
func TestNumCtxReachesServer(t *testing.T) {
	p, srv := provider(t)
	conversation := func(padding int) []engine.Message {
		return []engine.Message{
			{Role: engine.RoleUser, Content: strings.Repeat("a", padding)},
			{Role: engine.RoleAssistant, Content: "ok"},
			{Role: engine.RoleUser, Content: "hi"},
		}
	}
	for _, tc := range []struct {
		name     string
		padding  int
		numCtx   int
		wantKept bool // the padded message reached the prompt
	}{
		// Automatic: the floor, capped at the model's 4096 tokens.
		{"automatic fits", 3000, 0, true},
		// Ollama 0.6.5's own default would drop it.
		{"explicit 2048 drops", 3000, 2048, false},
		// Capped at 4096 either way; 16384 uncapped would keep it.
		{"automatic capped", 5000, 0, false},
		{"explicit capped", 5000, 16384, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := greedy(4)
			opts.NumCtx = tc.numCtx
			chunks, err := collect(t, p, engine.ChatRequest{Model: srv.ChatModel, Messages: conversation(tc.padding), Options: opts})
			if err != nil {
				t.Fatal(err)
			}
			r := summarize(t, chunks)
			if kept := r.usage.PromptTokens > int64(tc.padding); kept != tc.wantKept {
				t.Errorf("prompt tokens %d with a %d-byte message: kept %v, want %v", r.usage.PromptTokens, tc.padding, kept, tc.wantKept)
			}
		})
	}
	if ollamatest.ContextLength != 4096 {
		t.Fatalf("the cases assume a context length of 4096, not %d", ollamatest.ContextLength)
	}
}

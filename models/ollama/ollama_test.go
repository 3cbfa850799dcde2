package ollama

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/internal/ollamatest"
)

// These tests run against a real Ollama server with tiny generated models
// (see internal/ollamatest); they skip when the ollama binary is missing,
// unless PLEXUS_REQUIRE_OLLAMA=1.

func TestMain(m *testing.M) { ollamatest.Main(m) }

// provider returns a Provider configured for the shared test server.
func provider(t *testing.T) (*Provider, *ollamatest.Server) {
	t.Helper()
	srv := ollamatest.Shared(t)
	p := New()
	if err := p.Configure(context.Background(), map[string]string{SettingHost: srv.URL}); err != nil {
		t.Fatal(err)
	}
	return p, srv
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func ptr[T any](v T) *T { return &v }

// greedy returns options that make the tiny models write
// ollamatest.Reply; tests always cap the reply length.
func greedy(maxTokens int) engine.ChatOptions {
	return engine.ChatOptions{Temperature: ptr(0.0), Seed: ptr(int64(1)), MaxTokens: maxTokens}
}

// collect runs Chat and returns every chunk.
func collect(t *testing.T, p *Provider, req engine.ChatRequest) ([]engine.ChatChunk, error) {
	t.Helper()
	var chunks []engine.ChatChunk
	err := p.Chat(testContext(t), req, func(c engine.ChatChunk) error {
		chunks = append(chunks, c)
		return nil
	})
	return chunks, err
}

// reply sums up a chunk sequence, checking its shape: text and tool calls,
// then exactly one usage, then exactly one done reason, last.
type reply struct {
	deltas []string
	calls  []engine.ToolCall
	usage  engine.Usage
	done   string
}

func summarize(t *testing.T, chunks []engine.ChatChunk) reply {
	t.Helper()
	var r reply
	usages := 0
	for i, c := range chunks {
		if r.done != "" {
			t.Fatalf("chunk %d (%+v) after the done reason", i, c)
		}
		switch {
		case c.Text != "":
			if usages > 0 {
				t.Errorf("text %q after usage", c.Text)
			}
			r.deltas = append(r.deltas, c.Text)
		case c.ToolCall != nil:
			if usages > 0 {
				t.Errorf("tool call %+v after usage", *c.ToolCall)
			}
			r.calls = append(r.calls, *c.ToolCall)
		case c.Usage != nil:
			usages++
			r.usage = *c.Usage
		case c.DoneReason != "":
			r.done = c.DoneReason
		default:
			t.Errorf("chunk %d is empty", i)
		}
	}
	if usages != 1 || r.done == "" {
		t.Fatalf("%d usage chunks and done reason %q, want one usage and a done reason, last: %+v", usages, r.done, chunks)
	}
	return r
}

func TestListModels(t *testing.T) {
	p, srv := provider(t)
	// Load the tools model so that Loaded has something to report.
	if _, err := collect(t, p, engine.ChatRequest{Model: srv.ToolsModel,
		Messages: []engine.Message{{Role: engine.RoleUser, Content: "hi"}}, Options: greedy(4)}); err != nil {
		t.Fatal(err)
	}
	models, err := p.ListModels(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]engine.ModelInfo{}
	for _, m := range models {
		byName[m.Name] = m
	}
	for _, tc := range []struct {
		name string
		want []string
	}{
		{srv.ToolsModel, []string{"completion", "tools"}},
		{srv.ChatModel, []string{"completion", "constrained_tools"}},
		{srv.EmbedModel, []string{"embedding"}},
	} {
		m, ok := byName[tc.name]
		if !ok {
			t.Errorf("%s is not listed: %+v", tc.name, models)
			continue
		}
		got := slices.Sorted(slices.Values(m.Capabilities))
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: capabilities %v, want %v", tc.name, got, tc.want)
		}
		if m.ContextLength != ollamatest.ContextLength || m.Family != "llama" || m.ParameterSize == "" || m.SizeBytes <= 0 {
			t.Errorf("%s: context %d, family %q, parameter size %q, size %d; want %d, llama, set, > 0",
				tc.name, m.ContextLength, m.Family, m.ParameterSize, m.SizeBytes, ollamatest.ContextLength)
		}
	}
	if !byName[srv.ToolsModel].Loaded {
		t.Errorf("%s is not Loaded right after a chat", srv.ToolsModel)
	}
}

func TestChatStreams(t *testing.T) {
	p, srv := provider(t)
	for _, tc := range []struct {
		name     string
		opts     engine.ChatOptions
		wantText string
		wantDone string
		wantEval int64 // 0: any
	}{
		{"to the end", greedy(32), ollamatest.Reply, "stop", 0},
		{"num_predict", greedy(3), " Hello from the", "length", 3},
		{"stop", func() engine.ChatOptions { o := greedy(32); o.Stop = []string{" tiny"}; return o }(), " Hello from the", "stop", 0},
		{"keep_alive and num_ctx", func() engine.ChatOptions {
			o := greedy(32)
			o.KeepAlive, o.NumCtx, o.TopP = 10*time.Minute, 1024, ptr(0.9)
			return o
		}(), ollamatest.Reply, "stop", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chunks, err := collect(t, p, engine.ChatRequest{
				Model: srv.ChatModel,
				Messages: []engine.Message{
					{Role: engine.RoleSystem, Content: "You are terse."},
					{Role: engine.RoleUser, Content: "Say hello."},
				},
				Options: tc.opts,
			})
			if err != nil {
				t.Fatal(err)
			}
			r := summarize(t, chunks)
			if got := strings.Join(r.deltas, ""); got != tc.wantText || r.done != tc.wantDone {
				t.Errorf("reply %q, done %q; want %q, %q", got, r.done, tc.wantText, tc.wantDone)
			}
			if len(r.deltas) < 2 {
				t.Errorf("text came in %d pieces %q; want it streamed", len(r.deltas), r.deltas)
			}
			if r.usage.PromptTokens <= 0 || r.usage.CompletionTokens <= 0 {
				t.Errorf("usage %+v, want both counts", r.usage)
			}
			if tc.wantEval != 0 && r.usage.CompletionTokens != tc.wantEval {
				t.Errorf("completion tokens %d, want %d", r.usage.CompletionTokens, tc.wantEval)
			}
		})
	}
}

// weatherTools are the tools of the tool tests: one flat, one with a
// nested schema (an array of objects), which the server must accept.
var weatherTools = []engine.ToolSpec{
	{Name: "get_weather", Description: "Current weather in a city",
		InputSchema: json.RawMessage(`{"type":"object","required":["city"],"properties":{"city":{"type":"string","description":"City name"}}}`)},
	{Name: "plan_trip", Description: "Plan a trip through several stops",
		InputSchema: json.RawMessage(`{"type":"object","required":["stops"],"properties":{
			"stops":{"type":"array","description":"Stops in order","items":{"type":"object","required":["city"],
				"properties":{"city":{"type":"string"},"nights":{"type":"integer","minimum":1}}}},
			"mode":{"type":"string","enum":["train","car"]}}}`)},
}

func TestChatToolCall(t *testing.T) {
	p, srv := provider(t)
	opts := greedy(96)
	opts.Format = ollamatest.ToolCallFormat(weatherTools[0].InputSchema, "get_weather")
	chunks, err := collect(t, p, engine.ChatRequest{
		Model:    srv.ToolsModel,
		Messages: []engine.Message{{Role: engine.RoleUser, Content: "What is the weather in Paris?"}},
		Tools:    weatherTools,
		Options:  opts,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := summarize(t, chunks)
	if len(r.calls) != 1 {
		t.Fatalf("tool calls %+v (text %q), want one", r.calls, r.deltas)
	}
	call := r.calls[0]
	var args struct {
		City *string `json:"city"`
	}
	if err := json.Unmarshal(call.Args, &args); err != nil || args.City == nil {
		t.Errorf("arguments %s (%v), want an object with a city string", call.Args, err)
	}
	if call.Name != "get_weather" || call.ID != "call_0" || r.done != "tool_calls" {
		t.Errorf("call %s id %s, done %q; want get_weather, call_0, tool_calls", call.Name, call.ID, r.done)
	}
}

// TestChatToolResults sends an assistant tool call and its result back and
// checks, through prompt token counts (one token per ASCII byte, see
// ollamatest), that both reached the model's prompt.
func TestChatToolResults(t *testing.T) {
	p, srv := provider(t)
	conversation := func(city, result string) []engine.Message {
		return []engine.Message{
			{Role: engine.RoleUser, Content: "What is the weather in Paris?"},
			{Role: engine.RoleAssistant, ToolCalls: []engine.ToolCall{
				{ID: "call_9", Name: "get_weather", Args: json.RawMessage(fmt.Sprintf(`{"city":%q}`, city))}}},
			// No ToolName: the provider finds it from call_9.
			{Role: engine.RoleTool, ToolCallID: "call_9", Content: result},
		}
	}
	promptTokens := func(msgs []engine.Message) int64 {
		t.Helper()
		chunks, err := collect(t, p, engine.ChatRequest{Model: srv.ToolsModel, Messages: msgs, Tools: weatherTools[:1], Options: greedy(32)})
		if err != nil {
			t.Fatal(err)
		}
		r := summarize(t, chunks)
		if got := strings.Join(r.deltas, ""); got != ollamatest.Reply || r.done != "stop" {
			t.Errorf("reply %q, done %q; want %q, stop", got, r.done, ollamatest.Reply)
		}
		return r.usage.PromptTokens
	}
	base := promptTokens(conversation("Rome", `{"temp_c":21}`))
	if got := promptTokens(conversation("Paris", `{"temp_c":21}`)); got-base != 1 {
		t.Errorf("arguments Paris instead of Rome: prompt grew by %d tokens, want 1", got-base)
	}
	if got := promptTokens(conversation("Rome", `{"temp_c":21,"sky":"clear"}`)); got-base != int64(len(`,"sky":"clear"`)) {
		t.Errorf("longer tool result: prompt grew by %d tokens, want %d", got-base, len(`,"sky":"clear"`))
	}
}

func TestChatReturnsCallbackError(t *testing.T) {
	p, srv := provider(t)
	stop := errors.New("seen enough")
	n := 0
	err := p.Chat(testContext(t), engine.ChatRequest{Model: srv.ChatModel,
		Messages: []engine.Message{{Role: engine.RoleUser, Content: "hi"}}, Options: greedy(32)},
		func(engine.ChatChunk) error { n++; return stop })
	if err != stop || n != 1 {
		t.Errorf("Chat = %v after %d chunks, want the callback's error after 1", err, n)
	}
}

func TestChatCancelled(t *testing.T) {
	p, srv := provider(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := p.Chat(ctx, engine.ChatRequest{Model: srv.ChatModel,
		Messages: []engine.Message{{Role: engine.RoleUser, Content: "hi"}}, Options: greedy(8)},
		func(engine.ChatChunk) error { return nil })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Chat with a cancelled context = %v, want context.Canceled", err)
	}
}

func TestEmbed(t *testing.T) {
	p, srv := provider(t)
	inputs := []string{"alpha", "a longer text about beta", "gamma, delta and epsilon"}
	for _, model := range []string{srv.EmbedModel, srv.ToolsModel} {
		t.Run(model, func(t *testing.T) {
			resp, err := p.Embed(testContext(t), engine.EmbedRequest{Model: model, Inputs: inputs})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Vectors) != len(inputs) {
				t.Fatalf("%d vectors for %d inputs", len(resp.Vectors), len(inputs))
			}
			for i, v := range resp.Vectors {
				if len(v) != ollamatest.EmbeddingLength {
					t.Errorf("vector %d has %d floats, want %d", i, len(v), ollamatest.EmbeddingLength)
				}
			}
			if slices.Equal(resp.Vectors[0], resp.Vectors[1]) {
				t.Errorf("different inputs got the same vector")
			}
			if resp.PromptTokens <= 0 {
				t.Errorf("prompt tokens %d, want > 0", resp.PromptTokens)
			}
		})
	}
	resp, err := p.Embed(testContext(t), engine.EmbedRequest{Model: srv.EmbedModel})
	if err != nil || len(resp.Vectors) != 0 {
		t.Errorf("no inputs: %d vectors, %v; want none, no error", len(resp.Vectors), err)
	}
}

// wantModelError checks err's kind and provider, and that its message is
// Ollama's own (contains every part of want).
func wantModelError(t *testing.T, err error, kind error, want ...string) {
	t.Helper()
	var me *engine.ModelError
	if !errors.As(err, &me) {
		t.Fatalf("error %v (%T), want *engine.ModelError", err, err)
	}
	if !errors.Is(err, kind) || me.Provider != ProviderName {
		t.Errorf("error %q: kind %v, provider %q; want %v, %q", me.Message, me.Kind, me.Provider, kind, ProviderName)
	}
	for _, w := range want {
		if !strings.Contains(me.Message, w) {
			t.Errorf("message %q does not contain %q", me.Message, w)
		}
	}
}

func TestErrors(t *testing.T) {
	p, srv := provider(t)
	user := []engine.Message{{Role: engine.RoleUser, Content: "hi"}}
	nop := func(engine.ChatChunk) error { return nil }

	t.Run("unknown model", func(t *testing.T) {
		err := p.Chat(testContext(t), engine.ChatRequest{Model: "no-such-model", Messages: user, Options: greedy(8)}, nop)
		wantModelError(t, err, engine.ErrModelNotFound, `model "no-such-model" not found, try pulling it first`)
		_, err = p.Embed(testContext(t), engine.EmbedRequest{Model: "no-such-model", Inputs: []string{"x"}})
		wantModelError(t, err, engine.ErrModelNotFound, "no-such-model", "not found")
	})
	t.Run("chat unsupported", func(t *testing.T) {
		err := p.Chat(testContext(t), engine.ChatRequest{Model: srv.EmbedModel, Messages: user, Options: greedy(8)}, nop)
		wantModelError(t, err, engine.ErrUnsupported, "plexus-embed", "does not support")
	})
	t.Run("invalid format", func(t *testing.T) {
		opts := greedy(8)
		opts.Format = json.RawMessage(`{"type":`)
		err := p.Chat(testContext(t), engine.ChatRequest{Model: srv.ChatModel, Messages: user, Options: opts}, nop)
		wantModelError(t, err, engine.ErrInvalidRequest, "format is not JSON")
	})
}

func TestUnreachableServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	p := New()
	if err := p.Configure(context.Background(), map[string]string{SettingHost: addr}); err != nil {
		t.Fatal(err)
	}
	want := []string{"no Ollama server is reachable at http://" + addr, "connection refused", `"ollama serve"`, "OLLAMA_HOST"}

	_, err = p.ListModels(testContext(t))
	wantModelError(t, err, engine.ErrModelUnavailable, want...)
	err = p.Chat(testContext(t), engine.ChatRequest{Model: "m", Messages: []engine.Message{{Role: engine.RoleUser, Content: "hi"}},
		Options: greedy(8)}, func(engine.ChatChunk) error { return nil })
	wantModelError(t, err, engine.ErrModelUnavailable, want...)
	_, err = p.Embed(testContext(t), engine.EmbedRequest{Model: "m", Inputs: []string{"x"}})
	wantModelError(t, err, engine.ErrModelUnavailable, want...)
}

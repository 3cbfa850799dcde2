package openai

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/internal/ollamatest"
)

// These tests run against a real Ollama server's OpenAI-compatible /v1
// endpoint (internal/ollamatest), with tiny generated models.

func TestMain(m *testing.M) { ollamatest.Main(m) }

// ollamaProvider returns a Provider for the shared Ollama server's /v1.
func ollamaProvider(t *testing.T) (*Provider, *ollamatest.Server) {
	t.Helper()
	srv := ollamatest.Shared(t)
	t.Setenv(EnvAPIKey, "")
	p := New()
	if err := p.Configure(t.Context(), map[string]string{"base_url": srv.URL + "/v1"}); err != nil {
		t.Fatal(err)
	}
	return p, srv
}

// capped returns options that keep test replies short and repeatable.
func capped(maxTokens int) engine.ChatOptions {
	zero := 0.0
	seed := int64(7)
	return engine.ChatOptions{MaxTokens: maxTokens, Temperature: &zero, Seed: &seed}
}

// collect runs Chat and returns its chunks.
func collect(t *testing.T, p engine.Model, req engine.ChatRequest) ([]engine.ChatChunk, error) {
	t.Helper()
	var chunks []engine.ChatChunk
	err := p.Chat(t.Context(), req, func(c engine.ChatChunk) error {
		chunks = append(chunks, c)
		return nil
	})
	return chunks, err
}

// reply is a stream summed up; summarize checks the order text*, tool
// calls*, usage?, done.
type reply struct {
	text      string
	textParts int
	calls     []engine.ToolCall
	usage     *engine.Usage
	done      string
}

func summarize(t *testing.T, chunks []engine.ChatChunk) reply {
	t.Helper()
	var r reply
	stage := 0
	for i, c := range chunks {
		next := 0
		switch {
		case c.Text != "":
			r.text += c.Text
			r.textParts++
		case c.ToolCall != nil:
			next = 1
			r.calls = append(r.calls, *c.ToolCall)
		case c.Usage != nil:
			next = 2
			r.usage = c.Usage
		case c.DoneReason != "":
			next = 3
			r.done = c.DoneReason
			if i != len(chunks)-1 {
				t.Errorf("chunks after the done reason: %+v", chunks[i+1:])
			}
		default:
			t.Errorf("chunk %d is empty", i)
		}
		if next < stage {
			t.Errorf("chunk %d (%+v) out of order", i, c)
		}
		stage = max(stage, next)
	}
	if r.done == "" {
		t.Error("no done reason")
	}
	return r
}

func user(s string) engine.Message { return engine.Message{Role: engine.RoleUser, Content: s} }

func TestOllamaListModels(t *testing.T) {
	p, srv := ollamaProvider(t)
	models, err := p.ListModels(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range models {
		names = append(names, m.Name)
		if len(m.Capabilities) != 0 {
			t.Errorf("%s: capabilities %v, want none (the API does not say)", m.Name, m.Capabilities)
		}
	}
	for _, want := range []string{srv.ToolsModel, srv.ChatModel, srv.EmbedModel} {
		if !slices.Contains(names, want) {
			t.Errorf("models %v lack %s", names, want)
		}
	}
}

func TestOllamaChatStreams(t *testing.T) {
	p, srv := ollamaProvider(t)
	chunks, err := collect(t, p, engine.ChatRequest{
		Model:    srv.ChatModel,
		Messages: []engine.Message{{Role: engine.RoleSystem, Content: "Be brief."}, user("Say hello.")},
		Options:  capped(32),
	})
	if err != nil {
		t.Fatal(err)
	}
	r := summarize(t, chunks)
	if r.text != ollamatest.Reply {
		t.Errorf("text = %q, want %q", r.text, ollamatest.Reply)
	}
	if r.textParts < 2 {
		t.Errorf("text came in %d chunk(s), want it streamed in several", r.textParts)
	}
	if r.usage == nil || r.usage.PromptTokens == 0 || r.usage.CompletionTokens == 0 {
		t.Errorf("usage = %+v, want both counts", r.usage)
	}
	if r.done != "stop" {
		t.Errorf("done = %q, want stop", r.done)
	}
}

func TestOllamaChatStopsAtMaxTokens(t *testing.T) {
	p, srv := ollamaProvider(t)
	chunks, err := collect(t, p, engine.ChatRequest{Model: srv.ChatModel, Messages: []engine.Message{user("Say hello.")}, Options: capped(2)})
	if err != nil {
		t.Fatal(err)
	}
	r := summarize(t, chunks)
	if r.done != "length" || r.usage == nil || r.usage.CompletionTokens != 2 {
		t.Errorf("done = %q, usage = %+v; want length after 2 tokens", r.done, r.usage)
	}
	if !strings.HasPrefix(ollamatest.Reply, r.text) || r.text == ollamatest.Reply {
		t.Errorf("text = %q, want a proper prefix of %q", r.text, ollamatest.Reply)
	}
}

func TestOllamaChatFormat(t *testing.T) {
	p, srv := ollamaProvider(t)
	opts := capped(64)
	opts.Format = json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}`)
	chunks, err := collect(t, p, engine.ChatRequest{Model: srv.ChatModel, Messages: []engine.Message{user("Answer in JSON.")}, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	r := summarize(t, chunks)
	var v struct {
		Answer *string `json:"answer"`
	}
	if err := json.Unmarshal([]byte(r.text), &v); err != nil || v.Answer == nil {
		t.Errorf("reply %q does not match the schema: %v", r.text, err)
	}
}

var weatherTool = engine.ToolSpec{
	Name:        "get_weather",
	Description: "Current weather in a city.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
}

func TestOllamaToolCalls(t *testing.T) {
	p, srv := ollamaProvider(t)
	opts := capped(64)
	// Grammar-constrained tool calling: the tiny model cannot choose a
	// tool by itself, but under this format Ollama parses its reply into
	// tool_calls.
	opts.Format = ollamatest.ToolCallFormat(weatherTool.InputSchema, weatherTool.Name)
	conv := []engine.Message{user("What is the weather in Oslo?")}
	req := engine.ChatRequest{Model: srv.ToolsModel, Messages: conv, Tools: []engine.ToolSpec{weatherTool}, Options: opts}
	chunks, err := collect(t, p, req)
	if err != nil {
		t.Fatal(err)
	}
	r := summarize(t, chunks)
	if len(r.calls) != 1 {
		t.Fatalf("calls = %+v (text %q), want one get_weather call", r.calls, r.text)
	}
	c := r.calls[0]
	var args struct {
		City *string `json:"city"`
	}
	if c.Name != "get_weather" || c.ID == "" || json.Unmarshal(c.Args, &args) != nil || args.City == nil {
		t.Errorf("call = %+v (args %s), want get_weather with an id and a city", c, c.Args)
	}
	if r.done != "tool_calls" {
		t.Errorf("done = %q, want tool_calls", r.done)
	}

	// The call and its result go back to the server, which accepts them.
	conv = append(conv,
		engine.Message{Role: engine.RoleAssistant, ToolCalls: r.calls},
		engine.Message{Role: engine.RoleTool, ToolCallID: c.ID, ToolName: c.Name, Content: `{"temperature_c": 4}`})
	chunks, err = collect(t, p, engine.ChatRequest{Model: srv.ToolsModel, Messages: conv, Tools: []engine.ToolSpec{weatherTool}, Options: capped(32)})
	if err != nil {
		t.Fatalf("second call with the tool result: %v", err)
	}
	if r := summarize(t, chunks); r.done == "" {
		t.Errorf("second reply = %+v", r)
	}
}

func TestOllamaEmptyMessagesAccepted(t *testing.T) {
	p, srv := ollamaProvider(t)
	conv := []engine.Message{user("Say hello."), {Role: engine.RoleAssistant}, user("Again.")}
	chunks, err := collect(t, p, engine.ChatRequest{Model: srv.ChatModel, Messages: conv, Options: capped(16)})
	if err != nil {
		t.Fatalf("a conversation with an empty assistant message: %v", err)
	}
	summarize(t, chunks)
}

func TestOllamaToolsUnsupported(t *testing.T) {
	p, srv := ollamaProvider(t)
	_, err := collect(t, p, engine.ChatRequest{Model: srv.ChatModel, Messages: []engine.Message{user("hi")}, Tools: []engine.ToolSpec{weatherTool}, Options: capped(8)})
	var me *engine.ModelError
	if !errors.As(err, &me) || !errors.Is(err, engine.ErrUnsupported) {
		t.Fatalf("err = %v, want ErrUnsupported", err)
	}
	if me.Provider != "openai" || !strings.Contains(me.Message, "does not support tools") {
		t.Errorf("err = %+v, want the server's words", me)
	}

	_, err = collect(t, p, engine.ChatRequest{Model: srv.EmbedModel, Messages: []engine.Message{user("hi")}, Options: capped(8)})
	if !errors.Is(err, engine.ErrUnsupported) || !strings.Contains(err.Error(), "does not support chat") {
		t.Errorf("chat with an embedding model: err = %v, want ErrUnsupported", err)
	}
}

func TestOllamaUnknownModel(t *testing.T) {
	p, _ := ollamaProvider(t)
	_, err := collect(t, p, engine.ChatRequest{Model: "no-such-model", Messages: []engine.Message{user("hi")}, Options: capped(8)})
	var me *engine.ModelError
	if !errors.As(err, &me) || !errors.Is(err, engine.ErrModelNotFound) {
		t.Fatalf("chat: err = %v, want ErrModelNotFound", err)
	}
	if me.Message != `model "no-such-model" not found, try pulling it first` {
		t.Errorf("message = %q, want the server's words", me.Message)
	}
	_, err = p.Embed(t.Context(), engine.EmbedRequest{Model: "no-such-model", Inputs: []string{"a"}})
	if !errors.Is(err, engine.ErrModelNotFound) {
		t.Errorf("embed: err = %v, want ErrModelNotFound", err)
	}
}

func TestOllamaEmbed(t *testing.T) {
	p, srv := ollamaProvider(t)
	inputs := []string{"open a session", "close the store", "open a session"}
	res, err := p.Embed(t.Context(), engine.EmbedRequest{Model: srv.EmbedModel, Inputs: inputs})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Vectors) != len(inputs) {
		t.Fatalf("%d vectors for %d inputs", len(res.Vectors), len(inputs))
	}
	for i, v := range res.Vectors {
		if len(v) != ollamatest.EmbeddingLength {
			t.Errorf("vector %d has %d floats, want %d", i, len(v), ollamatest.EmbeddingLength)
		}
	}
	if slices.Equal(res.Vectors[0], res.Vectors[1]) {
		t.Error("different inputs got the same vector")
	}
	if !slices.Equal(res.Vectors[0], res.Vectors[2]) {
		t.Error("vectors are not in input order (inputs 0 and 2 are equal, their vectors differ)")
	}
	empty, err := p.Embed(t.Context(), engine.EmbedRequest{Model: srv.EmbedModel})
	if err != nil || len(empty.Vectors) != 0 {
		t.Errorf("no inputs: %v, %v", empty, err)
	}
}

func TestOllamaWrongBasePath(t *testing.T) {
	srv := ollamatest.Shared(t)
	p := New()
	if err := p.Configure(t.Context(), map[string]string{"base_url": srv.URL}); err != nil {
		t.Fatal(err)
	}
	_, err := collect(t, p, engine.ChatRequest{Model: srv.ChatModel, Messages: []engine.Message{user("hi")}, Options: capped(8)})
	if !errors.Is(err, engine.ErrModelUnavailable) {
		t.Fatalf("err = %v, want ErrModelUnavailable", err)
	}
	for _, want := range []string{"404 page not found", srv.URL, "/v1", "OPENAI_BASE_URL", "--openai-base-url"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestOllamaCancel(t *testing.T) {
	p, srv := ollamaProvider(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	n := 0
	err := p.Chat(ctx, engine.ChatRequest{Model: srv.ChatModel, Messages: []engine.Message{user("hi")}, Options: capped(32)}, func(engine.ChatChunk) error {
		n++
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v after %d chunks, want context.Canceled", err, n)
	}
}

func TestUnreachableServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + l.Addr().String() + "/v1"
	l.Close() // nothing listens there now
	p := New()
	if err := p.Configure(t.Context(), map[string]string{"base_url": base}); err != nil {
		t.Fatal(err)
	}
	calls := map[string]func() error{
		"chat": func() error {
			_, err := collect(t, p, engine.ChatRequest{Model: "m", Messages: []engine.Message{user("hi")}})
			return err
		},
		"list": func() error { _, err := p.ListModels(t.Context()); return err },
		"embed": func() error {
			_, err := p.Embed(t.Context(), engine.EmbedRequest{Model: "m", Inputs: []string{"a"}})
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			err := call()
			if !errors.Is(err, engine.ErrModelUnavailable) {
				t.Fatalf("err = %v, want ErrModelUnavailable", err)
			}
			for _, want := range []string{base, "connection refused", "start the server", "OPENAI_BASE_URL", "--openai-base-url"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}

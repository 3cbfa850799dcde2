package openai

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/plexus-agent/plexus/engine"
)

// These tests replay wire transcripts (testdata/*.sse) and error responses
// that Ollama cannot produce, from an httptest server, and check the
// requests the provider sends.

// fakeServer answers every request with status and body (an SSE
// transcript file when body names one) and records the last request.
type fakeServer struct {
	*httptest.Server
	mu      sync.Mutex
	path    string
	auth    string
	request map[string]any
}

func newFakeServer(t *testing.T, status int, contentType, body string) *fakeServer {
	t.Helper()
	if strings.HasSuffix(body, ".sse") {
		b, err := os.ReadFile(filepath.Join("testdata", body))
		if err != nil {
			t.Fatal(err)
		}
		body = string(b)
	}
	f := &fakeServer{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var req map[string]any
		_ = json.Unmarshal(raw, &req)
		f.mu.Lock()
		f.path, f.auth, f.request = r.URL.Path, r.Header.Get("Authorization"), req
		f.mu.Unlock()
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeServer) provider(t *testing.T, key string) *Provider {
	t.Helper()
	t.Setenv(EnvAPIKey, "")
	p := New()
	if err := p.Configure(t.Context(), map[string]string{"base_url": f.URL + "/v1", "api_key": key}); err != nil {
		t.Fatal(err)
	}
	return p
}

func (f *fakeServer) lastRequest() (string, string, map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.path, f.auth, f.request
}

func TestChatAssemblesStreamedToolCalls(t *testing.T) {
	tests := []struct {
		transcript string
		text       string
		calls      []engine.ToolCall
		usage      *engine.Usage
		done       string
	}{
		{
			// OpenAI's shape: one call per index, arguments in pieces.
			transcript: "openai_tool_deltas.sse",
			calls: []engine.ToolCall{
				{ID: "call_a", Name: "list_files", Args: json.RawMessage(`{"path": "."}`)},
				{ID: "call_b", Name: "read_file", Args: json.RawMessage(`{"path": "README.md", "start_line": 1}`)},
			},
			usage: &engine.Usage{PromptTokens: 82, CompletionTokens: 41},
			done:  "tool_calls",
		},
		{
			// Several complete calls at index 0 in one delta, no usage.
			transcript: "index0_calls.sse",
			text:       "Looking.",
			calls: []engine.ToolCall{
				{ID: "call_x1", Name: "list_files", Args: json.RawMessage(`{"path":"."}`)},
				{ID: "call_x2", Name: "search_text", Args: json.RawMessage(`{"pattern":"func New"}`)},
			},
			done: "stop",
		},
	}
	for _, tt := range tests {
		t.Run(tt.transcript, func(t *testing.T) {
			srv := newFakeServer(t, 200, "text/event-stream", tt.transcript)
			chunks, err := collect(t, srv.provider(t, ""), engine.ChatRequest{Model: "m", Messages: []engine.Message{user("hi")}})
			if err != nil {
				t.Fatal(err)
			}
			r := summarize(t, chunks)
			if r.text != tt.text {
				t.Errorf("text = %q, want %q", r.text, tt.text)
			}
			if len(r.calls) != len(tt.calls) {
				t.Fatalf("calls = %+v, want %+v", r.calls, tt.calls)
			}
			for i, want := range tt.calls {
				got := r.calls[i]
				if got.ID != want.ID || got.Name != want.Name || string(got.Args) != string(want.Args) {
					t.Errorf("call %d = %s %s %s, want %s %s %s", i, got.ID, got.Name, got.Args, want.ID, want.Name, want.Args)
				}
			}
			if (r.usage == nil) != (tt.usage == nil) || (r.usage != nil && *r.usage != *tt.usage) {
				t.Errorf("usage = %+v, want %+v", r.usage, tt.usage)
			}
			if r.done != tt.done {
				t.Errorf("done = %q, want %q", r.done, tt.done)
			}
		})
	}
}

func TestChatStreamWithoutFinishIsAnError(t *testing.T) {
	srv := newFakeServer(t, 200, "text/event-stream", "no_finish.sse")
	var text string
	err := srv.provider(t, "").Chat(t.Context(), engine.ChatRequest{Model: "m", Messages: []engine.Message{user("hi")}}, func(c engine.ChatChunk) error {
		text += c.Text
		return nil
	})
	if !errors.Is(err, engine.ErrModelUnavailable) || !strings.Contains(err.Error(), "before the reply was complete") {
		t.Errorf("err = %v, want ErrModelUnavailable about an incomplete reply", err)
	}
	if text != "Half a rep" {
		t.Errorf("text before the error = %q", text)
	}
}

func TestChatRequestBody(t *testing.T) {
	srv := newFakeServer(t, 200, "text/event-stream", "index0_calls.sse")
	zero, topP, seed := 0.0, 0.9, int64(42)
	_, err := collect(t, srv.provider(t, "sk-test"), engine.ChatRequest{
		Model: "qwen2.5-coder:7b",
		Messages: []engine.Message{
			{Role: engine.RoleSystem, Content: "sys"},
			user("list"),
			{Role: engine.RoleAssistant, ToolCalls: []engine.ToolCall{{ID: "c1", Name: "list_files", Args: json.RawMessage(`{"path":"."}`)}, {ID: "c2", Name: "noop"}}},
			{Role: engine.RoleTool, ToolCallID: "c1", ToolName: "list_files", Content: `{"files":[]}`},
			{Role: engine.RoleTool, ToolCallID: "c2", ToolName: "noop", Content: `{}`},
			{Role: engine.RoleAssistant, Content: ""},
		},
		Tools: []engine.ToolSpec{weatherTool, {Name: "noop", Description: "No input."}},
		Options: engine.ChatOptions{
			Temperature: &zero, TopP: &topP, Seed: &seed, MaxTokens: 128, Stop: []string{"\n\n"},
			Format: json.RawMessage(`{"type":"object"}`), NumCtx: 8192,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	path, auth, got := srv.lastRequest()
	if path != "/v1/chat/completions" || auth != "Bearer sk-test" {
		t.Errorf("path %q, Authorization %q", path, auth)
	}
	want := map[string]any{}
	if err := json.Unmarshal([]byte(`{
		"model": "qwen2.5-coder:7b",
		"stream": true,
		"stream_options": {"include_usage": true},
		"temperature": 1e-45,
		"top_p": 0.9,
		"seed": 42,
		"max_tokens": 128,
		"stop": ["\n\n"],
		"response_format": {"type": "json_schema", "json_schema": {"name": "response", "schema": {"type": "object"}, "strict": false}},
		"messages": [
			{"role": "system", "content": "sys"},
			{"role": "user", "content": "list"},
			{"role": "assistant", "tool_calls": [
				{"id": "c1", "type": "function", "function": {"name": "list_files", "arguments": "{\"path\":\".\"}"}},
				{"id": "c2", "type": "function", "function": {"name": "noop", "arguments": "{}"}}]},
			{"role": "tool", "content": "{\"files\":[]}", "tool_call_id": "c1"},
			{"role": "tool", "content": "{}", "tool_call_id": "c2"},
			{"role": "assistant", "content": " "}
		],
		"tools": [
			{"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city.",
			  "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
			{"type": "function", "function": {"name": "noop", "description": "No input.", "parameters": {"type": "object", "properties": {}}}}
		]
	}`), &want); err != nil {
		t.Fatal(err)
	}
	gotJSON, _ := json.MarshalIndent(got, "", "  ")
	wantJSON, _ := json.MarshalIndent(want, "", "  ")
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("request body\n%s\nwant\n%s", gotJSON, wantJSON)
	}
}

func TestChatRequestVariants(t *testing.T) {
	srv := newFakeServer(t, 200, "text/event-stream", "index0_calls.sse")
	p := srv.provider(t, "")

	// Reasoning models refuse max_tokens.
	if _, err := collect(t, p, engine.ChatRequest{Model: "o3-mini", Messages: []engine.Message{user("hi")}, Options: engine.ChatOptions{MaxTokens: 50}}); err != nil {
		t.Fatal(err)
	}
	_, auth, got := srv.lastRequest()
	if got["max_completion_tokens"] != 50.0 || got["max_tokens"] != nil {
		t.Errorf("o3-mini: max_tokens %v, max_completion_tokens %v; want only max_completion_tokens 50", got["max_tokens"], got["max_completion_tokens"])
	}
	if auth != "" {
		t.Errorf("without an API key, Authorization = %q, want none", auth)
	}

	// The "json" format asks for a JSON object.
	if _, err := collect(t, p, engine.ChatRequest{Model: "m", Messages: []engine.Message{user("hi")}, Options: engine.ChatOptions{Format: json.RawMessage(`"json"`)}}); err != nil {
		t.Fatal(err)
	}
	if _, _, got = srv.lastRequest(); got["response_format"].(map[string]any)["type"] != "json_object" {
		t.Errorf("response_format = %v", got["response_format"])
	}

	bad := []struct {
		name string
		req  engine.ChatRequest
		want string
	}{
		{"no model", engine.ChatRequest{Messages: []engine.Message{user("hi")}}, "no model given"},
		{"bad role", engine.ChatRequest{Model: "m", Messages: []engine.Message{{Role: "robot", Content: "x"}}}, `message 0: unknown role "robot"`},
		{"tool without id", engine.ChatRequest{Model: "m", Messages: []engine.Message{{Role: engine.RoleTool, ToolName: "x", Content: "{}"}}}, "has no tool call id"},
		{"bad format", engine.ChatRequest{Model: "m", Options: engine.ChatOptions{Format: json.RawMessage(`[1]`)}}, "format must be a JSON Schema object"},
		{"bad schema", engine.ChatRequest{Model: "m", Tools: []engine.ToolSpec{{Name: "t", InputSchema: json.RawMessage(`{`)}}}, "tool t: input schema is not valid JSON"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := collect(t, p, tt.req)
			if !errors.Is(err, engine.ErrInvalidRequest) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want ErrInvalidRequest saying %q", err, tt.want)
			}
		})
	}
}

func TestErrorClassification(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		contentType string
		body        string
		key         string
		kind        error // nil: unclassified
		want        []string
	}{
		{"401 without key", 401, "application/json",
			`{"error":{"message":"You didn't provide an API key.","type":"invalid_request_error","param":null,"code":null}}`, "",
			nil, []string{"You didn't provide an API key.", "no API key is set", "OPENAI_API_KEY", "--openai-api-key"}},
		{"401 wrong key", 401, "application/json",
			`{"error":{"message":"Incorrect API key provided: sk-wrong.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`, "sk-wrong",
			nil, []string{"Incorrect API key provided: sk-wrong.", "refused the API key", "OPENAI_API_KEY", "--openai-api-key"}},
		{"model_not_found code", 400, "application/json",
			`{"error":{"message":"The model 'gpt-9' does not exist","type":"invalid_request_error","param":"model","code":"model_not_found"}}`, "",
			engine.ErrModelNotFound, []string{"The model 'gpt-9' does not exist"}},
		{"vLLM 404", 404, "application/json",
			`{"object":"error","message":"The model ` + "`gpt-9`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}`, "",
			engine.ErrModelNotFound, []string{"The model `gpt-9` does not exist."}},
		{"vLLM tools not enabled", 400, "application/json",
			`{"object":"error","message":"\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set","type":"BadRequestError","param":null,"code":400}`, "",
			engine.ErrUnsupported, []string{"--enable-auto-tool-choice"}},
		{"llama.cpp embeddings disabled", 501, "application/json",
			`{"error":{"code":501,"message":"This server does not support embeddings. Start it with ` + "`--embeddings`" + `","type":"not_supported_error"}}`, "",
			engine.ErrUnsupported, []string{"Start it with `--embeddings`"}},
		{"bad request", 400, "application/json",
			`{"error":{"message":"Invalid 'messages[1].content': string too long.","type":"invalid_request_error","param":"messages[1].content","code":"string_above_max_length"}}`, "",
			engine.ErrInvalidRequest, []string{"string too long"}},
		{"FastAPI 422", 422, "application/json", `{"detail":[{"loc":["body","model"],"msg":"field required"}]}`, "",
			engine.ErrInvalidRequest, []string{"field required"}},
		{"overloaded", 503, "text/html", "<html>Service Unavailable</html>", "",
			engine.ErrModelUnavailable, []string{"HTTP 503", "Service Unavailable"}},
		{"server error", 500, "application/json", `{"error":{"message":"llama runner process has terminated","type":"api_error"}}`, "",
			nil, []string{"llama runner process has terminated"}},
		{"rate limited", 429, "application/json", `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`, "",
			nil, []string{"Rate limit reached"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFakeServer(t, tt.status, tt.contentType, tt.body)
			_, err := collect(t, srv.provider(t, tt.key), engine.ChatRequest{Model: "m", Messages: []engine.Message{user("hi")}})
			var me *engine.ModelError
			if !errors.As(err, &me) {
				t.Fatalf("err = %#v, want *engine.ModelError", err)
			}
			if me.Kind != tt.kind || me.Provider != "openai" {
				t.Errorf("kind = %v (provider %q), want %v", me.Kind, me.Provider, tt.kind)
			}
			for _, w := range tt.want {
				if !strings.Contains(me.Message, w) {
					t.Errorf("message %q does not contain %q", me.Message, w)
				}
			}
		})
	}
}

func TestEmbedChecksTheResponse(t *testing.T) {
	tests := []struct {
		body string
		want string
	}{
		{`{"object":"list","data":[{"object":"embedding","embedding":[1,2],"index":0}],"model":"m","usage":{"prompt_tokens":2,"total_tokens":2}}`, "returned 1 embeddings for 2 inputs"},
		{`{"object":"list","data":[{"embedding":[1],"index":0},{"embedding":[2],"index":5}],"model":"m"}`, "index 5 for a batch of 2"},
	}
	for _, tt := range tests {
		srv := newFakeServer(t, 200, "application/json", tt.body)
		_, err := srv.provider(t, "").Embed(t.Context(), engine.EmbedRequest{Model: "m", Inputs: []string{"a", "b"}})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("err = %v, want %q", err, tt.want)
		}
	}

	// Out-of-order data is put back in input order.
	srv := newFakeServer(t, 200, "application/json",
		`{"object":"list","data":[{"embedding":[2],"index":1},{"embedding":[1],"index":0}],"model":"m","usage":{"prompt_tokens":3,"total_tokens":3}}`)
	res, err := srv.provider(t, "").Embed(t.Context(), engine.EmbedRequest{Model: "m", Inputs: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Vectors[0][0] != 1 || res.Vectors[1][0] != 2 || res.PromptTokens != 3 {
		t.Errorf("got %+v", res)
	}
	if path, _, req := srv.lastRequest(); path != "/v1/embeddings" || req["model"] != "m" {
		t.Errorf("request %s %v", path, req)
	}
}

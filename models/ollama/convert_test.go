package ollama

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/ollama/ollama/envconfig"

	"github.com/plexus-agent/plexus/engine"
)

// compact re-indents JSON for comparison without reordering keys.
func compact(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatalf("compact %s: %v", s, err)
	}
	return b.String()
}

func TestToolSchemaConversion(t *testing.T) {
	for _, tc := range []struct {
		name, schema, want string
	}{
		{
			name:   "empty",
			schema: ``,
			want:   `{"type":"object","properties":{}}`,
		},
		{
			name:   "no properties",
			schema: `{"type":"object"}`,
			want:   `{"type":"object","properties":{}}`,
		},
		{
			name: "flat, property order kept",
			schema: `{"type":"object","required":["path"],"properties":{
				"path":{"type":"string","description":"File path"},
				"limit":{"type":"integer"},
				"mode":{"type":"string","enum":["read","stat"]},
				"after":{"type":["string","null"]}}}`,
			want: `{"type":"object","required":["path"],"properties":{
				"path":{"type":"string","description":"File path"},
				"limit":{"type":"integer"},
				"mode":{"type":"string","enum":["read","stat"]},
				"after":{"type":["string","null"]}}}`,
		},
		{
			name: "array of objects survives whole",
			schema: `{"type":"object","properties":{"edits":{"type":"array","description":"Edits",
				"items":{"type":"object","required":["old","new"],"additionalProperties":false,
					"properties":{"old":{"type":"string"},"new":{"type":"string"},"count":{"type":"integer","minimum":1}}}}}}`,
			// items is kept verbatim (keys as Go marshals a map: sorted).
			want: `{"type":"object","properties":{"edits":{"type":"array","items":{"additionalProperties":false,
				"properties":{"count":{"minimum":1,"type":"integer"},"new":{"type":"string"},"old":{"type":"string"}},
				"required":["old","new"],"type":"object"},"description":"Edits"}}}`,
		},
		{
			name: "nested object keeps its properties",
			schema: `{"type":"object","properties":{"range":{"type":"object","required":["start"],
				"properties":{"start":{"type":"integer"},"end":{"type":"integer"}}}}}`,
			want: `{"type":"object","properties":{"range":{"type":"object",
				"properties":{"start":{"type":"integer"},"end":{"type":"integer"}}}}}`,
		},
		{
			name: "refs inlined, oneOf and const",
			schema: `{"type":"object","$defs":{"pos":{"type":"object","properties":{"line":{"type":"integer"}}}},
				"properties":{
				"at":{"$ref":"#/$defs/pos","description":"Where"},
				"kind":{"const":"replace"},
				"value":{"oneOf":[{"type":"string"},{"type":"number"}]}}}`,
			want: `{"type":"object","$defs":{"pos":{"properties":{"line":{"type":"integer"}},"type":"object"}},"properties":{
				"at":{"type":"object","description":"Where","properties":{"line":{"type":"integer"}}},
				"kind":{"enum":["replace"]},
				"value":{"anyOf":[{"type":"string"},{"type":"number"}]}}}`,
		},
		{
			name: "recursive ref becomes untyped below the first level",
			schema: `{"type":"object","definitions":{"node":{"type":"object","properties":{"child":{"$ref":"#/definitions/node"}}}},
				"properties":{"root":{"$ref":"#/definitions/node"}}}`,
			// Ollama's type has no "definitions"; everything is inlined.
			want: `{"type":"object","properties":{"root":{"type":"object","properties":{"child":{}}}}}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tool, err := toolFromSpec(engine.ToolSpec{Name: "t", Description: "d", InputSchema: json.RawMessage(tc.schema)})
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(tool.Function.Parameters)
			if err != nil {
				t.Fatal(err)
			}
			if want := compact(t, tc.want); string(got) != want {
				t.Errorf("parameters\n got %s\nwant %s", got, want)
			}
			if tool.Type != "function" || tool.Function.Name != "t" || tool.Function.Description != "d" {
				t.Errorf("tool %+v, want function t with description d", tool)
			}
		})
	}
}

func TestToolSchemaErrors(t *testing.T) {
	for _, tc := range []struct{ name, schema, want string }{
		{"not JSON", `{"type":`, "not JSON"},
		{"not an object", `["a"]`, "is an array"},
		{"not an object type", `{"type":"string"}`, `has "type": "string"`},
		{"bad type keyword", `{"type":"object","properties":{"a":{"type":5}}}`, "does not fit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := toolFromSpec(engine.ToolSpec{Name: "t", InputSchema: json.RawMessage(tc.schema)})
			if !errors.Is(err, engine.ErrInvalidRequest) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `tool "t"`) {
				t.Errorf("error %v, want ErrInvalidRequest naming the tool and containing %q", err, tc.want)
			}
		})
	}
}

func TestChatRequestTranslation(t *testing.T) {
	req := engine.ChatRequest{
		Model: "qwen2.5-coder:7b",
		Messages: []engine.Message{
			{Role: engine.RoleSystem, Content: "sys"},
			{Role: engine.RoleUser, Content: "read it"},
			{Role: engine.RoleAssistant, Content: "ok", ToolCalls: []engine.ToolCall{
				{ID: "c1", Name: "read_file", Args: json.RawMessage(`{"path":"a.go","limit":3}`)},
				{ID: "c2", Name: "list_files"},
			}},
			{Role: engine.RoleTool, ToolCallID: "c1", Content: `{"text":"package a"}`},
			{Role: engine.RoleTool, ToolCallID: "c2", ToolName: "explicit", Content: "[]"},
		},
		Options: engine.ChatOptions{
			Temperature: ptr(0.2), TopP: ptr(0.9), Seed: ptr(int64(7)), MaxTokens: 100, NumCtx: 8192,
			Stop: []string{"END"}, KeepAlive: 90 * time.Second, Format: json.RawMessage(` {"type":"object"} `),
		},
	}
	got, err := chatRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	want := compact(t, `{"model":"qwen2.5-coder:7b","messages":[
		{"role":"system","content":"sys"},
		{"role":"user","content":"read it"},
		{"role":"assistant","content":"ok","tool_calls":[
			{"id":"c1","function":{"index":0,"name":"read_file","arguments":{"path":"a.go","limit":3}}},
			{"id":"c2","function":{"index":0,"name":"list_files","arguments":{}}}]},
		{"role":"tool","content":"{\"text\":\"package a\"}","tool_name":"read_file","tool_call_id":"c1"},
		{"role":"tool","content":"[]","tool_name":"explicit","tool_call_id":"c2"}],
		"stream":true,"format":{"type":"object"},"keep_alive":"1m30s",
		"options":{"num_ctx":8192,"num_predict":100,"seed":7,"stop":["END"],"temperature":0.2,"top_p":0.9}}`)
	if string(b) != want {
		t.Errorf("request\n got %s\nwant %s", b, want)
	}

	forever, err := chatRequest(engine.ChatRequest{Model: "m", Options: engine.ChatOptions{KeepAlive: -1}})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(forever.KeepAlive); string(b) != "-1" {
		t.Errorf("negative KeepAlive is keep_alive %s, want -1 (forever)", b)
	}
	defaults, err := chatRequest(engine.ChatRequest{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if defaults.Options != nil || defaults.KeepAlive != nil || defaults.Format != nil || defaults.Tools != nil {
		t.Errorf("zero options sent %+v, keep_alive %v, format %s, tools %v; want none", defaults.Options, defaults.KeepAlive, defaults.Format, defaults.Tools)
	}
}

func TestChatRequestErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  engine.ChatRequest
		want string
	}{
		{"no model", engine.ChatRequest{}, "no model"},
		{"unknown role", engine.ChatRequest{Model: "m", Messages: []engine.Message{{Role: "developer"}}}, `message 0: role "developer"`},
		{"array arguments", engine.ChatRequest{Model: "m", Messages: []engine.Message{{Role: engine.RoleAssistant,
			ToolCalls: []engine.ToolCall{{Name: "x", Args: json.RawMessage(`[1]`)}}}}}, `tool call "x" are not a JSON object`},
		{"broken arguments", engine.ChatRequest{Model: "m", Messages: []engine.Message{{Role: engine.RoleAssistant,
			ToolCalls: []engine.ToolCall{{Name: "x", Args: json.RawMessage(`{"a":`)}}}}}, `tool call "x" are not a JSON object`},
		{"nameless tool", engine.ChatRequest{Model: "m", Tools: []engine.ToolSpec{{}}}, "no name"},
		{"format", engine.ChatRequest{Model: "m", Options: engine.ChatOptions{Format: json.RawMessage(`schema`)}}, "format is not JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := chatRequest(tc.req)
			var me *engine.ModelError
			if !errors.As(err, &me) || !errors.Is(err, engine.ErrInvalidRequest) || !strings.Contains(me.Message, tc.want) {
				t.Errorf("error %v, want an ErrInvalidRequest ModelError containing %q", err, tc.want)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	base := &url.URL{Scheme: "http", Host: "127.0.0.1:11434"}
	refused := &url.Error{Op: "Post", URL: "http://127.0.0.1:11434/api/chat", Err: &net.OpError{
		Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 11434},
		Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}}
	for _, tc := range []struct {
		name    string
		err     error
		kind    error
		message string
	}{
		{"model not found", api.StatusError{StatusCode: 404, ErrorMessage: `model "x" not found, try pulling it first`},
			engine.ErrModelNotFound, `model "x" not found, try pulling it first`},
		{"embed model not found (0.6.5)", api.StatusError{StatusCode: 404, ErrorMessage: `model 'x' not found`},
			engine.ErrModelNotFound, `model 'x' not found`},
		{"not an Ollama server", api.StatusError{StatusCode: 404, ErrorMessage: `404 page not found`},
			nil, `404 page not found`},
		{"tools", api.StatusError{StatusCode: 400, ErrorMessage: `registry.ollama.ai/library/x:latest does not support tools`},
			engine.ErrUnsupported, `registry.ollama.ai/library/x:latest does not support tools`},
		{"embeddings", api.StatusError{StatusCode: 500, ErrorMessage: `this model does not support embeddings`},
			engine.ErrUnsupported, `this model does not support embeddings`},
		{"bad request", api.StatusError{StatusCode: 400, ErrorMessage: `invalid options: foo`},
			engine.ErrInvalidRequest, `invalid options: foo`},
		{"busy", api.StatusError{StatusCode: 503, ErrorMessage: `server busy, please try again.  maximum pending requests exceeded`},
			engine.ErrModelUnavailable, `server busy, please try again.  maximum pending requests exceeded`},
		{"server error", api.StatusError{StatusCode: 500, Status: "500 Internal Server Error", ErrorMessage: `llama runner process has terminated: exit status 2`},
			nil, `llama runner process has terminated: exit status 2`},
		{"empty body", api.StatusError{StatusCode: 502},
			nil, `HTTP 502 Bad Gateway from http://127.0.0.1:11434`},
		{"unauthorized", api.AuthorizationError{StatusCode: 401, Status: "401 Unauthorized", SigninURL: "https://ollama.com/connect"},
			nil, `401 Unauthorized (HTTP 401 from http://127.0.0.1:11434); sign in at https://ollama.com/connect`},
		{"in-stream error", errors.New(`an error was encountered while running the model: out of memory`),
			nil, `an error was encountered while running the model: out of memory`},
		{"refused", refused, engine.ErrModelUnavailable,
			`no Ollama server is reachable at http://127.0.0.1:11434 (dial tcp 127.0.0.1:11434: connect: connection refused); start one with "ollama serve", or point --ollama-host / OLLAMA_HOST at a running server`},
		{"no such host", &url.Error{Op: "Post", URL: "http://gpu-box:11434/api/chat", Err: &net.OpError{Op: "dial", Net: "tcp",
			Err: &net.DNSError{Err: "no such host", Name: "gpu-box", IsNotFound: true}}},
			engine.ErrModelUnavailable, `no Ollama server is reachable at http://127.0.0.1:11434 (dial tcp: lookup gpu-box: no such host); start one with "ollama serve", or point --ollama-host / OLLAMA_HOST at a running server`},
		{"cut off", &url.Error{Op: "Post", URL: "http://127.0.0.1:11434/api/chat", Err: io.ErrUnexpectedEOF},
			engine.ErrModelUnavailable, `the Ollama server at http://127.0.0.1:11434 closed the connection during the call (unexpected EOF)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := classify(context.Background(), base, tc.err)
			var me *engine.ModelError
			if !errors.As(err, &me) {
				t.Fatalf("classify = %v (%T), want *engine.ModelError", err, err)
			}
			if me.Kind != tc.kind || me.Message != tc.message || me.Provider != ProviderName {
				t.Errorf("got kind %v, message %q, provider %q\nwant kind %v, message %q, provider %q", me.Kind, me.Message, me.Provider, tc.kind, tc.message, ProviderName)
			}
		})
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cancelled := &url.Error{Op: "Post", URL: "http://127.0.0.1:11434/api/chat", Err: context.Canceled}
	if err := classify(ctx, base, cancelled); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: %v, want context.Canceled", err)
	}
}

func TestParseHostMatchesOllama(t *testing.T) {
	for _, in := range []string{
		"", "127.0.0.1", "localhost", "gpu-box", "gpu-box:8080", "0.0.0.0:11434", "10.0.0.5",
		"http://gpu-box", "https://gpu-box", "http://gpu-box:9999", "https://ollama.example.com/prefix",
		"ollama.com", "[::1]", "[::1]:8080", "::1", "  http://spaced:1234  ",
	} {
		t.Run(in, func(t *testing.T) {
			t.Setenv("OLLAMA_HOST", in)
			want := envconfig.Host()
			got, err := ParseHost(in)
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != want.String() {
				t.Errorf("ParseHost(%q) = %s, OLLAMA_HOST=%q gives %s", in, got, in, want)
			}
		})
	}
	for in, want := range map[string]string{
		":8080":      "http://127.0.0.1:8080",
		"gpu-box:":   "http://gpu-box:11434",
		"http://:80": "http://127.0.0.1:80",
	} {
		if got, err := ParseHost(in); err != nil || got.String() != want {
			t.Errorf("ParseHost(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"gpu-box:port", "gpu-box:70000", "ftp://gpu-box", "unix:///run/ollama.sock"} {
		if got, err := ParseHost(in); err == nil {
			t.Errorf("ParseHost(%q) = %s, want an error", in, got)
		}
	}
}

func TestConfigure(t *testing.T) {
	t.Setenv("OLLAMA_HOST", "env-box:1234")
	p := New()
	if got := p.Host(); got != "http://env-box:1234" {
		t.Errorf("New().Host() = %s, want OLLAMA_HOST's http://env-box:1234", got)
	}
	ctx := context.Background()
	if err := p.Configure(ctx, map[string]string{"host": "https://gpu-box"}); err != nil {
		t.Fatal(err)
	}
	if got := p.Host(); got != "https://gpu-box:443" {
		t.Errorf("host = %s, want https://gpu-box:443", got)
	}
	if err := p.Configure(ctx, map[string]string{"host": "  "}); err != nil || p.Host() != "http://env-box:1234" {
		t.Errorf("empty host: %v, host %s; want OLLAMA_HOST's", err, p.Host())
	}
	if err := p.Configure(ctx, map[string]string{"hots": "x"}); err == nil || !strings.Contains(err.Error(), `"hots"`) || !strings.Contains(err.Error(), "host") {
		t.Errorf("unknown key: %v, want an error naming it and the known keys", err)
	}
	if err := p.Configure(ctx, map[string]string{"host": "gpu-box:99999"}); err == nil || !strings.Contains(err.Error(), "99999") {
		t.Errorf("bad port: %v, want an error naming it", err)
	}
	if p.Host() != "http://env-box:1234" {
		t.Errorf("a failed Configure changed the host to %s", p.Host())
	}
	t.Setenv("OLLAMA_HOST", "")
	if err := p.Configure(ctx, nil); err != nil || p.Host() != "http://127.0.0.1:11434" {
		t.Errorf("no settings, no OLLAMA_HOST: %v, host %s; want http://127.0.0.1:11434", err, p.Host())
	}
}

// Example shows the provider on its own, outside a plugin process.
func Example() {
	p := New()
	if err := p.Configure(context.Background(), map[string]string{"host": "127.0.0.1:1"}); err != nil {
		fmt.Println(err)
		return
	}
	_, err := p.ListModels(context.Background())
	fmt.Println(errors.Is(err, engine.ErrModelUnavailable))
	// Output: true
}

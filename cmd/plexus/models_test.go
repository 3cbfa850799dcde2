package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestModelsListedTheSameEverywhere: the replay model in use is listed by
// its provider, with the same capabilities in `plexus models`, GET
// /v1/models, GET /v1/models/current and server.hello; PUT
// /v1/models/current accepts it; OpenAI without an API key or a base URL
// is reported as not configured (not as a failure, and not contacted),
// and an Ollama server that is down as a failure.
func TestModelsListedTheSameEverywhere(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("OLLAMA_HOST", "http://127.0.0.1:9") // nothing listens there
	ws, script := calcFixture(t)
	wantCaps := []any{"completion", "tools", "embedding"}

	r := plexus(t, ws, "", []string{"OLLAMA_HOST=http://127.0.0.1:9"}, "models", "--model", "replay:"+script)
	if r.code != 0 {
		t.Fatalf("plexus models: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "replay:"+script+"  completion,tools,embedding") {
		t.Errorf("plexus models does not list the replay model in use with its capabilities:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "openai: not configured: set OPENAI_API_KEY") || !strings.Contains(r.stderr, "ollama: no Ollama server is reachable") {
		t.Errorf("plexus models stderr:\n%s", r.stderr)
	}

	srv := startHTTPServer(t, ws, t.TempDir(), script)
	code, body := srv.do(t, "GET", "/v1/models", "")
	if code != 200 {
		t.Fatalf("GET /v1/models: %d %v", code, body)
	}
	var listed []any
	for _, m := range body["models"].([]any) {
		if e := m.(map[string]any); e["provider"] == "replay" && e["model_name"] == script {
			listed = e["capabilities"].([]any)
		}
	}
	if !slices.Equal(listed, wantCaps) {
		t.Errorf("GET /v1/models lists the replay model in use with capabilities %v, want %v: %v", listed, wantCaps, body["models"])
	}
	byProvider := func(key string) map[string]string {
		out := map[string]string{}
		list, _ := body[key].([]any)
		for _, e := range list {
			e := e.(map[string]any)
			out[e["provider"].(string)] = e["message"].(string)
		}
		return out
	}
	if nc := byProvider("not_configured"); !strings.HasPrefix(nc["openai"], "not configured: set OPENAI_API_KEY") || len(nc) != 1 {
		t.Errorf("not_configured = %v, want openai only", body["not_configured"])
	}
	if errs := byProvider("errors"); !strings.Contains(errs["ollama"], "127.0.0.1:9") || len(errs) != 1 {
		t.Errorf("errors = %v, want ollama (down) only", body["errors"])
	}
	if cur, _ := body["current"].(map[string]any); cur == nil || !slices.Equal(cur["capabilities"].([]any), wantCaps) {
		t.Errorf("current = %v, want the capabilities %v", body["current"], wantCaps)
	}
	code, cur := srv.do(t, "GET", "/v1/models/current", "")
	if code != 200 || !slices.Equal(cur["capabilities"].([]any), wantCaps) {
		t.Errorf("GET /v1/models/current: %d %v", code, cur)
	}
	put := fmt.Sprintf(`{"provider": "replay", "model_name": %q}`, script)
	if code, body := srv.do(t, "PUT", "/v1/models/current", put); code != 200 || !slices.Equal(body["capabilities"].([]any), wantCaps) {
		t.Errorf("PUT /v1/models/current with the current model: %d %v", code, body)
	}
	if code, body := srv.do(t, "PUT", "/v1/models/current", `{"provider": "openai", "model_name": "gpt-4o-mini"}`); code != 400 || !strings.Contains(fmt.Sprint(body), "not configured") {
		t.Errorf("PUT /v1/models/current with a provider not configured: %d %v", code, body)
	}

	_, sessID := srv.setupSession(t)
	c := srv.dial(t, loadWSSchemas(t), sessID, "")
	hello := c.next()
	model, _ := hello["server_info"].(map[string]any)["model"].(map[string]any)
	if hello["type"] != "server.hello" || model["model_name"] != script || !slices.Equal(model["capabilities"].([]any), wantCaps) {
		data, _ := json.Marshal(hello)
		t.Errorf("server.hello's model is not as REST lists it (%v): %s", wantCaps, data)
	}
}

// TestTaskServerNotConfigured: the task front-end with an OpenAI model and
// no API key or base URL is not ready, and /health says the provider is
// not configured (and what to set), not that it cannot be reached.
func TestTaskServerNotConfigured(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	srv := startTaskServerWith(t, t.TempDir(), "-w", t.TempDir(), "--model", "openai:gpt-4o-mini")
	u := srv.url
	resp, err := http.Get(strings.TrimSuffix(u, "/api/task/process") + "/health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(body), "openai is not configured") || !strings.Contains(string(body), "OPENAI_API_KEY") {
		t.Errorf("/health: %d %s", resp.StatusCode, body)
	}
}

package openai

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/plugins/plugintest"
)

func TestConfigure(t *testing.T) {
	t.Setenv(EnvBaseURL, "")
	t.Setenv(EnvAPIKey, "")
	p := New()
	if got := p.settings(); got != (conn{baseURL: DefaultBaseURL}) {
		t.Errorf("defaults = %+v, want %s and no key", got, DefaultBaseURL)
	}

	t.Setenv(EnvBaseURL, "http://127.0.0.1:1234/v1/")
	t.Setenv(EnvAPIKey, "from-env")
	p = New()
	if got := p.settings(); got != (conn{baseURL: "http://127.0.0.1:1234/v1", hasKey: true}) {
		t.Errorf("from the environment = %+v", got)
	}

	if err := p.Configure(t.Context(), map[string]string{"base_url": "https://example.test/v1", "api_key": ""}); err != nil {
		t.Fatal(err)
	}
	if got := p.settings(); got != (conn{baseURL: "https://example.test/v1", hasKey: true}) {
		t.Errorf("after Configure = %+v (an empty api_key keeps the environment's)", got)
	}

	for _, tt := range []struct {
		settings map[string]string
		want     string
	}{
		{map[string]string{"baseurl": "x"}, `unknown setting "baseurl"`},
		{map[string]string{"base_url": "127.0.0.1:11434/v1"}, "not an http or https URL"},
		{map[string]string{"base_url": "ftp://example.test"}, "not an http or https URL"},
	} {
		err := p.Configure(t.Context(), tt.settings)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Configure(%v) = %v, want %q", tt.settings, err, tt.want)
		}
	}
	if got := p.settings(); got.baseURL != "https://example.test/v1" {
		t.Errorf("a failed Configure changed the base URL to %s", got.baseURL)
	}
}

func TestInvalidBaseURLFromEnvironment(t *testing.T) {
	t.Setenv(EnvBaseURL, "localhost:11434")
	p := New()
	_, err := p.ListModels(t.Context())
	if !errors.Is(err, engine.ErrModelUnavailable) || !strings.Contains(err.Error(), EnvBaseURL+` is "localhost:11434"`) {
		t.Errorf("err = %v, want ErrModelUnavailable naming %s", err, EnvBaseURL)
	}
	if err := p.Configure(t.Context(), map[string]string{"base_url": "http://localhost:11434/v1"}); err != nil {
		t.Fatal(err)
	}
	if got := p.settings(); got.baseURL != "http://localhost:11434/v1" {
		t.Errorf("base URL = %s", got.baseURL)
	}
}

// settings returns p's current settings without the client, for tests.
func (p *Provider) settings() conn {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.err != nil {
		return conn{}
	}
	return conn{baseURL: p.baseURL, hasKey: p.apiKey != ""}
}

// TestNotConfigured: without an API key or a base URL every call fails at
// once with ErrNotConfigured, saying what to set, and nothing is
// contacted (the client's transport fails the test if it is used); a key
// or a base URL, from a setting or the environment, configures it.
func TestNotConfigured(t *testing.T) {
	t.Setenv(EnvBaseURL, "")
	t.Setenv(EnvAPIKey, "")
	p := New()
	p.httpClient.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		t.Errorf("contacted %s without configuration", r.URL)
		return nil, errors.New("no network in this test")
	})
	p.apply(map[string]string{}) // rebuild the client on the guarded transport
	_, listErr := p.ListModels(t.Context())
	chatErr := p.Chat(t.Context(), engine.ChatRequest{Model: "gpt-4o-mini", Messages: []engine.Message{{Role: engine.RoleUser, Content: "hi"}}}, func(engine.ChatChunk) error { return nil })
	_, embedErr := p.Embed(t.Context(), engine.EmbedRequest{Model: "text-embedding-3-small", Inputs: []string{"x"}})
	for name, err := range map[string]error{"ListModels": listErr, "Chat": chatErr, "Embed": embedErr} {
		if !errors.Is(err, engine.ErrNotConfigured) || !strings.Contains(err.Error(), "OPENAI_API_KEY") || !strings.Contains(err.Error(), "--openai-base-url") {
			t.Errorf("%s = %v, want ErrNotConfigured saying what to set", name, err)
		}
	}
	for _, tc := range []struct {
		name     string
		env      [2]string
		settings map[string]string
	}{
		{"api_key setting", [2]string{}, map[string]string{"api_key": "k"}},
		{"base_url setting", [2]string{}, map[string]string{"base_url": "http://127.0.0.1:9/v1"}},
		{EnvAPIKey, [2]string{EnvAPIKey, "k"}, nil},
		{EnvBaseURL, [2]string{EnvBaseURL, "http://127.0.0.1:9/v1"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env[0] != "" {
				t.Setenv(tc.env[0], tc.env[1])
			}
			p := New()
			if err := p.Configure(t.Context(), tc.settings); err != nil {
				t.Fatal(err)
			}
			if _, err := p.conn(); err != nil {
				t.Errorf("still not configured: %v", err)
			}
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestNotConfiguredOverGRPC: the plugin's not-configured answer reaches
// the host as ErrNotConfigured with the provider's words, not as a
// missing capability.
func TestNotConfiguredOverGRPC(t *testing.T) {
	t.Setenv(EnvBaseURL, "")
	t.Setenv(EnvAPIKey, "")
	m := plugintest.StartModel(t, New())
	_, err := m.ListModels(t.Context())
	if !errors.Is(err, engine.ErrNotConfigured) || errors.Is(err, engine.ErrUnsupported) || !strings.Contains(err.Error(), "not configured: set OPENAI_API_KEY") {
		t.Errorf("ListModels over gRPC = %v, want ErrNotConfigured", err)
	}
}

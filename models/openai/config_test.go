package openai

import (
	"errors"
	"strings"
	"testing"

	"github.com/plexus-agent/plexus/engine"
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
	c, err := p.conn()
	if err != nil {
		return conn{}
	}
	c.client = nil
	return c
}

package ollama

import (
	"strings"
	"testing"

	"github.com/plexus-agent/plexus/engine"
)

func TestAutoNumCtx(t *testing.T) {
	for _, tc := range []struct {
		name             string
		bytes, maxTokens int
		facts            modelFacts
		want             int
	}{
		{"small prompt gets the floor", 3000, 0, modelFacts{}, numCtxFloor},
		{"floor capped by the context length", 3000, 0, modelFacts{contextLength: 4096}, 4096},
		// 30000 bytes / 3 + 1024 = 11024 tokens: the next power of two
		// from the floor.
		{"grows by doubling", 30000, 0, modelFacts{contextLength: 131072}, 16384},
		{"max tokens replaces the allowance", 3 * 8000, 200, modelFacts{}, 16384},
		{"max tokens fits", 3 * 7000, 192, modelFacts{}, 8192},
		{"capped", 3 * 100000, 0, modelFacts{contextLength: 32768}, 32768},
		{"modelfile num_ctx is the floor", 100, 0, modelFacts{numCtxParam: 4096, contextLength: 32768}, 4096},
		{"modelfile num_ctx doubles too", 3 * 5000, 0, modelFacts{numCtxParam: 4096}, 8192},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := autoNumCtx(tc.bytes, tc.maxTokens, tc.facts); got != tc.want {
				t.Errorf("autoNumCtx(%d, %d, %+v) = %d, want %d", tc.bytes, tc.maxTokens, tc.facts, got, tc.want)
			}
		})
	}
}

func TestSetNumCtx(t *testing.T) {
	p := New()
	key := factsKey{"http://h:1", "m"}
	facts := modelFacts{contextLength: 65536}
	numCtx := func(explicit int, content string) any {
		creq, err := chatRequest(engine.ChatRequest{Model: "m", Messages: []engine.Message{{Role: engine.RoleUser, Content: content}}})
		if err != nil {
			t.Fatal(err)
		}
		p.setNumCtx(creq, key, explicit, 0, facts)
		return creq.Options["num_ctx"]
	}
	if got := numCtx(0, "hi"); got != 8192 {
		t.Errorf("small prompt: num_ctx %v, want 8192", got)
	}
	if got := numCtx(0, strings.Repeat("x", 60000)); got != 32768 {
		t.Errorf("60000-byte prompt: num_ctx %v, want 32768", got)
	}
	if got := numCtx(0, "hi"); got != 32768 {
		t.Errorf("small prompt after a large one: num_ctx %v, want 32768 kept (no reload)", got)
	}
	if got := numCtx(2048, "hi"); got != 2048 {
		t.Errorf("explicit 2048: num_ctx %v, want 2048", got)
	}
	if got := numCtx(1<<20, "hi"); got != 65536 {
		t.Errorf("explicit 1Mi: num_ctx %v, want the context length 65536", got)
	}
}

package ollama

import (
	"testing"
	"time"
)

func TestFactsCache(t *testing.T) {
	now := time.Unix(1000, 0)
	c := factsCache{now: func() time.Time { return now }}
	key := factsKey{"http://h:1", "m"}
	if _, ok := c.get(key); ok {
		t.Fatal("empty cache has facts")
	}
	c.put(key, modelFacts{capabilities: []string{"completion", "tools"}})
	if f, ok := c.get(key); !ok || f.withoutTools() {
		t.Errorf("fresh facts %+v, %v; want them, with tools", f, ok)
	}
	if _, ok := c.get(factsKey{"http://other:1", "m"}); ok {
		t.Error("facts of another server")
	}
	c.markNoTools(key)
	if f, _ := c.get(key); !f.withoutTools() {
		t.Error("tools still assumed after a refusal")
	}
	now = now.Add(factsTTL)
	if _, ok := c.get(key); ok {
		t.Error("facts used after factsTTL")
	}
	c.put(key, modelFacts{})
	c.forget(key)
	if _, ok := c.get(key); ok {
		t.Error("facts kept after forget")
	}
	for _, tc := range []struct {
		f    modelFacts
		want bool
	}{
		{modelFacts{}, false}, // unknown: try native tools
		{modelFacts{capabilities: []string{"completion"}}, true},
		{modelFacts{capabilities: []string{"completion", "tools"}, noTools: true}, true},
	} {
		if got := tc.f.withoutTools(); got != tc.want {
			t.Errorf("%+v.withoutTools() = %v, want %v", tc.f, got, tc.want)
		}
	}
}

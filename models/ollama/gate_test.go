package ollama

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

func TestGate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pieces []string
		want   []string // forwarded after each piece
		held   string   // left at the end
	}{
		{"plain text streams", []string{"Hel", "lo ", "world"}, []string{"Hel", "lo ", "world"}, ""},
		{"leading space waits for a decision", []string{"  ", "Hi"}, []string{"", "  Hi"}, ""},
		{"object is held", []string{"{\"na", "me\":1}"}, []string{"", ""}, `{"name":1}`},
		{"array of objects is held", []string{"[", " {"}, []string{"", ""}, "[ {"},
		{"markdown link streams", []string{"[", "docs]"}, []string{"", "[docs]"}, ""},
		{"json fence is held", []string{"``", "`js", "on\n{"}, []string{"", "", ""}, "```json\n{"},
		{"go fence streams", []string{"```g", "o\nx"}, []string{"```g", "o\nx"}, ""},
		{"marker at the start", []string{"<tool", "_call>{"}, []string{"", ""}, "<tool_call>{"},
		{"marker after text", []string{"Sure. <tool", "_call>{\"a\""}, []string{"Sure. ", ""}, "<tool_call>{\"a\""},
		{"partial marker released", []string{"a <func", "tional b"}, []string{"a ", "<functional b"}, ""},
		{"mistral marker", []string{"[TOOL_", "CALLS][{"}, []string{"", ""}, "[TOOL_CALLS][{"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gate{hold: true}
			for i, p := range tc.pieces {
				if got := g.push(p); got != tc.want[i] {
					t.Errorf("push %q = %q, want %q", p, got, tc.want[i])
				}
			}
			if got := g.flush(); got != tc.held {
				t.Errorf("held %q, want %q", got, tc.held)
			}
		})
	}
	g := gate{}
	if got := g.push("{"); got != "{" {
		t.Errorf("without tools, push = %q, want it forwarded", got)
	}
}

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

func TestToolsFormat(t *testing.T) {
	tools := []engine.ToolSpec{
		{Name: "get_weather", InputSchema: json.RawMessage(`{"type":"object","required":["city"],"properties":{
			"city":{"type":"string","pattern":"^[A-Z]","format":"city","description":"x"},
			"days":{"type":"integer","minimum":1,"maximum":1e12},
			"unit":{"oneOf":[{"const":"C"},{"const":"F"}]},
			"extra":{"description":"anything"},
			"at":{"$ref":"#/$defs/pos"}},
			"$defs":{"pos":{"type":"object","properties":{"line":{"type":"integer"}},"additionalProperties":false}}}`)},
		{Name: "list", InputSchema: nil},
	}
	got, err := toolsFormat(tools, false)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"anyOf":[
		{"type":"object","properties":{"name":{"const":"get_weather"},"arguments":{"type":"object","required":["city"],"properties":{
			"city":{"type":"string"},
			"days":{"type":"integer","minimum":1},
			"unit":{"anyOf":[{"enum":["C"]},{"enum":["F"]}]},
			"extra":{"type":["string","number","integer","boolean","object","array","null"]},
			"at":{"type":"object","properties":{"line":{"type":"integer"}},"additionalProperties":false}}}},"required":["name","arguments"]},
		{"type":"object","properties":{"name":{"const":"list"},"arguments":{"type":"object"}},"required":["name","arguments"]},
		{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}]}`
	if compact(t, string(got)) != compact(t, want) {
		t.Errorf("format\n%s\nwant\n%s", got, compact(t, want))
	}
	simple, err := toolsFormat(tools, true)
	if err != nil {
		t.Fatal(err)
	}
	wantSimple := `{"anyOf":[
		{"type":"object","properties":{"name":{"enum":["get_weather","list"]},"arguments":{"type":"object"}},"required":["name","arguments"]},
		{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}]}`
	if compact(t, string(simple)) != compact(t, wantSimple) {
		t.Errorf("simple format\n%s\nwant\n%s", simple, compact(t, wantSimple))
	}
	big := []engine.ToolSpec{{Name: "big", InputSchema: json.RawMessage(`{"type":"object","properties":{"p":{"enum":["` + strings.Repeat("v", maxToolsFormat) + `"]}}}`)}}
	if got, _ := toolsFormat(big, false); strings.Contains(string(got), "vvv") {
		t.Errorf("a format over %d bytes was sent whole", maxToolsFormat)
	}
}

func TestConstrainedMessages(t *testing.T) {
	req := engine.ChatRequest{
		Tools: []engine.ToolSpec{{Name: "get_weather", Description: "Weather", InputSchema: json.RawMessage(`{"type": "object"}`)}},
		Messages: []engine.Message{
			{Role: engine.RoleSystem, Content: "Be brief."},
			{Role: engine.RoleUser, Content: "Paris?"},
			{Role: engine.RoleAssistant, ToolCalls: []engine.ToolCall{{ID: "call_0", Name: "get_weather", Args: json.RawMessage(`{"city": "Paris"}`)}}},
			{Role: engine.RoleTool, ToolCallID: "call_0", Content: "21 C"},
		},
	}
	msgs, err := constrainedMessages(req)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 4 {
		t.Fatalf("%d messages, want 4: %+v", len(msgs), msgs)
	}
	sys := msgs[0].Content
	for _, want := range []string{"Be brief.\n\nYou can call these tools:", "- get_weather: Weather\n  arguments (JSON Schema): {\"type\":\"object\"}", `{"answer": "<your answer>"}`} {
		if !strings.Contains(sys, want) {
			t.Errorf("system message %q lacks %q", sys, want)
		}
	}
	if got, want := msgs[2], `{"name": "get_weather", "arguments": {"city":"Paris"}}`; got.Role != "assistant" || got.Content != want || len(got.ToolCalls) != 0 {
		t.Errorf("assistant message %+v, want content %s", got, want)
	}
	if got, want := msgs[3], "Result of tool get_weather (call call_0):\n21 C"; got.Role != "user" || got.Content != want {
		t.Errorf("tool message %+v, want a user message %q", got, want)
	}
	msgs, _ = constrainedMessages(engine.ChatRequest{Tools: req.Tools, Messages: req.Messages[1:2]})
	if len(msgs) != 2 || msgs[0].Role != "system" || !strings.HasPrefix(msgs[0].Content, "You can call") {
		t.Errorf("without a system message: %+v, want one added first", msgs)
	}
}

func TestParseConstrained(t *testing.T) {
	names := []string{"get_weather"}
	calls, answer, ok := parseConstrained(`{"name":"get_weather","arguments":{"city":"Paris"}}`, names)
	if !ok || len(calls) != 1 || string(calls[0].Args) != `{"city":"Paris"}` || answer != "" {
		t.Errorf("call: %+v %q %v", calls, answer, ok)
	}
	calls, answer, ok = parseConstrained(` {"answer": "It is sunny."} `, names)
	if !ok || len(calls) != 0 || answer != "It is sunny." {
		t.Errorf("answer: %+v %q %v", calls, answer, ok)
	}
	for _, text := range []string{`{"answer": "cut sh`, `{"verdict": 1}`, `{"name":"other","arguments":{}}`} {
		if _, _, ok := parseConstrained(text, names); ok {
			t.Errorf("%s: parsed, want it left as text", text)
		}
	}
}

package ollama

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/plexus-agent/plexus/engine"
)

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

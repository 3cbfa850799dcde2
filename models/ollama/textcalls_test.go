package ollama

import (
	"encoding/json"
	"strings"
	"testing"
)

var offered = []string{"get_weather", "read_file"}

func TestParseTextCalls(t *testing.T) {
	type call struct{ name, args string }
	for _, tc := range []struct {
		name      string
		text      string
		want      []call
		before    string
		attempted bool
	}{
		// Qwen 2.5 / Hermes.
		{name: "tool_call tag", text: `<tool_call>
{"name": "get_weather", "arguments": {"city": "Paris"}}
</tool_call>`, want: []call{{"get_weather", `{"city":"Paris"}`}}},
		{name: "tool_call tags, two calls, im_end", text: `<tool_call>{"name":"get_weather","arguments":{"city":"Paris"}}</tool_call>
<tool_call>{"name":"read_file","arguments":{"path":"a.go","limit":3}}</tool_call><|im_end|>`,
			want: []call{{"get_weather", `{"city":"Paris"}`}, {"read_file", `{"path":"a.go","limit":3}`}}},
		{name: "tool_call tag after text, unclosed", text: "Let me check.\n<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\"}}",
			want: []call{{"get_weather", `{"city":"Oslo"}`}}, before: "Let me check.\n"},
		{name: "tool_call tag, unknown tool", text: `<tool_call>{"name":"rm_rf","arguments":{}}</tool_call>`, attempted: true},
		{name: "tool_call tag, broken JSON", text: `<tool_call>{"name":"get_weather","arguments":{"city":}</tool_call>`, attempted: true},

		// Bare and fenced JSON.
		{name: "bare object", text: ` {"name": "get_weather", "arguments": {"city": "Paris", "n": 1.50}} `,
			want: []call{{"get_weather", `{"city":"Paris","n":1.50}`}}},
		{name: "bare object, parameters", text: `{"name":"read_file","parameters":{"path":"x"}}`, want: []call{{"read_file", `{"path":"x"}`}}},
		{name: "bare object, OpenAI-style string arguments", text: `{"type":"function","name":"read_file","arguments":"{\"path\":\"x\"}"}`,
			want: []call{{"read_file", `{"path":"x"}`}}},
		{name: "bare object, null arguments", text: `{"name":"read_file","arguments":null}`, want: []call{{"read_file", `{}`}}},
		{name: "bare array", text: `[{"name":"get_weather","arguments":{"city":"A"}},{"name":"read_file","arguments":{"path":"b"}}]`,
			want: []call{{"get_weather", `{"city":"A"}`}, {"read_file", `{"path":"b"}`}}},
		{name: "json fence", text: "```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n```",
			want: []call{{"get_weather", `{"city":"Rome"}`}}},
		{name: "bare fence", text: "```\n{\"name\": \"get_weather\", \"arguments\": {}}\n```\n", want: []call{{"get_weather", `{}`}}},
		{name: "bare object, unknown tool", text: `{"name":"delete_all","arguments":{}}`, attempted: true},
		{name: "bare object, arguments not an object", text: `{"name":"get_weather","arguments":["Paris"]}`, attempted: true},
		{name: "bare object, cut short", text: `{"name":"get_weather","arguments":{"city":"Par`, attempted: true},
		{name: "fence, unknown tool", text: "```json\n{\"name\":\"nope\",\"arguments\":{}}\n```", attempted: true},

		// Mistral.
		{name: "mistral array", text: `[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Lyon"}}]</s>`,
			want: []call{{"get_weather", `{"city":"Lyon"}`}}},
		{name: "mistral name[ARGS]", text: `[TOOL_CALLS]get_weather[ARGS]{"city":"Nice"}[TOOL_CALLS]read_file[ARGS]{"path":"p"}`,
			want: []call{{"get_weather", `{"city":"Nice"}`}, {"read_file", `{"path":"p"}`}}},
		{name: "mistral, unknown tool", text: `[TOOL_CALLS][{"name":"x","arguments":{}}]`, attempted: true},

		// Llama 3.1 custom tools and python_tag.
		{name: "function tag", text: `<function=get_weather>{"city": "Bern"}</function>`, want: []call{{"get_weather", `{"city":"Bern"}`}}},
		{name: "function tags, two, eot", text: `<function=get_weather>{"city":"A"}</function><function=read_file>{"path":"b"}</function><|eot_id|>`,
			want: []call{{"get_weather", `{"city":"A"}`}, {"read_file", `{"path":"b"}`}}},
		{name: "function tag, unknown tool", text: `<function=launch>{}</function>`, attempted: true},
		{name: "function tag, arguments not an object", text: `<function=get_weather>"Bern"</function>`, attempted: true},
		{name: "python_tag", text: `<|python_tag|>{"name": "get_weather", "parameters": {"city": "Graz"}}<|eom_id|>`,
			want: []call{{"get_weather", `{"city":"Graz"}`}}},
		{name: "python_tag, two separated by ;", text: `<|python_tag|>{"name":"get_weather","parameters":{"city":"A"}}; {"name":"read_file","parameters":{"path":"b"}}`,
			want: []call{{"get_weather", `{"city":"A"}`}, {"read_file", `{"path":"b"}`}}},
		{name: "python_tag, python call", text: `<|python_tag|>brave_search.call(query="x")`, attempted: true},

		// Ordinary answers.
		{name: "plain text", text: "The weather in Paris is mild."},
		{name: "empty", text: ""},
		{name: "JSON answer", text: `{"temperature": 21, "unit": "C"}`},
		{name: "JSON answer with a name", text: `{"name": "get_weather", "description": "a tool"}`},
		{name: "JSON answer with name, arguments and more", text: `{"name":"get_weather","arguments":{},"note":"x"}`},
		{name: "array of numbers", text: `[1, 2, 3]`},
		{name: "markdown link", text: `[docs](https://example.com) say so.`},
		{name: "go fence", text: "```go\nfunc main() {}\n```"},
		{name: "JSON inside prose", text: `Call it like {"name":"get_weather","arguments":{"city":"Paris"}} next time.`},
		{name: "JSON fence then prose", text: "```json\n{\"name\":\"get_weather\",\"arguments\":{}}\n```\nThat is how."},
		{name: "text that mentions a tag", text: "Models write <tool_call without closing it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := parseTextCalls(tc.text, offered)
			var calls []call
			for _, c := range got.Calls {
				calls = append(calls, call{c.Name, string(c.Args)})
			}
			if len(calls) != len(tc.want) {
				t.Fatalf("calls %v, want %v (attempted %v)", calls, tc.want, got.Attempted)
			}
			for i := range calls {
				if calls[i] != tc.want[i] {
					t.Errorf("call %d = %v, want %v", i, calls[i], tc.want[i])
				}
			}
			if got.Before != tc.before || got.Attempted != tc.attempted {
				t.Errorf("before %q, attempted %v; want %q, %v", got.Before, got.Attempted, tc.before, tc.attempted)
			}
		})
	}
}

func FuzzParseTextCalls(f *testing.F) {
	for _, s := range []string{
		`<tool_call>{"name":"get_weather","arguments":{"city":"Paris"}}</tool_call>`,
		`{"name":"read_file","parameters":{"path":"x"}}`,
		"```json\n{\"name\":\"get_weather\",\"arguments\":{}}\n```",
		`[TOOL_CALLS]get_weather[ARGS]{"city":"Nice"}`,
		`[TOOL_CALLS][{"name":"get_weather","arguments":{}}]`,
		`<function=get_weather>{"city":"A"}</function>`,
		`<|python_tag|>{"name":"get_weather","parameters":{}};{"name":"read_file","parameters":{}}`,
		`{"name":"read_file","arguments":"{\"path\":1}"}`,
		"plain text",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		got := parseTextCalls(text, offered)
		if len(got.Calls) > 0 && got.Attempted {
			t.Errorf("both calls and attempted: %+v", got)
		}
		if !strings.HasPrefix(text, got.Before) {
			t.Errorf("before %q is not a prefix of the text", got.Before)
		}
		for _, c := range got.Calls {
			if c.Name != offered[0] && c.Name != offered[1] {
				t.Errorf("call of %q, not offered", c.Name)
			}
			var o map[string]json.RawMessage
			if err := json.Unmarshal(c.Args, &o); err != nil || o == nil {
				t.Errorf("arguments %q are not a JSON object: %v", c.Args, err)
			}
		}
	})
}

package openai

import (
	"encoding/json"
	"testing"

	oai "github.com/sashabaranov/go-openai"
)

func FuzzBodyMessage(f *testing.F) {
	for _, s := range []string{
		`{"error":{"message":"m"}}`, `{"error":"m"}`, `{"message":"m"}`, `{"detail":[{"msg":"x"}]}`,
		`{"error":null}`, `404 page not found`, ``, `{"error":{}}`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		msg, ok := bodyMessage(body)
		if ok && msg == "" {
			t.Fatalf("bodyMessage(%q) found an empty message", body)
		}
		if !ok && json.Valid(body) {
			var m map[string]json.RawMessage
			if json.Unmarshal(body, &m) == nil {
				for _, k := range []string{"error", "message", "detail"} {
					if v, has := m[k]; has && string(v) != "null" && string(v) != `""` {
						t.Fatalf("bodyMessage(%q) missed the %s field", body, k)
					}
				}
			}
		}
	})
}

// FuzzToolCalls feeds tool call deltas decoded from the fuzzer's JSON and
// checks that assembly keeps every argument byte, in order per call.
func FuzzToolCalls(f *testing.F) {
	f.Add([]byte(`[[{"index":0,"id":"a","function":{"name":"f","arguments":"{\"x\""}}],[{"index":0,"function":{"arguments":":1}"}}]]`))
	f.Add([]byte(`[[{"index":0,"id":"a","function":{"name":"f"}},{"index":0,"id":"b","function":{"name":"g"}}]]`))
	f.Add([]byte(`[[{"id":"a","function":{"name":"f","arguments":"{}"}}],[{"index":3,"function":{"arguments":"x"}}]]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var deltas [][]oai.ToolCall
		if json.Unmarshal(data, &deltas) != nil {
			return
		}
		var tc toolCalls
		total := 0
		for _, d := range deltas {
			tc.add(d)
			for _, c := range d {
				total += len(c.Function.Arguments)
			}
		}
		kept := 0
		for _, c := range tc.calls {
			kept += c.args.Len()
		}
		if kept != total {
			t.Fatalf("assembled %d argument bytes of %d", kept, total)
		}
		for _, c := range tc.complete() {
			if len(c.Args) == 0 {
				t.Fatalf("call %q has empty arguments", c.Name)
			}
		}
	})
}

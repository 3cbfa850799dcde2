package ollama

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/ollama/ollama/api"

	"github.com/plexus-agent/plexus/engine"
)

// maxToolsFormat is the largest full constrained schema, in bytes, sent as
// `format`. Ollama 0.6.5 turns the schema into a llama.cpp grammar in a
// 32 KB buffer and cuts longer grammars short; the grammar of these
// schemas measures about 3.3 times the schema's size. Above this, the
// arguments are constrained only to be an object.
const maxToolsFormat = 6 << 10

// answerKey is the property of a constrained reply that answers without a
// tool.
const answerKey = "answer"

// constrainedRequest returns creq rewritten for constrained tool calling:
// no tools, the tools described in the system message, the history's tool
// calls and results as text, and `format` the schema of toolsFormat unless
// the caller gave a format of its own. simple asks for the schema that
// constrains arguments only to objects.
func constrainedRequest(creq *api.ChatRequest, req engine.ChatRequest, simple bool) (*api.ChatRequest, error) {
	out := *creq
	out.Tools = nil
	msgs, err := constrainedMessages(req)
	if err != nil {
		return nil, err
	}
	out.Messages = msgs
	if len(bytes.TrimSpace(req.Options.Format)) == 0 {
		f, err := toolsFormat(req.Tools, simple)
		if err != nil {
			return nil, err
		}
		out.Format = f
	}
	return &out, nil
}

// toolsFormat returns the JSON Schema a constrained reply must match: one
// branch per tool, {"name": <const>, "arguments": <its argument schema as
// the grammar can take it>}, and a branch {"answer": <string>}. Property
// order is kept, since the grammar writes properties in schema order. A
// schema larger than maxToolsFormat, or simple, gives instead one tool
// branch with "name" an enum of all tools and "arguments" any object.
func toolsFormat(tools []engine.ToolSpec, simple bool) (json.RawMessage, error) {
	answer := &object{}
	answer.set("type", "object")
	answer.set("properties", props(answerKey, &object{m: map[string]any{"type": "string"}, keys: []string{"type"}}))
	answer.set("required", []any{answerKey})

	names := make([]any, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	simpleBranch := callBranch(enumOf(names...), anyObject())
	if !simple {
		branches := make([]any, 0, len(tools)+1)
		for _, t := range tools {
			args, err := grammarArgs(t.InputSchema)
			if err != nil {
				return nil, invalidf("tool %q: input schema: %v", t.Name, err)
			}
			branches = append(branches, callBranch(enumOf(t.Name), args))
		}
		full := &object{}
		full.set("anyOf", append(branches, answer))
		b, err := json.Marshal(full)
		if err != nil {
			return nil, invalidf("tool schemas: %v", err)
		}
		if len(b) <= maxToolsFormat {
			return b, nil
		}
	}
	root := &object{}
	root.set("anyOf", []any{simpleBranch, answer})
	b, err := json.Marshal(root)
	if err != nil {
		return nil, invalidf("tool schemas: %v", err)
	}
	return b, nil
}

// callBranch is {"type":"object","properties":{"name":name,
// "arguments":args},"required":["name","arguments"]}.
func callBranch(name, args any) *object {
	p := &object{}
	p.set("name", name)
	p.set("arguments", args)
	o := &object{}
	o.set("type", "object")
	o.set("properties", p)
	o.set("required", []any{"name", "arguments"})
	return o
}

func props(k string, v any) *object {
	o := &object{}
	o.set(k, v)
	return o
}

func enumOf(vs ...any) *object {
	o := &object{}
	if len(vs) == 1 {
		o.set("const", vs[0])
	} else {
		o.set("enum", vs)
	}
	return o
}

func anyObject() *object {
	o := &object{}
	o.set("type", "object")
	return o
}

// anyValue is a schema any JSON value matches. llama.cpp reads an empty
// schema as "an object", so "any" is spelt as every type.
func anyValue() *object {
	o := &object{}
	o.set("type", []any{"string", "number", "integer", "boolean", "object", "array", "null"})
	return o
}

// grammarArgs converts a tool's input schema into what llama.cpp's
// json-schema-to-grammar (as in Ollama 0.6.5) takes without error: refs
// inlined, oneOf as anyOf, and only the keywords it enforces (see
// grammarNode). An empty schema is any object.
func grammarArgs(raw json.RawMessage) (any, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return anyObject(), nil
	}
	root, err := decodeOrdered(trimmed)
	if err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	obj, ok := root.(*object)
	if !ok {
		return nil, fmt.Errorf("is %s, want an object schema", jsonKind(root))
	}
	node := grammarNode(normalize(obj, obj, nil))
	if o, ok := node.(*object); ok {
		if _, typed := o.get("type"); !typed {
			if _, alt := o.get("anyOf"); !alt {
				o.set("type", "object")
			}
		}
	}
	return node, nil
}

// grammarNode keeps the keywords of a normalized schema node that the
// grammar enforces: type (names llama.cpp knows), properties, required,
// items (one schema), enum, anyOf, additionalProperties, minItems,
// maxItems, minLength, maxLength, and integer bounds that fit 32 bits.
// pattern, format, allOf, not and the rest are dropped: llama.cpp fails on
// patterns it cannot anchor and on formats that are not strings. A node
// left with no constraint is any value.
func grammarNode(node any) any {
	n, ok := node.(*object)
	if !ok {
		return anyValue() // true, false, or junk: no constraint
	}
	out := &object{}
	integer := false
	for _, k := range n.keys {
		v := n.m[k]
		switch k {
		case "type":
			switch t := v.(type) {
			case string:
				if knownType(t) {
					out.set(k, t)
					integer = t == "integer"
				}
			case []any:
				var ts []any
				for _, e := range t {
					if s, ok := e.(string); ok && knownType(s) {
						ts = append(ts, s)
					}
				}
				if len(ts) > 0 {
					out.set(k, ts)
				}
			}
		case "properties":
			m, ok := v.(*object)
			if !ok {
				continue
			}
			p := &object{}
			for _, name := range m.keys {
				p.set(name, grammarNode(m.m[name]))
			}
			out.set(k, p)
		case "required":
			if a, ok := v.([]any); ok {
				var names []any
				for _, e := range a {
					if s, ok := e.(string); ok {
						names = append(names, s)
					}
				}
				out.set(k, names)
			}
		case "items":
			if _, ok := v.(*object); ok {
				out.set(k, grammarNode(v))
			}
		case "enum":
			if a, ok := v.([]any); ok && len(a) > 0 {
				out.set(k, a)
			}
		case "anyOf":
			if a, ok := v.([]any); ok && len(a) > 0 {
				alts := make([]any, len(a))
				for i, e := range a {
					alts[i] = grammarNode(e)
				}
				out.set(k, alts)
			}
		case "additionalProperties":
			switch v.(type) {
			case bool:
				out.set(k, v)
			case *object:
				out.set(k, grammarNode(v))
			}
		case "minItems", "maxItems", "minLength", "maxLength":
			if i, ok := smallInt(v); ok && i >= 0 {
				out.set(k, i)
			}
		}
	}
	if integer {
		for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
			if v, ok := n.get(k); ok {
				if i, ok := smallInt(v); ok {
					out.set(k, i)
				}
			}
		}
	}
	if len(out.keys) == 0 || onlyKeys(out, "required") || onlyKeys(out, "minItems", "maxItems", "minLength", "maxLength") {
		return anyValue()
	}
	return out
}

func knownType(t string) bool {
	switch t {
	case "string", "number", "integer", "boolean", "object", "array", "null":
		return true
	}
	return false
}

// smallInt returns a json.Number that is an integer within 32 bits.
func smallInt(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) || f < math.MinInt32+1 || f > math.MaxInt32-1 {
		return 0, false
	}
	return int64(f), true
}

// onlyKeys reports whether o has keys and all of them are among ks.
func onlyKeys(o *object, ks ...string) bool {
	for _, k := range o.keys {
		found := false
		for _, want := range ks {
			found = found || k == want
		}
		if !found {
			return false
		}
	}
	return len(o.keys) > 0
}

// toolsPrompt describes the tools and the reply format for a model that
// is not given them as tools.
func toolsPrompt(tools []engine.ToolSpec) string {
	var b strings.Builder
	b.WriteString("You can call these tools:\n")
	for _, t := range tools {
		fmt.Fprintf(&b, "- %s", t.Name)
		if d := strings.TrimSpace(t.Description); d != "" {
			fmt.Fprintf(&b, ": %s", d)
		}
		b.WriteString("\n  arguments (JSON Schema): ")
		schema := bytes.TrimSpace(t.InputSchema)
		var c bytes.Buffer
		if len(schema) == 0 || json.Compact(&c, schema) != nil {
			c.Reset()
			c.WriteString(`{"type":"object"}`)
		}
		b.Write(c.Bytes())
		b.WriteString("\n")
	}
	b.WriteString("\nReply with exactly one JSON object and nothing else. To call a tool: " +
		`{"name": "<tool name>", "arguments": {<the tool's arguments>}}` +
		". To answer without a tool: " + `{"answer": "<your answer>"}` + ".")
	return b.String()
}

// constrainedMessages renders req's messages for a template without tools:
// the tools prompt joins the first system message (or becomes one), an
// assistant's tool calls are its content, one JSON object per line as the
// model writes them, and a tool result is a user message naming the tool
// and call.
func constrainedMessages(req engine.ChatRequest) ([]api.Message, error) {
	prompt := toolsPrompt(req.Tools)
	out := make([]api.Message, 0, len(req.Messages)+1)
	if len(req.Messages) == 0 || req.Messages[0].Role != engine.RoleSystem {
		out = append(out, api.Message{Role: "system", Content: prompt})
	}
	for i, m := range req.Messages {
		switch m.Role {
		case engine.RoleSystem:
			content := m.Content
			if i == 0 {
				content = strings.TrimRight(content, "\n") + "\n\n" + prompt
			}
			out = append(out, api.Message{Role: "system", Content: content})
		case engine.RoleUser:
			out = append(out, api.Message{Role: "user", Content: m.Content})
		case engine.RoleAssistant:
			lines := []string{}
			if strings.TrimSpace(m.Content) != "" {
				lines = append(lines, m.Content)
			}
			for _, c := range m.ToolCalls {
				args := bytes.TrimSpace(c.Args)
				if len(args) == 0 || string(args) == "null" {
					args = []byte(`{}`)
				}
				if args[0] != '{' || !json.Valid(args) {
					return nil, invalidf("message %d: the arguments of tool call %q are not a JSON object: %s", i, c.Name, args)
				}
				name, _ := json.Marshal(c.Name)
				var compact bytes.Buffer
				_ = json.Compact(&compact, args)
				lines = append(lines, fmt.Sprintf(`{"name": %s, "arguments": %s}`, name, compact.Bytes()))
			}
			out = append(out, api.Message{Role: "assistant", Content: strings.Join(lines, "\n")})
		case engine.RoleTool:
			name := m.ToolName
			if name == "" && m.ToolCallID != "" {
				name = toolNameOf(req.Messages[:i], m.ToolCallID)
			}
			head := "Result of tool " + name
			if name == "" {
				head = "Tool result"
			}
			if m.ToolCallID != "" {
				head += " (call " + m.ToolCallID + ")"
			}
			out = append(out, api.Message{Role: "user", Content: head + ":\n" + m.Content})
		default:
			return nil, invalidf("message %d: role %q is not system, user, assistant or tool", i, m.Role)
		}
	}
	return out, nil
}

// parseConstrained reads a constrained reply: a call of an offered tool,
// or an answer. Anything else (a caller's own format, a reply cut short)
// is neither: ok is false and the reply stands as text.
func parseConstrained(text string, names []string) (calls []textCall, answer string, ok bool) {
	var o map[string]json.RawMessage
	if json.Unmarshal([]byte(strings.TrimSpace(text)), &o) != nil {
		return nil, "", false
	}
	if raw, has := o[answerKey]; has && len(o) == 1 {
		if json.Unmarshal(raw, &answer) == nil {
			return nil, answer, true
		}
		return nil, "", false
	}
	if r := parseTextCalls(text, names); len(r.Calls) > 0 {
		return r.Calls, "", true
	}
	return nil, "", false
}

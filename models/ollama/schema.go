package ollama

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/ollama/ollama/api"

	"github.com/plexus-agent/plexus/engine"
)

// toolFromSpec converts a tool for /api/chat (see the package doc for what
// survives of the input schema).
func toolFromSpec(s engine.ToolSpec) (api.Tool, error) {
	if s.Name == "" {
		return api.Tool{}, invalidf("a tool has no name")
	}
	params, err := parametersFromSchema(s.InputSchema)
	if err != nil {
		return api.Tool{}, invalidf("tool %q: input schema: %v", s.Name, err)
	}
	return api.Tool{Type: "function", Function: api.ToolFunction{
		Name: s.Name, Description: s.Description, Parameters: params,
	}}, nil
}

// parametersFromSchema converts an object JSON Schema into Ollama's tool
// parameters, keeping the order of properties. An empty or null schema is
// an object without properties.
func parametersFromSchema(raw json.RawMessage) (api.ToolFunctionParameters, error) {
	empty := api.ToolFunctionParameters{Type: "object", Properties: api.NewToolPropertiesMap()}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return empty, nil
	}
	root, err := decodeOrdered(trimmed)
	if err != nil {
		return api.ToolFunctionParameters{}, fmt.Errorf("not JSON: %v", err)
	}
	obj, ok := root.(*object)
	if !ok {
		return api.ToolFunctionParameters{}, fmt.Errorf("is %s, want an object schema", jsonKind(root))
	}
	if t, ok := obj.get("type"); ok && t != "object" {
		b, _ := json.Marshal(t)
		return api.ToolFunctionParameters{}, fmt.Errorf(`has "type": %s; Ollama tools take "type": "object"`, b)
	}
	obj = normalize(obj, obj, nil).(*object)
	obj.set("type", "object")
	b, err := json.Marshal(obj)
	if err != nil {
		return api.ToolFunctionParameters{}, err
	}
	var params api.ToolFunctionParameters
	if err := json.Unmarshal(b, &params); err != nil {
		return api.ToolFunctionParameters{}, fmt.Errorf("does not fit Ollama's tool parameters: %v", err)
	}
	if params.Properties == nil {
		params.Properties = api.NewToolPropertiesMap()
	}
	return params, nil
}

// normalize rewrites a schema node into the keywords Ollama's types carry:
// local $refs are replaced by a copy of their target (a $ref back into a
// target being inlined is dropped, leaving an untyped node), oneOf becomes
// anyOf and const a one-value enum. root is the whole schema; active holds
// the refs being inlined on the way down.
func normalize(node any, root *object, active []string) any {
	switch n := node.(type) {
	case []any:
		out := make([]any, len(n))
		for i, v := range n {
			out[i] = normalize(v, root, active)
		}
		return out
	case *object:
		if ref, ok := n.get("$ref"); ok {
			ref, _ := ref.(string)
			if target, ok := resolveRef(root, ref); ok && !slices.Contains(active, ref) {
				merged := &object{}
				for _, k := range target.keys {
					merged.set(k, target.m[k])
				}
				for _, k := range n.keys { // siblings of $ref (a description) win
					if k != "$ref" {
						merged.set(k, n.m[k])
					}
				}
				return normalize(merged, root, append(active, ref))
			}
		}
		out := &object{}
		for _, k := range n.keys {
			v := n.m[k]
			switch k {
			case "$ref":
				continue // unresolvable or recursive
			case "oneOf":
				if _, both := n.get("anyOf"); !both {
					k = "anyOf"
				}
			case "const":
				if _, both := n.get("enum"); !both {
					out.set("enum", []any{v})
					continue
				}
			case "properties", "$defs", "definitions":
				// Maps of names to schemas: normalize the schemas, not
				// the names.
				if m, ok := v.(*object); ok {
					props := &object{}
					for _, name := range m.keys {
						props.set(name, normalize(m.m[name], root, active))
					}
					out.set(k, props)
					continue
				}
			}
			out.set(k, normalize(v, root, active))
		}
		return out
	}
	return node
}

// resolveRef finds a local reference (#/$defs/name, #/definitions/name or
// any other JSON pointer into the schema) and returns its object.
func resolveRef(root *object, ref string) (*object, bool) {
	pointer, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, false
	}
	var node any = root
	for _, part := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		if part == "" {
			continue
		}
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		o, ok := node.(*object)
		if !ok {
			return nil, false
		}
		if node, ok = o.get(part); !ok {
			return nil, false
		}
	}
	obj, ok := node.(*object)
	return obj, ok
}

// object is a JSON object that keeps its keys in order, so that a tool's
// properties reach the model in the order the schema lists them.
type object struct {
	keys []string
	m    map[string]any
}

func (o *object) get(k string) (any, bool) {
	v, ok := o.m[k]
	return v, ok
}

// set sets k to v, appending k if it is new.
func (o *object) set(k string, v any) {
	if o.m == nil {
		o.m = map[string]any{}
	}
	if _, ok := o.m[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.m[k] = v
}

// MarshalJSON writes the keys in order.
func (o *object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		vb, err := json.Marshal(o.m[k])
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// decodeOrdered decodes one JSON value, objects as *object and numbers as
// json.Number (so enum values and bounds stay exactly as written). Trailing
// data is an error.
func decodeOrdered(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the top-level value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		o := &object{m: map[string]any{}}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			o.set(kt.(string), v)
		}
		_, err := dec.Token() // }
		return o, err
	case json.Delim('['):
		a := []any{}
		for dec.More() {
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := dec.Token() // ]
		return a, err
	}
	return tok, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case *object:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "null"
}

package toolkit

import (
	"encoding/json"
	"fmt"
)

// Prop is one property of an input schema.
type Prop struct {
	Name   string
	Schema map[string]any
}

// ObjectSchema is a draft 2020-12 schema of an object with exactly props,
// and the property names in order (what DecodeArgs accepts).
func ObjectSchema(required []string, props ...Prop) (json.RawMessage, []string) {
	properties := map[string]any{}
	fields := make([]string, 0, len(props))
	for _, p := range props {
		properties[p.Name] = p.Schema
		fields = append(fields, p.Name)
	}
	s := map[string]any{
		"$schema":              "https://json-schema.org/draft/2020-12/schema",
		"type":                 "object",
		"properties":           properties,
		"additionalProperties": false,
	}
	if len(required) > 0 {
		s["required"] = required
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("input schema does not encode: %v", err)) // static data; cannot happen
	}
	return b, fields
}

// Str is a string property.
func Str(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }

// Boolean is a boolean property with a default.
func Boolean(desc string, def bool) map[string]any {
	return map[string]any{"type": "boolean", "description": desc, "default": def}
}

// StrArray is an array-of-strings property.
func StrArray(desc string) map[string]any {
	return map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": desc}
}

// Integer is an integer property; a maximum of 0 means none.
func Integer(desc string, minimum, maximum int) map[string]any {
	s := map[string]any{"type": "integer", "description": desc, "minimum": minimum}
	if maximum > 0 {
		s["maximum"] = maximum
	}
	return s
}

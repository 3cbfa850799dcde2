// Package toolkit holds what the built-in tool plugins share: strict
// decoding of a call's JSON arguments, JSON Schema builders for their
// inputs, and a cache of open workspace roots.
package toolkit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/plexus-agent/plexus/engine"
)

// DecodeArgs decodes a call's JSON arguments into dst (a pointer to a
// struct with json tags) strictly: the arguments must be one JSON object
// (absent or null counts as {}) whose keys are all in fields, spelled
// exactly (encoding/json alone would accept "Path" for "path"), each of
// the type dst declares. Errors are *engine.ToolError with code
// invalid_input naming the field.
func DecodeArgs(tool string, raw []byte, fields []string, dst any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = []byte("{}")
	}
	if raw[0] != '{' {
		return engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: the arguments must be a JSON object with the fields %s, not %s", tool, strings.Join(fields, ", "), jsonKind(raw))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	var keys map[string]json.RawMessage
	if err := dec.Decode(&keys); err != nil {
		return decodeError(tool, dst, err)
	}
	if dec.More() {
		return engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: the arguments must be a single JSON object; there is more after it", tool)
	}
	var unknown []string
	for k := range keys {
		if !slices.Contains(fields, k) {
			unknown = append(unknown, strconv.Quote(k))
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		noun := "field"
		if len(unknown) > 1 {
			noun = "fields"
		}
		return engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: unknown %s %s; the accepted fields are %s", tool, noun, strings.Join(unknown, ", "), strings.Join(fields, ", "))
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return decodeError(tool, dst, err)
	}
	return nil
}

// decodeError describes a json decoding error for the model.
func decodeError(tool string, dst any, err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: field %q must be %s, not %s", tool, typeErr.Field, jsonType(dst, typeErr.Field), typeErr.Value)
	case errors.As(err, &syntaxErr):
		return engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: the arguments are not valid JSON: %v", tool, err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: the arguments are not valid JSON: they end before the object is closed", tool)
	}
	return engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: the arguments do not match the input schema: %v", tool, err)
}

// jsonType names, in JSON words, the type of dst's field with json name
// field.
func jsonType(dst any, field string) string {
	t := reflect.TypeOf(dst)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != field {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch ft.Kind() {
		case reflect.String:
			return "a string"
		case reflect.Bool:
			return "true or false"
		case reflect.Int, reflect.Int64, reflect.Int32:
			return "an integer"
		case reflect.Slice:
			if ft.Elem().Kind() == reflect.String {
				return "an array of strings"
			}
			return "an array"
		}
		return ft.Kind().String()
	}
	return "of another type"
}

// jsonKind names the kind of JSON value raw starts with.
func jsonKind(raw []byte) string {
	switch c := raw[0]; {
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == '-' || c >= '0' && c <= '9':
		return "a number"
	}
	return fmt.Sprintf("%.20q", raw)
}

// Missing is the error for a required field that is absent or null.
func Missing(tool, field, what string) error {
	return engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: missing required field %q (%s)", tool, field, what)
}

// Invalid is the error for a field whose value is out of range.
func Invalid(tool, field, format string, args ...any) error {
	return engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: field %q %s", tool, field, fmt.Sprintf(format, args...))
}

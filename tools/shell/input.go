package shell

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

// input is a decoded, validated run_command call.
type input struct {
	Command     string
	Cwd         string        // as given; "" means the workspace root
	Timeout     time.Duration // > 0
	OutputBytes int           // per stream, > 0
}

// fieldNames lists the input fields in schema order.
var fieldNames = []string{"command", "cwd", "timeout_seconds", "max_output_bytes"}

// decodeInput decodes args strictly against the input schema. Errors are
// *engine.ToolError with code invalid_input naming the offending field.
func (t *Tools) decodeInput(args json.RawMessage) (input, error) {
	args = bytes.TrimSpace(args)
	if len(args) == 0 {
		return input{}, invalid(`%s needs a JSON object of arguments like {"command": "ls -la"}; it got none`, ToolName)
	}
	if kind := jsonKind(args); kind != "object" {
		return input{}, invalid(`%s needs a JSON object of arguments like {"command": "ls -la"}; it got %s`, ToolName, describe(args))
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(args, &fields); err != nil {
		return input{}, invalid("the arguments of %s are not valid JSON: %v", ToolName, err)
	}
	for name := range fields {
		if !slices.Contains(fieldNames, name) {
			return input{}, invalid("unknown field %q; %s accepts only %s", name, ToolName, strings.Join(fieldNames, ", "))
		}
	}
	in := input{Timeout: t.opts.Timeout, OutputBytes: t.opts.OutputBytes}

	raw, ok := fields["command"]
	if !ok {
		return input{}, invalid(`"command" is required: the shell command to run, for example {"command": "go test ./..."}`)
	}
	if err := decodeString(raw, &in.Command); err != nil {
		return input{}, invalid(`"command" must be a string holding the shell command to run, got %s`, describe(raw))
	}
	switch {
	case strings.TrimSpace(in.Command) == "":
		return input{}, invalid(`"command" is empty; give the shell command to run, for example "ls -la"`)
	case strings.ContainsRune(in.Command, 0):
		return input{}, invalid(`"command" contains a NUL byte, which no shell command can contain`)
	case len(in.Command) > maxCommandBytes:
		return input{}, invalid(`"command" is %d bytes; the limit is %d. Write a long script to a file in the workspace and run that file instead`, len(in.Command), maxCommandBytes)
	}

	if raw, ok := fields["cwd"]; ok {
		if err := decodeString(raw, &in.Cwd); err != nil {
			return input{}, invalid(`"cwd" must be a string naming a directory relative to the workspace root (omit it to run in the root), got %s`, describe(raw))
		}
	}

	if raw, ok := fields["timeout_seconds"]; ok {
		maxSec := int64(t.opts.MaxTimeout / time.Second)
		n, err := decodeInt(raw, 1, maxSec)
		if err != nil {
			return input{}, invalid(`"timeout_seconds" must be a whole number of seconds from 1 to %d, got %s`, maxSec, describe(raw))
		}
		in.Timeout = time.Duration(n) * time.Second
	}

	if raw, ok := fields["max_output_bytes"]; ok {
		n, err := decodeInt(raw, 1, int64(t.opts.MaxOutputBytes))
		if err != nil {
			return input{}, invalid(`"max_output_bytes" must be a whole number of bytes from 1 to %d, got %s`, t.opts.MaxOutputBytes, describe(raw))
		}
		in.OutputBytes = int(n)
	}
	return in, nil
}

func invalid(format string, args ...any) *engine.ToolError {
	return engine.ToolErrorf(engine.ToolCodeInvalidInput, format, args...)
}

// decodeString decodes a JSON string (not null) into s.
func decodeString(raw json.RawMessage, s *string) error {
	if jsonKind(raw) != "string" {
		return fmt.Errorf("not a string")
	}
	return json.Unmarshal(raw, s)
}

// decodeInt decodes a JSON number with an integer value in [lo, hi]. As in
// JSON Schema, 30.0 is the integer 30; "30" (a string) is not.
func decodeInt(raw json.RawMessage, lo, hi int64) (int64, error) {
	if jsonKind(raw) != "number" {
		return 0, fmt.Errorf("not a number")
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.Trunc(f) != f || f < float64(lo) || f > float64(hi) {
		return 0, fmt.Errorf("not an integer in [%d, %d]", lo, hi)
	}
	return int64(f), nil
}

// jsonKind names the kind of the JSON value raw from its first byte.
func jsonKind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// describe renders a JSON value for an error message: its kind and, when
// short, the value itself.
func describe(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	kind := jsonKind(raw)
	switch kind {
	case "null", "nothing":
		return kind
	case "object", "array":
		if len(raw) > 40 {
			return "an " + kind
		}
	default:
		if len(raw) > 40 {
			return "a " + kind
		}
	}
	article := "a "
	if kind == "object" || kind == "array" {
		article = "an "
	}
	return article + kind + " " + string(raw)
}

package ollama

import (
	"bytes"
	"encoding/json"
	"strings"
)

// textCall is a tool call parsed out of a reply's text.
type textCall struct {
	Name string
	Args json.RawMessage // a JSON object
}

// textCallResult is what parseTextCalls makes of a reply.
type textCallResult struct {
	// Calls are the tool calls, in reply order; empty when the text is not
	// a well-formed call of offered tools.
	Calls []textCall
	// Before is the text before the first tool call marker (empty for a
	// reply that is a bare or fenced JSON call).
	Before string
	// Attempted is true when the text is written as a tool call (a marker,
	// or a whole-reply JSON object with "name" and "arguments" or
	// "parameters") that could not be parsed into calls of offered tools:
	// an unknown tool, broken JSON, arguments that are not an object.
	Attempted bool
}

// Markers that open a tool call anywhere in a reply.
const (
	markToolCall   = "<tool_call>"    // Qwen 2.5, Hermes
	markToolCallE  = "</tool_call>"   //
	markMistral    = "[TOOL_CALLS]"   // Mistral
	markMistralArg = "[ARGS]"         // Mistral (tokenizer v11): [TOOL_CALLS]name[ARGS]{...}
	markFunction   = "<function="     // Llama 3.1 custom tools: <function=name>{...}</function>
	markFunctionE  = "</function>"    //
	markPythonTag  = "<|python_tag|>" // Llama 3.1/3.2: <|python_tag|>{"name":...,"parameters":...}
	fence          = "```"            // a whole reply fenced as ```json
	endOfMessage   = "<|eom_id|>"     // Llama's end of a tool-call message
	endOfTurn      = "<|eot_id|>"     //
	imEnd          = "<|im_end|>"     // ChatML's end of a message
)

// midMarkers are the markers that may follow ordinary text in a reply.
var midMarkers = []string{markToolCall, markMistral, markFunction, markPythonTag}

// parseTextCalls parses a reply whose text may be a tool call written as
// text, in the formats listed in the package doc. names are the offered
// tools; a call of any other name is not a call (it makes the reply
// Attempted). It never fails: text that is not a call gives a zero result.
func parseTextCalls(text string, names []string) textCallResult {
	known := func(n string) bool {
		for _, have := range names {
			if have == n {
				return true
			}
		}
		return false
	}
	trimmed := strings.TrimSpace(stripEndTokens(text))

	// A whole reply that is JSON, bare or fenced.
	jsonStart := strings.HasPrefix(trimmed, "{") || strings.HasPrefix(trimmed, "[") && !strings.HasPrefix(trimmed, markMistral)
	if body, ok := unfence(trimmed); ok || jsonStart {
		if !ok {
			body = trimmed
		}
		calls, shaped, valid := jsonCalls(body, known)
		switch {
		case valid && len(calls) > 0:
			return textCallResult{Calls: calls}
		case shaped:
			return textCallResult{Attempted: true}
		}
		if !valid && looksLikeCallJSON(body) {
			return textCallResult{Attempted: true}
		}
		if ok || !strings.HasPrefix(trimmed, "[") {
			return textCallResult{}
		}
	}

	// A marker, maybe after some text.
	at, mark := firstMarker(text)
	if at < 0 {
		return textCallResult{}
	}
	before, rest := text[:at], text[at+len(mark):]
	var (
		calls []textCall
		ok    bool
	)
	switch mark {
	case markToolCall:
		calls, ok = taggedCalls(rest, known)
	case markMistral:
		calls, ok = mistralCalls(rest, known)
	case markFunction:
		calls, ok = functionCalls(rest, known)
	case markPythonTag:
		calls, ok = pythonTagCalls(rest, known)
	}
	if !ok || len(calls) == 0 {
		return textCallResult{Attempted: true}
	}
	return textCallResult{Calls: calls, Before: before}
}

// firstMarker returns the position and text of the earliest mid-reply
// marker in text, or -1.
func firstMarker(text string) (int, string) {
	at, mark := -1, ""
	for _, m := range midMarkers {
		if i := strings.Index(text, m); i >= 0 && (at < 0 || i < at) {
			at, mark = i, m
		}
	}
	return at, mark
}

// stripEndTokens removes end-of-message tokens some templates leave in
// the text.
func stripEndTokens(s string) string {
	for _, t := range []string{endOfMessage, endOfTurn, imEnd} {
		s = strings.ReplaceAll(s, t, "")
	}
	return s
}

// unfence returns the body of a reply that is one fenced block whose info
// string is empty, json or tool_call(s).
func unfence(s string) (string, bool) {
	rest, ok := strings.CutPrefix(s, fence)
	if !ok {
		return "", false
	}
	info, body, ok := strings.Cut(rest, "\n")
	if !ok {
		return "", false
	}
	switch strings.ToLower(strings.TrimSpace(info)) {
	case "", "json", "tool_call", "tool_calls":
	default:
		return "", false
	}
	body, ok = strings.CutSuffix(strings.TrimSpace(body), fence)
	if !ok || strings.Contains(body, fence) {
		return "", false
	}
	return strings.TrimSpace(body), true
}

// jsonCalls decodes s, one JSON object or array of objects and nothing
// else, as tool calls. valid reports that s is that JSON; shaped that some
// object is written as a call ("name" plus "arguments" or "parameters")
// that is not one of an offered tool with object arguments.
func jsonCalls(s string, known func(string) bool) (calls []textCall, shaped, valid bool) {
	s = strings.TrimSpace(s)
	if !json.Valid([]byte(s)) {
		return nil, false, false
	}
	var objs []map[string]json.RawMessage
	switch {
	case strings.HasPrefix(s, "{"):
		var o map[string]json.RawMessage
		if json.Unmarshal([]byte(s), &o) != nil {
			return nil, false, true
		}
		objs = append(objs, o)
	case strings.HasPrefix(s, "["):
		if json.Unmarshal([]byte(s), &objs) != nil {
			return nil, false, true // not all objects
		}
	default:
		return nil, false, true
	}
	if len(objs) == 0 {
		return nil, false, true
	}
	for _, o := range objs {
		c, isCall, ok := objectCall(o, known)
		if isCall && !ok {
			shaped = true
		}
		if !isCall || !ok {
			return nil, shaped, true
		}
		calls = append(calls, c)
	}
	return calls, false, true
}

// objectCall reads one object as a call. isCall reports that it is
// written as one: a string "name", "arguments" or "parameters", and no
// keys but those, "id" and "type". ok reports that the name is offered and
// the arguments are an object (or a string holding one, as OpenAI writes
// them; null counts as {}).
func objectCall(o map[string]json.RawMessage, known func(string) bool) (c textCall, isCall, ok bool) {
	var name string
	if raw, has := o["name"]; !has || json.Unmarshal(raw, &name) != nil {
		return textCall{}, false, false
	}
	args, hasArgs := o["arguments"]
	if !hasArgs {
		args, hasArgs = o["parameters"]
	}
	if !hasArgs {
		return textCall{}, false, false
	}
	for k := range o {
		switch k {
		case "name", "arguments", "parameters", "id", "type":
		default:
			return textCall{}, false, false
		}
	}
	raw, ok := argsObject(args)
	if !ok || !known(name) {
		return textCall{}, true, false
	}
	return textCall{Name: name, Args: raw}, true, true
}

// argsObject returns arguments as a compact JSON object, keeping the
// model's key order: an object as it is, a string holding one decoded,
// null as {}.
func argsObject(raw json.RawMessage) (json.RawMessage, bool) {
	raw = bytes.TrimSpace(raw)
	switch {
	case string(raw) == "null":
		return json.RawMessage(`{}`), true
	case len(raw) > 0 && raw[0] == '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, false
		}
		return objectText(s)
	}
	return objectText(string(raw))
}

// objectText returns s, which must be exactly one JSON object and nothing
// else, compacted.
func objectText(s string) (json.RawMessage, bool) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "{") || !json.Valid([]byte(s)) {
		return nil, false
	}
	var b bytes.Buffer
	if json.Compact(&b, []byte(s)) != nil {
		return nil, false
	}
	return b.Bytes(), true
}

// looksLikeCallJSON reports whether broken JSON was meant as a call: it
// has a "name" key and an "arguments" or "parameters" key.
func looksLikeCallJSON(s string) bool {
	return strings.Contains(s, `"name"`) && (strings.Contains(s, `"arguments"`) || strings.Contains(s, `"parameters"`))
}

// taggedCalls parses `{...}</tool_call>` and any further
// `<tool_call>{...}</tool_call>`; the last closing tag may be missing.
// Text after the calls is dropped.
func taggedCalls(rest string, known func(string) bool) ([]textCall, bool) {
	var calls []textCall
	for {
		body, after, closed := strings.Cut(rest, markToolCallE)
		got, _, valid := jsonCalls(stripEndTokens(body), known)
		if !valid || len(got) == 0 {
			return nil, false
		}
		calls = append(calls, got...)
		next := strings.TrimSpace(stripEndTokens(after))
		var more bool
		if rest, more = strings.CutPrefix(next, markToolCall); !closed || !more {
			return calls, true
		}
	}
}

// mistralCalls parses what follows [TOOL_CALLS]: a JSON array of calls
// (`[{"name":...,"arguments":{...}}]`), or `name[ARGS]{...}` with
// [TOOL_CALLS] before each further call.
func mistralCalls(rest string, known func(string) bool) ([]textCall, bool) {
	rest = strings.TrimSpace(stripEndTokens(strings.ReplaceAll(rest, "</s>", "")))
	if strings.HasPrefix(rest, "[") || strings.HasPrefix(rest, "{") {
		calls, _, valid := jsonCalls(rest, known)
		return calls, valid && len(calls) > 0
	}
	var calls []textCall
	for _, part := range strings.Split(rest, markMistral) {
		name, args, ok := strings.Cut(part, markMistralArg)
		if !ok {
			return nil, false
		}
		name = strings.TrimSpace(name)
		raw, ok := objectText(args)
		if !ok || !known(name) {
			return nil, false
		}
		calls = append(calls, textCall{Name: name, Args: raw})
	}
	return calls, len(calls) > 0
}

// functionCalls parses `NAME>{...}</function>` and any further
// `<function=NAME>{...}</function>`; the last closing tag may be missing.
func functionCalls(rest string, known func(string) bool) ([]textCall, bool) {
	var calls []textCall
	for {
		name, after, ok := strings.Cut(rest, ">")
		if !ok || !known(name) {
			return nil, false
		}
		body, after, closed := strings.Cut(after, markFunctionE)
		raw, ok := objectText(stripEndTokens(body))
		if !ok {
			return nil, false
		}
		calls = append(calls, textCall{Name: name, Args: raw})
		next := strings.TrimSpace(stripEndTokens(after))
		var more bool
		if rest, more = strings.CutPrefix(next, markFunction); !closed || !more {
			return calls, true
		}
	}
}

// pythonTagCalls parses JSON calls after <|python_tag|>: one object, an
// array, or several objects separated by ";" or white space. Python-syntax
// calls of Llama's built-in tools are not parsed.
func pythonTagCalls(rest string, known func(string) bool) ([]textCall, bool) {
	rest = strings.TrimSpace(stripEndTokens(rest))
	if calls, _, valid := jsonCalls(rest, known); valid {
		return calls, len(calls) > 0
	}
	var calls []textCall
	for rest != "" {
		dec := json.NewDecoder(strings.NewReader(rest))
		var o map[string]json.RawMessage
		if dec.Decode(&o) != nil {
			return nil, false
		}
		c, _, ok := objectCall(o, known)
		if !ok {
			return nil, false
		}
		calls = append(calls, c)
		rest = strings.TrimLeft(rest[dec.InputOffset():], " \t\r\n;")
	}
	return calls, len(calls) > 0
}

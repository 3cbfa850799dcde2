package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"text/template"
	"unicode/utf8"

	"github.com/plexus-agent/plexus/engine"
)

// TemplateData is what a Step's Text template sees as its dot. Templates
// run with missingkey=error, so `.Result "x"` followed by a field that is
// not there fails the call; use the get function for fields a result may
// lack.
//
// Besides the text/template built-ins (index, len, printf, and, or, eq,
// ...), templates have these functions, all nil-safe:
//
//	get V KEY...   V[KEY]... following object keys (strings) and array
//	               positions (ints); nil when any step is missing
//	count V        elements of an array or object, characters of a string;
//	               0 for anything else (nil included)
//	pluck LIST KEY the KEY field of each object in LIST, skipping objects
//	               without it
//	uniq LIST      LIST without repeated values, in first-seen order
//	join LIST SEP  the elements of LIST printed and joined with SEP
//	json V         V as compact JSON
//
// Example, citing read_file's total_lines when there is one:
//
//	README.md has {{ with .Result "read_file" }}{{ or (get . "total_lines") "an unknown number of" }}{{ end }} lines.
type TemplateData struct {
	// Results are the tool results of the current turn: the contents of
	// the tool messages after the last user message, in order, each
	// decoded from JSON (objects are map[string]any, arrays []any, whole
	// numbers int, other numbers float64); a content that is not JSON is
	// its text as a string.
	Results []any
	// Step is the 0-based index of the step being played, which is the
	// number of assistant messages in the conversation.
	Step int

	tools []string // tool name of each result
}

// Result returns the last result of the named tool in the current turn,
// or nil when the turn has not called it. A failed call's result is the
// engine's error object, {"error": MESSAGE, "code": CODE}.
func (d TemplateData) Result(tool string) any {
	for i := len(d.tools) - 1; i >= 0; i-- {
		if d.tools[i] == tool {
			return d.Results[i]
		}
	}
	return nil
}

// newTemplateData collects the tool results of the current turn from msgs.
func newTemplateData(msgs []engine.Message, step int) TemplateData {
	start := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == engine.RoleUser {
			start = i + 1
			break
		}
	}
	names := map[string]string{} // call id -> tool name
	d := TemplateData{Step: step, Results: []any{}}
	for _, m := range msgs[start:] {
		switch m.Role {
		case engine.RoleAssistant:
			for _, c := range m.ToolCalls {
				names[c.ID] = c.Name
			}
		case engine.RoleTool:
			name := m.ToolName
			if name == "" {
				name = names[m.ToolCallID]
			}
			d.tools = append(d.tools, name)
			d.Results = append(d.Results, decodeResult(m.Content))
		}
	}
	return d
}

// decodeResult decodes a tool message's content, turning whole numbers
// into ints; content that is not JSON stays a string.
func decodeResult(content string) any {
	var v any
	dec := json.NewDecoder(strings.NewReader(content))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil || dec.More() {
		return content
	}
	return normalizeNumbers(v)
}

func normalizeNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil && i >= math.MinInt && i <= math.MaxInt {
			return int(i)
		}
		if f, err := x.Float64(); err == nil {
			if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
				return int(f)
			}
			return f
		}
		return x.String()
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalizeNumbers(e)
		}
	}
	return v
}

var templateFuncs = template.FuncMap{
	"get":   tmplGet,
	"count": tmplCount,
	"pluck": tmplPluck,
	"uniq":  tmplUniq,
	"join":  tmplJoin,
	"json":  tmplJSON,
}

func parseTemplate(text string) (*template.Template, error) {
	return template.New("text").Option("missingkey=error").Funcs(templateFuncs).Parse(text)
}

// render runs st's template on d, or returns st.Text when it has none.
func (st *Step) render(d TemplateData) (string, error) {
	if st.tmpl == nil {
		return st.Text, nil
	}
	var b bytes.Buffer
	if err := st.tmpl.Execute(&b, d); err != nil {
		return "", err
	}
	return b.String(), nil
}

func tmplGet(v any, keys ...any) any {
	for _, k := range keys {
		switch c := v.(type) {
		case map[string]any:
			s, ok := k.(string)
			if !ok {
				return nil
			}
			v = c[s]
		case []any:
			i, ok := k.(int)
			if !ok || i < 0 || i >= len(c) {
				return nil
			}
			v = c[i]
		default:
			return nil
		}
	}
	return v
}

func tmplCount(v any) int {
	switch c := v.(type) {
	case []any:
		return len(c)
	case map[string]any:
		return len(c)
	case string:
		return utf8.RuneCountInString(c)
	}
	return 0
}

func tmplPluck(list any, key string) []any {
	out := []any{}
	items, _ := list.([]any)
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			if v, ok := m[key]; ok {
				out = append(out, v)
			}
		}
	}
	return out
}

func tmplUniq(list any) []any {
	out := []any{}
	items, _ := list.([]any)
	seen := map[string]bool{}
	for _, it := range items {
		k := tmplJSON(it)
		if !seen[k] {
			seen[k] = true
			out = append(out, it)
		}
	}
	return out
}

func tmplJoin(list any, sep string) string {
	items, _ := list.([]any)
	parts := make([]string, len(items))
	for i, it := range items {
		parts[i] = fmt.Sprint(it)
	}
	return strings.Join(parts, sep)
}

func tmplJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimRight(b.String(), "\n")
}

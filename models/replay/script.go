package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"text/template"

	"github.com/plexus-agent/plexus/engine"
)

// MaxDelayMS caps Step.DelayMS: one minute per token.
const MaxDelayMS = 60_000

// Script is a parsed, validated replay script: one Step per non-blank line.
type Script struct {
	// Path is the file the script was read from, as given to LoadScript or
	// ParseScript; it prefixes every error about the script.
	Path string
	// Steps in file order. Steps[i] answers the Chat call whose
	// conversation already holds i assistant messages.
	Steps []Step
}

// Step is one recorded model response: one line of a script, answering
// one Chat call. A step is either an error (Error set, nothing else but
// DelayMS) or a reply made of Text, ToolCalls, Usage and DoneReason, at
// least one of them set.
type Step struct {
	// Text is the reply's text. When it contains "{{" it is a Go
	// text/template rendered at replay time (see TemplateData); write a
	// literal "{{" as {{"{{"}}. The template is parsed by DecodeStep, so
	// only steps read from a script (or decoded) render it.
	Text string `json:"text,omitempty"`
	// ToolCalls are the calls the reply makes, in order.
	ToolCalls []StepToolCall `json:"tool_calls,omitempty"`
	// Usage is the reply's token count; nil means estimated at replay
	// time (about 4 characters per token).
	Usage *engine.Usage `json:"usage,omitempty"`
	// DoneReason ends the reply; empty means "tool_calls" when there are
	// tool calls, else "stop".
	DoneReason string `json:"done_reason,omitempty"`
	// DelayMS is the pause before each streamed text piece, in
	// milliseconds, in [0, MaxDelayMS]; for an error step, the pause
	// before the error.
	DelayMS int `json:"delay_ms,omitempty"`
	// Error makes the call fail instead of replying.
	Error *StepError `json:"error,omitempty"`

	// Line is the 1-based line of the script the step was read from; 0
	// when the step was not read from a script.
	Line int `json:"-"`

	tmpl *template.Template // parsed Text when it is a template
}

// StepToolCall is one tool call of a Step.
type StepToolCall struct {
	// ID is the call's id; empty means the provider generates
	// "call_S_N" (S the 1-based step, N the 1-based call in the step).
	ID string `json:"id,omitempty"`
	// Name is the tool's name: 1 to 256 bytes, no control characters.
	Name string `json:"name"`
	// Arguments is the JSON input object, or a JSON string holding the
	// argument text exactly as a model sent it when that was not a JSON
	// object (so malformed calls replay as they happened); absent or null
	// means {}.
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// args returns the argument bytes a replayed call carries.
func (c StepToolCall) args() []byte {
	if len(c.Arguments) > 0 && c.Arguments[0] == '"' {
		var s string
		if json.Unmarshal(c.Arguments, &s) == nil {
			return []byte(s)
		}
	}
	if len(c.Arguments) == 0 {
		return []byte("{}")
	}
	return append([]byte(nil), c.Arguments...)
}

// StepError is a scripted provider failure.
type StepError struct {
	// Kind is one of "not_found" (engine.ErrModelNotFound),
	// "unsupported" (engine.ErrUnsupported), "unavailable"
	// (engine.ErrModelUnavailable) or "invalid" (engine.ErrInvalidRequest).
	Kind string `json:"kind"`
	// Message is the provider's words, shown to the user verbatim.
	Message string `json:"message"`
}

// errorKinds maps StepError.Kind to the engine sentinel it stands for.
var errorKinds = map[string]error{
	"not_found":   engine.ErrModelNotFound,
	"unsupported": engine.ErrUnsupported,
	"unavailable": engine.ErrModelUnavailable,
	"invalid":     engine.ErrInvalidRequest,
}

const errorKindList = "not_found, unsupported, unavailable, invalid"

// sentinel returns the engine sentinel e.Kind stands for.
func (e *StepError) sentinel() error { return errorKinds[e.Kind] }

// ScriptError is a problem with a script: unreadable, malformed or
// invalid. Line is 1-based; 0 when the problem concerns the whole file.
type ScriptError struct {
	Path string
	Line int
	Err  error
}

// Error returns "PATH:LINE: problem", or "PATH: problem" when Line is 0.
func (e *ScriptError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %v", e.Path, e.Err)
	}
	return fmt.Sprintf("%s:%d: %v", e.Path, e.Line, e.Err)
}

// Unwrap returns the underlying problem (fs.ErrNotExist for a missing
// file).
func (e *ScriptError) Unwrap() error { return e.Err }

// LoadScript reads and validates the script at path (relative paths
// resolve against the working directory). Errors are *ScriptError, and
// wrap fs.ErrNotExist when the file does not exist.
func LoadScript(path string) (*Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, &ScriptError{Path: path, Err: err}
	}
	return ParseScript(path, bytes.NewReader(data))
}

// ParseScript reads and validates a whole script from r. path names the
// script in errors. Blank lines (and a trailing "\r" on each line) are
// ignored; every other line must decode with DecodeStep. A script with no
// steps is an error. Errors are *ScriptError naming the first bad line.
func ParseScript(path string, r io.Reader) (*Script, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, &ScriptError{Path: path, Err: err}
	}
	s := &Script{Path: path}
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		st, err := DecodeStep(line)
		if err != nil {
			return nil, &ScriptError{Path: path, Line: i + 1, Err: err}
		}
		st.Line = i + 1
		s.Steps = append(s.Steps, st)
	}
	if len(s.Steps) == 0 {
		return nil, &ScriptError{Path: path, Err: errors.New("the script has no steps; each non-blank line is one model response, for example {\"text\": \"Hello.\"}")}
	}
	return s, nil
}

var stepFields = []string{"text", "tool_calls", "usage", "done_reason", "delay_ms", "error"}

var (
	toolNameRE   = regexp.MustCompile(`^[^\x00-\x1f\x7f]{1,256}$`)
	doneReasonRE = regexp.MustCompile(`^[A-Za-z0-9_\-]{1,64}$`)
)

// DecodeStep decodes and validates one script line: a JSON object with the
// fields of Step and no others, and nothing after it. A Text template is
// parsed here, so template syntax errors are reported with the line. The
// error says what is wrong with the line, without a file or line prefix.
func DecodeStep(line []byte) (Step, error) {
	var st Step
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return Step{}, describeDecodeError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Step{}, errors.New("unexpected text after the JSON object; put each response on its own line")
	}
	if bytes.HasPrefix(bytes.TrimSpace(line), []byte("null")) {
		return Step{}, errors.New("the line is null; each line must be a JSON object")
	}
	if err := st.validate(); err != nil {
		return Step{}, err
	}
	return st, nil
}

func describeDecodeError(err error) error {
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return fmt.Errorf("unknown field %s (a step has %s)", f, strings.Join(stepFields, ", "))
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return fmt.Errorf("the line is a JSON %s; each line must be a JSON object", te.Value)
		}
		return fmt.Errorf("field %s: got a JSON %s, want %s", te.Field, te.Value, jsonKind(te.Type.Kind().String()))
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("the line is not complete JSON; each line must be one whole JSON object")
	}
	return fmt.Errorf("the line is not valid JSON: %v", strings.TrimPrefix(msg, "json: "))
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "int", "int64":
		return "an integer"
	case "slice":
		return "an array"
	case "struct", "ptr", "map":
		return "an object"
	}
	return goKind
}

func (st *Step) validate() error {
	if st.DelayMS < 0 || st.DelayMS > MaxDelayMS {
		return fmt.Errorf("delay_ms is %d; it must be between 0 and %d milliseconds per token", st.DelayMS, MaxDelayMS)
	}
	if st.Error != nil {
		if st.Text != "" || len(st.ToolCalls) > 0 || st.Usage != nil || st.DoneReason != "" {
			return errors.New("a step with error cannot also have text, tool_calls, usage or done_reason: the error is the whole response")
		}
		if _, ok := errorKinds[st.Error.Kind]; !ok {
			return fmt.Errorf("error.kind is %q; it must be one of %s", st.Error.Kind, errorKindList)
		}
		if strings.TrimSpace(st.Error.Message) == "" {
			return errors.New("error.message is empty; write the words the provider would show the user")
		}
		return nil
	}
	if st.Text == "" && len(st.ToolCalls) == 0 && st.Usage == nil && st.DoneReason == "" {
		return errors.New(`the step is empty; give text, tool_calls or error (write {"done_reason": "stop"} for an intentionally empty reply)`)
	}
	for i := range st.ToolCalls {
		c := &st.ToolCalls[i]
		if !toolNameRE.MatchString(c.Name) || len(c.Name) > 256 {
			return fmt.Errorf("tool_calls[%d]: name %q is not a tool name (1 to 256 bytes, no control characters)", i, c.Name)
		}
		args := bytes.TrimSpace(c.Arguments)
		if len(args) == 0 || bytes.Equal(args, []byte("null")) {
			c.Arguments = nil
			continue
		}
		if args[0] != '{' && args[0] != '"' {
			return fmt.Errorf("tool_calls[%d] (%s): arguments must be a JSON object (or a string of raw argument text), got %s", i, c.Name, truncate(string(args), 40))
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, args); err != nil {
			return fmt.Errorf("tool_calls[%d] (%s): arguments: %v", i, c.Name, err)
		}
		c.Arguments = compact.Bytes()
	}
	if st.Usage != nil && (st.Usage.PromptTokens < 0 || st.Usage.CompletionTokens < 0) {
		return fmt.Errorf("usage has a negative count (%d prompt, %d completion tokens)", st.Usage.PromptTokens, st.Usage.CompletionTokens)
	}
	if st.DoneReason != "" && !doneReasonRE.MatchString(st.DoneReason) {
		return fmt.Errorf("done_reason %q is not a reason like stop, length or tool_calls (1 to 64 letters, digits, '_' or '-')", st.DoneReason)
	}
	if strings.Contains(st.Text, "{{") {
		t, err := parseTemplate(st.Text)
		if err != nil {
			return fmt.Errorf("text: %v", err)
		}
		st.tmpl = t
	}
	return nil
}

// MarshalLine returns st as one script line, without the newline. The
// result decodes with DecodeStep to an equal Step.
func (st Step) MarshalLine() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(st); err != nil {
		return nil, fmt.Errorf("encode step: %w", err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && (s[n]&0xC0) == 0x80 {
		n--
	}
	return s[:n] + "…"
}

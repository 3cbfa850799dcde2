package plugins

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/workspace"
)

// Tool is one tool of a tool plugin, written on plain Go types. In is the
// input of a call: a struct whose exported fields, by their json names,
// are the tool's arguments. The JSON Schema the model sees is inferred from
// In (github.com/google/jsonschema-go): a field is required unless its
// json tag has omitempty or omitzero, a `jsonschema:"..."` tag is the
// field's description, and unknown arguments are refused. Out is the
// result; the model sees its JSON encoding. An Out with a
// `Summary() string` method gives the one-line summary people see.
//
// Invoke returns a *engine.ToolError (engine.ToolErrorf) to tell the model
// what went wrong in its own terms (invalid_input, not_found, ...); any
// other error is reported as "failed" with its message, a context error as
// "timeout" or "cancelled". A panic in Invoke fails that call, not the
// plugin.
type Tool[In, Out any] interface {
	Describe() ToolInfo
	Invoke(ctx context.Context, call *Call, in In) (Out, error)
}

// ToolInfo is what Describe says of a tool.
type ToolInfo struct {
	// Name is what the model calls the tool: 1 to 64 of [a-zA-Z0-9_-],
	// snake_case by convention, unique across every plugin a user loads
	// (so prefer a specific name, count_lines_of_code over count).
	Name string
	// Description tells the model what the tool does and when to use it.
	Description string
	// ReadOnly tools change nothing: no file, process or network.
	ReadOnly bool
	// NeedsApproval tools run only after the user approves each call.
	NeedsApproval bool
	// Risk grades a call for approval prompts and policy; default low
	// for ReadOnly tools and medium otherwise.
	Risk engine.RiskLevel
	// InputSchema, when set, replaces the schema inferred from In: a JSON
	// Schema (draft 2020-12) of an object. Arguments are validated
	// against it before Invoke.
	InputSchema json.RawMessage
}

// Summarizer is implemented by results that can say in one line what a
// call found or did.
type Summarizer interface{ Summary() string }

// Call is one tool call as Invoke sees it: where it runs and how to report
// on it. Its methods are safe for concurrent use by the goroutines of one
// Invoke; after Invoke returns, Root and ReadFile fail and updates are
// dropped.
type Call struct {
	// ID is the engine's id of the call.
	ID string
	// Tool is the name the model called.
	Tool string
	// Workspace is the absolute path of the workspace root the call is
	// confined to.
	Workspace string
	// Settings are per-call settings from the host, never from the model
	// (see engine.InvokeRequest.Settings).
	Settings map[string]string

	req      engine.InvokeRequest
	onUpdate func(engine.ToolUpdate)

	mu      sync.Mutex
	root    *workspace.Root
	rootErr error
	done    bool // Invoke has returned
}

// errCallDone is what a Call's methods return after its Invoke returned
// (a new value each time: callers may change a *ToolError).
func errCallDone() error {
	return engine.ToolErrorf(engine.ToolCodeFailed, "the tool call has ended; a Call must not be used after Invoke returns")
}

// Progress reports how far the call has come; percent in [0, 100], or
// negative when the tool cannot tell. Updates after Invoke returned are
// dropped.
func (c *Call) Progress(message string, percent float64) {
	p := &engine.ToolProgress{Message: message}
	if percent >= 0 {
		v := min(percent, 100)
		p.Percentage = &v
	}
	c.update(engine.ToolUpdate{Progress: p})
}

// Output streams a piece of incremental output on a named stream
// ("stdout", "stderr", "match", ...).
func (c *Call) Output(stream, text string) {
	c.update(engine.ToolUpdate{Output: &engine.ToolOutput{Stream: stream, Text: text}})
}

func (c *Call) update(u engine.ToolUpdate) {
	c.mu.Lock() // onUpdate must never be called concurrently
	defer c.mu.Unlock()
	if !c.done {
		c.onUpdate(u)
	}
}

// Root returns the call's workspace, opened on first use and closed when
// Invoke returns. Resolve every path the model gives through it: it
// refuses "..", absolute paths outside the workspace and symlinks that
// lead out, and Walk lists files the way git sees them. After Invoke
// returned it fails.
func (c *Call) Root() (*workspace.Root, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return nil, errCallDone()
	}
	if c.root == nil && c.rootErr == nil {
		c.root, c.rootErr = workspace.Open(c.Workspace)
		if c.rootErr != nil {
			c.rootErr = engine.ToolErrorf(engine.ToolCodeFailed, "open the workspace %s: %v", c.Workspace, c.rootErr)
		}
	}
	return c.root, c.rootErr
}

// ReadFile returns the content of a workspace file as the model sees it:
// the pending content when an edit earlier in the same model response
// changed it, else the file on disk. Symlinks inside the workspace are
// followed (an absolute one too), as the built-in file tools do. Errors
// are *engine.ToolError values the model understands (see
// workspace.Root.ToolError): permission_denied for a path outside the
// workspace, not_found for a missing (or pending-deleted) file,
// invalid_input for a path no file can have.
func (c *Call) ReadFile(path string) ([]byte, error) {
	root, err := c.Root()
	if err != nil {
		return nil, err
	}
	real, err := root.Real(path)
	if err != nil {
		return nil, root.ToolError(c.Tool, path, err)
	}
	// The engine keys pending edits by the real slash path.
	if o, ok := c.req.Overlay[filepath.ToSlash(real)]; ok {
		if o.Deleted {
			return nil, engine.ToolErrorf(engine.ToolCodeNotFound, "%s: %s is deleted by a pending edit", c.Tool, path)
		}
		return o.Content, nil
	}
	data, err := root.FS().ReadFile(real)
	if err != nil {
		return nil, root.ToolError(c.Tool, path, err)
	}
	return data, nil
}

// Host returns the engine's callbacks for this call (approval, and
// searches of the workspace index), or nil when the host offers none.
func (c *Call) Host() engine.ToolHost { return c.req.Host }

func (c *Call) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done = true
	if c.root != nil {
		c.root.Close()
	}
}

// ToolHandler is a Tool with its types erased, as Serve and NewToolset
// take it. Make one with NewTool.
type ToolHandler struct {
	spec   engine.ToolSpec
	schema *jsonschema.Resolved
	invoke func(ctx context.Context, call *Call, args json.RawMessage) (any, error)
	err    error // why the tool cannot be served
}

// NewTool wraps t for Serve. Problems with t's description (an invalid
// name, a schema that cannot be inferred or compiled) are reported by
// Serve and NewToolset, so NewTool can be called inline.
func NewTool[In, Out any](t Tool[In, Out]) *ToolHandler {
	info := t.Describe()
	h := &ToolHandler{spec: engine.ToolSpec{
		Name: info.Name, Description: info.Description, Risk: info.Risk,
		ReadOnly: info.ReadOnly, NeedsApproval: info.NeedsApproval,
	}}
	if h.spec.Risk == "" {
		h.spec.Risk = engine.RiskMedium
		if info.ReadOnly {
			h.spec.Risk = engine.RiskLow
		}
	}
	if err := h.compile(info.InputSchema, jsonschema.For[In]); err != nil {
		h.err = fmt.Errorf("tool %q: %w", info.Name, err)
		return h
	}
	h.invoke = func(ctx context.Context, call *Call, args json.RawMessage) (any, error) {
		var in In
		if err := json.Unmarshal(args, &in); err != nil {
			return nil, engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: the arguments do not fit the input schema: %v", info.Name, err)
		}
		return t.Invoke(ctx, call, in)
	}
	return h
}

// toolName is what engine tool names may be: the common subset of what
// model APIs accept (OpenAI's function names).
var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// CheckToolSpec reports every way s breaks what Plexus needs of a tool's
// description, joined: a name of 1 to 64 of [a-zA-Z0-9_-], a description,
// a risk level of low, medium, high or critical, and an input schema that
// is a JSON Schema of an object and compiles. NewTool and the conformance
// check (plugintest) both use it.
func CheckToolSpec(s engine.ToolSpec) error {
	var errs []error
	if !toolName.MatchString(s.Name) {
		errs = append(errs, errors.New("the name must be 1 to 64 of a-z, A-Z, 0-9, _ and - (model APIs refuse others)"))
	}
	if strings.TrimSpace(s.Description) == "" {
		errs = append(errs, errors.New("the description is empty; the model needs it to know when to call the tool"))
	}
	switch s.Risk {
	case engine.RiskLow, engine.RiskMedium, engine.RiskHigh, engine.RiskCritical:
	default:
		errs = append(errs, fmt.Errorf("risk %q is not low, medium, high or critical", s.Risk))
	}
	if _, err := resolveInputSchema(s.InputSchema); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// resolveInputSchema parses and compiles a tool's input schema, which must
// describe an object.
func resolveInputSchema(raw json.RawMessage) (*jsonschema.Resolved, error) {
	var schema jsonschema.Schema
	if err := json.Unmarshal(raw, &schema); err != nil {
		return nil, fmt.Errorf("the input schema is not a JSON Schema: %w", err)
	}
	if schema.Type != "object" {
		return nil, fmt.Errorf("the input schema must describe an object (type %q); use a struct for the input", schema.Type)
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("the input schema does not compile: %w", err)
	}
	return resolved, nil
}

// compile sets the input schema (given, or inferred from the input type
// by infer), checks the description with CheckToolSpec, and keeps the
// compiled schema for validating arguments.
func (h *ToolHandler) compile(given json.RawMessage, infer func(*jsonschema.ForOptions) (*jsonschema.Schema, error)) error {
	h.spec.InputSchema = given
	if len(bytes.TrimSpace(given)) == 0 {
		schema, err := infer(nil)
		if err != nil {
			return fmt.Errorf("infer the input schema: %w", err)
		}
		if h.spec.InputSchema, err = json.Marshal(schema); err != nil {
			return fmt.Errorf("encode the input schema: %w", err)
		}
	}
	if err := CheckToolSpec(h.spec); err != nil {
		return err
	}
	resolved, err := resolveInputSchema(h.spec.InputSchema)
	h.schema = resolved
	return err
}

// sdkToolset is the engine.Toolset Serve offers over ToolHandlers.
type sdkToolset struct {
	specs  []engine.ToolSpec
	byName map[string]*ToolHandler
}

// NewToolset returns the engine.Toolset that Serve serves for tools:
// Describe lists them in order; Invoke validates the arguments against a
// tool's input schema (invalid_input naming the problem), decodes them into
// its input type and calls it. Errors: a tool that NewTool could not wrap,
// and two tools of one name.
func NewToolset(tools ...*ToolHandler) (engine.Toolset, error) {
	ts := &sdkToolset{byName: map[string]*ToolHandler{}}
	var errs []error
	for _, h := range tools {
		switch {
		case h == nil:
			errs = append(errs, errors.New("a nil tool"))
		case h.err != nil:
			errs = append(errs, h.err)
		case ts.byName[h.spec.Name] != nil:
			errs = append(errs, fmt.Errorf("two tools are named %q", h.spec.Name))
		default:
			ts.byName[h.spec.Name] = h
			ts.specs = append(ts.specs, h.spec)
		}
	}
	if len(tools) == 0 {
		errs = append(errs, errors.New("no tools to serve"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return ts, nil
}

func (ts *sdkToolset) Tools(context.Context) ([]engine.ToolSpec, error) {
	return append([]engine.ToolSpec(nil), ts.specs...), nil
}

func (ts *sdkToolset) Invoke(ctx context.Context, req engine.InvokeRequest, onUpdate func(engine.ToolUpdate)) (res engine.ToolResult, err error) {
	h := ts.byName[req.Tool]
	if h == nil {
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeUnknownTool, "this plugin has no tool %q", req.Tool)
	}
	args := bytes.TrimSpace(req.Args)
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	var instance any
	if err := json.Unmarshal(args, &instance); err != nil {
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: the arguments are not JSON: %v", req.Tool, err)
	}
	if err := h.schema.Validate(instance); err != nil {
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: %v", req.Tool, err)
	}
	call := &Call{ID: req.CallID, Tool: req.Tool, Workspace: req.WorkspaceRoot, Settings: req.Settings, req: req, onUpdate: onUpdate}
	defer call.close()
	defer func() {
		if p := recover(); p != nil {
			Logger().Error("tool panicked", "tool", req.Tool, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			res, err = engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeFailed, "%s failed: the plugin panicked: %v", req.Tool, p)
		}
	}()
	out, err := h.invoke(ctx, call, args)
	if err != nil {
		return engine.ToolResult{}, err
	}
	summary := req.Tool + " done"
	if s, ok := out.(Summarizer); ok {
		summary = s.Summary()
	}
	return engine.JSONResult(out, summary)
}

// Serve serves tools as a tool plugin and returns when the host closes the
// connection; call it from main. A tool NewTool could not wrap (or two
// tools of one name) is reported on stderr and the process exits with
// status 1. For a plugin that implements engine.Toolset itself, use
// ServeTool.
func Serve(tools ...*ToolHandler) {
	ts, err := NewToolset(tools...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "plexus plugin: %v\n", err)
		os.Exit(1)
	}
	ServeTool(ts)
}

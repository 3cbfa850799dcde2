package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// turn is one run of the model/tool loop.
type turn struct {
	s       *Session
	e       *Engine
	id      string
	opts    TurnOptions
	model   Model
	ref     ModelRef
	started time.Time

	specs map[string]ToolSpec
	// clientTools names the tools the Host's client runs (ClientToolHost).
	clientTools map[string]bool
	meta        TurnMetadata
	calls       int // tool calls so far, for ids
}

func (t *turn) emit(d EventData) { t.s.emit(t.id, t.opts.OnEvent, d) }

// run executes the turn and returns its result and the messages to append
// to the session history: the user message and every complete exchange
// (an assistant message and the results of all its tool calls).
func (t *turn) run(ctx context.Context, in TurnInput, history []Message) (TurnResult, []Message) {
	t.meta.Model = t.ref.String()
	t.meta.ToolsUsed = []string{}
	t.meta.FilesModified = []string{}

	// The request is stored with the turn's first event, as typed, and
	// replaced by the message the model sees (with the editor context and
	// attachments) with the next one.
	t.s.setPending(Message{Role: RoleUser, Content: in.Message})
	t.emit(&ThinkingEvent{Phase: PhaseAnalyzing, Message: "Reading the request"})
	ec := t.editorContext(ctx, in.Context)
	user := Message{Role: RoleUser, Content: t.userContent(in, ec.text)}
	if user.Content != in.Message {
		t.s.setPending(user)
	}
	keep := []Message{user}

	specs, err := t.e.Tools(ctx)
	if err != nil {
		// Some tool plugins failed to load; the turn goes on with the rest.
		t.emit(&ErrorEvent{Code: CodeToolError, Message: err.Error(), Recoverable: true})
	}
	t.specs = make(map[string]ToolSpec, len(specs))
	for _, sp := range specs {
		t.specs[sp.Name] = sp
	}
	if ch, ok := t.opts.Host.(ClientToolHost); ok {
		t.clientTools = map[string]bool{}
		for _, sp := range ch.ClientTools() {
			if _, taken := t.specs[sp.Name]; taken || sp.Name == "" {
				continue // the engine's own tool of that name wins
			}
			sp.Kind = "" // the client runs it: no edit or command handling
			t.specs[sp.Name] = sp
			t.clientTools[sp.Name] = true
			specs = append(specs, sp)
		}
	}

	msgs := make([]Message, 0, len(history)+8)
	msgs = append(msgs, Message{Role: RoleSystem, Content: t.e.systemPrompt(t.s.workspace.Root)})
	msgs = append(msgs, history...)
	// Retrieved context goes to this turn's model calls only, not to the
	// session history: the next turn retrieves for its own request. The
	// query aims at the selection and the diagnostics too, when given.
	if snips := t.retrieve(ctx, ec.query(in.Message)); len(snips) > 0 {
		msgs = append(msgs, Message{Role: RoleSystem, Content: contextMessage(snips)})
	}
	msgs = append(msgs, user)

	for step := 0; step < t.e.opts.MaxSteps; step++ {
		if step > 0 {
			t.emit(&ThinkingEvent{Phase: PhaseGenerating, Message: "Reading tool results"})
		}
		reply, err := t.chat(ctx, msgs, specs)
		if err != nil {
			return t.fail(ctx, err), keep
		}
		msgs = append(msgs, reply)
		if len(reply.ToolCalls) == 0 {
			keep = append(keep, reply)
			return t.finish(TurnCompleted, reply.Content, ""), keep
		}
		t.emit(&ThinkingEvent{Phase: PhaseExecuting, Message: describeCalls(reply.ToolCalls)})
		results := make([]Message, 0, len(reply.ToolCalls))
		resp := newResponse()
		for _, call := range reply.ToolCalls {
			content, err := t.callTool(ctx, call, resp)
			if err != nil {
				return t.fail(ctx, err), keep
			}
			results = append(results, Message{Role: RoleTool, Content: content, ToolCallID: call.ID, ToolName: call.Name})
		}
		if len(resp.edits) > 0 {
			// The response's edits form one patch set; each edit call's
			// result tells the model what became of it.
			outcomes, err := t.applyEdits(ctx, resp, reply.Content)
			if err != nil {
				return t.fail(ctx, err), keep
			}
			for i := range results {
				if o, ok := outcomes[results[i].ToolCallID]; ok {
					results[i].Content = withPatch(results[i].Content, o)
				}
			}
		}
		msgs = append(msgs, results...)
		keep = append(keep, reply)
		keep = append(keep, results...)
	}
	msg := fmt.Sprintf("stopped after %d model calls without a final answer; narrow the request or raise the step limit", t.e.opts.MaxSteps)
	t.emit(&ErrorEvent{Code: CodeInternal, Message: msg})
	return t.finish(TurnError, "", msg), keep
}

// retrieve runs the retrieval stage, emitting its events. A failure is
// reported as a recoverable error: the turn goes on without context.
func (t *turn) retrieve(ctx context.Context, query string) []Snippet {
	r := t.e.opts.Retriever
	if r == nil {
		return nil
	}
	t.emit(&ThinkingEvent{Phase: PhaseRetrieving, Message: "Searching the workspace"})
	res, err := r.Retrieve(ctx, RetrievalRequest{Root: t.s.workspace.Root, Query: query, TokenBudget: t.e.opts.RetrievalTokens},
		func(ev RetrievalEvent) { t.emit(&ev) })
	if err != nil {
		if ctx.Err() == nil {
			t.emit(&ErrorEvent{Code: CodeRetrievalFailed, Message: "retrieval failed: " + err.Error(), Recoverable: true})
		}
		return nil
	}
	t.meta.RetrievedSnippets = len(res.Snippets)
	return res.Snippets
}

// chat runs one model call, streaming its text as token events, and returns
// the assistant message with tool calls given unique ids.
func (t *turn) chat(ctx context.Context, msgs []Message, specs []ToolSpec) (Message, error) {
	t.meta.ModelCalls++
	step := t.meta.ModelCalls - 1
	var text strings.Builder
	var calls []ToolCall
	req := ChatRequest{Model: t.ref.Name, Messages: msgs, Tools: specs, Options: t.e.opts.Chat}
	err := t.model.Chat(ctx, req, func(c ChatChunk) error {
		switch {
		case c.Text != "":
			text.WriteString(c.Text)
			t.emit(&TokenEvent{Text: c.Text, Step: step})
		case c.ToolCall != nil:
			calls = append(calls, *c.ToolCall)
		case c.Usage != nil:
			t.meta.PromptTokens += c.Usage.PromptTokens
			t.meta.CompletionTokens += c.Usage.CompletionTokens
		}
		return nil
	})
	if err != nil {
		return Message{}, err
	}
	seen := map[string]bool{}
	for i := range calls {
		t.calls++
		if calls[i].ID == "" || seen[calls[i].ID] {
			calls[i].ID = fmt.Sprintf("call_%s_%d", strings.TrimPrefix(t.id, "turn_"), t.calls)
		}
		seen[calls[i].ID] = true
		if len(bytes.TrimSpace(calls[i].Args)) == 0 {
			calls[i].Args = json.RawMessage("{}")
		}
	}
	return Message{Role: RoleAssistant, Content: text.String(), ToolCalls: calls}, nil
}

// fail ends the turn after err: cancelled or timed out when ctx ended,
// error otherwise. A turn whose deadline has passed by the clock timed out
// even when ctx does not say so yet: a plugin process's copy of the
// deadline can fire, and its error come back, before this process's
// timer has run (under load, timers run late).
func (t *turn) fail(ctx context.Context, err error) TurnResult {
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		return t.finish(TurnCancelled, "", "cancelled")
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || ctx.Err() == nil && PastDeadline(ctx, time.Now()):
		t.emit(&ErrorEvent{Code: CodeTimeout, Message: "the turn ran past its deadline"})
		return t.finish(TurnTimeout, "", "the turn ran past its deadline")
	}
	code := CodeInternal
	var me *ModelError
	if errors.As(err, &me) || errors.Is(err, ErrModelNotFound) || errors.Is(err, ErrModelUnavailable) || errors.Is(err, ErrUnsupported) {
		code = CodeModelError
	}
	t.emit(&ErrorEvent{Code: code, Message: err.Error()})
	return t.finish(TurnError, "", err.Error())
}

// PastDeadline reports whether ctx has a deadline and now is not before
// it. ctx.Err() reports the deadline only once ctx's timer has run, which
// may be late on a loaded machine; a front-end that classifies a failure
// as a timeout checks the clock too.
func PastDeadline(ctx context.Context, now time.Time) bool {
	d, ok := ctx.Deadline()
	return ok && !now.Before(d)
}

func (t *turn) finish(status TurnStatus, message, errText string) TurnResult {
	t.meta.TokensUsed = t.meta.PromptTokens + t.meta.CompletionTokens
	t.meta.Duration = time.Since(t.started)
	return TurnResult{TurnID: t.id, Status: status, Message: message, Error: errText, Metadata: t.meta}
}

// callTool runs one tool call through policy and returns the content of the
// tool message for the model. Edits an edit tool proposes join r (they are
// applied after the response's last call). The error is non-nil only when
// the turn must end (ctx ended).
func (t *turn) callTool(ctx context.Context, call ToolCall, r *response) (string, error) {
	t.meta.ToolCalls++
	if !slices.Contains(t.meta.ToolsUsed, call.Name) {
		t.meta.ToolsUsed = append(t.meta.ToolsUsed, call.Name)
	}
	ev := func(status ToolStatus) *ToolCallEvent {
		return &ToolCallEvent{CallID: call.ID, Name: call.Name, Args: call.Args, Status: status}
	}
	refuse := func(status ToolStatus, code ToolErrorCode, msg string) string {
		e := ev(status)
		e.Error, e.ErrorCode = msg, code
		t.emit(e)
		ecode := CodeToolError
		if status == ToolDenied {
			ecode = CodePolicyViolation
		}
		t.emit(&ErrorEvent{Code: ecode, Message: msg, Recoverable: true,
			Details: map[string]any{"call_id": call.ID, "tool": call.Name}})
		return errorContent(code, msg)
	}

	spec, ok := t.specs[call.Name]
	if !ok {
		return refuse(ToolFailed, ToolCodeUnknownTool, fmt.Sprintf("there is no tool named %q; available tools: %s", call.Name, strings.Join(t.toolNames(), ", "))), nil
	}
	if !json.Valid(call.Args) {
		return refuse(ToolFailed, ToolCodeInvalidInput, fmt.Sprintf("the arguments of %s are not valid JSON: %s", call.Name, truncate(string(call.Args), 200))), nil
	}
	req := ActionRequest{Kind: ActionToolCall, Tool: call.Name, Spec: spec, Paths: callPaths(t.s.workspace.Root, call.Args), Args: call.Args}
	var cmd *CommandRequest
	if spec.Kind == ToolKindCommand {
		req.Kind, req.Command = ActionCommand, commandOf(call.Args)
		cmd = &CommandRequest{ID: newID("cmd"), Command: req.Command, WorkingDir: commandDir(t.s.workspace.Root, call.Args)}
	}
	dec, err := t.gate(ctx, req, ApprovalRequest{
		ID: newID("apr"), CallID: call.ID, Tool: call.Name,
		Description: fmt.Sprintf("Run %s %s", call.Name, truncate(string(call.Args), 200)),
		Args:        call.Args, Preview: previewFor(call), Command: cmd,
	})
	if err != nil {
		return "", err
	}
	if !dec.Approved {
		return refuse(ToolDenied, ToolCodePermissionDenied, fmt.Sprintf("%s was not run: %s", call.Name, dec.Reason)), nil
	}

	t.emit(ev(ToolStarted))
	start := time.Now()
	var res ToolResult
	switch {
	case call.Name == planToolSpec.Name:
		res, err = t.updatePlan(call.Args)
	case t.clientTools[call.Name]:
		res, err = t.invokeOnClient(ctx, call, spec)
	case t.e.opts.Tools == nil:
		err = ToolErrorf(ToolCodeUnknownTool, "no tools are loaded")
	default:
		res, err = t.invoke(ctx, call, spec, cmd, r, ev)
	}
	if err != nil && spec.Kind == ToolKindCommand && t.e.opts.Tools != nil {
		// The command was handed to a runner and may have run in part:
		// that is recorded too (without an exit code).
		t.record(context.WithoutCancel(ctx), "command", dec.Actor, req, "", nil, "did not finish: "+err.Error())
	}
	if err != nil {
		if ctx.Err() != nil {
			e := ev(ToolFailed)
			e.Error, e.ErrorCode, e.Duration = "cancelled", ToolCodeCancelled, time.Since(start)
			t.emit(e)
			return "", ctx.Err()
		}
		code := ToolCodeFailed
		var te *ToolError
		switch {
		case errors.As(err, &te):
			code = te.Code
		case errors.Is(err, ErrPluginCrashed):
			code = ToolCodePluginCrashed
		}
		e := ev(ToolFailed)
		e.Error, e.ErrorCode, e.Duration = err.Error(), code, time.Since(start)
		t.emit(e)
		t.emit(&ErrorEvent{Code: CodeToolError, Message: err.Error(), Recoverable: true,
			Details: map[string]any{"call_id": call.ID, "tool": call.Name, "error_code": string(code)}})
		return errorContent(code, err.Error()), nil
	}
	if len(res.Content) == 0 || !json.Valid(res.Content) {
		res.Content, _ = json.Marshal(string(res.Content))
	}
	switch {
	case len(res.Edits) > 0 && spec.Kind == ToolKindEdit:
		r.addEdits(call, res.Edits)
	case len(res.Edits) > 0:
		t.emit(&ErrorEvent{Code: CodeToolError, Recoverable: true, Details: map[string]any{"call_id": call.ID, "tool": call.Name},
			Message: fmt.Sprintf("%s proposed file edits but is not an edit tool; they were ignored", call.Name)})
	}
	if spec.Kind == ToolKindCommand {
		var cr struct {
			ExitCode *int `json:"exit_code"`
		}
		json.Unmarshal(res.Content, &cr)
		t.record(ctx, "command", dec.Actor, req, "", cr.ExitCode, res.Summary)
	}
	e := ev(ToolCompleted)
	e.Result, e.Summary, e.Duration = res.Content, res.Summary, time.Since(start)
	t.emit(e)
	return t.forModel(res.Content), nil
}

// invoke runs an approved call: a command on the client when the
// workspace runs commands in the local terminal and the Host can,
// otherwise the tool in its plugin, with the response's overlay and the
// workspace's sandbox settings.
func (t *turn) invoke(ctx context.Context, call ToolCall, spec ToolSpec, cmd *CommandRequest, r *response, ev func(ToolStatus) *ToolCallEvent) (ToolResult, error) {
	var settings map[string]string
	if spec.Kind == ToolKindCommand {
		cs := t.commandSettings(ctx)
		if runner, ok := t.opts.Host.(CommandRunner); ok && cs.Mode == CommandModeLocal {
			return t.runOnClient(ctx, runner, *cmd)
		}
		settings = map[string]string{"sandbox.network": "deny"}
		if cs.AllowNetwork {
			settings["sandbox.network"] = "allow"
		}
		if len(cs.Env) > 0 {
			settings["env.allow"] = strings.Join(cs.Env, ",")
		}
	}
	timeout := t.e.toolTimeout(spec)
	deadline := time.Now().Add(timeout)
	cctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	res, err := t.e.opts.Tools.Invoke(cctx, InvokeRequest{
		CallID: call.ID, Tool: call.Name, Args: call.Args,
		WorkspaceRoot: t.s.workspace.Root, Host: &callHost{t: t, call: call},
		Overlay: t.overlayFor(ctx, call, spec, r), Settings: settings,
	}, func(u ToolUpdate) {
		e := ev(ToolRunning)
		e.Update = &u
		e.Remaining = max(time.Until(deadline), 0)
		t.emit(e)
	})
	if err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
		err = ToolErrorf(ToolCodeTimeout, "%s did not finish within %s (its tool deadline)", call.Name, timeout)
	}
	return res, err
}

// toolTimeout is the deadline of one call of the tool spec describes: its
// own Timeout, else Options.ToolTimeout.
func (e *Engine) toolTimeout(spec ToolSpec) time.Duration {
	if spec.Timeout > 0 {
		return spec.Timeout
	}
	return e.opts.ToolTimeout
}

// invokeOnClient hands an approved call of a client tool to the Host,
// with the tool deadline.
func (t *turn) invokeOnClient(ctx context.Context, call ToolCall, spec ToolSpec) (ToolResult, error) {
	timeout := t.e.toolTimeout(spec)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := t.opts.Host.(ClientToolHost).InvokeClientTool(cctx, call)
	if err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
		err = ToolErrorf(ToolCodeTimeout, "the client did not answer %s within %s", call.Name, timeout)
	}
	return res, err
}

// callHost answers callbacks of a running tool call.
type callHost struct {
	t    *turn
	call ToolCall
}

func (h *callHost) RequestApproval(ctx context.Context, a ActionApproval) (ApprovalDecision, error) {
	req := ApprovalRequest{
		ID: newID("apr"), CallID: h.call.ID, Tool: h.call.Name,
		Description: a.Description, Args: h.call.Args, Risk: a.Risk,
	}
	if req.Description == "" {
		req.Description = fmt.Sprintf("%s wants to %s", h.call.Name, a.Action)
	}
	if a.Preview != "" {
		req.Preview = &Preview{Type: "text", Content: a.Preview}
	}
	dec, err := h.t.approve(ctx, req)
	if err != nil {
		return dec, err
	}
	kind := "approval"
	if !dec.Approved {
		kind = "denial"
	}
	h.t.record(ctx, kind, dec.Actor, ActionRequest{Tool: h.call.Name, Args: h.call.Args}, "", nil, req.Description+": "+dec.Reason)
	return dec, nil
}

func (h *callHost) searcher() (Searcher, error) {
	if s := h.t.e.opts.Searcher; s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("%w: this engine has no code index (search_text with a pattern still searches the files without one)", ErrUnsupported)
}

func (h *callHost) SearchSymbols(ctx context.Context, q SymbolQuery) ([]SymbolHit, error) {
	s, err := h.searcher()
	if err != nil {
		return nil, err
	}
	return s.SearchSymbols(ctx, h.t.s.workspace.Root, q)
}

func (h *callHost) SearchText(ctx context.Context, q TextQuery, onMatch func(TextMatch)) (TextResult, error) {
	s, err := h.searcher()
	if err != nil {
		return TextResult{}, err
	}
	return s.SearchText(ctx, h.t.s.workspace.Root, q, onMatch)
}

func (h *callHost) SearchChunks(ctx context.Context, q ChunkQuery) ([]ChunkHit, error) {
	s, err := h.searcher()
	if err != nil {
		return nil, err
	}
	return s.SearchChunks(ctx, h.t.s.workspace.Root, q)
}

func (h *callHost) SearchVectors(ctx context.Context, q ChunkQuery) ([]ChunkHit, error) {
	s, err := h.searcher()
	if err != nil {
		return nil, err
	}
	return s.SearchVectors(ctx, h.t.s.workspace.Root, q)
}

// forModel returns the tool result text the model sees, cut to
// MaxToolResultBytes.
func (t *turn) forModel(content json.RawMessage) string {
	limit := t.e.opts.MaxToolResultBytes
	if len(content) <= limit {
		return string(content)
	}
	cut, _ := json.Marshal(map[string]any{
		"truncated": true,
		"note":      fmt.Sprintf("the result was %d bytes; only the first %d are shown. Ask for less (a line range, a narrower pattern).", len(content), limit),
		"partial":   truncate(string(content), limit),
	})
	return string(cut)
}

func (t *turn) toolNames() []string {
	names := make([]string, 0, len(t.specs))
	for n := range t.specs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func errorContent(code ToolErrorCode, msg string) string {
	b, _ := json.Marshal(map[string]string{"error": msg, "code": string(code)})
	return string(b)
}

func specRisk(s ToolSpec) Risk {
	level := s.Risk
	if level == "" {
		level = RiskMedium
	}
	reasons := []string{s.Name + " is marked as needing approval"}
	if !s.ReadOnly {
		reasons = append(reasons, "it can change files or run processes in the workspace")
	}
	return Risk{Level: level, Reasons: reasons, Reversible: s.ReadOnly}
}

// previewFor shows what a call will do when its arguments say it plainly:
// the command line of a command, the path and opening lines of a file
// write. Nil otherwise. (Diff previews of edits come with patch proposal.)
func previewFor(call ToolCall) *Preview {
	var a struct {
		Command string  `json:"command"`
		Path    string  `json:"path"`
		Content *string `json:"content"`
	}
	if json.Unmarshal(call.Args, &a) != nil {
		return nil
	}
	switch {
	case a.Command != "":
		return &Preview{Type: "command", Content: a.Command}
	case a.Path != "" && a.Content != nil:
		lines := strings.SplitAfter(*a.Content, "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		head := strings.Join(lines[:min(len(lines), previewLines)], "")
		more := ""
		if len(lines) > previewLines {
			more = fmt.Sprintf("\n… %d more lines", len(lines)-previewLines)
		}
		return &Preview{Type: "text", Content: fmt.Sprintf("%s (%d bytes):\n%s%s", a.Path, len(*a.Content), truncate(head, 4096), more)}
	}
	return nil
}

// previewLines is how many lines of a file write a preview shows.
const previewLines = 20

func describeCalls(calls []ToolCall) string {
	names := make([]string, len(calls))
	for i, c := range calls {
		names[i] = c.Name
	}
	if len(calls) == 1 {
		return "Running " + names[0]
	}
	return fmt.Sprintf("Running %d tool calls: %s", len(calls), strings.Join(names, ", "))
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

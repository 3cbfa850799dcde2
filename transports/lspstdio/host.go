package lspstdio

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/creachadair/jrpc2"

	"github.com/plexus-agent/plexus/engine"
)

// taskHost is the engine.Host of one task: the host's tools run through
// $/requestToolExecution, and approvals are asked through it with
// toolName "approve".
type taskHost struct {
	c               *conn
	taskID          string
	tools           []engine.ToolSpec
	toolTimeout     time.Duration
	approvalTimeout time.Duration
}

var _ engine.ClientToolHost = (*taskHost)(nil)

// ClientTools returns the host tools of the configuration the task started
// with.
func (h *taskHost) ClientTools() []engine.ToolSpec { return h.tools }

// InvokeClientTool asks the host to run call and waits for its answer (see
// callHost). Errors: a *engine.ToolError for the host's error (code
// mapped from its JSON-RPC code), for no answer within the host tool
// timeout (timeout) and for input that is not a JSON object
// (invalid_input); the context's cause when the task ends first.
func (h *taskHost) InvokeClientTool(ctx context.Context, call engine.ToolCall) (engine.ToolResult, error) {
	input, ok := objectInput(call.Args)
	if !ok {
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s needs a JSON object as its input", call.Name)
	}
	timeout := capTimeout(ctx, h.toolTimeout)
	a, err := h.c.callHost(ctx, h.taskID, call.Name, input, timeout)
	switch {
	case errors.Is(err, errHostTimeout):
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeTimeout,
			"the editor did not answer %s within %s (neither a toolResponse nor a response to $/requestToolExecution came)", call.Name, timeout)
	case err != nil:
		return engine.ToolResult{}, err
	case a.err != nil:
		return engine.ToolResult{}, a.err.toolError(call.Name)
	}
	return engine.ToolResult{Content: a.result, Summary: fmt.Sprintf("answered by the editor (%d bytes)", len(a.result))}, nil
}

// capTimeout is timeout, shortened to end before ctx's deadline (the
// engine's tool deadline, engine.Options.ToolTimeout) with a margin of a
// tenth of the time left, at most a second: the host call's own timeout
// then fires first, and the model gets this package's message.
func capTimeout(ctx context.Context, timeout time.Duration) time.Duration {
	dl, ok := ctx.Deadline()
	if !ok {
		return timeout
	}
	left := time.Until(dl)
	left -= min(time.Second, left/10)
	if left >= timeout {
		return timeout
	}
	return max(left.Round(time.Millisecond), time.Millisecond)
}

// RequestApproval asks the host with $/requestToolExecution {toolName:
// "approve", toolInput: the request} and decodes its answer {approved,
// reason, scope, files, hunks, remember, applyToSimilar}. An error (the
// host answered with one, did not answer within the approval timeout, or
// its answer has no boolean approved) makes the engine deny the call,
// with the error as the reason.
func (h *taskHost) RequestApproval(ctx context.Context, req engine.ApprovalRequest) (engine.ApprovalDecision, error) {
	input, err := json.Marshal(approvalInputOf(req))
	if err != nil {
		return engine.ApprovalDecision{}, fmt.Errorf("encode the approval request: %w", err)
	}
	a, err := h.c.callHost(ctx, h.taskID, ApproveToolName, input, h.approvalTimeout)
	switch {
	case errors.Is(err, errHostTimeout):
		return engine.ApprovalDecision{}, fmt.Errorf("the editor did not answer within %s", h.approvalTimeout)
	case err != nil:
		return engine.ApprovalDecision{}, err
	case a.err != nil:
		return engine.ApprovalDecision{}, fmt.Errorf("the editor answered with error %d: %s", a.err.Code, a.err.Message)
	}
	var ans approvalAnswer
	if err := json.Unmarshal(a.result, &ans); err != nil || ans.Approved == nil {
		return engine.ApprovalDecision{}, fmt.Errorf("the editor's answer %s has no boolean approved", snippet(string(a.result), 200))
	}
	return engine.ApprovalDecision{
		Approved: *ans.Approved, Reason: ans.Reason, Scope: ans.Scope, Files: ans.Files, Hunks: ans.Hunks,
		Remember: ans.Remember, ApplyToSimilar: ans.ApplyToSimilar, Actor: "user",
	}, nil
}

func approvalInputOf(r engine.ApprovalRequest) approvalInput {
	in := approvalInput{
		RequestID: r.ID, ToolCallID: r.CallID, Tool: r.Tool, Description: r.Description, Args: r.Args,
		Risk: approvalRisk{Level: string(r.Risk.Level), Reasons: nonNil(r.Risk.Reasons), Reversible: r.Risk.Reversible},
	}
	if len(in.Args) == 0 || !json.Valid(in.Args) {
		in.Args, _ = json.Marshal(string(r.Args))
	}
	if r.Preview != nil {
		in.Preview = &approvalText{Type: r.Preview.Type, Content: r.Preview.Content}
	}
	if set := r.PatchSet; set != nil {
		p := &approvalPatch{ID: set.ID, Rationale: set.Rationale, Criteria: set.AcceptanceCriteria, Files: []approvalFile{}}
		for _, f := range set.Files {
			p.Files = append(p.Files, approvalFile{Path: f.Path, Op: f.Op, Diff: f.Diff, Hunks: len(f.Hunks)})
		}
		in.PatchSet = p
	}
	if cmd := r.Command; cmd != nil {
		in.Command = &approvalCmd{Command: cmd.Command, WorkingDirectory: cmd.WorkingDir}
	}
	return in
}

// objectInput is a call's arguments as toolInput: the object itself, {}
// when empty or null; ok is false for anything but an object.
func objectInput(args json.RawMessage) (json.RawMessage, bool) {
	switch jsonKind(args) {
	case 0, 'n':
		return json.RawMessage(`{}`), true
	case '{':
		return args, json.Valid(args)
	}
	return nil, false
}

// errHostTimeout is a host call that got no answer within its timeout.
var errHostTimeout = errors.New("no answer from the host")

// hostAnswer is the host's answer to one $/requestToolExecution: a result
// or an error.
type hostAnswer struct {
	result json.RawMessage
	err    *hostError
}

// hostError is an error the host answered with.
type hostError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// toolError turns e into the ToolError the model sees.
func (e *hostError) toolError(tool string) *engine.ToolError {
	code := engine.ToolCodeFailed
	switch jrpc2.Code(e.Code) {
	case jrpc2.MethodNotFound:
		code = engine.ToolCodeUnknownTool
	case jrpc2.InvalidParams:
		code = engine.ToolCodeInvalidInput
	case -32800: // LSP RequestCancelled
		code = engine.ToolCodeCancelled
	}
	msg := fmt.Sprintf("the editor reported an error running %s (code %d): %s", tool, e.Code, e.Message)
	if len(e.Data) > 0 && string(e.Data) != "null" {
		msg += " " + snippet(string(e.Data), 1000)
	}
	return &engine.ToolError{Code: code, Message: msg}
}

// pendingCall is a $/requestToolExecution waiting for its answer.
type pendingCall struct {
	tool     string
	answered bool
	answer   chan hostAnswer // buffered: the first answer never blocks
}

// callHost sends $/requestToolExecution {toolCallId, toolName, toolInput,
// taskId} as a request and waits for the first answer: a toolResponse
// {toolCallId, result, error} (request or notification), or the response
// to the request itself when it carries an error or a result other than
// null (a null result is an acknowledgement; the answer then comes as a
// toolResponse). It waits at most timeout (errHostTimeout) and until ctx
// ends (its cause).
func (c *conn) callHost(ctx context.Context, taskID, tool string, input json.RawMessage, timeout time.Duration) (hostAnswer, error) {
	id := newCallID()
	p := &pendingCall{tool: tool, answer: make(chan hostAnswer, 1)}
	c.mu.Lock()
	c.pending[id] = p
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.finished.add(id)
		c.mu.Unlock()
	}()
	c.log.Debug("host tool requested", "task", taskID, "tool", tool, "toolCallId", id)

	// The request stays pending in jrpc2 for callbackLinger after the
	// call ends (answered, timed out, or its task ended), so that the
	// acknowledgement that follows a toolResponse, or an answer a little
	// late, is taken by jrpc2 and ignored here. Then the call is given up:
	// Recv drops its responses from then on, and its Callback is cancelled
	// (jrpc2 forgets the request), which ends the goroutine below and
	// frees the request.
	c.ch.calls.expect(id)
	cbctx, cbcancel := context.WithCancel(c.ctx)
	defer time.AfterFunc(c.s.opts.callbackLinger, func() {
		if c.ch.calls.forget(id) {
			cbcancel()
		}
	})
	go func() {
		defer cbcancel()
		rsp, err := c.srv.Callback(cbctx, methodRequestTool, requestToolParams{ToolCallID: id, ToolName: tool, ToolInput: input, TaskID: taskID})
		var a hostAnswer
		switch {
		case err == nil:
			res := strings.TrimSpace(rsp.ResultString())
			if res == "" || res == "null" {
				return // an acknowledgement
			}
			a.result = json.RawMessage(res)
		case cbctx.Err() != nil:
			c.log.Debug("host request given up", "task", taskID, "tool", tool, "toolCallId", id)
			return // given up, or the connection ended: the waiter has returned or sees it
		default:
			var je *jrpc2.Error
			if errors.As(err, &je) {
				a.err = &hostError{Code: int64(je.Code), Message: je.Message, Data: je.Data}
			} else {
				a.err = &hostError{Code: int64(jrpc2.InternalError), Message: "the request could not be sent: " + err.Error()}
			}
		}
		c.deliver(id, a) // an error means a toolResponse came first
	}()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case a := <-p.answer:
		return a, nil
	case <-timer.C:
		c.log.Warn("the host did not answer in time", "task", taskID, "tool", tool, "toolCallId", id, "timeout", timeout)
		return hostAnswer{}, errHostTimeout
	case <-ctx.Done():
		return hostAnswer{}, context.Cause(ctx)
	}
}

// deliver hands a to the pending call id. It fails when no call with that
// id is pending: unknown, or already answered, timed out or ended with its
// task.
func (c *conn) deliver(id string, a hostAnswer) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pending[id]
	switch {
	case p == nil && c.finished.has(id):
		return fmt.Errorf("toolCallId %q is no longer pending: it was answered, timed out or its task ended", id)
	case p == nil:
		return fmt.Errorf("toolCallId %q matches no $/requestToolExecution of this connection", snippet(id, 100))
	case p.answered:
		return fmt.Errorf("toolCallId %q was already answered", id)
	}
	p.answered = true
	p.answer <- a
	return nil
}

// toolResponse handles toolResponse {toolCallId, result, error}. As a
// request it is answered with null, or -32602 when the toolCallId matches
// no pending call; as a notification such an error goes out as
// $/logMessage.
func (c *conn) toolResponse(_ context.Context, req *jrpc2.Request) (any, error) {
	var p toolResponseParams
	if err := unmarshalParams(req, &p); err != nil {
		return c.fail(req, err)
	}
	if p.ToolCallID == "" {
		return c.fail(req, jrpc2.Errorf(jrpc2.InvalidParams, "toolResponse: toolCallId must be a non-empty string"))
	}
	a := hostAnswer{result: p.Result}
	switch jsonKind(p.Error) {
	case 0, 'n':
		if len(a.result) == 0 {
			a.result = json.RawMessage("null")
		}
	case '{':
		var e hostError
		if err := json.Unmarshal(p.Error, &e); err != nil {
			return c.fail(req, jrpc2.Errorf(jrpc2.InvalidParams, "toolResponse: error must be {code, message, data}: %s", jsonErrText(err)))
		}
		if e.Code == 0 {
			e.Code = int64(CodeToolError)
		}
		a = hostAnswer{err: &e}
	case '"':
		var msg string
		json.Unmarshal(p.Error, &msg)
		a = hostAnswer{err: &hostError{Code: int64(CodeToolError), Message: msg}}
	default:
		return c.fail(req, jrpc2.Errorf(jrpc2.InvalidParams, "toolResponse: error must be an object or null"))
	}
	if err := c.deliver(p.ToolCallID, a); err != nil {
		return c.fail(req, jrpc2.Errorf(jrpc2.InvalidParams, "toolResponse: %v", err))
	}
	return nil, nil
}

// newCallID returns "tc_" and 16 random hex digits.
func newCallID() string {
	var b [8]byte
	rand.Read(b[:])
	return "tc_" + hex.EncodeToString(b[:])
}

package ollama

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/ollama/ollama/api"

	"github.com/plexus-agent/plexus/engine"
)

// Chat runs one model call over /api/chat and streams its reply to
// onChunk: text deltas as they arrive, then each tool call, then usage,
// then the done reason (see the package doc for tool calling without
// native tools and for num_ctx). It returns onChunk's error unchanged, a
// *engine.ModelError for a failed call, and, when the server ends the
// stream without a final message, a *engine.ModelError of kind
// engine.ErrModelUnavailable.
func (p *Provider) Chat(ctx context.Context, req engine.ChatRequest, onChunk func(engine.ChatChunk) error) error {
	creq, err := chatRequest(req)
	if err != nil {
		return err
	}
	base, client := p.current()
	key := factsKey{base.String(), req.Model}
	facts, err := p.factsOf(ctx, base, client, req.Model)
	if err != nil {
		return err
	}
	names := make([]string, len(req.Tools))
	for i, t := range req.Tools {
		names[i] = t.Name
	}
	out := &sink{onChunk: onChunk}
	call := func(creq *api.ChatRequest, fn func(api.ChatResponse) error) error {
		p.setNumCtx(creq, key, req.Options.NumCtx, req.Options.MaxTokens, facts)
		err := p.stream(ctx, base, client, creq, fn)
		if errors.Is(err, engine.ErrModelNotFound) {
			p.facts.forget(key)
		}
		return err
	}

	if len(names) == 0 || !facts.withoutTools() {
		reason, retry, err := chatNative(creq, names, out, call)
		switch {
		case err == nil && !retry:
			return out.finish(reason)
		case err == nil:
			// Text that tried a tool call and failed: once more,
			// constrained.
		case len(names) > 0 && !out.sent && noToolsError(err):
			p.facts.markNoTools(key)
		default:
			return err
		}
	}

	ccreq, err := constrainedRequest(creq, req, false)
	if err != nil {
		return err
	}
	reason, err := chatConstrained(ccreq, names, out, call)
	if err != nil && !out.sent && schemaError(err) && len(bytes.TrimSpace(req.Options.Format)) == 0 {
		// The server could not make a grammar of the full schema.
		if ccreq, err = constrainedRequest(creq, req, true); err != nil {
			return err
		}
		reason, err = chatConstrained(ccreq, names, out, call)
	}
	if err != nil {
		return err
	}
	return out.finish(reason)
}

// noToolsError reports whether err is the server refusing tools for a
// model (`"x" does not support tools`).
func noToolsError(err error) bool {
	var me *engine.ModelError
	return errors.As(err, &me) && errors.Is(err, engine.ErrUnsupported) && strings.Contains(me.Message, "does not support tools")
}

// schemaError reports whether err is the server failing to turn a
// `format` schema into a grammar (Ollama 0.6.5: "invalid JSON schema in
// format").
func schemaError(err error) bool {
	var me *engine.ModelError
	return errors.As(err, &me) && strings.Contains(strings.ToLower(me.Message), "invalid json schema")
}

// chatNative runs creq as it is. Text that may be a tool call written as
// text is held back (see gate) and parsed when the reply is done; retry
// reports a reply that tried to call a tool in text and failed, of which
// nothing was forwarded.
func chatNative(creq *api.ChatRequest, names []string, out *sink, call func(*api.ChatRequest, func(api.ChatResponse) error) error) (reason string, retry bool, err error) {
	g := gate{hold: len(names) > 0}
	err = call(creq, func(r api.ChatResponse) error {
		if r.Message.Content != "" {
			if err := out.text(g.push(r.Message.Content)); err != nil {
				return err
			}
		}
		if len(r.Message.ToolCalls) > 0 {
			// Native calls: what was held is text after all.
			if err := out.text(g.flush()); err != nil {
				return err
			}
		}
		if err := out.nativeCalls(r.Message.ToolCalls); err != nil {
			return err
		}
		if !r.Done {
			return nil
		}
		out.addUsage(r)
		reason = r.DoneReason
		held := g.flush()
		if held == "" || out.calls > 0 {
			return out.text(held)
		}
		parsed := parseTextCalls(held, names)
		switch {
		case len(parsed.Calls) > 0:
			if err := out.text(parsed.Before); err != nil {
				return err
			}
			for _, c := range parsed.Calls {
				if err := out.call("", c.Name, c.Args); err != nil {
					return err
				}
			}
			return nil
		case parsed.Attempted && !out.sent:
			retry = true
			return nil
		}
		return out.text(held)
	})
	return reason, retry, err
}

// chatConstrained runs a constrained request (see constrainedRequest),
// holding the whole reply, and emits the tool call or answer it holds.
func chatConstrained(creq *api.ChatRequest, names []string, out *sink, call func(*api.ChatRequest, func(api.ChatResponse) error) error) (reason string, err error) {
	var text strings.Builder
	err = call(creq, func(r api.ChatResponse) error {
		text.WriteString(r.Message.Content)
		if err := out.nativeCalls(r.Message.ToolCalls); err != nil { // not expected without tools
			return err
		}
		if !r.Done {
			return nil
		}
		out.addUsage(r)
		reason = r.DoneReason
		calls, answer, ok := parseConstrained(text.String(), names)
		if !ok {
			return out.text(text.String())
		}
		if err := out.text(answer); err != nil {
			return err
		}
		for _, c := range calls {
			if err := out.call("", c.Name, c.Args); err != nil {
				return err
			}
		}
		return nil
	})
	return reason, err
}

// sink forwards a reply's chunks to onChunk, numbering tool calls and
// summing usage over the calls a reply took.
type sink struct {
	onChunk func(engine.ChatChunk) error
	sent    bool // text other than white space was forwarded
	calls   int
	usage   engine.Usage
}

func (s *sink) text(t string) error {
	if t == "" {
		return nil
	}
	if strings.TrimSpace(t) != "" {
		s.sent = true
	}
	return s.onChunk(engine.ChatChunk{Text: t})
}

// call forwards a tool call; an empty id becomes "call_N", N counting the
// reply's calls from 0.
func (s *sink) call(id, name string, args json.RawMessage) error {
	if id == "" {
		id = fmt.Sprintf("call_%d", s.calls)
	}
	s.calls++
	return s.onChunk(engine.ChatChunk{ToolCall: &engine.ToolCall{ID: id, Name: name, Args: args}})
}

// nativeCalls forwards the tool calls Ollama parsed.
func (s *sink) nativeCalls(calls []api.ToolCall) error {
	for _, tc := range calls {
		args, err := json.Marshal(tc.Function.Arguments)
		if err != nil {
			return modelError(nil, "encode the arguments of tool call %q: %v", tc.Function.Name, err)
		}
		if err := s.call(tc.ID, tc.Function.Name, args); err != nil {
			return err
		}
	}
	return nil
}

func (s *sink) addUsage(r api.ChatResponse) {
	s.usage.PromptTokens += int64(r.PromptEvalCount)
	s.usage.CompletionTokens += int64(r.EvalCount)
}

// finish forwards the usage and the done reason: "stop" (also when the
// server sent none, as servers before 0.1.40 do) becomes "tool_calls" when
// the reply called tools.
func (s *sink) finish(reason string) error {
	usage := s.usage
	if err := s.onChunk(engine.ChatChunk{Usage: &usage}); err != nil {
		return err
	}
	if reason == "" {
		reason = "stop"
	}
	if reason == "stop" && s.calls > 0 {
		reason = "tool_calls"
	}
	return s.onChunk(engine.ChatChunk{DoneReason: reason})
}

// callbackError carries an error of a stream callback (onChunk's own, or
// one of its translation) through the api client unchanged.
type callbackError struct{ err error }

func (e callbackError) Error() string { return e.err.Error() }

// stream runs one streaming /api/chat call, calling fn with each response.
// It returns fn's errors as they are, classifies the client's, and reports
// a stream that ended without a final response as
// engine.ErrModelUnavailable.
func (p *Provider) stream(ctx context.Context, base *url.URL, client *api.Client, creq *api.ChatRequest, fn func(api.ChatResponse) error) error {
	done := false
	var cbErr error
	err := client.Chat(ctx, creq, func(r api.ChatResponse) error {
		if err := fn(r); err != nil {
			cbErr = err
			return callbackError{err}
		}
		done = done || r.Done
		return nil
	})
	if cbErr != nil {
		return cbErr
	}
	if err != nil {
		return classify(ctx, base, err)
	}
	if !done {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return modelError(engine.ErrModelUnavailable, "the Ollama server at %s ended the reply of %s before it was done", base, creq.Model)
	}
	return nil
}

// chatRequest translates req into a streaming /api/chat request.
func chatRequest(req engine.ChatRequest) (*api.ChatRequest, error) {
	if req.Model == "" {
		return nil, invalidf("no model named; give an Ollama model such as qwen2.5-coder:7b")
	}
	stream := true
	out := &api.ChatRequest{Model: req.Model, Stream: &stream, Messages: make([]api.Message, 0, len(req.Messages))}
	for i, m := range req.Messages {
		msg, err := messageToAPI(req.Messages[:i], m)
		if err != nil {
			return nil, invalidf("message %d: %v", i, err)
		}
		out.Messages = append(out.Messages, msg)
	}
	for _, spec := range req.Tools {
		tool, err := toolFromSpec(spec)
		if err != nil {
			return nil, err
		}
		out.Tools = append(out.Tools, tool)
	}

	o := req.Options
	opts := map[string]any{}
	if o.Temperature != nil {
		opts["temperature"] = *o.Temperature
	}
	if o.TopP != nil {
		opts["top_p"] = *o.TopP
	}
	if o.Seed != nil {
		opts["seed"] = *o.Seed
	}
	if o.MaxTokens > 0 {
		opts["num_predict"] = o.MaxTokens
	}
	if o.NumCtx > 0 {
		opts["num_ctx"] = o.NumCtx
	}
	if len(o.Stop) > 0 {
		opts["stop"] = o.Stop
	}
	if len(opts) > 0 {
		out.Options = opts
	}
	if o.KeepAlive != 0 {
		out.KeepAlive = &api.Duration{Duration: o.KeepAlive}
	}
	if f := bytes.TrimSpace(o.Format); len(f) > 0 {
		if !json.Valid(f) {
			return nil, invalidf("format is not JSON; give a JSON Schema (or \"json\")")
		}
		out.Format = json.RawMessage(f)
	}
	return out, nil
}

// messageToAPI translates one message; earlier are the messages before it,
// searched for the tool call a tool message answers.
func messageToAPI(earlier []engine.Message, m engine.Message) (api.Message, error) {
	switch m.Role {
	case engine.RoleSystem, engine.RoleUser:
		return api.Message{Role: string(m.Role), Content: m.Content}, nil
	case engine.RoleAssistant:
		msg := api.Message{Role: string(m.Role), Content: m.Content}
		for _, c := range m.ToolCalls {
			args := api.NewToolCallFunctionArguments()
			if raw := bytes.TrimSpace(c.Args); len(raw) > 0 && string(raw) != "null" {
				if raw[0] != '{' {
					return api.Message{}, fmt.Errorf("the arguments of tool call %q are not a JSON object: %s", c.Name, raw)
				}
				if err := json.Unmarshal(raw, &args); err != nil {
					return api.Message{}, fmt.Errorf("the arguments of tool call %q are not a JSON object: %v", c.Name, err)
				}
			}
			msg.ToolCalls = append(msg.ToolCalls, api.ToolCall{ID: c.ID, Function: api.ToolCallFunction{Name: c.Name, Arguments: args}})
		}
		return msg, nil
	case engine.RoleTool:
		name := m.ToolName
		if name == "" && m.ToolCallID != "" {
			name = toolNameOf(earlier, m.ToolCallID)
		}
		return api.Message{Role: "tool", Content: m.Content, ToolName: name, ToolCallID: m.ToolCallID}, nil
	}
	return api.Message{}, fmt.Errorf("role %q is not system, user, assistant or tool", m.Role)
}

// toolNameOf returns the name of the latest tool call with id among msgs,
// or "".
func toolNameOf(msgs []engine.Message, id string) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		for _, c := range msgs[i].ToolCalls {
			if c.ID == id {
				return c.Name
			}
		}
	}
	return ""
}

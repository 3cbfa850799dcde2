package ollama

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/ollama/ollama/api"

	"github.com/plexus-agent/plexus/engine"
)

// Chat runs one /api/chat call and streams its reply to onChunk: text
// deltas as they arrive, then each tool call, then usage, then the done
// reason (see the package doc). It returns onChunk's error unchanged, a
// *engine.ModelError for a failed call, and, when the server ends the
// stream without a final message, a *engine.ModelError of kind
// engine.ErrModelUnavailable.
func (p *Provider) Chat(ctx context.Context, req engine.ChatRequest, onChunk func(engine.ChatChunk) error) error {
	creq, err := chatRequest(req)
	if err != nil {
		return err
	}
	base, client := p.current()
	var (
		cbErr error // onChunk's error, returned as it is
		calls int
		done  bool
	)
	emit := func(c engine.ChatChunk) error {
		if err := onChunk(c); err != nil {
			cbErr = err
			return err
		}
		return nil
	}
	err = client.Chat(ctx, creq, func(r api.ChatResponse) error {
		if r.Message.Content != "" {
			if err := emit(engine.ChatChunk{Text: r.Message.Content}); err != nil {
				return err
			}
		}
		for _, tc := range r.Message.ToolCalls {
			args, err := json.Marshal(tc.Function.Arguments)
			if err != nil {
				return fmt.Errorf("encode the arguments of tool call %q: %w", tc.Function.Name, err)
			}
			id := tc.ID
			if id == "" {
				id = fmt.Sprintf("call_%d", calls)
			}
			calls++
			if err := emit(engine.ChatChunk{ToolCall: &engine.ToolCall{ID: id, Name: tc.Function.Name, Args: args}}); err != nil {
				return err
			}
		}
		if !r.Done {
			return nil
		}
		done = true
		usage := &engine.Usage{PromptTokens: int64(r.PromptEvalCount), CompletionTokens: int64(r.EvalCount)}
		if err := emit(engine.ChatChunk{Usage: usage}); err != nil {
			return err
		}
		reason := r.DoneReason
		if reason == "" {
			reason = "stop" // servers before 0.1.40 send none
		}
		if reason == "stop" && calls > 0 {
			reason = "tool_calls"
		}
		return emit(engine.ChatChunk{DoneReason: reason})
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
		return modelError(engine.ErrModelUnavailable, "the Ollama server at %s ended the reply of %s before it was done", base, req.Model)
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

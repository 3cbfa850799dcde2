package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	oai "github.com/sashabaranov/go-openai"

	"github.com/plexus-agent/plexus/engine"
)

// Chat streams one chat completion; see the package doc for the mapping
// of the request and of the reply onto chunks. Errors are
// *engine.ModelError, or ctx.Err() when ctx ended, or onChunk's error.
func (p *Provider) Chat(ctx context.Context, req engine.ChatRequest, onChunk func(engine.ChatChunk) error) error {
	c, err := p.conn()
	if err != nil {
		return err
	}
	creq, err := chatRequest(req)
	if err != nil {
		return &engine.ModelError{Provider: ProviderName, Kind: engine.ErrInvalidRequest, Message: err.Error()}
	}
	stream, err := c.client.CreateChatCompletionStream(ctx, creq)
	if err != nil {
		return c.classify(ctx, "chat", err)
	}
	defer stream.Close()

	var (
		calls  toolCalls
		usage  *oai.Usage
		finish oai.FinishReason
	)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return c.classify(ctx, "chat", err)
		}
		if resp.Usage != nil {
			usage = resp.Usage
		}
		for _, ch := range resp.Choices {
			if ch.Index != 0 {
				continue // only one choice is asked for
			}
			if ch.Delta.Content != "" {
				if err := onChunk(engine.ChatChunk{Text: ch.Delta.Content}); err != nil {
					return err
				}
			}
			calls.add(ch.Delta.ToolCalls)
			if ch.FinishReason != "" && ch.FinishReason != oai.FinishReasonNull {
				finish = ch.FinishReason
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if finish == "" {
		return &engine.ModelError{Provider: ProviderName, Kind: engine.ErrModelUnavailable,
			Message: fmt.Sprintf("the server at %s closed the stream before the reply was complete (no finish_reason)", c.baseURL)}
	}
	complete := calls.complete()
	for i := range complete {
		if err := onChunk(engine.ChatChunk{ToolCall: &complete[i]}); err != nil {
			return err
		}
	}
	if usage != nil {
		if err := onChunk(engine.ChatChunk{Usage: &engine.Usage{
			PromptTokens: int64(usage.PromptTokens), CompletionTokens: int64(usage.CompletionTokens),
		}}); err != nil {
			return err
		}
	}
	return onChunk(engine.ChatChunk{DoneReason: doneReason(finish, len(complete))})
}

func doneReason(finish oai.FinishReason, calls int) string {
	switch finish {
	case oai.FinishReasonFunctionCall:
		return string(oai.FinishReasonToolCalls)
	case "":
		if calls > 0 {
			return string(oai.FinishReasonToolCalls)
		}
		return string(oai.FinishReasonStop)
	}
	return string(finish)
}

// toolCalls assembles streamed tool call deltas into complete calls.
type toolCalls struct {
	calls   []*partialCall
	byIndex map[int]*partialCall // the latest call at each index
}

type partialCall struct {
	id, name string
	args     strings.Builder
}

// add takes one delta's tool call pieces. A piece continues the call at
// its index, unless it carries an id different from that call's, which
// starts a new call. A piece without an index is placed by its position in
// the delta.
func (t *toolCalls) add(deltas []oai.ToolCall) {
	if t.byIndex == nil {
		t.byIndex = map[int]*partialCall{}
	}
	for pos, d := range deltas {
		idx := pos
		if d.Index != nil {
			idx = *d.Index
		}
		cur := t.byIndex[idx]
		if cur == nil || (d.ID != "" && cur.id != "" && d.ID != cur.id) {
			cur = &partialCall{}
			t.calls = append(t.calls, cur)
			t.byIndex[idx] = cur
		}
		if d.ID != "" {
			cur.id = d.ID
		}
		switch name := d.Function.Name; {
		case name == "" || name == cur.name:
		case cur.name == "":
			cur.name = name
		default:
			cur.name += name // a name streamed in pieces
		}
		cur.args.WriteString(d.Function.Arguments)
	}
}

// complete returns the assembled calls in the order they started; calls
// without a name and arguments are dropped, empty arguments become {}.
func (t *toolCalls) complete() []engine.ToolCall {
	out := make([]engine.ToolCall, 0, len(t.calls))
	for _, c := range t.calls {
		args := strings.TrimSpace(c.args.String())
		if c.name == "" && args == "" {
			continue
		}
		if args == "" {
			args = "{}"
		}
		out = append(out, engine.ToolCall{ID: c.id, Name: c.name, Args: json.RawMessage(args)})
	}
	return out
}

// chatRequest maps an engine request onto a streaming chat completion
// request.
func chatRequest(req engine.ChatRequest) (oai.ChatCompletionRequest, error) {
	if req.Model == "" {
		return oai.ChatCompletionRequest{}, errors.New("no model given; name one as openai:MODEL, for example openai:gpt-4o-mini")
	}
	out := oai.ChatCompletionRequest{
		Model:         req.Model,
		Stream:        true,
		StreamOptions: &oai.StreamOptions{IncludeUsage: true},
		Stop:          req.Options.Stop,
	}
	for i, m := range req.Messages {
		msg, err := chatMessage(m)
		if err != nil {
			return oai.ChatCompletionRequest{}, fmt.Errorf("message %d: %w", i, err)
		}
		out.Messages = append(out.Messages, msg)
	}
	for _, t := range req.Tools {
		params := json.RawMessage(t.InputSchema)
		if len(bytes.TrimSpace(params)) == 0 {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		if !json.Valid(params) {
			return oai.ChatCompletionRequest{}, fmt.Errorf("tool %s: input schema is not valid JSON", t.Name)
		}
		out.Tools = append(out.Tools, oai.Tool{Type: oai.ToolTypeFunction, Function: &oai.FunctionDefinition{
			Name: t.Name, Description: t.Description, Parameters: params,
		}})
	}
	o := req.Options
	if o.Temperature != nil {
		out.Temperature = nonZero(*o.Temperature)
	}
	if o.TopP != nil {
		out.TopP = nonZero(*o.TopP)
	}
	if o.Seed != nil {
		s := int(*o.Seed)
		out.Seed = &s
	}
	if o.MaxTokens > 0 {
		out.MaxTokens = o.MaxTokens
		if errors.Is(oai.NewReasoningValidator().Validate(out), oai.ErrReasoningModelMaxTokensDeprecated) {
			out.MaxTokens, out.MaxCompletionTokens = 0, o.MaxTokens
		}
	}
	if f := bytes.TrimSpace(o.Format); len(f) > 0 {
		switch {
		case f[0] == '{' && json.Valid(f):
			out.ResponseFormat = &oai.ChatCompletionResponseFormat{
				Type:       oai.ChatCompletionResponseFormatTypeJSONSchema,
				JSONSchema: &oai.ChatCompletionResponseFormatJSONSchema{Name: "response", Schema: json.RawMessage(f)},
			}
		case string(f) == `"json"`:
			out.ResponseFormat = &oai.ChatCompletionResponseFormat{Type: oai.ChatCompletionResponseFormatTypeJSONObject}
		default:
			return oai.ChatCompletionRequest{}, fmt.Errorf("format must be a JSON Schema object or \"json\", got %.60s", f)
		}
	}
	return out, nil
}

// nonZero returns v as a float32, the smallest positive float32 for 0 so
// that the client library does not omit it.
func nonZero(v float64) float32 {
	if v == 0 {
		return math.SmallestNonzeroFloat32
	}
	return float32(v)
}

func chatMessage(m engine.Message) (oai.ChatCompletionMessage, error) {
	out := oai.ChatCompletionMessage{Content: m.Content}
	switch m.Role {
	case engine.RoleSystem:
		out.Role = oai.ChatMessageRoleSystem
	case engine.RoleUser:
		out.Role = oai.ChatMessageRoleUser
	case engine.RoleAssistant:
		out.Role = oai.ChatMessageRoleAssistant
		for _, c := range m.ToolCalls {
			args := string(bytes.TrimSpace(c.Args))
			if args == "" {
				args = "{}"
			}
			out.ToolCalls = append(out.ToolCalls, oai.ToolCall{
				ID: c.ID, Type: oai.ToolTypeFunction, Function: oai.FunctionCall{Name: c.Name, Arguments: args},
			})
		}
	case engine.RoleTool:
		if m.ToolCallID == "" {
			return oai.ChatCompletionMessage{}, fmt.Errorf("tool message (from %q) has no tool call id", m.ToolName)
		}
		out.Role = oai.ChatMessageRoleTool
		out.ToolCallID = m.ToolCallID
	default:
		return oai.ChatCompletionMessage{}, fmt.Errorf("unknown role %q (want system, user, assistant or tool)", m.Role)
	}
	if out.Content == "" && len(out.ToolCalls) == 0 {
		out.Content = " "
	}
	return out, nil
}

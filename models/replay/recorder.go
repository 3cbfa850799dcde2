package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/plugins"
)

// Recorder is an engine.Model that passes every call to a live model and
// appends each complete Chat response to a script, one line per response,
// so the session can later be replayed with Provider.
//
// Only successful calls are written: a failed call (a provider error, ctx
// ending, onChunk refusing a chunk) writes nothing, because an error step
// would stop every later replay at that point. Text is written so that it
// replays literally ("{{" is escaped as {{"{{"}}); usage is written when
// the model reported some; the done reason is written as reported, or as
// the replay default when the model sent none.
//
// Recorder is safe for concurrent use, and each line is written with one
// Write call, but responses of concurrent sessions interleave in the
// script: record one session at a time.
type Recorder struct {
	inner engine.Model

	mu sync.Mutex
	w  io.Writer
}

var (
	_ engine.Model       = (*Recorder)(nil)
	_ plugins.Configurer = (*Recorder)(nil)
)

// NewRecorder returns a Recorder that records m's responses to w.
func NewRecorder(m engine.Model, w io.Writer) *Recorder {
	return &Recorder{inner: m, w: w}
}

// Configure passes settings to the wrapped model when it is a
// plugins.Configurer, and does nothing otherwise.
func (r *Recorder) Configure(ctx context.Context, settings map[string]string) error {
	if c, ok := r.inner.(plugins.Configurer); ok {
		return c.Configure(ctx, settings)
	}
	return nil
}

// ListModels returns the wrapped model's list.
func (r *Recorder) ListModels(ctx context.Context) ([]engine.ModelInfo, error) {
	return r.inner.ListModels(ctx)
}

// Embed returns the wrapped model's vectors; embeddings are not recorded.
func (r *Recorder) Embed(ctx context.Context, req engine.EmbedRequest) (engine.EmbedResponse, error) {
	return r.inner.Embed(ctx, req)
}

// Chat runs the wrapped model's Chat, passing every chunk to onChunk as it
// arrives, and once the call has succeeded appends the response as one
// script line. It returns the wrapped model's error unchanged, or an error
// when the line cannot be written.
func (r *Recorder) Chat(ctx context.Context, req engine.ChatRequest, onChunk func(engine.ChatChunk) error) error {
	var (
		text  strings.Builder
		st    Step
		usage engine.Usage
		seen  bool // usage reported
	)
	err := r.inner.Chat(ctx, req, func(c engine.ChatChunk) error {
		switch {
		case c.Text != "":
			text.WriteString(c.Text)
		case c.ToolCall != nil:
			st.ToolCalls = append(st.ToolCalls, StepToolCall{
				ID: c.ToolCall.ID, Name: c.ToolCall.Name, Arguments: recordArgs(c.ToolCall.Args),
			})
		case c.Usage != nil:
			usage.PromptTokens += c.Usage.PromptTokens
			usage.CompletionTokens += c.Usage.CompletionTokens
			seen = true
		case c.DoneReason != "":
			st.DoneReason = c.DoneReason
		}
		return onChunk(c)
	})
	if err != nil {
		return err
	}
	st.Text = escapeTemplate(text.String())
	if seen {
		st.Usage = &usage
	}
	if st.DoneReason == "" || !doneReasonRE.MatchString(st.DoneReason) {
		st.DoneReason = defaultDoneReason(len(st.ToolCalls))
	}
	line, err := st.MarshalLine()
	if err == nil {
		_, err = DecodeStep(line)
	}
	if err != nil {
		return fmt.Errorf("replay recorder: the response cannot be recorded as a script line: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.w.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("replay recorder: write script line: %w", err)
	}
	return nil
}

// escapeTemplate makes s a template that renders as s.
func escapeTemplate(s string) string {
	return strings.ReplaceAll(s, "{{", `{{"{{"}}`)
}

// recordArgs returns a call's arguments as a script writes them: the JSON
// object itself, or the raw text as a JSON string when it is not one.
func recordArgs(args []byte) json.RawMessage {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 {
		return nil
	}
	if trimmed[0] == '{' && json.Valid(trimmed) {
		return append(json.RawMessage(nil), trimmed...)
	}
	s, _ := json.Marshal(string(args))
	return s
}

package acp

import (
	"context"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/plexus-agent/plexus/engine"
)

// replay sends a loaded session's conversation as session/update
// notifications: each turn's user message (user_message_chunk, from the
// stored history) followed by that turn's stored events through the same
// mapping as a live turn (its text, thoughts, plan, tool calls with their
// diffs and outcomes). User messages of turns that have no stored events
// (a conversation imported without them) are followed by the assistant's
// text from the history.
func (s *session) replay(ctx context.Context) error {
	history := s.eng.History()
	events, err := s.c.s.opts.Engine.Events(ctx, s.id, 0, 0)
	if err != nil {
		return err
	}
	// The events of each turn, in order.
	var turns [][]engine.Event
	last := ""
	for _, ev := range events {
		if ev.TurnID != last || len(turns) == 0 {
			turns = append(turns, nil)
			last = ev.TurnID
		}
		turns[len(turns)-1] = append(turns[len(turns)-1], ev)
	}
	// The history's user messages, each with the messages after it.
	type exchange struct {
		user    string
		replies []engine.Message
	}
	var exchanges []exchange
	for _, m := range history {
		switch {
		case m.Role == engine.RoleUser:
			exchanges = append(exchanges, exchange{user: m.Content})
		case len(exchanges) > 0:
			exchanges[len(exchanges)-1].replies = append(exchanges[len(exchanges)-1].replies, m)
		}
	}
	// The last turns pair with the last user messages. Extra user
	// messages at the front were imported without events; extra turns
	// lack their user message (saving the history failed).
	n := min(len(exchanges), len(turns))
	specs, _ := s.c.s.opts.Engine.Tools(ctx)
	for _, t := range turns[:len(turns)-n] {
		s.replayTurn(specs, t)
	}
	for i, ex := range exchanges {
		s.c.notify(s.id, sdk.UpdateUserMessageText(ex.user))
		if j := i - (len(exchanges) - n); j >= 0 {
			s.replayTurn(specs, turns[len(turns)-n+j])
			continue
		}
		for _, r := range ex.replies {
			if r.Role == engine.RoleAssistant && r.Content != "" {
				s.c.notify(s.id, sdk.UpdateAgentMessageText(r.Content))
			}
		}
	}
	return nil
}

func (s *session) replayTurn(specs []engine.ToolSpec, events []engine.Event) {
	m := newMapper(s.root, specs)
	for _, ev := range events {
		s.emit(m, ev)
	}
	// A turn whose final event was not stored still ends its calls.
	s.mapMu.Lock()
	defer s.mapMu.Unlock()
	for _, u := range m.closeAll(&engine.FinalEvent{Status: engine.TurnError}) {
		s.c.notify(s.id, u)
	}
}

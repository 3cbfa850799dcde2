package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Session is one conversation in a workspace: its message history and its
// event sequence. Turns of a session run one at a time, in the order Run was
// called; Run waits for the previous turn. Safe for concurrent use.
type Session struct {
	id        string
	workspace *Workspace
	engine    *Engine
	created   time.Time

	// turnLock holds a token while a turn (or ClearHistory) runs.
	turnLock chan struct{}

	mu      sync.Mutex // guards history, turns, running
	history []Message
	turns   int
	running bool

	// emitMu orders event delivery; seq is written under it.
	emitMu sync.Mutex
	seq    atomic.Uint64
}

// ID is the session's id.
func (s *Session) ID() string { return s.id }

// Workspace is the workspace the session works in.
func (s *Session) Workspace() *Workspace { return s.workspace }

// Created is when the session started.
func (s *Session) Created() time.Time { return s.created }

// History returns a copy of the conversation so far (user, assistant and
// tool messages, without the system prompt).
func (s *Session) History() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.history)
}

// SessionStatus is a snapshot of a session.
type SessionStatus struct {
	ID          string `json:"session_id"`
	WorkspaceID string `json:"workspace_id"`
	// Busy is true while a turn runs.
	Busy bool `json:"busy"`
	// Messages counts user and assistant messages in the history (tool
	// messages are not counted).
	Messages int `json:"messages"`
	// Turns counts finished turns.
	Turns int `json:"turns"`
	// LastSeq is the sequence number of the last event.
	LastSeq uint64    `json:"last_seq"`
	Created time.Time `json:"created"`
}

// Status returns a snapshot of the session.
func (s *Session) Status() SessionStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.history {
		if m.Role == RoleUser || m.Role == RoleAssistant {
			n++
		}
	}
	return SessionStatus{
		ID: s.id, WorkspaceID: s.workspace.ID, Busy: s.running, Messages: n,
		Turns: s.turns, LastSeq: s.seq.Load(), Created: s.created,
	}
}

// ClearHistory forgets the conversation. It waits for a running turn to end
// (or ctx) first, so it never cuts a turn in half.
func (s *Session) ClearHistory(ctx context.Context) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.unlock()
	s.mu.Lock()
	s.history = nil
	s.mu.Unlock()
	return nil
}

func (s *Session) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil { // select picks at random when both are ready
		return fmt.Errorf("session %s: %w", s.id, context.Cause(ctx))
	}
	select {
	case s.turnLock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("session %s: waiting for the previous turn: %w", s.id, context.Cause(ctx))
	}
}

func (s *Session) unlock() { <-s.turnLock }

// TurnInput is what a user sends for one turn.
type TurnInput struct {
	// Message is the user's text; it must not be empty.
	Message string
	// Attachments are files the client attached. Relative paths are
	// relative to the workspace root. Unlike tool paths they are not
	// confined to the workspace: the client picked them for the user
	// (a desktop shell's file picker), so an absolute path anywhere is
	// read, up to Options.MaxAttachmentBytes.
	Attachments []Attachment
	// Model overrides the engine's current model for this turn.
	Model ModelRef
}

// Attachment is a file the client attached to a message.
type Attachment struct {
	Path string `json:"path"`
	MIME string `json:"mime"`
}

// TurnOptions are per-turn settings of the front-end.
type TurnOptions struct {
	// Host is asked to approve calls that need approval; nil when the
	// front-end cannot ask.
	Host Host
	// ApproveAll approves every call that needs approval without asking.
	ApproveAll bool
	// OnEvent receives the turn's events in order, synchronously, from
	// one goroutine at a time; a slow OnEvent slows the turn. Nil drops
	// them. The FinalEvent comes after the session's history and status
	// are updated.
	OnEvent func(Event)
}

// TurnResult is how a turn ended; it repeats the turn's FinalEvent.
type TurnResult struct {
	TurnID   string
	Status   TurnStatus
	Message  string
	Error    string
	Metadata TurnMetadata
}

// Run runs one turn: it waits for the session's previous turn, then drives
// the model and tools until the model answers without calling a tool, the
// step limit is reached, or ctx ends. Events go to opts.OnEvent and end
// with exactly one FinalEvent. Run returns an error only when the turn could
// not start (empty message, unknown provider, ctx ended while waiting); a
// turn that starts and fails reports it in TurnResult and the events.
func (s *Session) Run(ctx context.Context, in TurnInput, opts TurnOptions) (TurnResult, error) {
	if in.Message == "" {
		return TurnResult{}, fmt.Errorf("%w: empty message", ErrInvalidRequest)
	}
	ref := in.Model
	if ref.IsZero() {
		ref = s.engine.CurrentModel()
	}
	if ref.IsZero() {
		return TurnResult{}, fmt.Errorf("%w: no model chosen (pick one as PROVIDER:MODEL)", ErrInvalidRequest)
	}
	model, err := s.engine.provider(ref.Provider)
	if err != nil {
		return TurnResult{}, err
	}
	if err := s.lock(ctx); err != nil {
		return TurnResult{}, err
	}
	defer s.unlock()

	s.mu.Lock()
	s.running = true
	history := slices.Clone(s.history)
	s.mu.Unlock()

	t := &turn{
		s: s, e: s.engine, id: newID("turn"), opts: opts,
		model: model, ref: ref, started: time.Now(),
	}
	res, keep := t.run(ctx, in, history)

	s.mu.Lock()
	s.history = append(s.history, keep...)
	s.turns++
	s.running = false
	s.mu.Unlock()
	// The final event goes out after the history is saved, so a front-end
	// answering from OnEvent sees the session as it now is.
	t.emit(&FinalEvent{Status: res.Status, Message: res.Message, Error: res.Error, Metadata: res.Metadata})
	return res, nil
}

// emit assigns the next sequence number and hands the event to onEvent.
// Holding emitMu while calling onEvent keeps delivery in sequence order even
// when a tool callback emits from another goroutine.
func (s *Session) emit(turnID string, onEvent func(Event), data EventData) {
	s.emitMu.Lock()
	defer s.emitMu.Unlock()
	seq := s.seq.Add(1)
	if onEvent == nil {
		return
	}
	onEvent(Event{Seq: seq, SessionID: s.id, TurnID: turnID, Time: time.Now(), Data: data})
}

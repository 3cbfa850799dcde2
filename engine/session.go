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

	mu      sync.Mutex // guards history, saved, turns, running, model
	history []Message
	// model is the session's own model choice (SetModel); zero means the
	// engine's current model.
	model ModelRef
	// modelMu serialises SetModel's store write and update of model.
	modelMu sync.Mutex
	// saved counts the leading history messages the session store has.
	saved   int
	turns   int
	running bool

	// emitMu orders event delivery; seq and quietTurn are written under
	// it.
	emitMu sync.Mutex
	seq    atomic.Uint64
	// quietTurn is the turn that already reported that the store failed
	// to keep its events; "" after an event is stored again.
	quietTurn string
	// state follows the events for State; written under emitMu.
	state *stateTracker
	// pending are the running turn's messages that are not in history
	// yet (its user message), stored with the next event when
	// pendingDirty; both guarded by emitMu (see Session.store).
	pending      []Message
	pendingDirty bool
}

func newSession(e *Engine, ws *Workspace, id string, created time.Time) *Session {
	return &Session{id: id, workspace: ws, engine: e, created: created, turnLock: make(chan struct{}, 1), state: newStateTracker()}
}

// record is what the session store keeps of s besides history and events.
func (s *Session) record() SessionRecord {
	return SessionRecord{ID: s.id, WorkspaceID: s.workspace.ID, WorkspaceRoot: s.workspace.Root, Created: s.created}
}

// ID is the session's id.
func (s *Session) ID() string { return s.id }

// Workspace is the workspace the session works in.
func (s *Session) Workspace() *Workspace { return s.workspace }

// Created is when the session started.
func (s *Session) Created() time.Time { return s.created }

// History returns a copy of the conversation so far (user, assistant and
// tool messages, without the system prompt). A running turn's messages
// join it when the turn ends; its request is in the session store from
// the turn's first event on (see the durability model in engine/store).
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

// ClearHistory forgets the conversation, in the session store too. It
// waits for a running turn to end (or ctx) first, so it never cuts a turn
// in half. Errors: the context's cause; the store's error (the history is
// then kept).
func (s *Session) ClearHistory(ctx context.Context) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.unlock()
	if st := s.engine.opts.Sessions; st != nil {
		if err := st.SaveHistory(ctx, s.id, 0, nil); err != nil {
			return fmt.Errorf("clear the history of session %s: %w", s.id, err)
		}
	}
	s.mu.Lock()
	s.history, s.saved = nil, 0
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
	// Context is the editor context the client sent with the message
	// (client.user_message's "context"); nil when none. The user message
	// the model sees gains a section gathered from it (see TurnContext).
	Context *TurnContext
	// Model overrides the session's model (Session.Model) for this turn.
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
	// ReadOnly denies, whatever the workspace policy and ApproveAll say,
	// every action but calls of read-only tools that need no approval:
	// patch applies, commands, and calls of tools that can change
	// something. A front-end's "read-only" or "plan" mode sets it.
	ReadOnly bool
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
		ref = s.Model()
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

	s.emitMu.Lock()
	s.mu.Lock()
	s.history = append(s.history, keep...)
	s.turns++
	s.running = false
	s.mu.Unlock()
	s.pending, s.pendingDirty = nil, false
	s.emitMu.Unlock()
	// The final event goes out after the history and status are updated,
	// so a front-end answering from OnEvent sees the session as it now
	// is; it is stored together with the turn's messages.
	return t.deliverFinal(res), nil
}

// deliverFinal delivers the turn's final event, stored in one write with the
// history messages the store lacks (the turn's exchange), and returns the
// result it reports. When that write fails the turn is not reported as a
// success: the final event has status error and says why, and the
// messages stay in memory, to be stored with the session's next write
// or by Engine.Flush.
func (t *turn) deliverFinal(res TurnResult) TurnResult {
	s := t.s
	s.emitMu.Lock()
	defer s.emitMu.Unlock()
	fin := &FinalEvent{Status: res.Status, Message: res.Message, Error: res.Error, Metadata: res.Metadata}
	ev := Event{Seq: s.seq.Add(1), SessionID: s.id, TurnID: t.id, Time: time.Now(), Data: fin}
	if st := s.engine.opts.Sessions; st != nil {
		if err := s.store(st, ev); err != nil {
			res.Status = TurnError
			res.Error = "the turn ended, but saving it failed, so a restart would lose it (the conversation is kept in memory and saved with the session's next change): " + err.Error()
			ev.Data = &FinalEvent{Status: res.Status, Message: res.Message, Error: res.Error, Metadata: res.Metadata}
			// The same number, alone: nothing of the failed write was
			// stored.
			if se, err := encodeEvent(ev); err == nil {
				ctx, cancel := storeContext(context.Background())
				st.AppendEvent(ctx, s.id, se)
				cancel()
			}
		}
	}
	s.quietTurn = ""
	s.state.apply(ev)
	if t.opts.OnEvent != nil {
		t.opts.OnEvent(ev)
	}
	return res
}

// setPending makes msgs the running turn's messages that the history
// lacks, to be stored with the turn's next event (see store).
func (s *Session) setPending(msgs ...Message) {
	s.emitMu.Lock()
	s.pending, s.pendingDirty = msgs, true
	s.emitMu.Unlock()
}

// emit assigns the next sequence number, appends the event to the session
// store and then hands it to onEvent, so a client never sees an event the
// store lacks (unless storing failed). Holding emitMu while calling onEvent
// keeps delivery in sequence order even when a tool callback emits from
// another goroutine.
//
// When the store fails, the event is delivered anyway, followed by a
// recoverable ErrorEvent; that is reported once per turn until an event is
// stored again, so a broken store does not double the stream.
func (s *Session) emit(turnID string, onEvent func(Event), data EventData) {
	s.emitMu.Lock()
	defer s.emitMu.Unlock()
	seq, err := s.deliver(turnID, onEvent, data)
	if err == nil {
		s.quietTurn = ""
		return
	}
	if s.quietTurn == turnID {
		return
	}
	s.quietTurn = turnID
	// Storing this report is tried too; its own failure is not reported.
	s.deliver(turnID, onEvent, &ErrorEvent{Code: CodeInternal, Recoverable: true,
		Message: fmt.Sprintf("saving event %d failed (a client that reconnects will not get it back): %v", seq, err),
		Details: map[string]any{"seq": seq}})
}

// deliver numbers, stores and delivers one event; the caller holds emitMu.
// The error is the store's.
func (s *Session) deliver(turnID string, onEvent func(Event), data EventData) (uint64, error) {
	ev := Event{Seq: s.seq.Add(1), SessionID: s.id, TurnID: turnID, Time: time.Now(), Data: data}
	s.state.apply(ev)
	var err error
	if st := s.engine.opts.Sessions; st != nil {
		err = s.store(st, ev)
	}
	if onEvent != nil {
		onEvent(ev)
	}
	return ev.Seq, err
}

// store stores ev; the caller holds emitMu. When the store lacks part of
// the history (the running turn's pending messages, or messages whose
// saving failed), they are stored in the same write (see
// SessionStore.AppendEventWithHistory and the durability model in
// engine/store).
func (s *Session) store(st SessionStore, ev Event) error {
	se, err := encodeEvent(ev)
	if err != nil {
		return err
	}
	ctx, cancel := storeContext(context.Background())
	defer cancel()
	s.mu.Lock()
	from, upTo := s.saved, len(s.history)
	var msgs []Message
	if from < upTo || s.pendingDirty {
		msgs = append(slices.Clone(s.history[from:]), s.pending...)
	}
	s.mu.Unlock()
	if msgs == nil {
		return st.AppendEvent(ctx, s.id, se)
	}
	if err := st.AppendEventWithHistory(ctx, s.id, se, from, msgs); err != nil {
		return err
	}
	s.pendingDirty = false
	s.mu.Lock()
	s.saved = max(s.saved, upTo)
	s.mu.Unlock()
	return nil
}

// flush stores the history messages the store lacks, waiting for a
// running turn first (ctx bounds the wait).
func (s *Session) flush(ctx context.Context, st SessionStore) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.unlock()
	s.emitMu.Lock()
	defer s.emitMu.Unlock()
	s.mu.Lock()
	from, upTo := s.saved, len(s.history)
	msgs := slices.Clone(s.history[from:])
	s.mu.Unlock()
	if len(msgs) == 0 {
		return nil
	}
	sctx, cancel := storeContext(ctx)
	defer cancel()
	if err := st.SaveHistory(sctx, s.id, from, msgs); err != nil {
		return fmt.Errorf("save the history of session %s: %w", s.id, err)
	}
	s.mu.Lock()
	s.saved = max(s.saved, upTo)
	s.mu.Unlock()
	return nil
}

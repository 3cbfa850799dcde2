package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// SessionStore persists sessions so that they survive a restart: each
// session's record, its conversation history and its event stream.
// engine/store implements it (its package documentation states the
// durability model every implementation follows, and
// engine/store/storetest checks an implementation against it).
// Implementations must be safe for concurrent use, also by several
// processes sharing the storage.
//
// Every method that stores something returns nil only once what it stored
// is durable (committed and on disk): the engine tells clients about it
// right after.
//
// A session is served by one Engine at a time: two engines running turns
// of the same session would number events independently, and the second
// append of a sequence number fails (the store keeps (session, seq)
// unique).
type SessionStore interface {
	// CreateSession stores a new session's record. Errors: ErrInvalidRequest
	// when a session with rec.ID is stored already.
	CreateSession(ctx context.Context, rec SessionRecord) error
	// AppendEvent stores one event of the session. Errors: ErrNotFound
	// (or the store's own error) when the session is not stored; an error
	// when the session already has an event with ev.Seq.
	AppendEvent(ctx context.Context, sessionID string, ev StoredEvent) error
	// SaveHistory replaces the stored history from index from (0-based) on
	// with msgs: messages at from and after are dropped and msgs are stored
	// at from, from+1, ... So from = the stored length appends, and from =
	// 0 with no msgs clears. Saving the same range twice is harmless.
	// Errors: ErrNotFound when the session is not stored.
	SaveHistory(ctx context.Context, sessionID string, from int, msgs []Message) error
	// AppendEventWithHistory stores ev and, in the same transaction, does
	// what SaveHistory(ctx, sessionID, from, msgs) does: both are stored or
	// neither is. The engine stores a turn's user message with the turn's
	// first event and the rest of the turn's messages with its final
	// event. Errors: those of AppendEvent and SaveHistory.
	AppendEventWithHistory(ctx context.Context, sessionID string, ev StoredEvent, from int, msgs []Message) error
	// LoadSession returns a stored session. Errors: ErrNotFound.
	LoadSession(ctx context.Context, id string) (*StoredSession, error)
	// Events returns the session's events with Seq > afterSeq in Seq
	// order, at most limit of them (limit <= 0 means all). Errors:
	// ErrNotFound when the session is not stored.
	Events(ctx context.Context, sessionID string, afterSeq uint64, limit int) ([]StoredEvent, error)
	// ListSessions returns the records of a workspace's sessions (of all
	// workspaces when workspaceID is ""), oldest first.
	ListSessions(ctx context.Context, workspaceID string) ([]SessionRecord, error)
	// DeleteSession removes a session with its history and events.
	// Errors: ErrNotFound.
	DeleteSession(ctx context.Context, id string) error
}

// SessionRecord is what identifies a session, apart from its history and
// events.
type SessionRecord struct {
	ID          string `json:"session_id"`
	WorkspaceID string `json:"workspace_id"`
	// WorkspaceRoot is the workspace's absolute root, so that a session
	// loaded after a restart knows its directory.
	WorkspaceRoot string    `json:"workspace_root"`
	Created       time.Time `json:"created"`
}

// StoredSession is a session as a SessionStore returns it.
type StoredSession struct {
	SessionRecord
	// History is the conversation, as Session.History returns it.
	History []Message
	// Model is the session's own model choice; zero when it has none or
	// the store does not keep it (see SessionModelStore).
	Model ModelRef
	// LastSeq is the highest stored event sequence number (0 for none).
	LastSeq uint64
	// Turns counts the session's stored final events (finished turns).
	Turns int
}

// StoredEvent is an Event as a SessionStore keeps it: Kind is the
// payload's EventKind and Data its JSON.
type StoredEvent struct {
	Seq    uint64          `json:"seq"`
	TurnID string          `json:"turn_id"`
	Time   time.Time       `json:"time"`
	Kind   string          `json:"kind"`
	Data   json.RawMessage `json:"data"`
}

// UnknownEvent is the payload of a stored event whose kind this engine
// does not know (one written by a newer engine). It marshals to the stored
// JSON unchanged.
type UnknownEvent struct {
	Kind string
	Data json.RawMessage
}

// EventKind implements EventData.
func (u *UnknownEvent) EventKind() string { return u.Kind }

// MarshalJSON returns the stored JSON.
func (u *UnknownEvent) MarshalJSON() ([]byte, error) { return u.Data, nil }

// eventTypes makes an empty payload of each event kind, to decode stored
// events into.
var eventTypes = map[string]func() EventData{
	"thinking":         func() EventData { return new(ThinkingEvent) },
	"plan":             func() EventData { return new(PlanEvent) },
	"retrieval":        func() EventData { return new(RetrievalEvent) },
	"token":            func() EventData { return new(TokenEvent) },
	"tool_call":        func() EventData { return new(ToolCallEvent) },
	"approval_request": func() EventData { return new(ApprovalEvent) },
	"approval_result":  func() EventData { return new(ApprovalResultEvent) },
	"command_request":  func() EventData { return new(CommandRequestEvent) },
	"patch_proposed":   func() EventData { return new(PatchProposedEvent) },
	"patch_result":     func() EventData { return new(PatchResultEvent) },
	"error":            func() EventData { return new(ErrorEvent) },
	"final":            func() EventData { return new(FinalEvent) },
}

// DecodeEvent turns a stored event of session sessionID back into an
// Event with a typed payload; a kind this engine does not know becomes an
// *UnknownEvent. Errors: the stored JSON does not fit its kind.
func DecodeEvent(sessionID string, se StoredEvent) (Event, error) {
	ev := Event{Seq: se.Seq, SessionID: sessionID, TurnID: se.TurnID, Time: se.Time}
	mk, ok := eventTypes[se.Kind]
	if !ok {
		ev.Data = &UnknownEvent{Kind: se.Kind, Data: se.Data}
		return ev, nil
	}
	ev.Data = mk()
	if err := json.Unmarshal(se.Data, ev.Data); err != nil {
		return Event{}, fmt.Errorf("event %d of session %s (%s) is unreadable: %w", se.Seq, sessionID, se.Kind, err)
	}
	return ev, nil
}

// encodeEvent is DecodeEvent's inverse.
func encodeEvent(ev Event) (StoredEvent, error) {
	data, err := json.Marshal(ev.Data)
	if err != nil {
		return StoredEvent{}, fmt.Errorf("encode %s event: %w", ev.Data.EventKind(), err)
	}
	return StoredEvent{Seq: ev.Seq, TurnID: ev.TurnID, Time: ev.Time, Kind: ev.Data.EventKind(), Data: data}, nil
}

// sessionStoreTimeout bounds each SessionStore call the engine makes
// without a caller's context (event appends, loads by Session) or after
// the caller's context ended (the history of a cancelled turn).
const sessionStoreTimeout = 30 * time.Second

// storeContext is ctx without its cancellation, bounded by
// sessionStoreTimeout: what a turn has done is saved even when the turn
// was cancelled.
func storeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), sessionStoreTimeout)
}

// errNoSessionStore is returned by calls that need Options.Sessions.
var errNoSessionStore = fmt.Errorf("%w: this engine keeps sessions in memory only (no session store)", ErrUnsupported)

// Events returns the stored events of a session with Seq > afterSeq, in
// order, at most limit of them (limit <= 0 means all), with typed payloads
// (see DecodeEvent). A client that reconnects with the last Seq it saw
// gets what it missed from here.
//
// Events are stored before they are delivered to TurnOptions.OnEvent, so
// a front-end that resumes a client while a turn runs loses nothing and
// repeats nothing if it first subscribes to the live events (buffering
// them), then calls Events(last seen), then forwards the buffered events
// whose Seq is above the last one Events returned. An event the store
// failed to keep (reported by a recoverable ErrorEvent) is missing here;
// the gap in Seq shows it.
//
// Errors: ErrUnsupported without Options.Sessions; ErrNotFound for a
// session that is not stored.
func (e *Engine) Events(ctx context.Context, sessionID string, afterSeq uint64, limit int) ([]Event, error) {
	st := e.opts.Sessions
	if st == nil {
		return nil, errNoSessionStore
	}
	stored, err := st.Events(ctx, sessionID, afterSeq, limit)
	if err != nil {
		return nil, err
	}
	out := make([]Event, len(stored))
	for i, se := range stored {
		if out[i], err = DecodeEvent(sessionID, se); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Sessions lists the sessions of ws (of every workspace when ws is nil),
// oldest first: the stored ones with Options.Sessions, the ones in memory
// without.
func (e *Engine) Sessions(ctx context.Context, ws *Workspace) ([]SessionRecord, error) {
	wsID := ""
	if ws != nil {
		wsID = ws.ID
	}
	if st := e.opts.Sessions; st != nil {
		return st.ListSessions(ctx, wsID)
	}
	e.mu.Lock()
	var out []SessionRecord
	for _, s := range e.sessions {
		if wsID == "" || s.workspace.ID == wsID {
			out = append(out, s.record())
		}
	}
	e.mu.Unlock()
	slices.SortFunc(out, func(a, b SessionRecord) int {
		return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// DeleteSession ends a session for good: it waits for its running turn,
// if any, to end (ctx bounds the wait), forgets it and deletes it, with its
// history and events, from the session store. Errors: ErrNotFound when the
// session is neither in memory nor stored; an error wrapping the context's
// cause when ctx ends first; the store's error (the session then stays).
func (e *Engine) DeleteSession(ctx context.Context, id string) error {
	e.mu.Lock()
	s := e.sessions[id]
	e.mu.Unlock()
	if s != nil {
		if err := s.lock(ctx); err != nil {
			return err
		}
		defer s.unlock()
	}
	if st := e.opts.Sessions; st != nil {
		err := st.DeleteSession(ctx, id)
		if err != nil && (s == nil || !errors.Is(err, ErrNotFound)) {
			return err
		}
	} else if s == nil {
		return fmt.Errorf("%w: session %s", ErrNotFound, id)
	}
	if s != nil {
		e.forget(s)
	}
	return nil
}

// ImportSession starts a new session in ws whose conversation so far is
// history (a saved conversation being restored): the next turn's model
// sees it as if the turns had run here. With Options.Sessions the history
// is stored before ImportSession returns; on a store failure no session is
// started. Errors: those of NewSession; ErrInvalidRequest for a history
// with a system message (the engine adds its own) or a message of an
// unknown role.
func (e *Engine) ImportSession(ws *Workspace, history []Message) (*Session, error) {
	for i, m := range history {
		switch m.Role {
		case RoleUser, RoleAssistant, RoleTool:
		default:
			return nil, fmt.Errorf("%w: history message %d has role %q (want user, assistant or tool)", ErrInvalidRequest, i, m.Role)
		}
	}
	s, err := e.NewSession(ws, "")
	if err != nil {
		return nil, err
	}
	if st := e.opts.Sessions; st != nil && len(history) > 0 {
		ctx, cancel := storeContext(context.Background())
		defer cancel()
		if err := st.SaveHistory(ctx, s.id, 0, history); err != nil {
			// The cleanup gets its own time: the save may have used up ctx.
			dctx, dcancel := storeContext(context.Background())
			st.DeleteSession(dctx, s.id)
			dcancel()
			e.forget(s)
			return nil, fmt.Errorf("import session: %w", err)
		}
	}
	s.mu.Lock()
	s.history = slices.Clone(history)
	s.saved = len(history)
	s.mu.Unlock()
	return s, nil
}

// Flush stores what the session store lacks of the sessions in memory:
// history messages whose saving failed (see the durability model in
// engine/store). It waits for running turns to end first, so a front-end
// calls it at graceful shutdown after ending or cancelling its turns, and
// before closing the store. ctx bounds the whole. Errors: those of the
// store, joined, naming each session; the context's cause. Without
// Options.Sessions it does nothing.
func (e *Engine) Flush(ctx context.Context) error {
	st := e.opts.Sessions
	if st == nil {
		return nil
	}
	e.mu.Lock()
	sessions := make([]*Session, 0, len(e.sessions))
	for _, s := range e.sessions {
		sessions = append(sessions, s)
	}
	e.mu.Unlock()
	var errs []error
	for _, s := range sessions {
		if err := s.flush(ctx, st); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// forget drops s from the engine's memory.
func (e *Engine) forget(s *Session) {
	e.mu.Lock()
	if e.sessions[s.id] == s {
		delete(e.sessions, s.id)
	}
	e.mu.Unlock()
}

// loadSession loads a stored session into memory (or returns the one
// another caller loaded meanwhile). Errors: ErrNotFound.
func (e *Engine) loadSession(id string) (*Session, error) {
	st := e.opts.Sessions
	if st == nil {
		return nil, fmt.Errorf("%w: session %s", ErrNotFound, id)
	}
	ctx, cancel := storeContext(context.Background())
	defer cancel()
	stored, err := st.LoadSession(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w: session %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("load session %s: %w", id, err)
	}
	// The state (pending patches and approvals, the plan) is rebuilt
	// from the stored events.
	evs, err := st.Events(ctx, id, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("load the events of session %s: %w", id, err)
	}
	state := newStateTracker()
	for _, se := range evs {
		ev, err := DecodeEvent(id, se)
		if err != nil {
			return nil, fmt.Errorf("load session %s: %w", id, err)
		}
		state.apply(ev)
	}
	e.mu.Lock()
	if s, ok := e.sessions[id]; ok {
		e.mu.Unlock()
		return s, nil
	}
	// A session outlives its workspace's registration (and may outlive
	// its directory): it is registered again as it was.
	ws, ok := e.workspaces[stored.WorkspaceID]
	if !ok {
		ws = &Workspace{ID: stored.WorkspaceID, Root: stored.WorkspaceRoot}
		e.workspaces[ws.ID] = ws
	}
	s := newSession(e, ws, id, stored.Created)
	s.model = stored.Model
	s.history = stored.History
	s.saved = len(stored.History)
	s.turns = stored.Turns
	s.seq.Store(stored.LastSeq)
	s.state = state
	// Nobody else has s yet: holding its turn lock keeps a new turn from
	// starting before the interrupted one is closed.
	s.turnLock <- struct{}{}
	e.sessions[id] = s
	e.mu.Unlock()
	defer s.unlock()
	s.closeInterrupted()
	return s, nil
}

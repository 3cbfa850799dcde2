package httpws

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/plexus-agent/plexus/engine"
)

// hub is the server side of one session: its WebSocket clients, its
// running turn and what that turn waits for from the clients.
type hub struct {
	srv  *Server
	id   string
	sess *engine.Session

	mu   sync.Mutex // guards the fields below
	subs map[*conn]struct{}
	// turn is the running turn's cancel function; nil when idle.
	turn context.CancelCauseFunc
	// context is the editor context the clients sent so far
	// (client.user_message context and client.context_update merged).
	context *engine.TurnContext
	// approvals wait for client.approval_response, by request id;
	// commandApprovals map a command id to its approval request id.
	approvals        map[string]chan engine.ApprovalDecision
	commandApprovals map[string]string
	// commands wait for client.command_result, by command id.
	commands map[string]chan engine.CommandResult
	// applies wait for client.patch_apply_result, by patch id.
	applies map[string]chan patchApplyResult
	// live maps the running turn's events to messages.
	live *mapper
	// deleted is set when the session is deleted: no client may join and
	// no turn start any more.
	deleted bool
	// orphan cancels the running turn when no client has been connected
	// for Options.OrphanTimeout; nil while a client is connected.
	orphan *time.Timer
}

// hub returns the session's hub, loading the session (from the store
// after a restart). Errors: engine.ErrNotFound.
func (s *Server) hub(id string) (*hub, error) {
	s.mu.Lock()
	h, ok := s.hubs[id]
	s.mu.Unlock()
	if ok {
		return h, nil
	}
	sess, err := s.eng.Session(id)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.hubs[id]; ok {
		return h, nil
	}
	if s.deleted[id] { // deleted while it was being loaded
		return nil, fmt.Errorf("%w: session %s", engine.ErrNotFound, id)
	}
	h = &hub{
		srv: s, id: id, sess: sess, subs: map[*conn]struct{}{},
		approvals: map[string]chan engine.ApprovalDecision{}, commandApprovals: map[string]string{},
		commands: map[string]chan engine.CommandResult{}, applies: map[string]chan patchApplyResult{},
		live: newMapper(),
	}
	s.hubs[id] = h
	return h, nil
}

// dropHub forgets a deleted session's hub; the id is remembered so that
// a load that raced the delete does not bring the hub back.
func (s *Server) dropHub(id string) {
	s.mu.Lock()
	delete(s.hubs, id)
	s.deleted[id] = true
	s.mu.Unlock()
}

// subscribe adds a client; it reports false when the session was deleted.
func (h *hub) subscribe(c *conn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.deleted {
		return false
	}
	h.subs[c] = struct{}{}
	if h.orphan != nil {
		h.orphan.Stop()
		h.orphan = nil
	}
	return true
}

// unsubscribe removes a client. When the last one leaves while a turn
// runs, the turn is cancelled after Options.OrphanTimeout unless a client
// comes back: a turn waiting for an approval or a command result must not
// hold the session (and a server slot) for ever. Its patch approvals stay
// answerable.
func (h *hub) unsubscribe(c *conn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, c)
	if len(h.subs) == 0 && h.turn != nil && h.orphan == nil {
		stop := h.turn
		after := h.srv.opts.OrphanTimeout
		h.orphan = time.AfterFunc(after, func() {
			h.mu.Lock()
			orphaned := len(h.subs) == 0 && h.orphan != nil
			h.orphan = nil
			h.mu.Unlock()
			if orphaned {
				stop(fmt.Errorf("no client was connected to the session for %s", after))
			}
		})
	}
}

// closeAll disconnects every client of the session.
func (h *hub) closeAll(code websocket.StatusCode, why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.subs {
		c.kick(code, why)
	}
}

// broadcast queues a message for every client.
func (h *hub) broadcast(m outMsg) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.subs {
		c.send(m)
	}
}

// onEvent is the OnEvent of the hub's turns (and of AnswerPending): it
// registers what the event asks the clients for (before the engine waits
// for it, so an early answer is never lost), then broadcasts it.
func (h *hub) onEvent(ev engine.Event) {
	h.mu.Lock()
	switch d := ev.Data.(type) {
	case *engine.ApprovalEvent:
		h.approvals[d.Request.ID] = make(chan engine.ApprovalDecision, 1)
		if d.Request.Command != nil {
			h.commandApprovals[d.Request.Command.ID] = d.Request.ID
		}
	case *engine.CommandRequestEvent:
		h.commands[d.Request.ID] = make(chan engine.CommandResult, 1)
	case *engine.PatchProposedEvent:
		for _, f := range d.Set.Files {
			h.applies[f.ID] = make(chan patchApplyResult, 1)
		}
	}
	msgs := h.live.messages(ev)
	h.mu.Unlock()
	for _, m := range msgs {
		data, err := encode(m)
		if err != nil {
			h.srv.log.Error("marshal event", "session", h.id, "seq", ev.Seq, "error", err)
			continue
		}
		h.broadcast(outMsg{seq: ev.Seq, data: data})
	}
}

// broadcastState sends session.state to every client. It must not be
// called from onEvent: the engine delivers events holding the lock that
// Session.State takes.
func (h *hub) broadcastState() {
	st := h.sess.State()
	h.broadcast(outMsg{build: func(last uint64) any {
		return sessionState{header: header{Type: typeSessionState, Seq: last}, State: st}
	}})
}

// handle acts on one decoded client message from c (see decodeClient).
func (h *hub) handle(ctx context.Context, c *conn, msg any) {
	switch m := msg.(type) {
	case *clientHello:
		c.sendError(codeInvalidMessage, "client.hello was already received on this connection", true, nil)
	case *userMessage:
		h.startTurn(c, *m)
	case *contextUpdate:
		h.mu.Lock()
		if h.context == nil {
			h.context = &engine.TurnContext{}
		}
		h.context.Merge(m.Updates)
		h.mu.Unlock()
	case *approvalResponse:
		h.answer(ctx, c, *m)
	case *patchApplyResult:
		h.mu.Lock()
		ch, ok := h.applies[m.PatchID]
		h.mu.Unlock()
		if !ok {
			c.sendError(codeNotFound, fmt.Sprintf("no patch %s waits for a client-side apply in this session", m.PatchID), true, map[string]any{"patch_id": m.PatchID})
			return
		}
		select {
		case ch <- *m:
		default:
			c.sendError(codeConflict, fmt.Sprintf("patch %s already has an apply result", m.PatchID), true, map[string]any{"patch_id": m.PatchID})
		}
	case *commandResult:
		h.mu.Lock()
		ch, ok := h.commands[m.CommandID]
		h.mu.Unlock()
		if !ok {
			c.sendError(codeNotFound, fmt.Sprintf("no command %s waits for a result in this session", m.CommandID), true, map[string]any{"command_id": m.CommandID})
			return
		}
		select {
		case ch <- engine.CommandResult{ExitCode: m.ExitCode, Stdout: m.Stdout, Stderr: m.Stderr, Duration: time.Duration(m.DurationMS) * time.Millisecond}:
		default:
			c.sendError(codeConflict, fmt.Sprintf("command %s already has a result", m.CommandID), true, map[string]any{"command_id": m.CommandID})
		}
	case *cancel:
		h.mu.Lock()
		stop := h.turn
		h.mu.Unlock()
		if stop == nil {
			c.sendError(codeInvalidRequest, "no turn is running in this session", true, nil)
			return
		}
		reason := m.Reason
		if reason == "" {
			reason = "cancelled by the client"
		}
		stop(errors.New(reason))
	case *fileChanges:
		h.fileChanges(ctx, c, *m)
	}
}

// startTurn runs a user message as a turn, unless one runs: the contract's
// client shows one conversation per session, so a second message while a
// turn runs is refused with SESSION_BUSY (send client.cancel first)
// rather than queued behind a turn the user may be about to cancel.
func (h *hub) startTurn(c *conn, m userMessage) {
	s := h.srv
	// Lock order: the server's lock is never taken under a hub's.
	s.mu.Lock()
	closing := s.closing
	if !closing {
		s.turns.Add(1)
	}
	s.mu.Unlock()
	if closing {
		c.sendError(codeInternal, "the server is shutting down; send the message again after it restarts", true, nil)
		return
	}
	h.mu.Lock()
	if h.turn != nil || h.deleted {
		h.mu.Unlock()
		s.turns.Done()
		c.sendError(codeSessionBusy, "a turn is running in this session; wait for assistant.message_final or send client.cancel first", true, nil)
		return
	}
	if m.Context != nil {
		if h.context == nil {
			h.context = &engine.TurnContext{}
		}
		h.context.Merge(m.Context)
	}
	var tc *engine.TurnContext
	if h.context != nil {
		cp := *h.context
		cp.Command = ""
		if m.Context != nil {
			cp.Command = m.Context.Command
		}
		tc = &cp
	}
	ctx, stop := context.WithCancelCause(s.base)
	h.turn = stop
	host := newTurnHost(h, c.caps)
	h.mu.Unlock()

	go func() {
		defer s.turns.Done()
		defer stop(nil)
		_, err := h.sess.Run(ctx, engine.TurnInput{Message: m.Message, Context: tc}, engine.TurnOptions{Host: host, OnEvent: h.onEvent})
		h.mu.Lock()
		h.turn = nil
		if h.orphan != nil {
			h.orphan.Stop()
			h.orphan = nil
		}
		clear(h.approvals)
		clear(h.commandApprovals)
		clear(h.commands)
		clear(h.applies)
		h.mu.Unlock()
		if err == nil {
			h.broadcastState()
		} else {
			// The turn did not start (no model, bad input).
			_, code := engineStatus(err)
			h.broadcast(outMsg{build: func(last uint64) any {
				return serverError{header: header{Type: typeServerError, Seq: last},
					Error: errorBody{Code: code, Message: err.Error(), Recoverable: true}}
			}})
		}
	}()
}

// answer delivers a client.approval_response: to the running turn when it
// waits for it, else to the session (a patch approval that outlived its
// turn, after a restart).
func (h *hub) answer(ctx context.Context, c *conn, m approvalResponse) {
	dec := decision(m)
	h.mu.Lock()
	id := m.RequestID
	if alias, ok := h.commandApprovals[id]; ok {
		id = alias
	}
	ch, live := h.approvals[id]
	h.mu.Unlock()
	if live {
		select {
		case ch <- dec:
		default:
			c.sendError(codeConflict, fmt.Sprintf("approval request %s was already answered", m.RequestID), true, map[string]any{"request_id": m.RequestID})
		}
		return
	}
	// The apply must not stop half-way when the answering client leaves.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	_, err := h.sess.AnswerPending(actx, id, dec, h.onEvent)
	if err != nil {
		_, code := engineStatus(err)
		c.sendError(code, err.Error(), true, map[string]any{"request_id": m.RequestID})
		return
	}
	h.broadcastState()
}

// decision turns an approval response into the engine's decision.
func decision(m approvalResponse) engine.ApprovalDecision {
	dec := engine.ApprovalDecision{
		Approved: m.Approved, Reason: m.Reason, Scope: m.Scope, Actor: "user",
		Remember: m.RememberChoice, ApplyToSimilar: m.ApplyToSimilar,
	}
	if !m.Approved {
		return dec
	}
	switch m.Scope {
	case "file":
		dec.Files = slices.Compact(append([]string{m.FilePath}, m.FilePaths...))
		dec.Files = slices.DeleteFunc(dec.Files, func(s string) bool { return s == "" })
	case "hunk":
		dec.Hunks = map[string][]int{}
		for f, hs := range m.HunksByFile {
			dec.Hunks[f] = hs
		}
		if m.FilePath != "" && len(m.Hunks) > 0 {
			dec.Hunks[m.FilePath] = append(dec.Hunks[m.FilePath], m.Hunks...)
		}
	default:
		dec.Scope = "all"
	}
	return dec
}

// fileChanges feeds client.file_changes to the index in the background
// (an update can wait for a running build), one at a time per
// connection, for up to fileChangesTimeout; index.updated or server.error
// answers it.
func (h *hub) fileChanges(ctx context.Context, c *conn, m fileChanges) {
	ix := h.srv.opts.Indexer
	if ix == nil {
		c.sendError(codeIndexFailed, "this server has no index", true, nil)
		return
	}
	select {
	case c.indexing <- struct{}{}:
	default:
		c.sendError(codeConflict, "an index update from this connection is running; send these changes again after index.updated", true, nil)
		return
	}
	changes := make([]FileChange, len(m.Changes))
	for i, ch := range m.Changes {
		changes[i] = FileChange{Type: ch.Type, Path: ch.FilePath, ContentHash: ch.ContentHash}
	}
	if i, err := checkFileChanges(h.sess.Workspace().Root, changes); err != nil {
		<-c.indexing
		_, _, code := indexErrorStatus(err)
		c.sendError(code, err.Error()+"; nothing was indexed", true, map[string]any{"field": fmt.Sprintf("/changes/%d/file_path", i)})
		return
	}
	c.work.Add(1)
	go func() {
		defer c.work.Done()
		defer func() { <-c.indexing }()
		ctx, cancel := context.WithTimeout(ctx, fileChangesTimeout)
		defer cancel()
		stats, err := ix.ApplyChanges(ctx, h.sess.Workspace().Root, changes)
		if err != nil {
			_, _, code := indexErrorStatus(err)
			c.sendError(code, "updating the index failed: "+err.Error(), true, nil)
			return
		}
		c.sendNow(func(last uint64) any {
			return indexUpdated{header: header{Type: typeIndexUpdated, Seq: last}, Changes: len(changes), Stats: stats}
		})
	}()
}

// fileChangesTimeout bounds one index update from client.file_changes.
const fileChangesTimeout = 5 * time.Minute

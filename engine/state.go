package engine

import (
	"context"
	"fmt"
	"slices"
)

// ApprovalResultEvent says how an approval request was answered, so that
// every front-end watching the session (not only the one that answered)
// can close its prompt.
type ApprovalResultEvent struct {
	RequestID string `json:"request_id"`
	Approved  bool   `json:"approved"`
	// Scope, Files and Hunks repeat the decision for a patch set.
	Scope  string           `json:"scope,omitempty"`
	Files  []string         `json:"files,omitempty"`
	Hunks  map[string][]int `json:"hunks,omitempty"`
	Actor  string           `json:"actor"`
	Reason string           `json:"reason,omitempty"`
}

// EventKind implements EventData.
func (*ApprovalResultEvent) EventKind() string { return "approval_result" }

// SessionState is what a session has pending and done, as the WebSocket
// contract's session.state reports it. It is derived from the session's
// events, so it is the same after a restart.
type SessionState struct {
	// PendingPatches are the patch ids ("patch_...", one per file) of
	// proposed patch sets that were neither applied nor rejected.
	PendingPatches []string `json:"pending_patches"`
	// AppliedPatches are the patch ids of files that were applied.
	AppliedPatches []string `json:"applied_patches"`
	// PendingApprovals are the ids of approval requests nobody answered
	// yet: those of the running turn, and those for patch sets of ended
	// turns (which Session.AnswerPending still applies). A tool or command
	// approval dies with its turn.
	PendingApprovals []string `json:"pending_approvals"`
	// CurrentStep is the 1-based number of the plan step in progress: the
	// first step of the latest plan not marked completed (TotalSteps when
	// all are), 0 without a plan. TotalSteps counts the latest plan's
	// steps.
	CurrentStep int `json:"current_step"`
	TotalSteps  int `json:"total_steps"`
	// Busy is true while a turn runs; LastSeq is the last event's number.
	Busy    bool   `json:"busy"`
	LastSeq uint64 `json:"last_seq"`
}

// stateTracker follows a session's events to answer State. The session's
// emitMu guards it (events are applied in sequence order).
type stateTracker struct {
	// sets are the proposed patch sets by id, in proposal order.
	sets    map[string]*PatchSet
	setIDs  []string
	settled map[string]bool
	applied []string
	// approvals are the unanswered approval requests by id, in order,
	// with the turn that asked.
	approvals  map[string]pendingApproval
	approvalIx []string
	// answering marks approvals AnswerPending is settling.
	answering map[string]bool
	ended     map[string]bool // turns with a final event
	// open are the turns with events but no final event yet, in order.
	open []string
	plan []PlanStep
}

type pendingApproval struct {
	req  ApprovalRequest
	turn string
}

func newStateTracker() *stateTracker {
	return &stateTracker{
		sets: map[string]*PatchSet{}, settled: map[string]bool{},
		approvals: map[string]pendingApproval{}, answering: map[string]bool{}, ended: map[string]bool{},
	}
}

// apply updates the state with one event.
func (st *stateTracker) apply(ev Event) {
	if _, final := ev.Data.(*FinalEvent); !final && ev.TurnID != "" && !st.ended[ev.TurnID] && !slices.Contains(st.open, ev.TurnID) {
		st.open = append(st.open, ev.TurnID)
	}
	switch d := ev.Data.(type) {
	case *PatchProposedEvent:
		set := d.Set
		if _, ok := st.sets[set.ID]; !ok {
			st.setIDs = append(st.setIDs, set.ID)
		}
		st.sets[set.ID] = &set
	case *PatchResultEvent:
		st.settled[d.SetID] = true
		if set := st.sets[d.SetID]; set != nil && (d.Status == PatchApplied || d.Status == PatchPartiallyApplied) {
			for _, f := range set.Files {
				if slices.Contains(d.Applied, f.Path) && !slices.Contains(st.applied, f.ID) {
					st.applied = append(st.applied, f.ID)
				}
			}
		}
		// A settled set needs no answer any more.
		for id, p := range st.approvals {
			if p.req.PatchSet != nil && p.req.PatchSet.ID == d.SetID {
				st.dropApproval(id)
			}
		}
	case *ApprovalEvent:
		if _, ok := st.approvals[d.Request.ID]; !ok {
			st.approvalIx = append(st.approvalIx, d.Request.ID)
		}
		st.approvals[d.Request.ID] = pendingApproval{req: d.Request, turn: ev.TurnID}
	case *ApprovalResultEvent:
		st.dropApproval(d.RequestID)
	case *PlanEvent:
		st.plan = d.Steps
	case *FinalEvent:
		st.ended[ev.TurnID] = true
		st.open = slices.DeleteFunc(st.open, func(id string) bool { return id == ev.TurnID })
		// Approvals of tools and commands die with their turn.
		for id, p := range st.approvals {
			if p.turn == ev.TurnID && p.req.PatchSet == nil {
				st.dropApproval(id)
			}
		}
	}
}

func (st *stateTracker) dropApproval(id string) {
	delete(st.approvals, id)
	st.approvalIx = slices.DeleteFunc(st.approvalIx, func(x string) bool { return x == id })
}

// snapshot returns the state; busy and lastSeq come from the session.
func (st *stateTracker) snapshot() SessionState {
	out := SessionState{
		PendingPatches: []string{}, AppliedPatches: slices.Clone(st.applied), PendingApprovals: slices.Clone(st.approvalIx),
		TotalSteps: len(st.plan),
	}
	if out.AppliedPatches == nil {
		out.AppliedPatches = []string{}
	}
	if out.PendingApprovals == nil {
		out.PendingApprovals = []string{}
	}
	for _, id := range st.setIDs {
		if !st.settled[id] {
			for _, f := range st.sets[id].Files {
				out.PendingPatches = append(out.PendingPatches, f.ID)
			}
		}
	}
	if len(st.plan) > 0 {
		out.CurrentStep = len(st.plan)
		for i, s := range st.plan {
			if s.Status != StepCompleted {
				out.CurrentStep = i + 1
				break
			}
		}
	}
	return out
}

// State returns what the session has pending and done. LastSeq is the
// last event delivered (and stored), never one still being delivered.
func (s *Session) State() SessionState {
	s.emitMu.Lock()
	st := s.state.snapshot()
	st.LastSeq = s.seq.Load()
	s.emitMu.Unlock()
	s.mu.Lock()
	st.Busy = s.running
	s.mu.Unlock()
	return st
}

// PendingApprovals returns the unanswered approval requests that
// State().PendingApprovals lists, in the order they were asked.
func (s *Session) PendingApprovals() []ApprovalRequest {
	s.emitMu.Lock()
	defer s.emitMu.Unlock()
	out := make([]ApprovalRequest, 0, len(s.state.approvalIx))
	for _, id := range s.state.approvalIx {
		out = append(out, s.state.approvals[id].req)
	}
	return out
}

// AnswerPending answers an approval request whose turn has ended (the
// client disconnected and the turn finished, or the server restarted):
// only patch-set approvals outlive their turn, and approving one applies
// the chosen part of the set on the server, with the same base-hash
// conflict checks, undo record and receipts as during a turn. Its
// ApprovalResultEvent and PatchResultEvent go to onEvent (may be nil)
// under the ended turn's id. It does not wait for a running turn: the
// apply's hash checks keep it safe beside one.
//
// Errors: ErrNotFound when no such request is pending; ErrInvalidRequest
// when its turn is still running (answer it through the Host) or when it
// was not for a patch set; the context's error.
func (s *Session) AnswerPending(ctx context.Context, requestID string, dec ApprovalDecision, onEvent func(Event)) (PatchResultEvent, error) {
	s.emitMu.Lock()
	p, ok := s.state.approvals[requestID]
	ended := s.state.ended[p.turn]
	busy := s.state.answering[requestID]
	var err error
	switch {
	case !ok:
		err = fmt.Errorf("%w: no pending approval request %s in session %s", ErrNotFound, requestID, s.id)
	case busy:
		err = fmt.Errorf("%w: approval request %s is being answered already", ErrConflict, requestID)
	case !ended:
		err = fmt.Errorf("%w: approval request %s belongs to the running turn; answer it through the turn", ErrInvalidRequest, requestID)
	case p.req.PatchSet == nil:
		err = fmt.Errorf("%w: approval request %s was for %s, and its turn has ended", ErrInvalidRequest, requestID, p.req.Tool)
	case s.engine.opts.Patcher == nil:
		err = fmt.Errorf("%w: this engine applies no patches (no patcher configured)", ErrUnsupported)
	default:
		// Claimed: a concurrent answer gets ErrConflict until this one
		// is settled.
		s.state.answering[requestID] = true
	}
	s.emitMu.Unlock()
	if err != nil {
		return PatchResultEvent{}, err
	}
	defer func() {
		s.emitMu.Lock()
		delete(s.state.answering, requestID)
		s.emitMu.Unlock()
	}()
	if dec.Actor == "" {
		dec.Actor = "user"
	}
	if !dec.Approved && dec.Reason == "" {
		dec.Reason = "the user denied it"
	}
	set := p.req.PatchSet
	// The ended turn settles its own patch; no Host, so the apply is
	// server-side. The apply is not cut short by ctx once it started: the
	// approval is answered by then.
	t := &turn{s: s, e: s.engine, id: p.turn, opts: TurnOptions{OnEvent: onEvent}}
	t.meta.FilesModified = []string{}
	req := ActionRequest{Kind: ActionPatchApply, Tool: "apply_patch", Paths: setPaths(set), Deletes: setDeletes(set), Args: patchArgs(set)}
	kind := "approval"
	if !dec.Approved {
		kind = "denial"
	}
	actx, cancel := storeContext(ctx)
	defer cancel()
	t.record(actx, kind, dec.Actor, req, "", nil, dec.Reason)
	t.emit(approvalResult(requestID, dec))
	return t.settlePatch(actx, req, set, selection(dec), dec.Reason, dec.Actor, false)
}

// approvalResult is the event reporting dec.
func approvalResult(id string, dec ApprovalDecision) *ApprovalResultEvent {
	ev := &ApprovalResultEvent{RequestID: id, Approved: dec.Approved, Actor: dec.Actor, Reason: dec.Reason}
	if dec.Approved {
		ev.Scope, ev.Files, ev.Hunks = dec.Scope, dec.Files, dec.Hunks
	}
	return ev
}

// closeInterrupted ends, with a FinalEvent of status error, every stored
// turn that has no final event because the process serving it stopped
// (see the durability model in engine/store: the turn's request stays in
// the history, unanswered). The caller has just loaded s, replayed its
// events into s.state, and holds its turn lock.
func (s *Session) closeInterrupted() {
	s.emitMu.Lock()
	open := slices.Clone(s.state.open)
	s.emitMu.Unlock()
	for _, turnID := range open {
		s.emit(turnID, nil, &FinalEvent{Status: TurnError, Error: "the server stopped before this turn finished; its request is kept in the conversation without an answer, and its patch approvals can still be answered",
			Metadata: TurnMetadata{ToolsUsed: []string{}, FilesModified: []string{}}})
		s.mu.Lock()
		s.turns++
		s.mu.Unlock()
	}
}

package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// PatchProposedEvent is a patch set proposed by the edits of one model
// response, before approval.
type PatchProposedEvent struct {
	Set              PatchSet `json:"patch_set"`
	RequiresApproval bool     `json:"requires_approval"`
}

// Patch set outcomes.
const (
	PatchApplied          = "applied"
	PatchPartiallyApplied = "partially_applied"
	PatchRejected         = "rejected"
	PatchConflict         = "conflict"
	PatchFailed           = "failed"
)

// PatchResultEvent says what became of a proposed patch set.
type PatchResultEvent struct {
	SetID string `json:"patch_set_id"`
	// Status is applied, partially_applied, rejected, conflict or failed.
	Status string `json:"status"`
	// Applied and Rejected list paths; AppliedID names the undo record.
	Applied   []string `json:"applied_files,omitempty"`
	Rejected  []string `json:"rejected_files,omitempty"`
	AppliedID string   `json:"applied_id,omitempty"`
	// ClientSide is true when the client applied the patch.
	ClientSide bool   `json:"client_side,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

// EventKind implementations.
func (*PatchProposedEvent) EventKind() string { return "patch_proposed" }
func (*PatchResultEvent) EventKind() string   { return "patch_result" }

// response is the state of one model response's tool calls: the edits
// they proposed and the overlay that later calls see.
type response struct {
	edits   []FileEdit
	callIDs []string
	// proposers are the tools whose calls proposed edits, in call order,
	// with the paths each one's edits touch.
	proposers []proposer
	// notes are the rationale and acceptance criteria the edit calls gave.
	rationale []string
	criteria  []string
	overlay   map[string]OverlayFile
}

func newResponse() *response { return &response{overlay: map[string]OverlayFile{}} }

// proposer is an edit tool of a response and the paths it edited.
type proposer struct {
	tool  string
	paths map[string]bool
}

// addEdits records an edit call's edits and updates the overlay.
func (r *response) addEdits(call ToolCall, edits []FileEdit) {
	r.edits = append(r.edits, edits...)
	r.callIDs = append(r.callIDs, call.ID)
	i := slices.IndexFunc(r.proposers, func(p proposer) bool { return p.tool == call.Name })
	if i < 0 {
		r.proposers = append(r.proposers, proposer{tool: call.Name, paths: map[string]bool{}})
		i = len(r.proposers) - 1
	}
	for _, e := range edits {
		r.proposers[i].paths[e.Path] = true
	}
	var a struct {
		Rationale          string   `json:"rationale"`
		AcceptanceCriteria []string `json:"acceptance_criteria"`
	}
	if json.Unmarshal(call.Args, &a) == nil {
		if a.Rationale != "" {
			r.rationale = append(r.rationale, a.Rationale)
		}
		r.criteria = append(r.criteria, a.AcceptanceCriteria...)
	}
	for _, e := range edits {
		r.overlay[e.Path] = OverlayFile{Content: e.New, Deleted: e.Delete}
	}
}

// applyEdits turns the response's edits into one patch set, gets it
// approved (all, some files or some hunks), applies the approved part and
// returns, per edit call, what the model should be told. The error is
// non-nil only when ctx ended.
func (t *turn) applyEdits(ctx context.Context, r *response, assistantText string) (map[string]any, error) {
	outcome := func(v any) map[string]any {
		out := map[string]any{}
		for _, id := range r.callIDs {
			out[id] = v
		}
		return out
	}
	p := t.e.opts.Patcher
	if p == nil {
		return outcome(map[string]string{"status": PatchFailed, "error": "this engine applies no patches (no patcher configured)"}), nil
	}
	rationale := strings.Join(r.rationale, " ")
	if rationale == "" {
		rationale = strings.TrimSpace(assistantText)
	}
	root := t.s.workspace.Root
	set, err := p.Propose(root, r.edits, rationale, r.criteria)
	if err != nil {
		t.emit(&ErrorEvent{Code: CodeToolError, Message: "proposing the patch failed: " + err.Error(), Recoverable: true})
		return outcome(map[string]string{"status": PatchFailed, "error": err.Error()}), nil
	}
	set.CallIDs = r.callIDs
	if s := t.e.opts.Patches; s != nil {
		if err := s.SavePatchSet(ctx, t.s.workspace.ID, set); err != nil {
			t.emit(&ErrorEvent{Code: CodeInternal, Message: "saving the patch set failed: " + err.Error(), Recoverable: true})
		}
	}
	paths := setPaths(set)
	req := ActionRequest{Kind: ActionPatchApply, Tool: "apply_patch", Paths: paths, Deletes: setDeletes(set), Args: patchArgs(set)}
	v := t.decidePatch(ctx, req, set, r.proposers)
	t.emit(&PatchProposedEvent{Set: *set, RequiresApproval: v.Action == VerdictAsk})

	sel, reason, actor := PatchSelection{}, "", "policy"
	switch v.Action {
	case VerdictDeny:
		reason = "denied by the workspace policy: " + v.Reason
	case VerdictAllow:
		sel, reason = PatchSelection{All: true}, v.Reason
		t.record(ctx, "approval", actor, req, setHash(set, sel), nil, reason)
	default:
		dec, err := t.gateWith(ctx, req, v, ApprovalRequest{
			ID: newID("apr"), Tool: "apply_patch", Args: req.Args,
			Description: fmt.Sprintf("Apply changes to %s", strings.Join(paths, ", ")),
			Preview:     &Preview{Type: "diff", Content: setDiff(set)},
			PatchSet:    set,
		})
		if err != nil {
			return nil, err
		}
		sel, reason, actor = selection(dec), dec.Reason, dec.Actor
	}
	res, err := t.settlePatch(ctx, req, set, sel, reason, actor, v.Action == VerdictDeny)
	if err != nil {
		return nil, err
	}
	if res.Status == PatchRejected {
		return outcome(map[string]any{"patch_set_id": set.ID, "status": PatchRejected, "reason": reason,
			"note": "nothing was changed; the files are as they were before your edits"}), nil
	}
	out := map[string]any{"patch_set_id": set.ID, "status": res.Status}
	if len(res.Applied) > 0 {
		out["applied_files"] = res.Applied
	}
	if len(res.Rejected) > 0 {
		out["rejected_files"] = res.Rejected
	}
	if res.Reason != "" {
		out["reason"] = res.Reason
	}
	return outcome(out), nil
}

// settlePatch applies the approved selection of a proposed patch set (or
// records its rejection), writes the receipt and emits the
// PatchResultEvent, which it returns. byPolicy says a policy rule denied
// the set. The error is non-nil only when ctx ended.
func (t *turn) settlePatch(ctx context.Context, req ActionRequest, set *PatchSet, sel PatchSelection, reason, actor string, byPolicy bool) (PatchResultEvent, error) {
	paths := setPaths(set)
	res := PatchResultEvent{SetID: set.ID, Reason: reason}
	if sel.Empty() {
		res.Status, res.Rejected = PatchRejected, paths
		if byPolicy {
			t.record(ctx, "denial", "policy", req, setHash(set, sel), nil, reason)
		}
		t.emit(&res)
		return res, nil
	}
	applied, err := t.applySet(ctx, set, sel, &res)
	switch {
	case err != nil && ctx.Err() != nil:
		return res, ctx.Err()
	case errors.Is(err, ErrConflict):
		res.Status, res.Reason = PatchConflict, err.Error()
	case err != nil:
		res.Status, res.Reason = PatchFailed, err.Error()
	default:
		res.Status = PatchApplied
		if len(res.Rejected) > 0 || !sel.All && selectedHunksPartial(set, sel) {
			res.Status = PatchPartiallyApplied
		}
		t.record(ctx, "patch_apply", actor, req, setHash(set, sel), nil, reason)
		for _, f := range res.Applied {
			if !slices.Contains(t.meta.FilesModified, f) {
				t.meta.FilesModified = append(t.meta.FilesModified, f)
			}
		}
		if applied != nil {
			res.AppliedID = applied.ID
		}
	}
	t.emit(&res)
	if res.Status == PatchConflict || res.Status == PatchFailed {
		t.emit(&ErrorEvent{Code: CodeToolError, Message: res.Reason, Recoverable: true, Details: map[string]any{"patch_set_id": set.ID}})
	}
	return res, nil
}

// applySet applies the selection server-side, or through the Host when it
// applies patches itself; it fills res.Applied and res.Rejected.
func (t *turn) applySet(ctx context.Context, set *PatchSet, sel PatchSelection, res *PatchResultEvent) (*AppliedPatch, error) {
	p := t.e.opts.Patcher
	chosen := map[string]bool{}
	for _, f := range set.Files {
		if sel.All || slices.Contains(sel.Files, f.Path) || len(sel.Hunks[f.Path]) > 0 {
			chosen[f.Path] = true
			res.Applied = append(res.Applied, f.Path)
		} else {
			res.Rejected = append(res.Rejected, f.Path)
		}
	}
	if pa, ok := t.opts.Host.(PatchApplier); ok {
		res.ClientSide = true
		want, err := p.Expected(set, sel)
		if err != nil {
			return nil, err
		}
		got, err := pa.ApplyPatch(ctx, set, sel)
		if err != nil {
			return nil, fmt.Errorf("the client could not apply the patch: %w", err)
		}
		for path, h := range want {
			if got[path] != h {
				return nil, fmt.Errorf("the client applied %s but its content (%s) is not what the approved patch produces (%s)", path, orNone(got[path]), h)
			}
		}
		return nil, nil
	}
	applied, err := p.Apply(t.s.workspace.Root, set, sel)
	if err != nil {
		res.Applied, res.Rejected = nil, setPaths(set)
		return nil, err
	}
	applied.ID = newID("apl")
	applied.Workspace, applied.Session = t.s.workspace.ID, t.s.id
	if s := t.e.opts.Patches; s != nil {
		if err := s.SaveApplied(ctx, applied); err != nil {
			t.emit(&ErrorEvent{Code: CodeInternal, Message: "saving the undo record failed (this change cannot be undone with plexus undo): " + err.Error(), Recoverable: true})
		}
	}
	return applied, nil
}

func orNone(s string) string {
	if s == "" {
		return "nothing reported"
	}
	return s
}

// selection turns an approval into what to apply.
func selection(d ApprovalDecision) PatchSelection {
	if !d.Approved {
		return PatchSelection{}
	}
	// A file or hunk scope that names nothing approves nothing: an
	// approval never grows beyond what it names.
	switch d.Scope {
	case "file":
		return PatchSelection{Files: d.Files}
	case "hunk":
		var hunks map[string][]int
		for path, hs := range d.Hunks {
			if len(hs) > 0 {
				if hunks == nil {
					hunks = map[string][]int{}
				}
				hunks[path] = hs
			}
		}
		return PatchSelection{Hunks: hunks}
	}
	return PatchSelection{All: true}
}

// selectedHunksPartial reports whether a hunk selection leaves out hunks
// of a chosen file.
func selectedHunksPartial(set *PatchSet, sel PatchSelection) bool {
	for _, f := range set.Files {
		if hs, ok := sel.Hunks[f.Path]; ok && len(hs) < len(f.Hunks) {
			return true
		}
	}
	return false
}

func setPaths(set *PatchSet) []string {
	out := make([]string, 0, len(set.Files))
	for _, f := range set.Files {
		out = append(out, f.Path)
	}
	return out
}

// decidePatch asks the policy about applying set once per edit tool that
// proposed part of it, naming the tool, for the files that tool edited, so
// that rules naming write_file, edit_file or delete_file judge the change
// itself: the paths the patch writes, as a change (policy.Gatekeeper also
// applies "patch_apply" rules to each). The worst answer wins (deny, then
// ask); the risk is the highest of them.
func (t *turn) decidePatch(ctx context.Context, req ActionRequest, set *PatchSet, proposers []proposer) Verdict {
	if len(proposers) == 0 {
		return t.decide(ctx, req)
	}
	var v Verdict
	for i, p := range proposers {
		sub := req
		sub.Tool, sub.Spec = p.tool, t.specs[p.tool]
		sub.Paths, sub.Deletes = nil, nil
		for _, f := range set.Files {
			if p.paths[f.Path] {
				sub.Paths = append(sub.Paths, f.Path)
				if f.Op == "delete" {
					sub.Deletes = append(sub.Deletes, f.Path)
				}
			}
		}
		if len(sub.Paths) == 0 {
			continue
		}
		w := t.decide(ctx, sub)
		if i == 0 || verdictRank(w.Action) > verdictRank(v.Action) {
			w.Risk = higherRisk(w.Risk, v.Risk)
			v = w
		} else {
			v.Risk = higherRisk(v.Risk, w.Risk)
		}
	}
	return v
}

func verdictRank(action string) int {
	switch action {
	case VerdictDeny:
		return 2
	case VerdictAsk:
		return 1
	}
	return 0
}

// higherRisk returns the riskier of a and b (a when they are level).
func higherRisk(a, b Risk) Risk {
	if riskRank(b.Level) > riskRank(a.Level) {
		return b
	}
	return a
}

func riskRank(l RiskLevel) int {
	return slices.Index([]RiskLevel{RiskLow, RiskMedium, RiskHigh, RiskCritical}, l)
}

// setDeletes lists the paths a set deletes.
func setDeletes(set *PatchSet) []string {
	var out []string
	for _, f := range set.Files {
		if f.Op == "delete" {
			out = append(out, f.Path)
		}
	}
	return out
}

// setDiff is the whole set's diff, file after file.
func setDiff(set *PatchSet) string {
	var b strings.Builder
	for _, f := range set.Files {
		b.WriteString(f.Diff)
	}
	return b.String()
}

// setHash is "sha256:<hex>" of what the selection applies, for receipts:
// the whole diff of each chosen file, or, for a file of which only some
// hunks were chosen, its path and those hunks.
func setHash(set *PatchSet, sel PatchSelection) string {
	h := sha256.New()
	for _, f := range set.Files {
		switch hs := sel.Hunks[f.Path]; {
		case sel.All || slices.Contains(sel.Files, f.Path):
			h.Write([]byte(f.Diff))
		case len(hs) > 0:
			// Only the chosen hunks were applied: hash those, after the
			// file's name.
			fmt.Fprintf(h, "%s\n", f.Path)
			for _, i := range hs {
				if i >= 0 && i < len(f.Hunks) {
					h.Write([]byte(f.Hunks[i].Content))
				}
			}
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// patchArgs describes a patch set as arguments for policy and receipts.
func patchArgs(set *PatchSet) json.RawMessage {
	files := make([]map[string]string, 0, len(set.Files))
	for _, f := range set.Files {
		files = append(files, map[string]string{"path": f.Path, "op": f.Op, "base_hash": f.BaseHash, "new_hash": f.NewHash})
	}
	b, _ := json.Marshal(map[string]any{"patch_set_id": set.ID, "files": files})
	return b
}

// Undo restores the files of an applied patch set byte for byte: the one
// named by appliedID, or the workspace's latest not yet undone when
// appliedID is "". Errors: ErrNotFound (nothing to undo), ErrConflict (a
// file changed since; force overrides), ErrUnsupported (no patch store).
func (e *Engine) Undo(ctx context.Context, ws *Workspace, appliedID string, force bool) (*AppliedPatch, error) {
	if e.opts.Patches == nil || e.opts.Patcher == nil {
		return nil, fmt.Errorf("%w: this engine keeps no record of applied patches", ErrUnsupported)
	}
	list, err := e.opts.Patches.Applied(ctx, ws.ID, 0)
	if err != nil {
		return nil, err
	}
	var target *AppliedPatch
	for _, a := range list {
		if (appliedID == "" && a.UndoneAt == nil) || a.ID == appliedID {
			target = a
			break
		}
	}
	switch {
	case target == nil && appliedID == "":
		return nil, fmt.Errorf("%w: no applied change to undo in %s", ErrNotFound, ws.Root)
	case target == nil:
		return nil, fmt.Errorf("%w: no applied change %s in %s", ErrNotFound, appliedID, ws.Root)
	case target.UndoneAt != nil:
		return nil, fmt.Errorf("%w: %s was already undone at %s", ErrInvalidRequest, target.ID, target.UndoneAt.Format(time.RFC3339))
	}
	if err := e.opts.Patcher.Undo(ws.Root, target, force); err != nil {
		return nil, err
	}
	now := time.Now()
	if err := e.opts.Patches.MarkUndone(ctx, target.ID, now); err != nil {
		return nil, err
	}
	target.UndoneAt = &now
	if r := e.opts.Recorder; r != nil {
		var paths []string
		for _, f := range target.Files {
			paths = append(paths, f.Path)
		}
		sort.Strings(paths)
		args, _ := json.Marshal(map[string]any{"applied_id": target.ID, "patch_set_id": target.SetID, "files": paths})
		if err := r.Record(ctx, DecisionRecord{Kind: "patch_undo", Actor: "user", Workspace: ws.ID, Tool: "undo", Args: args, Reason: "undo requested", Time: now}); err != nil {
			return target, fmt.Errorf("undone, but writing the receipt failed: %w", err)
		}
	}
	return target, nil
}

// AppliedPatches lists a workspace's applied changes, newest first (limit
// 0: all).
func (e *Engine) AppliedPatches(ctx context.Context, ws *Workspace, limit int) ([]*AppliedPatch, error) {
	if e.opts.Patches == nil {
		return nil, fmt.Errorf("%w: this engine keeps no record of applied patches", ErrUnsupported)
	}
	return e.opts.Patches.Applied(ctx, ws.ID, limit)
}

// Policy returns the workspace's policy document.
func (e *Engine) Policy(ctx context.Context, ws *Workspace) (json.RawMessage, error) {
	if e.opts.Gatekeeper == nil {
		return nil, fmt.Errorf("%w: this engine has no policy store", ErrUnsupported)
	}
	return e.opts.Gatekeeper.Policy(ctx, ws.ID)
}

// SetPolicy replaces the workspace's policy document after validating it
// (ErrInvalidRequest naming the field).
func (e *Engine) SetPolicy(ctx context.Context, ws *Workspace, doc json.RawMessage) error {
	if e.opts.Gatekeeper == nil {
		return fmt.Errorf("%w: this engine has no policy store", ErrUnsupported)
	}
	return e.opts.Gatekeeper.SetPolicy(ctx, ws.ID, doc)
}

package engine

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// decide asks the workspace policy about an action; without a Gatekeeper
// the built-in default applies: read-only tools run, tools that need
// approval, patch applies and commands ask.
func (t *turn) decide(ctx context.Context, req ActionRequest) Verdict {
	risk := specRisk(req.Spec)
	if t.opts.ReadOnly && (req.Kind != ActionToolCall || !req.Spec.ReadOnly || req.Spec.NeedsApproval) {
		return Verdict{Action: VerdictDeny, Reason: "the session is read-only: it may read and search, not change files or run commands (switch the mode to allow changes)", Risk: risk}
	}
	if g := t.e.opts.Gatekeeper; g != nil {
		v, err := g.Decide(ctx, t.s.workspace.ID, req)
		if err == nil {
			return v
		}
		// A policy that cannot be read must not open the gates, not even
		// to approve-all.
		return Verdict{Action: VerdictDeny, Reason: "the workspace policy could not be read (" + err.Error() + "); fix or replace it (plexus policy show, plexus policy set)", Risk: risk}
	}
	switch {
	case req.Kind == ActionPatchApply:
		return Verdict{Action: VerdictAsk, Reason: "applying changes to files needs approval", Risk: Risk{Level: RiskMedium, Reasons: []string{"changes files in the workspace"}, Reversible: true}}
	case req.Kind == ActionCommand || req.Spec.NeedsApproval:
		return Verdict{Action: VerdictAsk, Reason: req.Tool + " needs approval", Risk: risk}
	}
	return Verdict{Action: VerdictAllow, Reason: "read-only tool", Risk: risk}
}

// gate runs an action through policy and, when the policy asks, through
// approval. It returns the decision (Approved false with the reason when
// refused); the error is non-nil only when ctx ended.
func (t *turn) gate(ctx context.Context, req ActionRequest, ask ApprovalRequest) (ApprovalDecision, error) {
	return t.gateWith(ctx, req, t.decide(ctx, req), ask)
}

// gateWith is gate with the policy's verdict v already known.
func (t *turn) gateWith(ctx context.Context, req ActionRequest, v Verdict, ask ApprovalRequest) (ApprovalDecision, error) {
	ask.Risk = v.Risk
	switch v.Action {
	case VerdictDeny:
		dec := ApprovalDecision{Reason: "denied by the workspace policy: " + v.Reason, Actor: "policy"}
		t.record(ctx, "denial", dec.Actor, req, "", nil, dec.Reason)
		return dec, nil
	case VerdictAllow:
		dec := ApprovalDecision{Approved: true, Reason: v.Reason, Actor: "policy"}
		if req.Kind != ActionToolCall || req.Spec.NeedsApproval || !req.Spec.ReadOnly {
			// A rule approved what would otherwise need a person; the
			// calls of read-only tools are not worth a receipt each.
			t.record(ctx, "approval", dec.Actor, req, "", nil, dec.Reason)
		}
		return dec, nil
	}
	dec, err := t.approve(ctx, ask)
	if err != nil {
		return dec, err
	}
	kind := "approval"
	if !dec.Approved {
		kind = "denial"
	}
	t.record(ctx, kind, dec.Actor, req, "", nil, dec.Reason)
	remember := (dec.Remember || dec.ApplyToSimilar) && t.e.opts.Gatekeeper != nil
	if remember && ask.PatchSet != nil && dec.Approved {
		// Remember what was approved: the chosen files, not the whole
		// set; nothing when none of the set's files was chosen.
		if sel := selection(dec); !sel.All {
			req.Paths, req.Deletes = nil, nil
			for _, f := range ask.PatchSet.Files {
				if slices.Contains(sel.Files, f.Path) || len(sel.Hunks[f.Path]) > 0 {
					req.Paths = append(req.Paths, f.Path)
				}
			}
			remember = len(req.Paths) > 0
		}
	}
	if remember {
		if err := t.e.opts.Gatekeeper.Remember(ctx, t.s.workspace.ID, req, dec.Approved, dec.ApplyToSimilar); err != nil {
			t.emit(&ErrorEvent{Code: CodeInternal, Message: "remembering the decision failed: " + err.Error(), Recoverable: true})
		}
	}
	return dec, nil
}

// approve decides an approval: ApproveAll, then the Host, else denied.
// The error is non-nil only when ctx ended while the Host was asked.
func (t *turn) approve(ctx context.Context, req ApprovalRequest) (ApprovalDecision, error) {
	switch {
	case t.opts.ApproveAll:
		return ApprovalDecision{Approved: true, Reason: "approved by the approve-all setting", Actor: "approve-all"}, nil
	case t.opts.Host == nil:
		return ApprovalDecision{Reason: "it needs approval and this front-end cannot ask for it; allow such calls with approve-all (plexus --approve-all) or a policy rule", Actor: "policy"}, nil
	}
	t.emit(&ApprovalEvent{Request: req})
	dec, err := t.opts.Host.RequestApproval(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return ApprovalDecision{}, ctx.Err()
		}
		return ApprovalDecision{Reason: "asking for approval failed: " + err.Error(), Actor: "policy"}, nil
	}
	if dec.Actor == "" {
		dec.Actor = "user"
	}
	if !dec.Approved && dec.Reason == "" {
		dec.Reason = "the user denied it"
	}
	t.emit(approvalResult(req.ID, dec))
	return dec, nil
}

// record appends a decision receipt; a failure to record is reported, not
// fatal.
func (t *turn) record(ctx context.Context, kind, actor string, req ActionRequest, diffHash string, exit *int, reason string) {
	r := t.e.opts.Recorder
	if r == nil {
		return
	}
	err := r.Record(ctx, DecisionRecord{
		Kind: kind, Actor: actor, Workspace: t.s.workspace.ID, Session: t.s.id, Turn: t.id,
		Tool: req.Tool, Args: req.Args, DiffHash: diffHash, ExitCode: exit, Reason: reason, Time: time.Now(),
	})
	if err != nil && ctx.Err() == nil {
		t.emit(&ErrorEvent{Code: CodeInternal, Message: "writing the decision receipt failed: " + err.Error(), Recoverable: true})
	}
}

// callPaths returns the workspace paths a call's arguments name ("path",
// "file_path", "paths", "cwd"), for policy decisions before the call runs,
// each followed by the path it leads to through symlinks inside root when
// that differs, so that a rule on secret/** also judges a link to it.
func callPaths(root string, args json.RawMessage) []string {
	var out []string
	for _, p := range namedPaths(args) {
		out = append(out, p)
		if real := realPath(root, p); real != "" && real != p {
			out = append(out, real)
		}
	}
	return out
}

// realPath is p (workspace-relative) with symlinks resolved, relative to
// root; "" when it cannot be resolved or leads outside root (the tools
// refuse those paths themselves).
func realPath(root, p string) string {
	r, err := filepath.EvalSymlinks(root)
	if err != nil {
		return ""
	}
	full, err := filepath.EvalSymlinks(filepath.Join(r, filepath.FromSlash(p)))
	if err != nil {
		if !os.IsNotExist(err) {
			return ""
		}
		// A file to be created: resolve its directory.
		dir, derr := filepath.EvalSymlinks(filepath.Join(r, filepath.Dir(filepath.FromSlash(p))))
		if derr != nil {
			return ""
		}
		full = filepath.Join(dir, filepath.Base(p))
	}
	rel, err := filepath.Rel(r, full)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return ""
	}
	return filepath.ToSlash(rel)
}

// namedPaths returns the paths a call's arguments name.
func namedPaths(args json.RawMessage) []string {
	var a map[string]any
	if json.Unmarshal(args, &a) != nil {
		return nil
	}
	var out []string
	for _, k := range []string{"path", "file_path", "cwd"} {
		if s, ok := a[k].(string); ok && s != "" {
			out = append(out, strings.TrimPrefix(s, "./"))
		}
	}
	if list, ok := a["paths"].([]any); ok {
		for _, v := range list {
			if s, ok := v.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// commandOf returns the "command" argument of a call.
func commandOf(args json.RawMessage) string {
	var a struct {
		Command string `json:"command"`
	}
	json.Unmarshal(args, &a)
	return a.Command
}

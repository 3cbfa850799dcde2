package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/plexus-agent/plexus/engine"
)

// DocStore keeps one policy document per workspace (engine/store
// implements it in plexus.db).
type DocStore interface {
	// PolicyDoc returns the stored document and true, or false when the
	// workspace has none.
	PolicyDoc(ctx context.Context, workspaceID string) (json.RawMessage, bool, error)
	// SetPolicyDoc stores a document, replacing the previous one.
	SetPolicyDoc(ctx context.Context, workspaceID string, doc json.RawMessage) error
}

// Gatekeeper is the engine's per-workspace policy (engine.Gatekeeper) on
// top of a DocStore: a workspace without a stored document has Default();
// SetPolicy validates with Parse and stores the canonical form
// (MarshalJSON); Remember adds the rule RememberedRule makes and stores the
// policy at once, so remembered choices survive restarts.
//
// Every decision reads the stored document again, so a change made by
// another process (plexus policy set while a server runs) applies to the
// next decision; a document is parsed only when its bytes changed. Remember
// adds its rule to the stored document as it is then, not to an older
// copy, and changes nothing when storing fails. It is safe for concurrent
// use.
type Gatekeeper struct {
	store DocStore
	mu    sync.Mutex        // serialises load, change and store
	cache map[string]parsed // by workspace ID
}

// parsed is a stored document and its policy.
type parsed struct {
	doc    json.RawMessage // nil: none stored, the policy is Default()
	policy *Policy
}

var _ engine.Gatekeeper = (*Gatekeeper)(nil)

// NewGatekeeper returns a Gatekeeper keeping documents in store.
func NewGatekeeper(store DocStore) *Gatekeeper {
	return &Gatekeeper{store: store, cache: map[string]parsed{}}
}

// load returns the workspace's policy as stored now, and the stored
// document (nil when none); g.mu must be held.
func (g *Gatekeeper) load(ctx context.Context, ws string) (parsed, error) {
	doc, ok, err := g.store.PolicyDoc(ctx, ws)
	if err != nil {
		return parsed{}, fmt.Errorf("reading the policy of workspace %s: %w", ws, err)
	}
	if !ok {
		doc = nil
	}
	if c, hit := g.cache[ws]; hit && bytes.Equal(c.doc, doc) && (c.doc == nil) == (doc == nil) {
		return c, nil
	}
	p := Default()
	if doc != nil {
		if p, err = Parse(doc); err != nil {
			// Only SetPolicy writes documents, and it validates them; a
			// bad one was changed behind our back.
			return parsed{}, fmt.Errorf("the stored policy of workspace %s is invalid (replace it with plexus policy set): %w", ws, err)
		}
	}
	c := parsed{doc: doc, policy: p}
	g.cache[ws] = c
	return c, nil
}

// policy is load under the lock.
func (g *Gatekeeper) policy(ctx context.Context, ws string) (*Policy, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, err := g.load(ctx, ws)
	return c.policy, err
}

// FromAction converts an engine action to a policy Request: a tool call
// and a command under the tool's name; a patch apply under the name of the
// edit tool the engine names (it asks once per tool that proposed part of
// the patch, see Request.Tool), or "patch_apply" for "apply_patch".
func FromAction(req engine.ActionRequest) Request {
	r := Request{Paths: req.Paths, Deletes: req.Deletes, Command: req.Command}
	switch req.Kind {
	case engine.ActionPatchApply:
		// The engine asks once per edit tool that proposed part of the
		// patch, naming it; "apply_patch" is the patch as a whole.
		r.Kind = KindPatchApply
		if req.Tool != "" && req.Tool != "apply_patch" {
			r.Tool = req.Spec
			r.Tool.Name = req.Tool
		}
	case engine.ActionCommand:
		r.Kind = KindCommand
		r.Tool = req.Spec
		r.Tool.Name = req.Tool
	case engine.ActionToolCall:
		r.Kind = KindToolCall
		r.Tool = req.Spec
		r.Tool.Name = req.Tool
	default:
		r.Kind = Kind(req.Kind) // unknown: Decide denies it
	}
	return r
}

// Decide implements engine.Gatekeeper: the workspace policy's Decision
// (see Policy.Decide) as a Verdict. The error is non-nil only when the
// policy cannot be read.
func (g *Gatekeeper) Decide(ctx context.Context, ws string, req engine.ActionRequest) (engine.Verdict, error) {
	p, err := g.policy(ctx, ws)
	if err != nil {
		return engine.Verdict{}, err
	}
	d := p.Decide(FromAction(req))
	return engine.Verdict{Action: string(d.Action), Reason: d.Reason, Risk: d.Risk}, nil
}

// Remember implements engine.Gatekeeper: it adds the rule for the choice
// (allow or deny; with similar, for actions like it: see RememberedRule)
// and stores the policy. Errors wrap engine.ErrInvalidRequest when the
// choice cannot be kept as a rule.
func (g *Gatekeeper) Remember(ctx context.Context, ws string, req engine.ActionRequest, allow, similar bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, err := g.load(ctx, ws)
	if err != nil {
		return err
	}
	action := Deny
	if allow {
		action = Allow
	}
	// Change a copy: the cached policy stays as stored if storing fails.
	doc, err := c.policy.MarshalJSON()
	if err != nil {
		return err
	}
	p, err := Parse(doc)
	if err != nil {
		return err
	}
	if _, err := p.Remember(FromAction(req), action, similar); err != nil {
		return err
	}
	return g.save(ctx, ws, p)
}

// save stores p as the workspace's document and caches it; g.mu must be
// held.
func (g *Gatekeeper) save(ctx context.Context, ws string, p *Policy) error {
	doc, err := p.MarshalJSON()
	if err != nil {
		return err
	}
	if err := g.store.SetPolicyDoc(ctx, ws, doc); err != nil {
		return fmt.Errorf("storing the policy of workspace %s: %w", ws, err)
	}
	g.cache[ws] = parsed{doc: doc, policy: p}
	return nil
}

// CommandSettings implements engine.Gatekeeper with the policy's commands
// section.
func (g *Gatekeeper) CommandSettings(ctx context.Context, ws string) (engine.CommandSettings, error) {
	p, err := g.policy(ctx, ws)
	if err != nil {
		return engine.CommandSettings{}, err
	}
	c := p.Commands()
	return engine.CommandSettings{Mode: string(c.Mode), AllowNetwork: c.Sandbox.Network, Env: c.Env}, nil
}

// Policy implements engine.Gatekeeper: the workspace's document, Default()
// when none was stored.
func (g *Gatekeeper) Policy(ctx context.Context, ws string) (json.RawMessage, error) {
	p, err := g.policy(ctx, ws)
	if err != nil {
		return nil, err
	}
	return p.MarshalJSON()
}

// SetPolicy implements engine.Gatekeeper: it validates doc with Parse (the
// error names the field and matches engine.ErrInvalidRequest) and stores
// its canonical form.
func (g *Gatekeeper) SetPolicy(ctx context.Context, ws string, doc json.RawMessage) error {
	p, err := Parse(doc)
	if err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.save(ctx, ws, p)
}

package patch

import (
	"io/fs"
	"slices"
	"sync"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/workspace"
)

// Patcher is engine.Patcher on this package: it opens each workspace root
// once, and runs Apply and Undo one at a time per workspace (two applies
// racing over the same files could each pass their hash checks).
type Patcher struct {
	mu    sync.Mutex
	roots map[string]*rootState
}

type rootState struct {
	root *workspace.Root
	mu   sync.Mutex // serialises Apply and Undo in this workspace
}

var _ engine.Patcher = (*Patcher)(nil)

// NewPatcher returns a Patcher.
func NewPatcher() *Patcher { return &Patcher{roots: map[string]*rootState{}} }

// Close releases the open workspace roots.
func (p *Patcher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, r := range p.roots {
		r.root.Close()
		delete(p.roots, k)
	}
	return nil
}

func (p *Patcher) state(dir string) (*rootState, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.roots[dir]; ok {
		return r, nil
	}
	root, err := workspace.Open(dir)
	if err != nil {
		return nil, err
	}
	r := &rootState{root: root}
	p.roots[dir] = r
	return r, nil
}

// Propose implements engine.Patcher.
func (p *Patcher) Propose(_ string, edits []engine.FileEdit, rationale string, criteria []string) (*engine.PatchSet, error) {
	in := make([]Edit, len(edits))
	for i, e := range edits {
		in[i] = Edit{Path: e.Path, Base: e.Base, BaseExists: e.BaseExists, New: e.New, Delete: e.Delete}
	}
	s, err := Propose(in, rationale, criteria)
	if err != nil {
		return nil, err
	}
	return toEngine(s), nil
}

// Expected implements engine.Patcher.
func (p *Patcher) Expected(set *engine.PatchSet, sel engine.PatchSelection) (map[string]string, error) {
	return fromEngine(set).Expected(selectionOf(sel))
}

// Apply implements engine.Patcher.
func (p *Patcher) Apply(root string, set *engine.PatchSet, sel engine.PatchSelection) (*engine.AppliedPatch, error) {
	r, err := p.state(root)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	a, err := Apply(r.root, fromEngine(set), selectionOf(sel))
	if err != nil {
		return nil, err
	}
	out := &engine.AppliedPatch{SetID: a.SetID, Time: a.Time}
	for _, f := range a.Files {
		out.Files = append(out.Files, engine.AppliedFile{
			Path: f.Path, Op: string(f.Op), Before: f.Before, BeforeExisted: f.Existed,
			Mode: uint32(f.Mode), AfterHash: f.AfterHash, Hunks: f.Hunks,
		})
	}
	out.Dirs = a.Dirs
	return out, nil
}

// Undo implements engine.Patcher.
func (p *Patcher) Undo(root string, applied *engine.AppliedPatch, force bool) error {
	r, err := p.state(root)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	a := &Applied{SetID: applied.SetID, Time: applied.Time, Dirs: applied.Dirs}
	for _, f := range applied.Files {
		a.Files = append(a.Files, AppliedFile{
			Path: f.Path, Op: Op(f.Op), Before: f.Before, Existed: f.BeforeExisted,
			Mode: fs.FileMode(f.Mode), AfterHash: f.AfterHash, Hunks: f.Hunks,
		})
	}
	return Undo(r.root, a, force)
}

func toEngine(s *Set) *engine.PatchSet {
	out := &engine.PatchSet{ID: s.ID, Rationale: s.Rationale, AcceptanceCriteria: slices.Clone(s.AcceptanceCriteria)}
	for _, f := range s.Files {
		ef := engine.FilePatch{ID: f.ID, Path: f.Path, Op: string(f.Op), BaseHash: f.BaseHash, NewHash: f.NewHash,
			Diff: f.Diff, Base: f.Base, New: f.New}
		for _, h := range f.Hunks {
			ef.Hunks = append(ef.Hunks, engine.Hunk{OldStart: h.OldStart, OldLines: h.OldLines, NewStart: h.NewStart, NewLines: h.NewLines, Content: h.Content})
		}
		out.Files = append(out.Files, ef)
	}
	return out
}

func fromEngine(s *engine.PatchSet) *Set {
	out := &Set{ID: s.ID, Rationale: s.Rationale, AcceptanceCriteria: s.AcceptanceCriteria}
	for _, f := range s.Files {
		pf := FilePatch{ID: f.ID, Path: f.Path, Op: Op(f.Op), BaseHash: f.BaseHash, NewHash: f.NewHash,
			Diff: f.Diff, Base: f.Base, New: f.New}
		for _, h := range f.Hunks {
			pf.Hunks = append(pf.Hunks, Hunk{OldStart: h.OldStart, OldLines: h.OldLines, NewStart: h.NewStart, NewLines: h.NewLines, Content: h.Content})
		}
		out.Files = append(out.Files, pf)
	}
	return out
}

func selectionOf(sel engine.PatchSelection) Selection {
	out := Selection{All: sel.All, Hunks: sel.Hunks}
	if len(sel.Files) > 0 {
		out.Files = map[string]bool{}
		for _, f := range sel.Files {
			out.Files[f] = true
		}
	}
	return out
}

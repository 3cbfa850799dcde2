package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// WorkspaceStore keeps the registered workspaces across restarts (the
// WebSocket contract's /v1/workspaces). engine/store implements it.
// Implementations must be safe for concurrent use.
type WorkspaceStore interface {
	// SaveWorkspace stores rec, replacing a stored workspace with its ID
	// (its Name changes; Registered stays the first registration's).
	SaveWorkspace(ctx context.Context, rec WorkspaceRecord) error
	// ListWorkspaces returns the stored workspaces, oldest registration
	// first.
	ListWorkspaces(ctx context.Context) ([]WorkspaceRecord, error)
}

// WorkspaceRecord is a registered workspace.
type WorkspaceRecord struct {
	ID   string `json:"workspace_id"`
	Root string `json:"root"`
	// Name is the client's label for it (default the root's base name).
	Name       string    `json:"name"`
	Registered time.Time `json:"registered_at"`
}

// RegisterWorkspace opens the workspace at dir (see OpenWorkspace) and
// stores it with Options.Workspaces, so Workspaces lists it after a
// restart. Registering a directory again returns the same id (and renames
// it when name is not empty). Errors: ErrInvalidRequest for what
// OpenWorkspace refuses (dir is not a directory) and for the filesystem
// root (a workspace there would confine the tools to nothing); the
// store's.
func (e *Engine) RegisterWorkspace(ctx context.Context, dir, name string) (WorkspaceRecord, error) {
	ws, err := e.OpenWorkspace(dir)
	if err != nil {
		return WorkspaceRecord{}, fmt.Errorf("%w: %v", ErrInvalidRequest, err)
	}
	if filepath.Dir(ws.Root) == ws.Root {
		return WorkspaceRecord{}, fmt.Errorf("%w: workspace %s is the filesystem root, where the tools would reach every file; register the project's directory", ErrInvalidRequest, dir)
	}
	rec := WorkspaceRecord{ID: ws.ID, Root: ws.Root, Name: name, Registered: time.Now().UTC()}
	if st := e.opts.Workspaces; st != nil {
		if err := st.SaveWorkspace(ctx, rec); err != nil {
			return WorkspaceRecord{}, fmt.Errorf("register workspace %s: %w", ws.Root, err)
		}
		if got, err := e.lookupWorkspace(ctx, ws.ID); err == nil {
			rec = got
		}
	}
	return rec, nil
}

// Workspaces lists the registered workspaces: the stored ones with
// Options.Workspaces, else those opened in this process.
func (e *Engine) Workspaces(ctx context.Context) ([]WorkspaceRecord, error) {
	if st := e.opts.Workspaces; st != nil {
		return st.ListWorkspaces(ctx)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]WorkspaceRecord, 0, len(e.workspaces))
	for _, ws := range e.workspaces {
		out = append(out, WorkspaceRecord{ID: ws.ID, Root: ws.Root, Registered: e.started})
	}
	return out, nil
}

// WorkspaceByID returns a registered workspace, opening a stored one.
// Errors: ErrNotFound.
func (e *Engine) WorkspaceByID(ctx context.Context, id string) (*Workspace, WorkspaceRecord, error) {
	rec, err := e.lookupWorkspace(ctx, id)
	if err != nil {
		return nil, WorkspaceRecord{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	ws, ok := e.workspaces[id]
	if !ok {
		ws = &Workspace{ID: rec.ID, Root: rec.Root}
		e.workspaces[id] = ws
	}
	return ws, rec, nil
}

func (e *Engine) lookupWorkspace(ctx context.Context, id string) (WorkspaceRecord, error) {
	all, err := e.Workspaces(ctx)
	if err != nil {
		return WorkspaceRecord{}, err
	}
	for _, r := range all {
		if r.ID == id {
			return r, nil
		}
	}
	return WorkspaceRecord{}, fmt.Errorf("%w: workspace %s", ErrNotFound, id)
}

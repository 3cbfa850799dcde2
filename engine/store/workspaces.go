package store

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

// SaveWorkspace stores rec; a stored workspace with its id keeps its
// registration time and takes rec's name (when not empty) and root.
func (s *Store) SaveWorkspace(ctx context.Context, rec engine.WorkspaceRecord) error {
	name := rec.Name
	if name == "" {
		name = filepath.Base(rec.Root)
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO workspaces(id, root, name, registered_ns) VALUES(?, ?, ?, ?)
ON CONFLICT(id) DO UPDATE SET root=excluded.root, name=CASE WHEN ?='' THEN workspaces.name ELSE excluded.name END`,
		rec.ID, rec.Root, name, rec.Registered.UnixNano(), rec.Name)
	if err != nil {
		return fmt.Errorf("save workspace %s: %w", rec.ID, err)
	}
	return nil
}

// ListWorkspaces returns the stored workspaces, oldest first.
func (s *Store) ListWorkspaces(ctx context.Context) ([]engine.WorkspaceRecord, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, root, name, registered_ns FROM workspaces ORDER BY registered_ns, id`)
	if err != nil {
		return nil, fmt.Errorf("list workspaces: %w", err)
	}
	defer rows.Close()
	out := []engine.WorkspaceRecord{}
	for rows.Next() {
		var r engine.WorkspaceRecord
		var ns int64
		if err := rows.Scan(&r.ID, &r.Root, &r.Name, &ns); err != nil {
			return nil, fmt.Errorf("list workspaces: %w", err)
		}
		r.Registered = time.Unix(0, ns).UTC()
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list workspaces: %w", err)
	}
	return out, nil
}

var _ engine.WorkspaceStore = (*Store)(nil)

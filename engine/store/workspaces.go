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
	err := s.write(ctx, func(ctx context.Context, tx dbtx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO workspaces(id, root, name, registered_ns) VALUES(?, ?, ?, ?)
ON CONFLICT(id) DO UPDATE SET root=excluded.root, name=CASE WHEN ?='' THEN workspaces.name ELSE excluded.name END`,
			rec.ID, rec.Root, name, rec.Registered.UnixNano(), rec.Name)
		return err
	})
	if err != nil {
		return fmt.Errorf("save workspace %s: %w", rec.ID, err)
	}
	return nil
}

// ListWorkspaces returns the stored workspaces, oldest first.
func (s *Store) ListWorkspaces(ctx context.Context) ([]engine.WorkspaceRecord, error) {
	var out []engine.WorkspaceRecord
	err := s.read(ctx, func() error {
		out = []engine.WorkspaceRecord{}
		rows, err := s.rdb.QueryContext(ctx, `SELECT id, root, name, registered_ns FROM workspaces ORDER BY registered_ns, id`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r engine.WorkspaceRecord
			var ns int64
			if err := rows.Scan(&r.ID, &r.Root, &r.Name, &ns); err != nil {
				return err
			}
			r.Registered = time.Unix(0, ns).UTC()
			out = append(out, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("list workspaces: %w", err)
	}
	return out, nil
}

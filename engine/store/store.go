package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/gofrs/flock"
	_ "modernc.org/sqlite" // pure-Go SQLite driver "sqlite"

	"github.com/plexus-agent/plexus/engine"
)

const schema = `
CREATE TABLE IF NOT EXISTS patch_sets(
	id TEXT PRIMARY KEY,
	workspace TEXT NOT NULL,
	created_ns INTEGER NOT NULL,
	doc BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS applied_patches(
	id TEXT PRIMARY KEY,
	workspace TEXT NOT NULL,
	set_id TEXT NOT NULL,
	time_ns INTEGER NOT NULL,
	undone_ns INTEGER,
	doc BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS applied_by_workspace ON applied_patches(workspace, time_ns DESC);
CREATE TABLE IF NOT EXISTS policies(
	workspace TEXT PRIMARY KEY,
	doc BLOB NOT NULL,
	updated_ns INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS workspaces(
	id TEXT PRIMARY KEY,
	root TEXT NOT NULL,
	name TEXT NOT NULL,
	registered_ns INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions(
	id TEXT PRIMARY KEY,
	workspace TEXT NOT NULL,
	root TEXT NOT NULL,
	created_ns INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_by_workspace ON sessions(workspace, created_ns);
CREATE TABLE IF NOT EXISTS session_models(
	session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
	provider TEXT NOT NULL,
	model TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS messages(
	session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
	idx INTEGER NOT NULL,
	doc BLOB NOT NULL,
	PRIMARY KEY(session_id, idx)
);
CREATE TABLE IF NOT EXISTS events(
	session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
	seq INTEGER NOT NULL,
	turn_id TEXT NOT NULL,
	time_ns INTEGER NOT NULL,
	kind TEXT NOT NULL,
	data BLOB NOT NULL,
	PRIMARY KEY(session_id, seq)
);
`

// Store is the engine's state database. Safe for concurrent use, also by
// several processes sharing the file; see the package documentation for
// what its writes promise.
type Store struct {
	// rdb is the pool of reading connections (query_only).
	rdb *sql.DB
	// wdb holds the writer's one connection.
	wdb *sql.DB

	// turnstile keeps writers of several processes taking turns (see
	// starveAfter).
	turnstile *flock.Flock

	queue  chan *writeOp
	exited chan struct{} // closed when the writer has stopped
	wmu    sync.RWMutex  // guards closed against sends on queue
	closed bool
}

var (
	_ engine.PatchStore        = (*Store)(nil)
	_ engine.SessionStore      = (*Store)(nil)
	_ engine.SessionModelStore = (*Store)(nil)
	_ engine.WorkspaceStore    = (*Store)(nil)
)

// dsn is the data source name of path for modernc.org/sqlite with the
// given pragmas.
func dsn(path string, pragmas ...string) string {
	q := url.Values{}
	for _, p := range pragmas {
		q.Add("_pragma", p)
	}
	return "file:" + path + "?" + q.Encode()
}

// Open opens (creating) the database at path and starts its writer.
// Errors: the directory cannot be made, the file is not a database or
// cannot be opened, the schema cannot be created (an error wrapping
// ErrBusy when another process held the lock throughout).
func Open(ctx context.Context, path string) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("state database: %w", err)
	}
	wdb, err := sql.Open("sqlite", dsn(path, "busy_timeout(0)", "journal_mode(WAL)", "synchronous(FULL)", "foreign_keys(1)"))
	if err != nil {
		return nil, fmt.Errorf("open state database %s: %w", path, err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxLifetime(0)
	wdb.SetConnMaxIdleTime(0)
	rdb, err := sql.Open("sqlite", dsn(path, fmt.Sprintf("busy_timeout(%d)", readBusyTimeout.Milliseconds()), "query_only(1)", "foreign_keys(1)"))
	if err != nil {
		wdb.Close()
		return nil, fmt.Errorf("open state database %s: %w", path, err)
	}
	rdb.SetMaxOpenConns(maxReaders)
	rdb.SetMaxIdleConns(4)
	s := &Store{turnstile: flock.New(path + "-turnstile"), rdb: rdb, wdb: wdb, queue: make(chan *writeOp, queueLen), exited: make(chan struct{})}
	go s.run()
	err = s.write(ctx, func(ctx context.Context, tx dbtx) error {
		_, err := tx.ExecContext(ctx, schema)
		return err
	})
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("open state database %s: %w", path, err)
	}
	return s, nil
}

// Close stops taking writes (later ones fail with ErrClosed), waits for
// the writer to commit those already queued, and closes the database.
// Calling it again is harmless.
func (s *Store) Close() error {
	s.wmu.Lock()
	if s.closed {
		s.wmu.Unlock()
		<-s.exited
		return nil
	}
	s.closed = true
	close(s.queue)
	s.wmu.Unlock()
	<-s.exited
	// Readers first: the writer's connection, closing last, checkpoints
	// the write-ahead log into the database file.
	return errors.Join(s.rdb.Close(), s.wdb.Close(), s.turnstile.Close())
}

// SavePatchSet stores a proposed patch set (replacing one with its id).
func (s *Store) SavePatchSet(ctx context.Context, workspaceID string, set *engine.PatchSet) error {
	doc, err := json.Marshal(set)
	if err != nil {
		return err
	}
	now := time.Now().UnixNano()
	err = s.write(ctx, func(ctx context.Context, tx dbtx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO patch_sets(id, workspace, created_ns, doc) VALUES(?, ?, ?, ?)
		ON CONFLICT(id) DO UPDATE SET doc=excluded.doc`, set.ID, workspaceID, now, doc)
		return err
	})
	if err != nil {
		return fmt.Errorf("save patch set %s: %w", set.ID, err)
	}
	return nil
}

// PatchSet loads a patch set; engine.ErrNotFound when there is none.
func (s *Store) PatchSet(ctx context.Context, id string) (*engine.PatchSet, error) {
	var doc []byte
	err := s.read(ctx, func() error {
		return s.rdb.QueryRowContext(ctx, `SELECT doc FROM patch_sets WHERE id=?`, id).Scan(&doc)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: patch set %s", engine.ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("load patch set %s: %w", id, err)
	}
	var set engine.PatchSet
	if err := json.Unmarshal(doc, &set); err != nil {
		return nil, fmt.Errorf("patch set %s is unreadable: %w", id, err)
	}
	return &set, nil
}

// SaveApplied stores an applied change. Errors: an applied change with
// a.ID is stored already.
func (s *Store) SaveApplied(ctx context.Context, a *engine.AppliedPatch) error {
	doc, err := json.Marshal(a)
	if err != nil {
		return err
	}
	var undone any
	if a.UndoneAt != nil {
		undone = a.UndoneAt.UnixNano()
	}
	err = s.write(ctx, func(ctx context.Context, tx dbtx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO applied_patches(id, workspace, set_id, time_ns, undone_ns, doc) VALUES(?, ?, ?, ?, ?, ?)`,
			a.ID, a.Workspace, a.SetID, a.Time.UnixNano(), undone, doc)
		return err
	})
	if err != nil {
		return fmt.Errorf("save applied change %s: %w", a.ID, err)
	}
	return nil
}

// Applied lists a workspace's applied changes, newest first; limit 0
// means all.
func (s *Store) Applied(ctx context.Context, workspaceID string, limit int) ([]*engine.AppliedPatch, error) {
	if limit <= 0 {
		limit = -1
	}
	var out []*engine.AppliedPatch
	err := s.read(ctx, func() error {
		out = nil
		rows, err := s.rdb.QueryContext(ctx, `SELECT doc, undone_ns FROM applied_patches WHERE workspace=? ORDER BY time_ns DESC, id DESC LIMIT ?`, workspaceID, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var doc []byte
			var undone sql.NullInt64
			if err := rows.Scan(&doc, &undone); err != nil {
				return err
			}
			var a engine.AppliedPatch
			if err := json.Unmarshal(doc, &a); err != nil {
				return fmt.Errorf("an applied change is unreadable: %w", err)
			}
			if undone.Valid {
				t := time.Unix(0, undone.Int64)
				a.UndoneAt = &t
			}
			out = append(out, &a)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("list applied changes: %w", err)
	}
	return out, nil
}

// MarkUndone records that an applied change was undone. Errors:
// engine.ErrNotFound when no applied change appliedID is stored that is
// not undone yet.
func (s *Store) MarkUndone(ctx context.Context, appliedID string, at time.Time) error {
	err := s.write(ctx, func(ctx context.Context, tx dbtx) error {
		res, err := tx.ExecContext(ctx, `UPDATE applied_patches SET undone_ns=? WHERE id=? AND undone_ns IS NULL`, at.UnixNano(), appliedID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("%w: no applied change %s that is not undone yet", engine.ErrNotFound, appliedID)
		}
		return nil
	})
	if err != nil && !errors.Is(err, engine.ErrNotFound) {
		return fmt.Errorf("mark %s undone: %w", appliedID, err)
	}
	return err
}

// PolicyDoc returns a workspace's stored policy document, and false when
// none is stored.
func (s *Store) PolicyDoc(ctx context.Context, workspaceID string) (json.RawMessage, bool, error) {
	var doc []byte
	err := s.read(ctx, func() error {
		return s.rdb.QueryRowContext(ctx, `SELECT doc FROM policies WHERE workspace=?`, workspaceID).Scan(&doc)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("load policy: %w", err)
	}
	return doc, true, nil
}

// SetPolicyDoc stores a workspace's policy document.
func (s *Store) SetPolicyDoc(ctx context.Context, workspaceID string, doc json.RawMessage) error {
	now := time.Now().UnixNano()
	err := s.write(ctx, func(ctx context.Context, tx dbtx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO policies(workspace, doc, updated_ns) VALUES(?, ?, ?)
		ON CONFLICT(workspace) DO UPDATE SET doc=excluded.doc, updated_ns=excluded.updated_ns`, workspaceID, []byte(doc), now)
		return err
	})
	if err != nil {
		return fmt.Errorf("save policy: %w", err)
	}
	return nil
}

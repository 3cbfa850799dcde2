package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

// finalKind is the kind of the event that ends a turn; LoadSession counts
// them.
var finalKind = (*engine.FinalEvent)(nil).EventKind()

func sessionNotFound(id string) error {
	return fmt.Errorf("%w: session %s", engine.ErrNotFound, id)
}

// CreateSession stores a new session's record. Errors: ErrInvalidRequest
// when the id is taken.
func (s *Store) CreateSession(ctx context.Context, rec engine.SessionRecord) error {
	err := s.write(ctx, func(ctx context.Context, tx dbtx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO sessions(id, workspace, root, created_ns) VALUES(?, ?, ?, ?) ON CONFLICT(id) DO NOTHING`,
			rec.ID, rec.WorkspaceID, rec.WorkspaceRoot, rec.Created.UnixNano())
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("%w: session %s exists", engine.ErrInvalidRequest, rec.ID)
		}
		return nil
	})
	if err != nil && !errors.Is(err, engine.ErrInvalidRequest) {
		return fmt.Errorf("save session %s: %w", rec.ID, err)
	}
	return err
}

// SetSessionModel records a session's own model; a zero ref clears it.
// Errors: ErrNotFound when the session is not stored.
func (s *Store) SetSessionModel(ctx context.Context, sessionID string, ref engine.ModelRef) error {
	err := s.write(ctx, func(ctx context.Context, tx dbtx) error {
		if err := mustExist(ctx, tx, sessionID); err != nil {
			return err
		}
		var err error
		if ref.IsZero() {
			_, err = tx.ExecContext(ctx, `DELETE FROM session_models WHERE session_id=?`, sessionID)
		} else {
			_, err = tx.ExecContext(ctx, `INSERT INTO session_models(session_id, provider, model) VALUES(?, ?, ?)
			ON CONFLICT(session_id) DO UPDATE SET provider=excluded.provider, model=excluded.model`, sessionID, ref.Provider, ref.Name)
		}
		return err
	})
	return wrapSessionErr(err, "set the model of session %s", sessionID)
}

// wrapSessionErr adds context to err, except to a not-found error, which
// already names the session.
func wrapSessionErr(err error, format, sessionID string) error {
	if err == nil || errors.Is(err, engine.ErrNotFound) {
		return err
	}
	return fmt.Errorf(format+": %w", sessionID, err)
}

// exists reports whether session id is stored.
func exists(ctx context.Context, q dbtx, id string) (bool, error) {
	var one int
	err := q.QueryRowContext(ctx, `SELECT 1 FROM sessions WHERE id=?`, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look up session %s: %w", id, err)
	}
	return true, nil
}

// mustExist is exists as an error: ErrNotFound when the session is not
// stored.
func mustExist(ctx context.Context, q dbtx, id string) error {
	ok, err := exists(ctx, q, id)
	if err == nil && !ok {
		err = sessionNotFound(id)
	}
	return err
}

// AppendEvent stores one event. Errors: ErrNotFound when the session is
// not stored; a constraint error when it has an event with ev.Seq.
func (s *Store) AppendEvent(ctx context.Context, sessionID string, ev engine.StoredEvent) error {
	err := s.write(ctx, func(ctx context.Context, tx dbtx) error {
		return appendEvent(ctx, tx, sessionID, ev)
	})
	return wrapSessionErr(err, "save an event of session %s", sessionID)
}

func appendEvent(ctx context.Context, tx dbtx, sessionID string, ev engine.StoredEvent) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO events(session_id, seq, turn_id, time_ns, kind, data) VALUES(?, ?, ?, ?, ?, ?)`,
		sessionID, int64(ev.Seq), ev.TurnID, ev.Time.UnixNano(), ev.Kind, []byte(ev.Data))
	if err == nil {
		return nil
	}
	if isBusy(err) {
		return err
	}
	if xerr := mustExist(ctx, tx, sessionID); xerr != nil {
		return xerr
	}
	return fmt.Errorf("event %d: %w", ev.Seq, err)
}

// SaveHistory replaces the history from index from on with msgs, in one
// transaction. Errors: ErrNotFound when the session is not stored.
func (s *Store) SaveHistory(ctx context.Context, sessionID string, from int, msgs []engine.Message) error {
	docs, err := encodeMessages(msgs)
	if err != nil {
		return fmt.Errorf("save the history of session %s: %w", sessionID, err)
	}
	err = s.write(ctx, func(ctx context.Context, tx dbtx) error {
		return saveHistory(ctx, tx, sessionID, from, docs)
	})
	return wrapSessionErr(err, "save the history of session %s", sessionID)
}

// AppendEventWithHistory stores ev and replaces the history from index
// from on with msgs, in one transaction. Errors: those of AppendEvent and
// SaveHistory.
func (s *Store) AppendEventWithHistory(ctx context.Context, sessionID string, ev engine.StoredEvent, from int, msgs []engine.Message) error {
	docs, err := encodeMessages(msgs)
	if err != nil {
		return fmt.Errorf("save the history of session %s: %w", sessionID, err)
	}
	err = s.write(ctx, func(ctx context.Context, tx dbtx) error {
		if err := saveHistory(ctx, tx, sessionID, from, docs); err != nil {
			return err
		}
		return appendEvent(ctx, tx, sessionID, ev)
	})
	return wrapSessionErr(err, "save an event and the history of session %s", sessionID)
}

func encodeMessages(msgs []engine.Message) ([][]byte, error) {
	docs := make([][]byte, len(msgs))
	for i, m := range msgs {
		doc, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		docs[i] = doc
	}
	return docs, nil
}

func saveHistory(ctx context.Context, tx dbtx, sessionID string, from int, docs [][]byte) error {
	if from < 0 {
		return fmt.Errorf("%w: history index %d", engine.ErrInvalidRequest, from)
	}
	if err := mustExist(ctx, tx, sessionID); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM messages WHERE session_id=? AND idx>=?`, sessionID, from); err != nil {
		return err
	}
	for i, doc := range docs {
		if _, err := tx.ExecContext(ctx, `INSERT INTO messages(session_id, idx, doc) VALUES(?, ?, ?)`, sessionID, from+i, doc); err != nil {
			return err
		}
	}
	return nil
}

// LoadSession returns a stored session with its history, last event
// number and count of finished turns, read in one transaction. Errors:
// ErrNotFound.
func (s *Store) LoadSession(ctx context.Context, id string) (*engine.StoredSession, error) {
	var out *engine.StoredSession
	err := s.read(ctx, func() error {
		var err error
		out, err = s.loadSession(ctx, id)
		return err
	})
	if err != nil && !errors.Is(err, engine.ErrNotFound) {
		return nil, fmt.Errorf("load session %s: %w", id, err)
	}
	return out, err
}

func (s *Store) loadSession(ctx context.Context, id string) (*engine.StoredSession, error) {
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var out engine.StoredSession
	var created int64
	err = tx.QueryRowContext(ctx, `SELECT s.id, s.workspace, s.root, s.created_ns, COALESCE(m.provider, ''), COALESCE(m.model, '')
		FROM sessions s LEFT JOIN session_models m ON m.session_id = s.id WHERE s.id=?`, id).
		Scan(&out.ID, &out.WorkspaceID, &out.WorkspaceRoot, &created, &out.Model.Provider, &out.Model.Name)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, sessionNotFound(id)
	}
	if err != nil {
		return nil, err
	}
	out.Created = time.Unix(0, created)
	var last int64
	err = tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0), COUNT(CASE WHEN kind=? THEN 1 END) FROM events WHERE session_id=?`, finalKind, id).
		Scan(&last, &out.Turns)
	if err != nil {
		return nil, err
	}
	out.LastSeq = uint64(last)
	rows, err := tx.QueryContext(ctx, `SELECT doc FROM messages WHERE session_id=? ORDER BY idx`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var doc []byte
		if err := rows.Scan(&doc); err != nil {
			return nil, err
		}
		var m engine.Message
		if err := json.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("a message of session %s is unreadable: %w", id, err)
		}
		out.History = append(out.History, m)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return &out, nil
}

// eventsQuery reads a session's events after a sequence number through
// the events primary key, already in order.
const eventsQuery = `SELECT seq, turn_id, time_ns, kind, data FROM events WHERE session_id=? AND seq>? ORDER BY seq LIMIT ?`

// Events returns the session's events after afterSeq in order, at most
// limit (<= 0: all). Errors: ErrNotFound when the session is not stored.
func (s *Store) Events(ctx context.Context, sessionID string, afterSeq uint64, limit int) ([]engine.StoredEvent, error) {
	if limit <= 0 {
		limit = -1
	}
	var out []engine.StoredEvent
	err := s.read(ctx, func() error {
		out = nil
		rows, err := s.rdb.QueryContext(ctx, eventsQuery, sessionID, int64(afterSeq), limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var ev engine.StoredEvent
			var seq, t int64
			var data []byte
			if err := rows.Scan(&seq, &ev.TurnID, &t, &ev.Kind, &data); err != nil {
				return err
			}
			ev.Seq, ev.Time, ev.Data = uint64(seq), time.Unix(0, t), data
			out = append(out, ev)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(out) == 0 {
			// Nothing after afterSeq, or no such session.
			return mustExist(ctx, s.rdb, sessionID)
		}
		return nil
	})
	return out, wrapSessionErr(err, "events of session %s", sessionID)
}

// ListSessions returns the records of a workspace's sessions (every
// workspace's when workspaceID is ""), oldest first.
func (s *Store) ListSessions(ctx context.Context, workspaceID string) ([]engine.SessionRecord, error) {
	var out []engine.SessionRecord
	err := s.read(ctx, func() error {
		out = nil
		rows, err := s.rdb.QueryContext(ctx, `SELECT id, workspace, root, created_ns FROM sessions WHERE ?='' OR workspace=? ORDER BY created_ns, id`,
			workspaceID, workspaceID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r engine.SessionRecord
			var created int64
			if err := rows.Scan(&r.ID, &r.WorkspaceID, &r.WorkspaceRoot, &created); err != nil {
				return err
			}
			r.Created = time.Unix(0, created)
			out = append(out, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}

// DeleteSession removes a session with its history and events. Errors:
// ErrNotFound.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	err := s.write(ctx, func(ctx context.Context, tx dbtx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE id=?`, id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return sessionNotFound(id)
		}
		return nil
	})
	return wrapSessionErr(err, "delete session %s", id)
}

package store

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

// TestDeleteRemovesRows checks, below the interface the conformance suite
// sees, that deleting a session removes its history and events from the
// tables (foreign keys cascade).
func TestDeleteRemovesRows(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "plexus.db"))
	if err := s.CreateSession(ctx, engine.SessionRecord{ID: "ses_1", WorkspaceID: "ws_1", Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	ev := engine.StoredEvent{Seq: 1, Kind: "token", Time: time.Now(), Data: json.RawMessage(`{}`)}
	if err := s.AppendEventWithHistory(ctx, "ses_1", ev, 0, []engine.Message{{Role: engine.RoleUser, Content: "hi"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSession(ctx, "ses_1"); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"messages", "events", "session_models"} {
		var n int
		if err := s.rdb.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+table+` WHERE session_id='ses_1'`).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s of the deleted session: %d rows, %v", table, n, err)
		}
	}
}

func TestEventsQueryUsesIndex(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "plexus.db"))
	rows, err := s.rdb.Query(`EXPLAIN QUERY PLAN `+eventsQuery, "s", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if len(plan) != 1 || plan[0] != "SEARCH events USING INDEX sqlite_autoindex_events_1 (session_id=? AND seq>?)" {
		t.Errorf("plan %q: want one index search and no sort", plan)
	}
}

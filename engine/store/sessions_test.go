package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

func TestSessionRecords(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "plexus.db"))
	t0 := time.Unix(1700000000, 123456789)
	recs := []engine.SessionRecord{
		{ID: "ses_b", WorkspaceID: "ws_1", WorkspaceRoot: "/w1", Created: t0.Add(time.Second)},
		{ID: "ses_a", WorkspaceID: "ws_1", WorkspaceRoot: "/w1", Created: t0},
		{ID: "ses_c", WorkspaceID: "ws_2", WorkspaceRoot: "/w2", Created: t0},
	}
	for _, r := range recs {
		if err := s.CreateSession(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CreateSession(ctx, recs[0]); !errors.Is(err, engine.ErrInvalidRequest) {
		t.Errorf("taken id: %v", err)
	}
	ids := func(rs []engine.SessionRecord) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	for _, tc := range []struct {
		ws   string
		want []string
	}{
		{"ws_1", []string{"ses_a", "ses_b"}},
		{"ws_2", []string{"ses_c"}},
		{"", []string{"ses_a", "ses_c", "ses_b"}},
		{"ws_3", nil},
	} {
		got, err := s.ListSessions(ctx, tc.ws)
		if err != nil || !slices.Equal(ids(got), tc.want) {
			t.Errorf("ListSessions(%q) = %v, %v; want %v", tc.ws, ids(got), err, tc.want)
		}
	}
	got, err := s.LoadSession(ctx, "ses_b")
	if err != nil {
		t.Fatal(err)
	}
	if got.SessionRecord.ID != "ses_b" || got.WorkspaceRoot != "/w1" || !got.Created.Equal(recs[0].Created) ||
		got.LastSeq != 0 || got.Turns != 0 || len(got.History) != 0 {
		t.Errorf("fresh session: %+v", got)
	}
	if _, err := s.LoadSession(ctx, "nope"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("load unknown: %v", err)
	}
}

func TestSessionHistory(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "plexus.db"))
	if err := s.CreateSession(ctx, engine.SessionRecord{ID: "ses_1", WorkspaceID: "ws_1", Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	msg := func(i int) engine.Message {
		return engine.Message{Role: engine.RoleUser, Content: fmt.Sprint("m", i)}
	}
	call := engine.Message{Role: engine.RoleAssistant, ToolCalls: []engine.ToolCall{{ID: "c1", Name: "read_file", Args: json.RawMessage(`{"path":"a.go"}`)}}}
	result := engine.Message{Role: engine.RoleTool, Content: `{"ok":true}`, ToolCallID: "c1", ToolName: "read_file"}
	history := func() []engine.Message {
		t.Helper()
		got, err := s.LoadSession(ctx, "ses_1")
		if err != nil {
			t.Fatal(err)
		}
		return got.History
	}
	steps := []struct {
		name string
		from int
		msgs []engine.Message
		want []engine.Message
	}{
		{"append to empty", 0, []engine.Message{msg(0), call, result}, []engine.Message{msg(0), call, result}},
		{"append", 3, []engine.Message{msg(1)}, []engine.Message{msg(0), call, result, msg(1)}},
		{"same range again", 3, []engine.Message{msg(1)}, []engine.Message{msg(0), call, result, msg(1)}},
		{"replace the tail", 1, []engine.Message{msg(2)}, []engine.Message{msg(0), msg(2)}},
		{"clear", 0, nil, nil},
	}
	for _, st := range steps {
		if err := s.SaveHistory(ctx, "ses_1", st.from, st.msgs); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		got, _ := json.Marshal(history())
		want, _ := json.Marshal(st.want)
		if string(got) != string(want) {
			t.Errorf("%s: got %s, want %s", st.name, got, want)
		}
	}
	if err := s.SaveHistory(ctx, "nope", 0, []engine.Message{msg(0)}); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("unknown session: %v", err)
	}
}

func TestSessionEvents(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "plexus.db")
	s := open(t, path)
	for _, id := range []string{"ses_1", "ses_2"} {
		if err := s.CreateSession(ctx, engine.SessionRecord{ID: id, WorkspaceID: "ws_1", Created: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Unix(1700000000, 5)
	var all []engine.StoredEvent
	for i := 1; i <= 5; i++ {
		kind := "token"
		if i == 3 || i == 5 {
			kind = "final"
		}
		ev := engine.StoredEvent{Seq: uint64(i), TurnID: fmt.Sprint("turn_", (i+1)/3), Time: t0.Add(time.Duration(i)),
			Kind: kind, Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}
		if err := s.AppendEvent(ctx, "ses_1", ev); err != nil {
			t.Fatal(err)
		}
		all = append(all, ev)
	}
	// Another session's events do not mix in.
	if err := s.AppendEvent(ctx, "ses_2", engine.StoredEvent{Seq: 1, Kind: "token", Time: t0, Data: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvent(ctx, "ses_1", all[2]); err == nil {
		t.Error("a repeated seq was stored")
	}
	if err := s.AppendEvent(ctx, "nope", all[0]); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("unknown session: %v", err)
	}
	s.Close()
	s = open(t, path)

	for _, tc := range []struct {
		after uint64
		limit int
		want  []engine.StoredEvent
	}{
		{0, 0, all},
		{2, 0, all[2:]},
		{2, 2, all[2:4]},
		{5, 0, nil},
		{9, 0, nil},
	} {
		got, err := s.Events(ctx, "ses_1", tc.after, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(tc.want) {
			t.Errorf("Events(%d, %d): %d events, want %d", tc.after, tc.limit, len(got), len(tc.want))
			continue
		}
		for i := range got {
			g, w := got[i], tc.want[i]
			if g.Seq != w.Seq || g.TurnID != w.TurnID || !g.Time.Equal(w.Time) || g.Kind != w.Kind || string(g.Data) != string(w.Data) {
				t.Errorf("Events(%d, %d)[%d] = %+v, want %+v", tc.after, tc.limit, i, g, w)
			}
		}
	}
	if _, err := s.Events(ctx, "nope", 0, 0); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("events of unknown session: %v", err)
	}
	got, err := s.LoadSession(ctx, "ses_1")
	if err != nil || got.LastSeq != 5 || got.Turns != 2 {
		t.Errorf("LoadSession: %+v, %v; want last seq 5, 2 turns", got, err)
	}
}

func TestDeleteSession(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "plexus.db"))
	for _, id := range []string{"ses_1", "ses_2"} {
		if err := s.CreateSession(ctx, engine.SessionRecord{ID: id, WorkspaceID: "ws_1", Created: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if err := s.SaveHistory(ctx, id, 0, []engine.Message{{Role: engine.RoleUser, Content: "hi"}}); err != nil {
			t.Fatal(err)
		}
		if err := s.AppendEvent(ctx, id, engine.StoredEvent{Seq: 1, Kind: "token", Time: time.Now(), Data: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteSession(ctx, "ses_1"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSession(ctx, "ses_1"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
	if _, err := s.LoadSession(ctx, "ses_1"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("load deleted: %v", err)
	}
	for _, table := range []string{"messages", "events"} {
		var n int
		if err := s.rdb.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+table+` WHERE session_id='ses_1'`).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s of the deleted session: %d rows, %v", table, n, err)
		}
	}
	if got, err := s.LoadSession(ctx, "ses_2"); err != nil || len(got.History) != 1 || got.LastSeq != 1 {
		t.Errorf("the other session: %+v, %v", got, err)
	}
	// A session id can be used again after its deletion.
	if err := s.CreateSession(ctx, engine.SessionRecord{ID: "ses_1", WorkspaceID: "ws_1", Created: time.Now()}); err != nil {
		t.Errorf("recreate: %v", err)
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

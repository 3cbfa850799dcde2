package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

func create(t *testing.T, s Store, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if err := s.CreateSession(bg(), engine.SessionRecord{ID: id, WorkspaceID: "ws_1", WorkspaceRoot: "/w1", Created: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
}

func userMsg(text string) engine.Message { return engine.Message{Role: engine.RoleUser, Content: text} }

// historyJSON is the stored history of session id as JSON.
func historyJSON(t *testing.T, s Store, id string) string {
	t.Helper()
	got, err := s.LoadSession(bg(), id)
	if err != nil {
		t.Fatal(err)
	}
	return asJSON(got.History)
}

func asJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func testSessionRecords(t *testing.T, d *db) {
	s := d.handle(t)
	t0 := time.Unix(1700000000, 123456789)
	recs := []engine.SessionRecord{
		{ID: "ses_b", WorkspaceID: "ws_1", WorkspaceRoot: "/w1", Created: t0.Add(time.Second)},
		{ID: "ses_a", WorkspaceID: "ws_1", WorkspaceRoot: "/w1", Created: t0},
		{ID: "ses_c", WorkspaceID: "ws_2", WorkspaceRoot: "/w2", Created: t0},
	}
	for _, r := range recs {
		if err := s.CreateSession(bg(), r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CreateSession(bg(), recs[0]); !errors.Is(err, engine.ErrInvalidRequest) {
		t.Errorf("taken id: %v, want ErrInvalidRequest", err)
	}
	s = d.reopen(t, s)
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
		got, err := s.ListSessions(bg(), tc.ws)
		if err != nil || !slices.Equal(ids(got), tc.want) {
			t.Errorf("ListSessions(%q) = %v, %v; want %v", tc.ws, ids(got), err, tc.want)
		}
	}
	got, err := s.LoadSession(bg(), "ses_b")
	if err != nil {
		t.Fatal(err)
	}
	if got.SessionRecord.ID != "ses_b" || got.WorkspaceID != "ws_1" || got.WorkspaceRoot != "/w1" || !got.Created.Equal(recs[0].Created) ||
		got.LastSeq != 0 || got.Turns != 0 || len(got.History) != 0 || !got.Model.IsZero() {
		t.Errorf("fresh session: %+v", got)
	}
	if _, err := s.LoadSession(bg(), "nope"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("load unknown: %v, want ErrNotFound", err)
	}
}

func testSessionHistory(t *testing.T, d *db) {
	s := d.handle(t)
	create(t, s, "ses_1")
	call := engine.Message{Role: engine.RoleAssistant, ToolCalls: []engine.ToolCall{{ID: "c1", Name: "read_file", Args: json.RawMessage(`{"path":"a.go"}`)}}}
	result := engine.Message{Role: engine.RoleTool, Content: `{"ok":true}`, ToolCallID: "c1", ToolName: "read_file"}
	m := func(i int) engine.Message { return userMsg(fmt.Sprint("m", i)) }
	steps := []struct {
		name string
		from int
		msgs []engine.Message
		want []engine.Message
	}{
		{"append to empty", 0, []engine.Message{m(0), call, result}, []engine.Message{m(0), call, result}},
		{"append", 3, []engine.Message{m(1)}, []engine.Message{m(0), call, result, m(1)}},
		{"same range again", 3, []engine.Message{m(1)}, []engine.Message{m(0), call, result, m(1)}},
		{"replace the tail", 1, []engine.Message{m(2)}, []engine.Message{m(0), m(2)}},
		{"clear", 0, nil, nil},
	}
	for _, st := range steps {
		if err := s.SaveHistory(bg(), "ses_1", st.from, st.msgs); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		s = d.reopen(t, s)
		if got, want := historyJSON(t, s, "ses_1"), asJSON(st.want); got != want {
			t.Errorf("%s: got %s, want %s", st.name, got, want)
		}
	}
	if err := s.SaveHistory(bg(), "nope", 0, []engine.Message{m(0)}); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("unknown session: %v, want ErrNotFound", err)
	}
}

func sameStored(t *testing.T, what string, got, want []engine.StoredEvent) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d events, want %d", what, len(got), len(want))
		return
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Seq != w.Seq || g.TurnID != w.TurnID || !g.Time.Equal(w.Time) || g.Kind != w.Kind || string(g.Data) != string(w.Data) {
			t.Errorf("%s[%d] = %+v, want %+v", what, i, g, w)
		}
	}
}

func testSessionEvents(t *testing.T, d *db) {
	s := d.handle(t)
	create(t, s, "ses_1", "ses_2")
	t0 := time.Unix(1700000000, 5)
	var all []engine.StoredEvent
	for i := 1; i <= 5; i++ {
		kind := "token"
		if i == 3 || i == 5 {
			kind = "final"
		}
		ev := engine.StoredEvent{Seq: uint64(i), TurnID: fmt.Sprint("turn_", (i+1)/3), Time: t0.Add(time.Duration(i)),
			Kind: kind, Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}
		if err := s.AppendEvent(bg(), "ses_1", ev); err != nil {
			t.Fatal(err)
		}
		all = append(all, ev)
	}
	// Another session's events do not mix in.
	if err := s.AppendEvent(bg(), "ses_2", engine.StoredEvent{Seq: 1, Kind: "token", Time: t0, Data: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvent(bg(), "ses_1", all[2]); err == nil {
		t.Error("a repeated seq was stored")
	}
	if err := s.AppendEvent(bg(), "nope", all[0]); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("unknown session: %v, want ErrNotFound", err)
	}
	s = d.reopen(t, s)
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
		got, err := s.Events(bg(), "ses_1", tc.after, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		sameStored(t, fmt.Sprintf("Events(%d, %d)", tc.after, tc.limit), got, tc.want)
	}
	if _, err := s.Events(bg(), "nope", 0, 0); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("events of unknown session: %v, want ErrNotFound", err)
	}
	got, err := s.LoadSession(bg(), "ses_1")
	if err != nil || got.LastSeq != 5 || got.Turns != 2 {
		t.Errorf("LoadSession: %+v, %v; want last seq 5, 2 turns", got, err)
	}
}

// testEventWithHistory checks that AppendEventWithHistory stores both or
// neither.
func testEventWithHistory(t *testing.T, d *db) {
	s := d.handle(t)
	create(t, s, "ses_1")
	t0 := time.Unix(1700000000, 0)
	ev := func(seq uint64, kind string) engine.StoredEvent {
		return engine.StoredEvent{Seq: seq, TurnID: "turn_1", Time: t0.Add(time.Duration(seq)), Kind: kind, Data: json.RawMessage(`{}`)}
	}
	first := []engine.Message{userMsg("typed")}
	if err := s.AppendEventWithHistory(bg(), "ses_1", ev(1, "thinking"), 0, first); err != nil {
		t.Fatal(err)
	}
	full := []engine.Message{userMsg("typed\n\ncontext"), {Role: engine.RoleAssistant, Content: "answer"}}
	// The event's seq is taken: nothing of the write is stored.
	if err := s.AppendEventWithHistory(bg(), "ses_1", ev(1, "final"), 0, full); err == nil {
		t.Error("a write with a repeated seq succeeded")
	}
	s = d.reopen(t, s)
	if got, want := historyJSON(t, s, "ses_1"), asJSON(first); got != want {
		t.Errorf("after a failed write the history is %s, want %s", got, want)
	}
	if err := s.AppendEventWithHistory(bg(), "ses_1", ev(2, "final"), 0, full); err != nil {
		t.Fatal(err)
	}
	s = d.reopen(t, s)
	got, err := s.LoadSession(bg(), "ses_1")
	if err != nil {
		t.Fatal(err)
	}
	if asJSON(got.History) != asJSON(full) || got.LastSeq != 2 || got.Turns != 1 {
		t.Errorf("after the final write: history %s, last seq %d, %d turns", asJSON(got.History), got.LastSeq, got.Turns)
	}
	if err := s.AppendEventWithHistory(bg(), "nope", ev(1, "final"), 0, full); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("unknown session: %v, want ErrNotFound", err)
	}
}

func testDeleteSession(t *testing.T, d *db) {
	s := d.handle(t)
	create(t, s, "ses_1", "ses_2")
	for _, id := range []string{"ses_1", "ses_2"} {
		ev := engine.StoredEvent{Seq: 1, Kind: "token", Time: time.Now(), Data: json.RawMessage(`{}`)}
		if err := s.AppendEventWithHistory(bg(), id, ev, 0, []engine.Message{userMsg("hi")}); err != nil {
			t.Fatal(err)
		}
		if err := s.SetSessionModel(bg(), id, engine.ModelRef{Provider: "p", Name: "m"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteSession(bg(), "ses_1"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSession(bg(), "ses_1"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("second delete: %v, want ErrNotFound", err)
	}
	s = d.reopen(t, s)
	if _, err := s.LoadSession(bg(), "ses_1"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("load deleted: %v, want ErrNotFound", err)
	}
	if got, err := s.LoadSession(bg(), "ses_2"); err != nil || len(got.History) != 1 || got.LastSeq != 1 || got.Model.Name != "m" {
		t.Errorf("the other session: %+v, %v", got, err)
	}
	// The id can be used again, and nothing of the deleted session comes
	// back with it.
	create(t, s, "ses_1")
	got, err := s.LoadSession(bg(), "ses_1")
	if err != nil || len(got.History) != 0 || got.LastSeq != 0 || got.Turns != 0 || !got.Model.IsZero() {
		t.Errorf("recreated session: %+v, %v", got, err)
	}
	if evs, err := s.Events(bg(), "ses_1", 0, 0); err != nil || len(evs) != 0 {
		t.Errorf("recreated session's events: %d, %v", len(evs), err)
	}
}

func testSessionModel(t *testing.T, d *db) {
	s := d.handle(t)
	create(t, s, "ses_1")
	ref := engine.ModelRef{Provider: "ollama", Name: "qwen2.5-coder:7b"}
	if err := s.SetSessionModel(bg(), "ses_1", ref); err != nil {
		t.Fatal(err)
	}
	s = d.reopen(t, s)
	if got, err := s.LoadSession(bg(), "ses_1"); err != nil || got.Model != ref {
		t.Errorf("model %+v, %v; want %+v", got.Model, err, ref)
	}
	if err := s.SetSessionModel(bg(), "ses_1", engine.ModelRef{}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.LoadSession(bg(), "ses_1"); err != nil || !got.Model.IsZero() {
		t.Errorf("cleared model %+v, %v", got.Model, err)
	}
	if err := s.SetSessionModel(bg(), "nope", ref); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("unknown session: %v, want ErrNotFound", err)
	}
}

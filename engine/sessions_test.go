package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/store"
	"github.com/plexus-agent/plexus/models/replay"
)

// persistentRig runs turns with the replay model in sessions kept by a
// real SQLite store, and can build a new engine on the same database as a
// restarted process would.
type persistentRig struct {
	dir, script, db string
}

func newPersistentRig(t *testing.T, script ...string) *persistentRig {
	t.Helper()
	r := &persistentRig{dir: t.TempDir(), script: filepath.Join(t.TempDir(), "script.jsonl"), db: filepath.Join(t.TempDir(), "plexus.db")}
	if err := os.WriteFile(r.script, []byte(strings.Join(script, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return r
}

// engine opens the database and builds an engine on it; wrap, when not
// nil, wraps the store the engine sees.
func (r *persistentRig) engine(t *testing.T, wrap func(engine.SessionStore) engine.SessionStore) *engine.Engine {
	t.Helper()
	st, err := store.Open(context.Background(), r.db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var sessions engine.SessionStore = st
	if wrap != nil {
		sessions = wrap(st)
	}
	eng, err := engine.New(engine.Options{
		Models: map[string]engine.Model{"replay": replay.New()}, Model: engine.ModelRef{Provider: "replay", Name: r.script},
		Sessions: sessions,
	})
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// runTurn runs one turn and returns what OnEvent delivered.
func runTurn(t *testing.T, s *engine.Session, msg string) (engine.TurnResult, []engine.Event) {
	t.Helper()
	var mu sync.Mutex
	var events []engine.Event
	res, err := s.Run(context.Background(), engine.TurnInput{Message: msg}, engine.TurnOptions{ApproveAll: true,
		OnEvent: func(e engine.Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	return res, events
}

// sameEvents reports how got differs from want: sequence numbers, ids,
// times and the JSON a client would get of each payload.
func sameEvents(t *testing.T, what string, got, want []engine.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d events, want %d", what, len(got), len(want))
		return
	}
	for i := range got {
		g, w := got[i], want[i]
		gd, _ := json.Marshal(g.Data)
		wd, _ := json.Marshal(w.Data)
		if g.Seq != w.Seq || g.SessionID != w.SessionID || g.TurnID != w.TurnID || !g.Time.Equal(w.Time) ||
			reflect.TypeOf(g.Data) != reflect.TypeOf(w.Data) || string(gd) != string(wd) {
			t.Errorf("%s[%d]:\n got %d %s %s %v %T %s\nwant %d %s %s %v %T %s", what, i,
				g.Seq, g.SessionID, g.TurnID, g.Time, g.Data, gd, w.Seq, w.SessionID, w.TurnID, w.Time, w.Data, wd)
		}
	}
}

func historyJSON(t *testing.T, s *engine.Session) string {
	t.Helper()
	b, err := json.Marshal(s.History())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const (
	planStep   = `{"text": "Planning first.", "tool_calls": [{"name": "update_plan", "arguments": {"steps": [{"description": "answer", "files_involved": ["a.go"]}]}}]}`
	answerStep = `{"text": "Here is the answer."}`
)

func TestSessionsSurviveRestart(t *testing.T) {
	ctx := context.Background()
	r := newPersistentRig(t, planStep, answerStep, `{"text": "The second answer."}`, `{"text": "The third answer."}`)
	eng := r.engine(t, nil)
	ws, err := eng.OpenWorkspace(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := eng.NewSession(ws, "")
	if err != nil {
		t.Fatal(err)
	}
	var delivered []engine.Event
	for _, msg := range []string{"first", "second"} {
		res, events := runTurn(t, sess, msg)
		if res.Status != engine.TurnCompleted {
			t.Fatalf("turn %q: %+v", msg, res)
		}
		delivered = append(delivered, events...)
	}
	for i, e := range delivered {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
	}
	lastSeq := delivered[len(delivered)-1].Seq
	history := historyJSON(t, sess)

	// A restarted process: a new engine on the same database file.
	eng2 := r.engine(t, nil)
	again, err := eng2.Session(sess.ID())
	if err != nil {
		t.Fatal(err)
	}
	if got := historyJSON(t, again); got != history {
		t.Errorf("history after restart:\n got %s\nwant %s", got, history)
	}
	st := again.Status()
	if st.LastSeq != lastSeq || st.Turns != 2 || st.Messages != 5 || st.WorkspaceID != ws.ID || !again.Created().Equal(sess.Created()) {
		t.Errorf("status after restart: %+v", st)
	}
	if again.Workspace().Root != ws.Root {
		t.Errorf("workspace root %q, want %q", again.Workspace().Root, ws.Root)
	}
	for _, after := range []uint64{0, 1, 5, lastSeq - 1, lastSeq} {
		got, err := eng2.Events(ctx, sess.ID(), after, 0)
		if err != nil {
			t.Fatal(err)
		}
		sameEvents(t, fmt.Sprint("events after ", after), got, delivered[after:])
	}
	if got, _ := eng2.Events(ctx, sess.ID(), 2, 3); len(got) != 3 || got[0].Seq != 3 {
		t.Errorf("a page of 3 after 2: %d events", len(got))
	}

	// The third turn continues the conversation (the replay model plays
	// the step after the stored assistant messages) and the numbering.
	res, third := runTurn(t, again, "third")
	if res.Status != engine.TurnCompleted || res.Message != "The third answer." {
		t.Fatalf("third turn: %+v", res)
	}
	for i, e := range third {
		if e.Seq != lastSeq+uint64(i+1) {
			t.Fatalf("third turn event %d has seq %d, want %d", i, e.Seq, lastSeq+uint64(i+1))
		}
	}
	delivered = append(delivered, third...)
	got, err := eng2.Events(ctx, sess.ID(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, "all events", got, delivered)

	// Listing and deleting.
	other, err := eng2.NewSession(again.Workspace(), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng2.NewSession(again.Workspace(), sess.ID()); !errors.Is(err, engine.ErrInvalidRequest) {
		t.Errorf("a stored id taken again: %v", err)
	}
	list, err := eng2.Sessions(ctx, again.Workspace())
	if err != nil || len(list) != 2 || list[0].ID != sess.ID() || list[1].ID != other.ID() {
		t.Errorf("Sessions = %+v, %v", list, err)
	}
	if err := eng2.CloseSession(ctx, sess.ID()); err != nil {
		t.Fatal(err)
	}
	if s, err := eng2.Session(sess.ID()); err != nil || historyJSON(t, s) != historyJSON(t, again) {
		t.Errorf("a closed session is loaded again: %v", err)
	}
	if err := eng2.DeleteSession(ctx, sess.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := eng2.Session(sess.ID()); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("Session after delete: %v", err)
	}
	if _, err := eng.Events(ctx, sess.ID(), 0, 0); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("Events after delete: %v", err)
	}
	if err := eng2.DeleteSession(ctx, sess.ID()); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
	if list, _ := eng2.Sessions(ctx, nil); len(list) != 1 || list[0].ID != other.ID() {
		t.Errorf("Sessions after delete = %+v", list)
	}
}

func TestClearHistoryIsStored(t *testing.T) {
	r := newPersistentRig(t, answerStep, answerStep)
	eng := r.engine(t, nil)
	ws, _ := eng.OpenWorkspace(r.dir)
	sess, err := eng.NewSession(ws, "ses_clear")
	if err != nil {
		t.Fatal(err)
	}
	runTurn(t, sess, "hello")
	if err := sess.ClearHistory(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Replay plays its first step again only if the history is empty.
	runTurn(t, sess, "again")
	again, err := r.engine(t, nil).Session("ses_clear")
	if err != nil {
		t.Fatal(err)
	}
	if got := again.History(); len(got) != 2 || got[0].Content != "again" {
		t.Errorf("history after clear and a turn: %+v", got)
	}
}

// flakyStore fails the calls its functions pick.
type flakyStore struct {
	engine.SessionStore
	mu         sync.Mutex
	failAppend func(ev engine.StoredEvent, withHistory bool) bool
}

func (f *flakyStore) fails(ev engine.StoredEvent, withHistory bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failAppend != nil && f.failAppend(ev, withHistory)
}

func (f *flakyStore) AppendEvent(ctx context.Context, id string, ev engine.StoredEvent) error {
	if f.fails(ev, false) {
		return errors.New("disk full")
	}
	return f.SessionStore.AppendEvent(ctx, id, ev)
}

func (f *flakyStore) AppendEventWithHistory(ctx context.Context, id string, ev engine.StoredEvent, from int, msgs []engine.Message) error {
	if f.fails(ev, true) {
		return errors.New("disk full")
	}
	return f.SessionStore.AppendEventWithHistory(ctx, id, ev, from, msgs)
}

func (f *flakyStore) set(failAppend func(ev engine.StoredEvent, withHistory bool) bool) {
	f.mu.Lock()
	f.failAppend = failAppend
	f.mu.Unlock()
}

// storeErrors returns the recoverable internal errors among events.
func storeErrors(events []engine.Event) []engine.Event {
	var out []engine.Event
	for _, e := range events {
		if d, ok := e.Data.(*engine.ErrorEvent); ok && d.Code == engine.CodeInternal && d.Recoverable && strings.Contains(d.Message, "disk full") {
			out = append(out, e)
		}
	}
	return out
}

// final returns the last event's payload, which must be a FinalEvent.
func final(t *testing.T, events []engine.Event) *engine.FinalEvent {
	t.Helper()
	f, ok := events[len(events)-1].Data.(*engine.FinalEvent)
	if !ok {
		t.Fatalf("the last event is %T, not the final event", events[len(events)-1].Data)
	}
	return f
}

// TestStoreFailuresAreReported follows the durability model of
// engine/store when the store fails: a lost event is reported and the
// turn goes on; a turn whose answer could not be saved ends with status
// error (never completed), keeps its messages in memory and stores them
// with the session's next write; a later turn or Flush makes the stored
// history whole again.
func TestStoreFailuresAreReported(t *testing.T) {
	ctx := context.Background()
	r := newPersistentRig(t, planStep, answerStep, `{"text": "Still here."}`, `{"text": "And again."}`, `{"text": "Flushed."}`)
	flaky := &flakyStore{}
	eng := r.engine(t, func(s engine.SessionStore) engine.SessionStore { flaky.SessionStore = s; return flaky })
	ws, _ := eng.OpenWorkspace(r.dir)
	sess, err := eng.NewSession(ws, "")
	if err != nil {
		t.Fatal(err)
	}

	// One event is lost: it is delivered, reported, and missing from the
	// stored stream; the turn completes.
	flaky.set(func(ev engine.StoredEvent, _ bool) bool { return ev.Seq == 3 })
	res, events := runTurn(t, sess, "first")
	if res.Status != engine.TurnCompleted {
		t.Fatalf("turn: %+v", res)
	}
	errs := storeErrors(events)
	if len(errs) != 1 || errs[0].Seq != 4 || !strings.Contains(errs[0].Data.(*engine.ErrorEvent).Message, "event 3") {
		t.Fatalf("store errors: %s", kinds(errs))
	}
	stored, err := eng.Events(ctx, sess.ID(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := append(append([]engine.Event{}, events[:2]...), events[3:]...)
	sameEvents(t, "stored events", stored, want)

	// The turn's answer cannot be saved: the final event says so, with
	// status error, and is stored alone under its number.
	flaky.set(func(ev engine.StoredEvent, withHistory bool) bool { return ev.Kind == "final" && withHistory })
	res, events = runTurn(t, sess, "second")
	fin := final(t, events)
	if res.Status != engine.TurnError || fin.Status != engine.TurnError || !strings.Contains(fin.Error, "saving it failed") ||
		res.Error != fin.Error || fin.Message != "Still here." {
		t.Fatalf("a turn whose answer was not saved: result %+v, final %+v", res, fin)
	}
	stored, _ = eng.Events(ctx, sess.ID(), 0, 0)
	if last := stored[len(stored)-1]; last.Seq != events[len(events)-1].Seq || last.Data.(*engine.FinalEvent).Status != engine.TurnError {
		t.Errorf("the stored final event: %d %+v", last.Seq, last.Data)
	}
	loaded, err := r.engine(t, nil).Session(sess.ID())
	if err != nil {
		t.Fatal(err)
	}
	if got := len(loaded.History()); got != 5 {
		t.Errorf("the store has %d history messages, want 5 (the first turn and the second's request)", got)
	}

	// The store is back: the next turn's first write stores the second
	// turn's messages too.
	flaky.set(nil)
	res, events = runTurn(t, sess, "third")
	if res.Status != engine.TurnCompleted || len(storeErrors(events)) != 0 {
		t.Fatalf("turn: %+v %v", res, kinds(events))
	}
	again, err := r.engine(t, nil).Session(sess.ID())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := historyJSON(t, again), historyJSON(t, sess); got != want {
		t.Errorf("history after the store recovered:\n got %s\nwant %s", got, want)
	}
	if again.Status().LastSeq != events[len(events)-1].Seq {
		t.Errorf("last seq %d, want %d", again.Status().LastSeq, events[len(events)-1].Seq)
	}

	// An unsaved answer is stored by Flush at shutdown.
	flaky.set(func(ev engine.StoredEvent, withHistory bool) bool { return ev.Kind == "final" && withHistory })
	if res, _ := runTurn(t, sess, "fourth"); res.Status != engine.TurnError {
		t.Fatalf("turn: %+v", res)
	}
	if err := eng.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	again, err = r.engine(t, nil).Session(sess.ID())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := historyJSON(t, again), historyJSON(t, sess); got != want {
		t.Errorf("history after Flush:\n got %s\nwant %s", got, want)
	}
}

// TestRequestStoredWithFirstEvent checks that a turn's user message is
// stored before its first event is delivered: a client that saw an event
// of a turn finds the request in the stored history (the message the
// model sees replaces it once the editor context is gathered).
func TestRequestStoredWithFirstEvent(t *testing.T) {
	r := newPersistentRig(t, answerStep)
	eng := r.engine(t, nil)
	ws, _ := eng.OpenWorkspace(r.dir)
	os.WriteFile(filepath.Join(r.dir, "a.go"), []byte("package a\n"), 0o644)
	sess, err := eng.NewSession(ws, "")
	if err != nil {
		t.Fatal(err)
	}
	// Another handle on the database, as another process would read it.
	reader, err := store.Open(context.Background(), r.db)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	var histories [][]engine.Message
	var kindsSeen []string
	_, err = sess.Run(context.Background(), engine.TurnInput{Message: "explain a.go", Context: &engine.TurnContext{Mentions: []engine.Mention{{Type: engine.MentionFile, Path: "a.go"}}}},
		engine.TurnOptions{OnEvent: func(e engine.Event) {
			if len(kindsSeen) >= 2 {
				return
			}
			kindsSeen = append(kindsSeen, e.Data.EventKind())
			st, err := reader.LoadSession(context.Background(), sess.ID())
			if err != nil {
				t.Error(err)
				return
			}
			histories = append(histories, st.History)
		}})
	if err != nil {
		t.Fatal(err)
	}
	if len(histories) != 2 {
		t.Fatalf("%d events seen", len(histories))
	}
	if h := histories[0]; len(h) != 1 || h[0].Role != engine.RoleUser || h[0].Content != "explain a.go" {
		t.Errorf("stored history when the first event (%s) arrived: %+v, want the request as typed", kindsSeen[0], h)
	}
	if h := histories[1]; len(h) != 1 || !strings.HasPrefix(h[0].Content, "explain a.go") || !strings.Contains(h[0].Content, "package a") {
		t.Errorf("stored history when the second event (%s) arrived: %+v, want the request with its editor context", kindsSeen[1], h)
	}
}

func TestSessionsWithoutStore(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, engine.Options{})
	if _, err := f.eng.Events(ctx, f.sess.ID(), 0, 0); !errors.Is(err, engine.ErrUnsupported) {
		t.Errorf("Events without a store: %v", err)
	}
	list, err := f.eng.Sessions(ctx, f.sess.Workspace())
	if err != nil || len(list) != 1 || list[0].ID != f.sess.ID() || list[0].WorkspaceRoot != f.sess.Workspace().Root {
		t.Errorf("Sessions = %+v, %v", list, err)
	}
	if err := f.eng.DeleteSession(ctx, f.sess.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.eng.Session(f.sess.ID()); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("Session after delete: %v", err)
	}
	if err := f.eng.DeleteSession(ctx, f.sess.ID()); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
}

func TestDecodeEvent(t *testing.T) {
	payloads := []engine.EventData{
		&engine.ThinkingEvent{Phase: engine.PhaseAnalyzing, Message: "m"},
		&engine.PlanEvent{Steps: []engine.PlanStep{{Number: 1, Description: "d", FilesInvolved: []string{"a"}}}, Rationale: "r"},
		&engine.RetrievalEvent{Stage: engine.StageTextSearch, Count: 2, Message: "m"},
		&engine.TokenEvent{Text: "t"},
		&engine.ToolCallEvent{CallID: "c", Name: "n", Args: json.RawMessage(`{"a":1}`), Status: engine.ToolCompleted, Duration: time.Second},
		&engine.ApprovalEvent{Request: engine.ApprovalRequest{ID: "apr", Tool: "t", Args: json.RawMessage(`{}`), Risk: engine.Risk{Level: engine.RiskHigh}}},
		&engine.CommandRequestEvent{Request: engine.CommandRequest{ID: "cmd", Command: "ls"}},
		&engine.PatchProposedEvent{Set: engine.PatchSet{ID: "pset", Files: []engine.FilePatch{{Path: "a", Base: []byte{0, 255}}}}, RequiresApproval: true},
		&engine.PatchResultEvent{SetID: "pset", Status: engine.PatchApplied, Applied: []string{"a"}},
		&engine.ErrorEvent{Code: engine.CodeToolError, Message: "m", Recoverable: true, Details: map[string]any{"n": 1.5}},
		&engine.FinalEvent{Status: engine.TurnCompleted, Message: "m", Metadata: engine.TurnMetadata{ToolsUsed: []string{}, Duration: time.Second}},
	}
	for _, d := range payloads {
		t.Run(d.EventKind(), func(t *testing.T) {
			data, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			got, err := engine.DecodeEvent("ses_1", engine.StoredEvent{Seq: 7, TurnID: "turn_1", Kind: d.EventKind(), Data: data})
			if err != nil {
				t.Fatal(err)
			}
			if got.Seq != 7 || got.SessionID != "ses_1" || got.TurnID != "turn_1" || !reflect.DeepEqual(got.Data, d) {
				t.Errorf("got %+v %#v, want %#v", got, got.Data, d)
			}
		})
	}
	got, err := engine.DecodeEvent("ses_1", engine.StoredEvent{Kind: "from_the_future", Data: json.RawMessage(`{"x":1}`)})
	if err != nil || got.Data.EventKind() != "from_the_future" {
		t.Fatalf("unknown kind: %+v, %v", got, err)
	}
	if b, _ := json.Marshal(got.Data); string(b) != `{"x":1}` {
		t.Errorf("unknown kind marshals to %s", b)
	}
	if _, err := engine.DecodeEvent("ses_1", engine.StoredEvent{Kind: "token", Data: json.RawMessage(`[]`)}); err == nil {
		t.Error("a token event stored as an array was decoded")
	}
}

// TestImportSession starts a session with a saved conversation: the next
// turn continues it, a restarted engine loads it, and a history with a
// system message is refused.
func TestImportSession(t *testing.T) {
	r := newPersistentRig(t, `{"text": "first"}`, `{"text": "again"}`)
	eng := r.engine(t, nil)
	ws, err := eng.OpenWorkspace(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	history := []engine.Message{{Role: engine.RoleUser, Content: "hello"}, {Role: engine.RoleAssistant, Content: "first"}}
	s, err := eng.ImportSession(ws, history)
	if err != nil {
		t.Fatal(err)
	}
	// The replay model plays line N+1 for N assistant messages: the
	// imported one makes this turn play "again".
	if res, _ := runTurn(t, s, "more"); res.Message != "again" {
		t.Errorf("turn after import: %+v", res)
	}
	loaded, err := r.engine(t, nil).Session(s.ID())
	if err != nil {
		t.Fatal(err)
	}
	if got := loaded.History(); len(got) != 4 || got[0].Content != "hello" || got[3].Content != "again" {
		t.Errorf("history after a restart: %+v", got)
	}
	if _, err := eng.ImportSession(ws, []engine.Message{{Role: engine.RoleSystem, Content: "x"}}); !errors.Is(err, engine.ErrInvalidRequest) {
		t.Errorf("system message: %v", err)
	}
}

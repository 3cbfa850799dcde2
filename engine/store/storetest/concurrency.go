package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

// Size of testConcurrentWriters: handles (processes) × writers per handle,
// each writer one session running turns of tokens events.
const (
	concHandles = 2
	concWriters = 6
	concTurns   = 4
	concTokens  = 3
)

// turnWrites writes turn k (0-based) of session id as the engine does:
// the first event with the user message, token events, the final event
// with the whole exchange. It returns the next seq.
func turnWrites(ctx context.Context, s Store, id string, k int, seq uint64) (uint64, error) {
	turn := fmt.Sprintf("turn_%s_%d", id, k)
	ev := func(kind, data string) engine.StoredEvent {
		seq++
		return engine.StoredEvent{Seq: seq, TurnID: turn, Time: time.Unix(1700000000, int64(seq)), Kind: kind, Data: json.RawMessage(data)}
	}
	from := 2 * k
	user := userMsg(fmt.Sprintf("request %d of %s", k, id))
	if err := s.AppendEventWithHistory(ctx, id, ev("thinking", `{"phase":"analyzing"}`), from, []engine.Message{user}); err != nil {
		return seq, fmt.Errorf("first event of %s: %w", turn, err)
	}
	for i := range concTokens {
		if err := s.AppendEvent(ctx, id, ev("token", fmt.Sprintf(`{"text":"t%d "}`, i))); err != nil {
			return seq, fmt.Errorf("token %d of %s: %w", i, turn, err)
		}
	}
	answer := engine.Message{Role: engine.RoleAssistant, Content: fmt.Sprintf("answer %d of %s", k, id)}
	if err := s.AppendEventWithHistory(ctx, id, ev("final", `{"status":"completed"}`), from, []engine.Message{user, answer}); err != nil {
		return seq, fmt.Errorf("final event of %s: %w", turn, err)
	}
	return seq, nil
}

// wantHistory is the history turnWrites leaves after turns turns.
func wantHistory(id string, turns int) []engine.Message {
	var out []engine.Message
	for k := range turns {
		out = append(out, userMsg(fmt.Sprintf("request %d of %s", k, id)),
			engine.Message{Role: engine.RoleAssistant, Content: fmt.Sprintf("answer %d of %s", k, id)})
	}
	return out
}

// testConcurrentWriters runs many writers on two handles at once, with
// readers beside them: every write must succeed (no "database is locked"
// reaching a caller), and a handle opened afterwards must find every
// event, in order and without gaps, and every history whole.
func testConcurrentWriters(t *testing.T, d *db) {
	handles := make([]Store, concHandles)
	for i := range handles {
		handles[i] = d.handle(t)
	}
	ctx := bg()
	var (
		mu   sync.Mutex
		errs []error
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	var ids []string
	for h := range concHandles {
		for w := range concWriters {
			ids = append(ids, fmt.Sprintf("ses_%d_%d", h, w))
		}
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for h, s := range handles {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for i := 0; ; i++ {
				// Paced, as clients read: a tight loop would only take the
				// writers' CPU.
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Millisecond):
				}
				id := ids[(h*7+i)%len(ids)]
				if _, err := s.LoadSession(ctx, id); err != nil && !errors.Is(err, engine.ErrNotFound) {
					fail(fmt.Errorf("read %s: %w", id, err))
				}
				if _, err := s.Events(ctx, id, 0, 0); err != nil && !errors.Is(err, engine.ErrNotFound) {
					fail(fmt.Errorf("read the events of %s: %w", id, err))
				}
			}
		}()
	}
	var writers sync.WaitGroup
	for h, s := range handles {
		for w := range concWriters {
			id := fmt.Sprintf("ses_%d_%d", h, w)
			writers.Add(1)
			go func() {
				defer writers.Done()
				if err := s.CreateSession(ctx, engine.SessionRecord{ID: id, WorkspaceID: "ws_1", WorkspaceRoot: "/w", Created: time.Now()}); err != nil {
					fail(err)
					return
				}
				var seq uint64
				for k := range concTurns {
					var err error
					if seq, err = turnWrites(ctx, s, id, k, seq); err != nil {
						fail(err)
						return
					}
					// The other kinds of writes contend too.
					var werr error
					switch k {
					case 0:
						werr = s.SetSessionModel(ctx, id, engine.ModelRef{Provider: "p", Name: id})
					case 1:
						werr = s.SetPolicyDoc(ctx, "ws_1", json.RawMessage(fmt.Sprintf(`{"version":1,"by":%q}`, id)))
					case 2:
						werr = s.SavePatchSet(ctx, "ws_1", &engine.PatchSet{ID: "pset_" + id})
					case 3:
						werr = s.SaveApplied(ctx, &engine.AppliedPatch{ID: "apl_" + id, SetID: "pset_" + id, Workspace: "ws_1", Time: time.Now()})
					}
					if werr != nil {
						fail(fmt.Errorf("%s: %w", id, werr))
					}
				}
				if err := s.SaveWorkspace(ctx, engine.WorkspaceRecord{ID: "ws_" + id, Root: "/w/" + id, Registered: time.Now()}); err != nil {
					fail(err)
				}
			}()
		}
	}
	writers.Wait()
	close(stop)
	readers.Wait()
	if len(errs) > 0 {
		var b strings.Builder
		for _, e := range errs[:min(len(errs), 5)] {
			b.WriteString("\n  " + e.Error())
		}
		t.Fatalf("%d of the concurrent calls failed; the first:%s", len(errs), b.String())
	}

	for _, s := range handles {
		s.Close()
	}
	s := d.handle(t)
	perTurn := uint64(concTokens + 2)
	for _, id := range ids {
		got, err := s.LoadSession(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if want := asJSON(wantHistory(id, concTurns)); asJSON(got.History) != want {
			t.Errorf("%s: history %s, want %s", id, asJSON(got.History), want)
		}
		if got.LastSeq != perTurn*concTurns || got.Turns != concTurns || got.Model.Name != id {
			t.Errorf("%s: last seq %d, %d turns, model %q; want %d, %d, %q", id, got.LastSeq, got.Turns, got.Model.Name, perTurn*concTurns, concTurns, id)
		}
		evs, err := s.Events(ctx, id, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, ev := range evs {
			if ev.Seq != uint64(i+1) {
				t.Errorf("%s: event %d has seq %d", id, i, ev.Seq)
				break
			}
		}
		if set, err := s.PatchSet(ctx, "pset_"+id); err != nil || set.ID != "pset_"+id {
			t.Errorf("%s: patch set %v, %v", id, set, err)
		}
	}
	applied, err := s.Applied(ctx, "ws_1", 0)
	if err != nil || len(applied) != len(ids) {
		t.Errorf("%d applied changes, %v; want %d", len(applied), err, len(ids))
	}
	wss, err := s.ListWorkspaces(ctx)
	if err != nil || len(wss) != len(ids) {
		t.Errorf("%d workspaces, %v; want %d", len(wss), err, len(ids))
	}
}

// testCancelledWrite checks that a write whose context has ended fails
// and stores nothing.
func testCancelledWrite(t *testing.T, d *db) {
	s := d.handle(t)
	create(t, s, "ses_1")
	ctx, cancel := context.WithCancel(bg())
	cancel()
	ev := engine.StoredEvent{Seq: 1, TurnID: "turn_1", Time: time.Now(), Kind: "token", Data: json.RawMessage(`{}`)}
	if err := s.AppendEventWithHistory(ctx, "ses_1", ev, 0, []engine.Message{userMsg("hi")}); !errors.Is(err, context.Canceled) {
		t.Errorf("write with a cancelled context: %v, want context.Canceled", err)
	}
	s = d.reopen(t, s)
	got, err := s.LoadSession(bg(), "ses_1")
	if err != nil || got.LastSeq != 0 || len(got.History) != 0 {
		t.Errorf("after a cancelled write: %+v, %v; want nothing stored", got, err)
	}
}

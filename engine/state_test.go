package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/patch"
	"github.com/plexus-agent/plexus/engine/store"
	"github.com/plexus-agent/plexus/models/replay"
	fstools "github.com/plexus-agent/plexus/tools/fs"
)

// deadStore stops storing events once dead is set, as a killed process
// would (the events delivered after are lost).
type deadStore struct {
	engine.SessionStore
	mu   sync.Mutex
	dead bool
}

func (d *deadStore) AppendEvent(ctx context.Context, id string, ev engine.StoredEvent) error {
	d.mu.Lock()
	dead := d.dead
	d.mu.Unlock()
	if dead {
		return nil
	}
	return d.SessionStore.AppendEvent(ctx, id, ev)
}

func (d *deadStore) AppendEventWithHistory(ctx context.Context, id string, ev engine.StoredEvent, from int, msgs []engine.Message) error {
	d.mu.Lock()
	dead := d.dead
	d.mu.Unlock()
	if dead {
		return nil
	}
	return d.SessionStore.AppendEventWithHistory(ctx, id, ev, from, msgs)
}

func (d *deadStore) SaveHistory(ctx context.Context, id string, from int, msgs []engine.Message) error {
	d.mu.Lock()
	dead := d.dead
	d.mu.Unlock()
	if dead {
		return nil
	}
	return d.SessionStore.SaveHistory(ctx, id, from, msgs)
}

// askingHost asks nobody: it reports each request and waits for ctx.
type askingHost struct{ asked chan engine.ApprovalRequest }

func (h *askingHost) RequestApproval(ctx context.Context, req engine.ApprovalRequest) (engine.ApprovalDecision, error) {
	h.asked <- req
	<-ctx.Done()
	return engine.ApprovalDecision{}, ctx.Err()
}

// stateRig builds engines with the file tools and the patcher on one
// database, as restarted processes would.
type stateRig struct{ root, db, script string }

func (r *stateRig) engine(t *testing.T, dead *deadStore) *engine.Engine {
	t.Helper()
	st, err := store.Open(context.Background(), r.db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var sessions engine.SessionStore = st
	if dead != nil {
		dead.SessionStore = st
		sessions = dead
	}
	eng, err := engine.New(engine.Options{
		Models: map[string]engine.Model{"replay": replay.New()}, Model: engine.ModelRef{Provider: "replay", Name: r.script},
		Tools: fstools.New(fstools.Options{}), Patcher: patch.NewPatcher(), Patches: st, Sessions: sessions,
	})
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// TestPendingPatchApprovalOutlivesItsProcess proposes a patch, "kills"
// the engine while the approval is open, and checks that a new engine
// closes the interrupted turn, still lists the approval and the patch as
// pending, and applies the patch when the approval is answered, once.
func TestPendingPatchApprovalOutlivesItsProcess(t *testing.T) {
	r := &stateRig{root: t.TempDir(), db: filepath.Join(t.TempDir(), "plexus.db"), script: filepath.Join(t.TempDir(), "s.jsonl")}
	os.WriteFile(filepath.Join(r.root, "a.txt"), []byte("one\n"), 0o644)
	os.WriteFile(r.script, []byte(`{"text": "", "tool_calls": [{"name": "update_plan", "arguments": {"steps": [{"description": "edit", "status": "completed"}, {"description": "check", "status": "in_progress"}, {"description": "report"}]}}, {"name": "edit_file", "arguments": {"path": "a.txt", "old_string": "one", "new_string": "two"}}]}`+"\n"+`{"text": "done"}`+"\n"), 0o644)

	dead := &deadStore{}
	eng := r.engine(t, dead)
	ws, _ := eng.OpenWorkspace(r.root)
	sess, err := eng.NewSession(ws, "")
	if err != nil {
		t.Fatal(err)
	}
	host := &askingHost{asked: make(chan engine.ApprovalRequest, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sess.Run(ctx, engine.TurnInput{Message: "edit"}, engine.TurnOptions{Host: host})
	}()
	req := <-host.asked
	st := sess.State()
	if len(st.PendingApprovals) != 1 || st.PendingApprovals[0] != req.ID || len(st.PendingPatches) != 1 || !st.Busy {
		t.Fatalf("state while asking: %+v", st)
	}
	if st.TotalSteps != 3 || st.CurrentStep != 2 {
		t.Errorf("steps %d/%d, want 2/3", st.CurrentStep, st.TotalSteps)
	}
	if _, err := sess.AnswerPending(context.Background(), req.ID, engine.ApprovalDecision{Approved: true}, nil); !errors.Is(err, engine.ErrInvalidRequest) {
		t.Errorf("AnswerPending during the turn: %v, want ErrInvalidRequest", err)
	}
	dead.mu.Lock()
	dead.dead = true
	dead.mu.Unlock()
	cancel()
	<-done

	eng2 := r.engine(t, nil)
	sess2, err := eng2.Session(sess.ID())
	if err != nil {
		t.Fatal(err)
	}
	st = sess2.State()
	if len(st.PendingApprovals) != 1 || st.PendingApprovals[0] != req.ID || len(st.PendingPatches) != 1 || st.Busy {
		t.Fatalf("state after the restart: %+v", st)
	}
	evs, _ := eng2.Events(context.Background(), sess.ID(), 0, 0)
	last := evs[len(evs)-1]
	if f, ok := last.Data.(*engine.FinalEvent); !ok || f.Status != engine.TurnError || !strings.Contains(f.Error, "server stopped") {
		t.Fatalf("the interrupted turn was not closed: %+v", last.Data)
	}
	var got []engine.Event
	res, err := sess2.AnswerPending(context.Background(), req.ID, engine.ApprovalDecision{Approved: true}, func(e engine.Event) { got = append(got, e) })
	if err != nil || res.Status != engine.PatchApplied {
		t.Fatalf("AnswerPending: %+v %v", res, err)
	}
	if len(got) != 2 || got[0].Data.EventKind() != "approval_result" || got[1].Data.EventKind() != "patch_result" || got[1].Seq != got[0].Seq+1 {
		t.Errorf("events of the answer: %v", got)
	}
	if data, _ := os.ReadFile(filepath.Join(r.root, "a.txt")); string(data) != "two\n" {
		t.Errorf("a.txt = %q", data)
	}
	st = sess2.State()
	if len(st.PendingApprovals) != 0 || len(st.PendingPatches) != 0 || len(st.AppliedPatches) != 1 {
		t.Errorf("state after answering: %+v", st)
	}
	if _, err := sess2.AnswerPending(context.Background(), req.ID, engine.ApprovalDecision{Approved: true}, nil); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("second answer: %v, want ErrNotFound", err)
	}
	// A third engine sees the same state, rebuilt from the events.
	sess3, err := r.engine(t, nil).Session(sess.ID())
	if err != nil {
		t.Fatal(err)
	}
	if st3 := sess3.State(); len(st3.AppliedPatches) != 1 || len(st3.PendingApprovals) != 0 || st3.LastSeq != st.LastSeq {
		t.Errorf("state in a third engine: %+v, want %+v", st3, st)
	}
}

// TestDeniedPendingPatchAndConflict answers pending approvals of ended
// turns: a denial rejects the patch; an approval of a patch whose file
// changed meanwhile is a conflict that writes nothing.
func TestDeniedPendingPatchAndConflict(t *testing.T) {
	for _, tc := range []struct {
		name     string
		approve  bool
		edit     bool
		want     string
		wantFile string
	}{
		{"denied", false, false, engine.PatchRejected, "one\n"},
		{"conflict", true, true, engine.PatchConflict, "changed by hand\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &stateRig{root: t.TempDir(), db: filepath.Join(t.TempDir(), "plexus.db"), script: filepath.Join(t.TempDir(), "s.jsonl")}
			os.WriteFile(filepath.Join(r.root, "a.txt"), []byte("one\n"), 0o644)
			os.WriteFile(r.script, []byte(`{"text": "", "tool_calls": [{"name": "edit_file", "arguments": {"path": "a.txt", "old_string": "one", "new_string": "two"}}]}`+"\n"+`{"text": "done"}`+"\n"), 0o644)
			eng := r.engine(t, nil)
			ws, _ := eng.OpenWorkspace(r.root)
			sess, _ := eng.NewSession(ws, "")
			host := &askingHost{asked: make(chan engine.ApprovalRequest, 1)}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			go func() { req := <-host.asked; host.asked <- req; cancel() }()
			sess.Run(ctx, engine.TurnInput{Message: "edit"}, engine.TurnOptions{Host: host})
			req := <-host.asked
			// The turn ended (cancelled) with the patch approval open.
			if st := sess.State(); len(st.PendingApprovals) != 1 {
				t.Fatalf("state after the cancelled turn: %+v", st)
			}
			if tc.edit {
				os.WriteFile(filepath.Join(r.root, "a.txt"), []byte("changed by hand\n"), 0o644)
			}
			res, err := sess.AnswerPending(context.Background(), req.ID, engine.ApprovalDecision{Approved: tc.approve}, nil)
			if err != nil || res.Status != tc.want {
				t.Fatalf("AnswerPending: %+v %v", res, err)
			}
			if data, _ := os.ReadFile(filepath.Join(r.root, "a.txt")); string(data) != tc.wantFile {
				t.Errorf("a.txt = %q", data)
			}
			if st := sess.State(); len(st.PendingApprovals) != 0 || len(st.PendingPatches) != 0 || len(st.AppliedPatches) != 0 {
				t.Errorf("state: %+v", st)
			}
		})
	}
}

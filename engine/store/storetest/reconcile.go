package storetest

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/plexus-agent/plexus/engine"
)

// echoModel answers "answer to: MESSAGE" to the last user message. A
// message starting with "block" gets one token, then the call waits for
// its context to end: a turn that never finishes.
type echoModel struct {
	mu   sync.Mutex
	seen [][]engine.Message // the messages of each call
	// blocked receives a value when a call starts waiting.
	blocked chan struct{}
}

var _ engine.Model = (*echoModel)(nil)

func newEchoModel() *echoModel { return &echoModel{blocked: make(chan struct{}, 1)} }

func (m *echoModel) ListModels(context.Context) ([]engine.ModelInfo, error) {
	return []engine.ModelInfo{{Name: "m"}}, nil
}

func (m *echoModel) Embed(context.Context, engine.EmbedRequest) (engine.EmbedResponse, error) {
	return engine.EmbedResponse{}, engine.ErrUnsupported
}

func (m *echoModel) Chat(ctx context.Context, req engine.ChatRequest, onChunk func(engine.ChatChunk) error) error {
	m.mu.Lock()
	m.seen = append(m.seen, req.Messages)
	m.mu.Unlock()
	last := ""
	for _, msg := range req.Messages {
		if msg.Role == engine.RoleUser {
			last = msg.Content
		}
	}
	if strings.HasPrefix(last, "block") {
		if err := onChunk(engine.ChatChunk{Text: "partial "}); err != nil {
			return err
		}
		m.blocked <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}
	return onChunk(engine.ChatChunk{Text: "answer to: " + last})
}

// lastCall returns the messages of the model's last call.
func (m *echoModel) lastCall() []engine.Message {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seen[len(m.seen)-1]
}

func newEngine(t *testing.T, s Store, m engine.Model) *engine.Engine {
	t.Helper()
	eng, err := engine.New(engine.Options{
		Models: map[string]engine.Model{"echo": m}, Model: engine.ModelRef{Provider: "echo", Name: "m"},
		Sessions: s, Workspaces: s, Patches: s,
	})
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// contents lists the roles and contents of msgs, without the system
// messages.
func contents(msgs []engine.Message) []string {
	var out []string
	for _, m := range msgs {
		if m.Role != engine.RoleSystem {
			out = append(out, string(m.Role)+": "+m.Content)
		}
	}
	return out
}

// testReconcile runs an engine on the store, stops it in the middle of a
// turn (its handle closes, as the process's would when killed), and
// checks what an engine on a new handle finds: the turn closed with
// status error, its user message kept, every event the first engine
// delivered stored, and the session serving a new turn whose model sees
// the interrupted request.
func testReconcile(t *testing.T, d *db) {
	ctx := bg()
	s1 := d.handle(t)
	m1 := newEchoModel()
	eng1 := newEngine(t, s1, m1)
	ws, err := eng1.OpenWorkspace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sess, err := eng1.NewSession(ws, "")
	if err != nil {
		t.Fatal(err)
	}
	if res, err := sess.Run(ctx, engine.TurnInput{Message: "first"}, engine.TurnOptions{}); err != nil || res.Status != engine.TurnCompleted {
		t.Fatalf("first turn: %+v, %v", res, err)
	}

	var (
		mu        sync.Mutex
		delivered []engine.Event
	)
	tctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sess.Run(tctx, engine.TurnInput{Message: "block: second"}, engine.TurnOptions{OnEvent: func(e engine.Event) {
			mu.Lock()
			delivered = append(delivered, e)
			mu.Unlock()
		}})
	}()
	t.Cleanup(func() { cancel(); <-done })
	<-m1.blocked
	// The process dies: nothing it does from here on is stored.
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	seen := append([]engine.Event(nil), delivered...)
	mu.Unlock()
	if len(seen) == 0 {
		t.Fatal("the interrupted turn delivered no event")
	}
	interrupted := seen[0].TurnID

	s2 := d.handle(t)
	m2 := newEchoModel()
	eng2 := newEngine(t, s2, m2)
	sess2, err := eng2.Session(sess.ID())
	if err != nil {
		t.Fatal(err)
	}
	wantHist := []string{"user: first", "assistant: answer to: first", "user: block: second"}
	if got := contents(sess2.History()); strings.Join(got, "|") != strings.Join(wantHist, "|") {
		t.Errorf("history after the restart: %q, want %q (the interrupted turn's request kept)", got, wantHist)
	}
	evs, err := eng2.Events(ctx, sess.ID(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[uint64]engine.Event{}
	for _, e := range evs {
		stored[e.Seq] = e
	}
	for _, e := range seen {
		if got, ok := stored[e.Seq]; !ok || got.TurnID != e.TurnID || got.Data.EventKind() != e.Data.EventKind() {
			t.Errorf("delivered event %d (%s) is not stored as delivered", e.Seq, e.Data.EventKind())
		}
	}
	last := evs[len(evs)-1]
	fin, ok := last.Data.(*engine.FinalEvent)
	if !ok || last.TurnID != interrupted || fin.Status != engine.TurnError || !strings.Contains(fin.Error, "stopped") {
		t.Fatalf("the interrupted turn was not closed: last event %d %s %+v", last.Seq, last.TurnID, last.Data)
	}
	if st := sess2.State(); st.Busy || st.LastSeq != last.Seq {
		t.Errorf("state after the restart: %+v", st)
	}

	// The session serves again, and its model sees the unanswered request.
	res, err := sess2.Run(ctx, engine.TurnInput{Message: "third"}, engine.TurnOptions{})
	if err != nil || res.Status != engine.TurnCompleted {
		t.Fatalf("turn after the restart: %+v, %v", res, err)
	}
	wantCall := append(wantHist, "user: third")
	if got := contents(m2.lastCall()); strings.Join(got, "|") != strings.Join(wantCall, "|") {
		t.Errorf("the model saw %q, want %q", got, wantCall)
	}
	s3 := d.reopen(t, s2)
	got, err := s3.LoadSession(ctx, sess.ID())
	if err != nil {
		t.Fatal(err)
	}
	wantHist = append(wantCall, "assistant: answer to: third")
	if h := contents(got.History); strings.Join(h, "|") != strings.Join(wantHist, "|") {
		t.Errorf("stored history: %q, want %q", h, wantHist)
	}
	if got.Turns != 3 {
		t.Errorf("%d finished turns stored, want 3", got.Turns)
	}
}

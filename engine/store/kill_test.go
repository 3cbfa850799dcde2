package store_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/store"
)

// killChildEnv names the database a re-executed test binary writes to
// until it is killed.
const killChildEnv = "PLEXUS_STORE_KILL_DB"

// killSessions is how many sessions the child writes at once.
const killSessions = 6

// TestSIGKILLDuringWrites kills a process writing to the store from many
// goroutines at 20 seeded random points. After each kill, every write
// whose call returned nil is there: each session's events are a prefix
// 1..N of what was written (no hole), N at least the last acknowledged,
// and its history holds the turns its final events acknowledge.
func TestSIGKILLDuringWrites(t *testing.T) {
	if db := os.Getenv(killChildEnv); db != "" {
		writeUntilKilled(t, db)
		return
	}
	if testing.Short() {
		t.Skip("kills a child process 20 times")
	}
	db := filepath.Join(t.TempDir(), "plexus.db")
	rng := rand.New(rand.NewPCG(14, 1))
	acked := map[string]uint64{} // session -> highest seq acknowledged
	for round := range 20 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSIGKILLDuringWrites$", "-test.count=1")
		cmd.Env = append(os.Environ(), killChildEnv+"="+db)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 1<<14)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		if l := <-lines; l != "ready" {
			t.Fatalf("round %d: child said %q\n%s", round, l, stderr.String())
		}
		time.Sleep(time.Duration(5+rng.IntN(150)) * time.Millisecond)
		cmd.Process.Kill()
		cmd.Wait()
		for l := range lines {
			var id string
			var seq uint64
			if _, err := fmt.Sscanf(l, "ack %s %d", &id, &seq); err == nil && seq > acked[id] {
				acked[id] = seq
			}
		}
		st, err := store.Open(context.Background(), db)
		if err != nil {
			t.Fatalf("round %d: reopen after the kill: %v", round, err)
		}
		for id, want := range acked {
			evs, err := st.Events(context.Background(), id, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			finals := 0
			for i, ev := range evs {
				if ev.Seq != uint64(i+1) {
					t.Fatalf("round %d: session %s has event %d at position %d: a hole", round, id, ev.Seq, i+1)
				}
				if ev.Kind == "final" {
					finals++
				}
			}
			if n := uint64(len(evs)); n < want {
				t.Fatalf("round %d: session %s has %d events, %d were acknowledged", round, id, n, want)
			}
			s, err := st.LoadSession(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			// Each acknowledged final stored the whole turn: request and
			// answer, in order.
			for k := range finals {
				if len(s.History) < 2*(k+1) || s.History[2*k].Content != fmt.Sprintf("request %d", k) || s.History[2*k+1].Content != fmt.Sprintf("answer %d", k) {
					t.Fatalf("round %d: session %s: the history lacks turn %d of its %d finished turns: %+v", round, id, k, finals, s.History)
				}
			}
		}
		st.Close()
	}
	total := uint64(0)
	for _, n := range acked {
		total += n
	}
	t.Logf("20 kills: %d events acknowledged in %d sessions, all stored, none out of place", total, len(acked))
}

// writeUntilKilled runs killSessions writers, each continuing its own
// session from what is stored, as the engine writes turns: the first
// event with the request, tokens, the final event with the answer; it
// prints "ack SESSION SEQ" after each write returned.
func writeUntilKilled(t *testing.T, db string) {
	ctx := context.Background()
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	ack := func(id string, seq uint64) {
		mu.Lock()
		fmt.Println("ack " + id + " " + strconv.FormatUint(seq, 10))
		mu.Unlock()
	}
	fmt.Println("ready")
	var wg sync.WaitGroup
	for w := range killSessions {
		id := fmt.Sprintf("ses_%d", w)
		wg.Go(func() {
			s, err := st.LoadSession(ctx, id)
			if err != nil {
				if err := st.CreateSession(ctx, engine.SessionRecord{ID: id, WorkspaceID: "ws", WorkspaceRoot: "/w", Created: time.Now()}); err != nil {
					t.Error(err)
					return
				}
				s = &engine.StoredSession{}
			}
			seq, turn := s.LastSeq, len(s.History)/2
			// A turn the kill interrupted left its request: start over.
			for {
				ev := func(kind string) engine.StoredEvent {
					seq++
					return engine.StoredEvent{Seq: seq, TurnID: fmt.Sprint("turn_", turn), Time: time.Now(), Kind: kind, Data: json.RawMessage(`{}`)}
				}
				user := engine.Message{Role: engine.RoleUser, Content: fmt.Sprintf("request %d", turn)}
				if err := st.AppendEventWithHistory(ctx, id, ev("thinking"), 2*turn, []engine.Message{user}); err != nil {
					t.Error(err)
					return
				}
				ack(id, seq)
				for range 3 {
					if err := st.AppendEvent(ctx, id, ev("token")); err != nil {
						t.Error(err)
						return
					}
					ack(id, seq)
				}
				answer := engine.Message{Role: engine.RoleAssistant, Content: fmt.Sprintf("answer %d", turn)}
				if err := st.AppendEventWithHistory(ctx, id, ev("final"), 2*turn, []engine.Message{user, answer}); err != nil {
					t.Error(err)
					return
				}
				ack(id, seq)
				turn++
			}
		})
	}
	wg.Wait()
}

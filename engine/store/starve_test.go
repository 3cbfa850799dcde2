package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/store"
)

// TestBusyWriterDoesNotStarveAnother: one handle (a process) commits back
// to back from many goroutines while another writes now and then; the
// second's writes all succeed (SQLite's write lock has no queue, and
// without the turnstile the busy one could keep it until the other gave
// up with ErrBusy).
func TestBusyWriterDoesNotStarveAnother(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "plexus.db")
	busy, quiet := openHandle(t, path), openHandle(t, path)
	for _, id := range []string{"busy", "quiet"} {
		if err := busy.CreateSession(ctx, engine.SessionRecord{ID: id, WorkspaceID: "ws", Created: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	var seq atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ev := engine.StoredEvent{Seq: seq.Add(1), Kind: "token", Time: time.Now(), Data: json.RawMessage(`{}`)}
				if err := busy.AppendEvent(ctx, "busy", ev); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for i := range 40 {
		ev := engine.StoredEvent{Seq: uint64(i + 1), Kind: "token", Time: time.Now(), Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
		if err := quiet.AppendEvent(ctx, "quiet", ev); err != nil {
			t.Errorf("write %d of the quiet handle: %v", i, err)
			break
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("the busy handle wrote %d events meanwhile", seq.Load())
}

func openHandle(t *testing.T, path string) *store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

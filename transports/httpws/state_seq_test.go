package httpws

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/plexus-agent/plexus/engine"
)

// TestStateLastSeqNeverAheadOfDelivery: State().LastSeq, where a stream
// without since starts, never names an event still being delivered.
func TestStateLastSeqNeverAheadOfDelivery(t *testing.T) {
	_, _, ss := loadEngine(t, 20000, 1)
	s := ss[0]
	var delivered atomic.Uint64
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(context.Background(), engine.TurnInput{Message: "go"}, engine.TurnOptions{OnEvent: func(ev engine.Event) { delivered.Store(ev.Seq) }})
	}()
	ahead, n := 0, 0
	for {
		select {
		case <-done:
			t.Logf("State().LastSeq ahead of the last delivered event in %d of %d calls", ahead, n)
			if ahead > 0 {
				t.Fail()
			}
			return
		default:
		}
		st := s.State()
		if st.LastSeq > delivered.Load() {
			ahead++
		}
		n++
	}
}

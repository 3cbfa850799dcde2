package faultsuite_test

import (
	"fmt"
	"testing"

	"github.com/plexus-agent/plexus/internal/faultsuite"
)

// TestLoadWebSocket100 runs 100 WebSocket sessions of 3 turns each at
// once with the npm ws client (issue 14, "Done when"): no server.error,
// no failed turn, no sequence gap; then a SIGTERM restart keeps every
// session's history and last sequence number exactly.
func TestLoadWebSocket100(t *testing.T) {
	r := faultsuite.NewLoadRig(t, bin, options(t))
	res, err := r.Round(100, 3)
	t.Logf("100 sessions x 3 turns: %d turns in %d ms (%.1f turns/s), first token p50 %.1f ms p99 %.1f ms",
		res.Turns, res.ElapsedMS, res.TurnsPerS, res.FirstTokenMS.P50, res.FirstTokenMS.P99)
	if err != nil || res.Turns != 300 || res.ServerErrors != 0 || res.FailedTurns != 0 || res.SeqGaps != 0 {
		t.Fatalf("%d turns, %d failed, %d server.error, %d gaps (%v); problems: %q", res.Turns, res.FailedTurns, res.ServerErrors, res.SeqGaps, err, res.Problems)
	}
	before := map[string]faultsuite.Session{}
	for _, s := range res.Sessions {
		got := r.Session(s.ID)
		if got.LastSeq != s.LastSeq {
			t.Errorf("session %s: last_seq %d, the client saw %d", s.ID, got.LastSeq, s.LastSeq)
		}
		before[s.ID] = got
	}
	r.Stop()
	r.Serve()
	for id, want := range before {
		got := r.Session(id)
		if got != want {
			t.Errorf("session %s changed across the restart: last_seq %d -> %d, messages\n%s\n->\n%s", id, want.LastSeq, got.LastSeq, want.Messages, got.Messages)
		}
	}
	r.Stop()
}

// BenchmarkWebSocketTurns measures what a client of plexus serve
// --transport http sees: turns per second and the time from sending a
// message to its first assistant.token (p50, p99), with 1, 20 and 100
// sessions at once, 3 turns each, through the npm ws client
// (examples/clients/ws-node/load.mjs) against the real binary and the
// replay model (so the figures are the engine's, the store's and the
// transport's, not a model's).
//
//	go test -run '^$' -bench WebSocketTurns -benchtime 3x ./internal/faultsuite
func BenchmarkWebSocketTurns(b *testing.B) {
	for _, n := range []int{1, 20, 100} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			o, err := faultsuite.OptionsFromEnv()
			if err != nil {
				b.Fatal(err)
			}
			r := faultsuite.NewLoadRig(b, bin, o)
			var turns, elapsed float64
			var p50, p99 []float64
			b.ResetTimer()
			for range b.N {
				res, err := r.Round(n, 3)
				if err != nil {
					b.Fatalf("%v: %q", err, res.Problems)
				}
				turns += float64(res.Turns)
				elapsed += float64(res.ElapsedMS) / 1000
				p50 = append(p50, res.FirstTokenMS.P50)
				p99 = append(p99, res.FirstTokenMS.P99)
			}
			b.StopTimer()
			b.ReportMetric(turns/elapsed, "turns/s")
			b.ReportMetric(median(p50), "p50-first-token-ms")
			b.ReportMetric(median(p99), "p99-first-token-ms")
			r.Stop()
		})
	}
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}

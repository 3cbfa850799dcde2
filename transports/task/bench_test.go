package task

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkProcess posts general tasks from parallel clients to a server
// on the replay model and reports requests per second and the p50 and p99
// latency of one request. Each request runs one engine turn and appends
// one fsynced, signed receipt. The peer, "health", is a GET /health on the
// same server and client: the cost of the HTTP round trip alone.
func BenchmarkProcess(b *testing.B) {
	r := newRig(b, rigConfig{})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var n atomic.Int64
	run := func(b *testing.B, do func() (*http.Response, error)) {
		var mu sync.Mutex
		var lat []time.Duration
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			var mine []time.Duration
			defer func() { mu.Lock(); lat = append(lat, mine...); mu.Unlock() }()
			for pb.Next() {
				start := time.Now()
				resp, err := do()
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mine = append(mine, time.Since(start))
				if resp.StatusCode != http.StatusOK {
					b.Errorf("status %d", resp.StatusCode)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		if len(lat) > 0 {
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)*50/100].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[min(len(lat)*99/100, len(lat)-1)].Microseconds())/1000, "p99-ms")
		}
	}
	b.Run("process", func(b *testing.B) {
		run(b, func() (*http.Response, error) {
			body := taskBody(fmt.Sprintf("bench-%d", n.Add(1)), "medium", "")
			return client.Post(r.ts.URL+ProcessPath, "application/json", strings.NewReader(body))
		})
	})
	b.Run("health", func(b *testing.B) {
		run(b, func() (*http.Response, error) { return client.Get(r.ts.URL + HealthPath) })
	})
}

package unixrpc_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

// BenchmarkHandshake measures connect → initialize result on a real
// socket, reporting the median and 99th percentile in milliseconds (the
// contract's target is under 50 ms).
func BenchmarkHandshake(b *testing.B) {
	e := newMemEnv(b)
	params, _ := json.Marshal(initParams)
	req := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":` + string(params) + "}\n")
	durs := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		nc, err := net.Dial("unix", e.sock)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := nc.Write(req); err != nil {
			b.Fatal(err)
		}
		line, err := bufio.NewReader(nc).ReadBytes('\n')
		durs = append(durs, time.Since(start))
		if err != nil || !strings.Contains(string(line), `"status":"ready"`) {
			b.Fatalf("initialize: %v %s", err, line)
		}
		nc.Close()
	}
	b.StopTimer()
	slices.Sort(durs)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(durs[len(durs)/2]), "p50-ms")
	b.ReportMetric(ms(durs[len(durs)*99/100]), "p99-ms")
}

// BenchmarkTokens measures tokens per second of a streamed answer
// through the socket (query sent → stream.complete read, every token
// decoded by the client) and, as the peer, through the engine alone
// (Session.Run counting TokenEvents), with the same scripted model.
func BenchmarkTokens(b *testing.B) {
	const n = 5000
	chunks := make([]string, n)
	for i := range chunks {
		chunks[i] = "tok "
	}
	b.Run("socket", func(b *testing.B) {
		e := newMemEnv(b)
		e.model.set("stream", step{chunks: chunks})
		c := dialRaw(b, e.sock)
		c.call(b, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocol_version":"1.0.0"}}`)
		tokens, messages := 0, 0
		var total time.Duration
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			start := time.Now()
			c.write(b, `{"jsonrpc":"2.0","id":2,"method":"agent.query","params":{"message":"stream"}}`)
			for {
				c.nc.SetReadDeadline(time.Now().Add(waitTimeout))
				line, err := c.r.ReadBytes('\n')
				if err != nil {
					b.Fatal(err)
				}
				var m struct {
					Method string `json:"method"`
					Params struct {
						Status string            `json:"status"`
						Tokens []json.RawMessage `json:"tokens"`
					} `json:"params"`
				}
				json.Unmarshal(line, &m)
				messages++
				switch m.Method {
				case "stream.token":
					tokens++
				case "stream.tokens":
					tokens += len(m.Params.Tokens)
				}
				if m.Method == "stream.complete" {
					if m.Params.Status != "success" {
						b.Fatalf("query: %s", line)
					}
					break
				}
			}
			total += time.Since(start)
		}
		b.StopTimer()
		if tokens != n*b.N {
			b.Fatalf("%d tokens arrived, want %d", tokens, n*b.N)
		}
		b.ReportMetric(float64(tokens)/total.Seconds(), "tokens/s")
		b.ReportMetric(float64(tokens)/float64(messages), "tokens/msg")
	})
	b.Run("engine", func(b *testing.B) {
		e := newMemEnv(b)
		e.model.set("stream", step{chunks: chunks})
		sess, err := e.eng.NewSession(mustWorkspace(b, e), "")
		if err != nil {
			b.Fatal(err)
		}
		tokens := 0
		var total time.Duration
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			start := time.Now()
			res, err := sess.Run(context.Background(), engine.TurnInput{Message: "stream"}, engine.TurnOptions{OnEvent: func(ev engine.Event) {
				if _, ok := ev.Data.(*engine.TokenEvent); ok {
					tokens++
				}
			}})
			if err != nil || res.Status != engine.TurnCompleted {
				b.Fatalf("turn: %v %v", err, res)
			}
			total += time.Since(start)
		}
		b.StopTimer()
		b.ReportMetric(float64(tokens)/total.Seconds(), "tokens/s")
	})
}

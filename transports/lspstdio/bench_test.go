package lspstdio

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/creachadair/jrpc2/channel"

	"github.com/plexus-agent/plexus/engine"
)

// benchTokens is the length of each benchmark task's answer, in tokens.
const benchTokens = 2000

// tokenModel streams benchTokens tokens for every call, as fast as the
// engine takes them.
type tokenModel struct{}

func (tokenModel) ListModels(context.Context) ([]engine.ModelInfo, error) {
	return []engine.ModelInfo{{Name: "test"}}, nil
}

func (tokenModel) Embed(context.Context, engine.EmbedRequest) (engine.EmbedResponse, error) {
	return engine.EmbedResponse{}, engine.ErrUnsupported
}

func (tokenModel) Chat(ctx context.Context, _ engine.ChatRequest, onChunk func(engine.ChatChunk) error) error {
	for i := range benchTokens {
		if err := onChunk(engine.ChatChunk{Text: fmt.Sprintf("tok%d ", i)}); err != nil {
			return err
		}
	}
	return onChunk(engine.ChatChunk{Usage: &engine.Usage{CompletionTokens: benchTokens}, DoneReason: "stop"})
}

// BenchmarkTokens measures tokens per second through the front-end: one
// task per iteration streams benchTokens tokens as $/partialResult
// notifications over an OS pipe to a client that reads every frame and
// decodes every message (as vscode-jsonrpc does), until the task's result.
// engine-only is the peer: the same turns through Session.Run with an
// OnEvent that counts the tokens, no server, no pipe.
func BenchmarkTokens(b *testing.B) {
	b.Run("frontend", benchFrontend)
	b.Run("engine-only", benchEngineOnly)
}

func benchFrontend(b *testing.B) {
	eng, ws := newEngine(b, tokenModel{})
	// OS pipes, as the stdio of a spawned process.
	inR, inW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	defer outR.Close()
	defer outW.Close()
	defer inR.Close()
	done := make(chan error, 1)
	go func() { done <- New(Options{Engine: eng, Workspace: ws}).Serve(context.Background(), inR, outW) }()
	ch := channel.LSP(outR, inW)
	send := func(s string) {
		if err := ch.Send([]byte(s)); err != nil {
			b.Fatal(err)
		}
	}
	// next reads messages until the response to id, counting tokens.
	next := func(id int) (tokens int) {
		for {
			raw, err := ch.Recv()
			if err != nil {
				b.Fatal(err)
			}
			var m struct {
				ID     *int `json:"id"`
				Method string
				Params struct {
					Type    string `json:"type"`
					Content string `json:"content"`
				} `json:"params"`
				Result *taskResult `json:"result"`
			}
			if err := json.Unmarshal(raw, &m); err != nil {
				b.Fatal(err)
			}
			switch {
			case m.Method == "$/partialResult" && m.Params.Type == "text":
				tokens++
			case m.Method == "" && m.ID != nil && *m.ID == id:
				if m.Result == nil || m.Result.Status != "completed" {
					b.Fatalf("task %d: %s", id, raw)
				}
				return tokens
			}
		}
	}
	send(`{"jsonrpc":"2.0","method":"initialize","params":{"initialConfig":{},"workspaceRoot":null,"environment":{}}}`)
	b.ReportAllocs()
	b.ResetTimer()
	began := time.Now()
	total := 0
	for i := range b.N {
		send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"executeTask","params":{"taskId":"t%d","prompt":"Stream.","context":null}}`, i+1, i))
		if n := next(i + 1); n != benchTokens {
			b.Fatalf("task %d: %d tokens, want %d", i, n, benchTokens)
		}
		total += benchTokens
	}
	b.ReportMetric(float64(total)/time.Since(began).Seconds(), "tokens/s")
	b.StopTimer()
	inW.Close()
	go io.Copy(io.Discard, outR)
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

func benchEngineOnly(b *testing.B) {
	eng, ws := newEngine(b, tokenModel{})
	sess, err := eng.NewSession(ws, "")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	began := time.Now()
	total := 0
	for range b.N {
		n := 0
		res, err := sess.Run(context.Background(), engine.TurnInput{Message: "Stream."}, engine.TurnOptions{
			OnEvent: func(ev engine.Event) {
				if _, ok := ev.Data.(*engine.TokenEvent); ok {
					n++
				}
			},
		})
		if err != nil || res.Status != engine.TurnCompleted || n != benchTokens {
			b.Fatalf("turn %v %+v, %d tokens", err, res, n)
		}
		total += n
	}
	b.ReportMetric(float64(total)/time.Since(began).Seconds(), "tokens/s")
}

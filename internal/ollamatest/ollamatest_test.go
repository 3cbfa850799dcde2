package ollamatest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
)

func TestMain(m *testing.M) { Main(m) }

func TestModelFileIsDeterministic(t *testing.T) {
	dir := t.TempDir()
	for _, spec := range []modelSpec{{name: "a"}, {name: "b", embedding: true}} {
		a, b := filepath.Join(dir, "a.gguf"), filepath.Join(dir, "b.gguf")
		if err := writeModel(a, spec); err != nil {
			t.Fatal(err)
		}
		if err := writeModel(b, spec); err != nil {
			t.Fatal(err)
		}
		da, _ := os.ReadFile(a)
		db, _ := os.ReadFile(b)
		if !bytes.Equal(da, db) {
			t.Errorf("spec %+v: two writes differ", spec)
		}
		if !bytes.HasPrefix(da, []byte("GGUF")) {
			t.Errorf("spec %+v: file starts %q, want GGUF", spec, da[:4])
		}
		if len(da) > 1<<20 {
			t.Errorf("spec %+v: model is %d bytes, want under 1 MB", spec, len(da))
		}
	}
}

func TestVocabularyHasNoDuplicates(t *testing.T) {
	// A duplicate token makes llama.cpp abort the whole server.
	tokens, scores, types := vocabulary()
	if len(scores) != len(tokens) || len(types) != len(tokens) {
		t.Fatalf("%d tokens, %d scores, %d types", len(tokens), len(scores), len(types))
	}
	seen := map[string]int{}
	for i, tok := range tokens {
		if j, ok := seen[tok]; ok {
			t.Errorf("token %q at %d and %d", tok, j, i)
		}
		seen[tok] = i
	}
	for _, w := range replyChain {
		if _, ok := seen[w]; !ok {
			t.Errorf("reply token %q is not in the vocabulary", w)
		}
	}
}

// recordingTB records Skip and Fatal instead of ending a real test; both
// end the calling goroutine as the real ones do.
type recordingTB struct {
	testing.TB
	skipped, failed string
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Skipf(format string, args ...any) {
	r.skipped = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *recordingTB) Fatal(args ...any) {
	r.failed = fmt.Sprint(args...)
	runtime.Goexit()
}

func runStart(t *testing.T) *recordingTB {
	rec := &recordingTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s := Start(rec)
		t.Errorf("Start returned a server at %s; want skip or failure", s.URL)
	}()
	<-done
	return rec
}

func TestMissingBinary(t *testing.T) {
	empty := t.TempDir()
	t.Setenv("PATH", empty) // no ollama, and no go to ask for GOPATH
	t.Setenv("GOBIN", "")
	t.Setenv("GOPATH", empty)

	t.Run("skips", func(t *testing.T) {
		t.Setenv(EnvRequire, "")
		rec := runStart(t)
		if rec.failed != "" {
			t.Fatalf("failed with %q, want skip", rec.failed)
		}
		for _, want := range []string{InstallCommand, filepath.Join(empty, "bin"), EnvRequire + "=1"} {
			if !strings.Contains(rec.skipped, want) {
				t.Errorf("skip message %q does not contain %q", rec.skipped, want)
			}
		}
	})
	t.Run("fails when required", func(t *testing.T) {
		t.Setenv(EnvRequire, "1")
		rec := runStart(t)
		if rec.skipped != "" || !strings.Contains(rec.failed, InstallCommand) {
			t.Errorf("skipped %q, failed %q; want a failure naming the install command", rec.skipped, rec.failed)
		}
	})
}

func TestShared(t *testing.T) {
	a := Shared(t)
	b := Shared(t)
	if a != b {
		t.Fatalf("Shared returned two servers, %s and %s", a.URL, b.URL)
	}
	if !strings.HasPrefix(a.URL, "http://127.0.0.1:") {
		t.Errorf("URL = %q, want http://127.0.0.1:PORT", a.URL)
	}
	if _, err := a.Client().Version(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestServer checks a server from Start end to end, then that stopping it
// left no process and no files behind.
func TestServer(t *testing.T) {
	var (
		pgid int
		dir  string
	)
	t.Run("serve", func(t *testing.T) {
		s := Start(t)
		pgid, dir = s.proc.pgid, s.dir
		t.Logf("Ollama %s at %s", s.Version, s.URL)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		client := s.Client()

		t.Run("models", func(t *testing.T) {
			list, err := client.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, m := range list.Models {
				names = append(names, m.Name)
			}
			slices.Sort(names)
			if want := []string{ChatModel, EmbedModel, ToolsModel}; !slices.Equal(names, want) {
				t.Fatalf("models = %v, want %v", names, want)
			}
			for _, tc := range []struct {
				model string
				want  []string
			}{
				{ToolsModel, []string{"completion", "tools"}},
				{ChatModel, []string{"completion"}},
				{EmbedModel, []string{"embedding"}},
			} {
				show, err := client.Show(ctx, &api.ShowRequest{Model: tc.model})
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, c := range show.Capabilities {
					got = append(got, string(c))
				}
				slices.Sort(got)
				if !slices.Equal(got, tc.want) {
					t.Errorf("%s: capabilities %v, want %v", tc.model, got, tc.want)
				}
				if n, _ := show.ModelInfo["llama.context_length"].(float64); n != ContextLength {
					t.Errorf("%s: llama.context_length = %v, want %d", tc.model, show.ModelInfo["llama.context_length"], ContextLength)
				}
			}
		})

		t.Run("greedy reply", func(t *testing.T) {
			var text strings.Builder
			var last api.ChatResponse
			err := client.Chat(ctx, &api.ChatRequest{
				Model:    ChatModel,
				Messages: []api.Message{{Role: "user", Content: "Say hello."}},
				Options:  map[string]any{"temperature": 0, "num_predict": 32},
			}, func(r api.ChatResponse) error {
				text.WriteString(r.Message.Content)
				last = r
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if text.String() != Reply || last.DoneReason != "stop" {
				t.Errorf("reply %q (done_reason %q), want %q (stop)", text.String(), last.DoneReason, Reply)
			}
		})

		t.Run("tool call", func(t *testing.T) {
			params := api.NewToolPropertiesMap()
			params.Set("city", api.ToolProperty{Type: api.PropertyType{"string"}, Description: "City name"})
			format := ToolCallFormat(json.RawMessage(`{"type":"object","required":["city"],"properties":{"city":{"type":"string"}}}`), "get_weather")
			stream := false
			var resp api.ChatResponse
			err := client.Chat(ctx, &api.ChatRequest{
				Model:    ToolsModel,
				Messages: []api.Message{{Role: "user", Content: "Weather in Paris?"}},
				Tools: api.Tools{{Type: "function", Function: api.ToolFunction{
					Name: "get_weather", Description: "Current weather",
					Parameters: api.ToolFunctionParameters{Type: "object", Required: []string{"city"}, Properties: params},
				}}},
				Format:  format,
				Stream:  &stream,
				Options: map[string]any{"temperature": 0, "num_predict": 96},
			}, func(r api.ChatResponse) error { resp = r; return nil })
			if err != nil {
				t.Fatal(err)
			}
			calls := resp.Message.ToolCalls
			if len(calls) != 1 || calls[0].Function.Name != "get_weather" {
				t.Fatalf("tool calls %+v (content %q), want one get_weather call", calls, resp.Message.Content)
			}
			if city, _ := calls[0].Function.Arguments.Get("city"); city != strings.TrimSpace(Reply) && city != Reply {
				t.Errorf("city = %#v, want %q", city, Reply)
			}
		})

		t.Run("embeddings", func(t *testing.T) {
			resp, err := client.Embed(ctx, &api.EmbedRequest{Model: EmbedModel, Input: []string{"alpha", "a longer text about beta"}})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Embeddings) != 2 {
				t.Fatalf("%d vectors, want 2", len(resp.Embeddings))
			}
			var dot float64
			for i, v := range resp.Embeddings {
				if len(v) != EmbeddingLength {
					t.Fatalf("vector %d has %d floats, want %d", i, len(v), EmbeddingLength)
				}
			}
			for j := range EmbeddingLength {
				dot += float64(resp.Embeddings[0][j]) * float64(resp.Embeddings[1][j])
			}
			if math.Abs(dot) > 0.99 {
				t.Errorf("the two texts' unit vectors have cosine %.4f; want them distinguishable", dot)
			}
		})

		// The runners the calls above started are in the server's process
		// group, which is what Stop checks is empty.
		members, err := liveGroupMembers(pgid)
		if err != nil || len(members) < 3 {
			t.Errorf("process group %d has %v (err %v); want ollama serve and its runners", pgid, members, err)
		}
	})
	if pgid == 0 {
		return // skipped, or failed to start
	}
	// The subtest's cleanup stopped the server.
	if left, err := liveGroupMembers(pgid); err != nil || len(left) != 0 {
		t.Errorf("after Stop, process group %d has %v (err %v); want none", pgid, left, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("server directory %s still exists after Stop (stat err %v)", dir, err)
	}
}

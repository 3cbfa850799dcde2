package ndjson

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

var update = flag.Bool("update", false, "rewrite the golden transcripts in testdata")

var (
	timestampRE = regexp.MustCompile(`"timestamp":\d+`)
	uptimeRE    = regexp.MustCompile(`"uptime":\d+`)
)

// normalise zeroes timestamps and uptimes, the only values that change
// from run to run.
func normalise(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		l = timestampRE.ReplaceAllString(l, `"timestamp":0`)
		l = uptimeRE.ReplaceAllString(l, `"uptime":0`)
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// TestGolden feeds testdata/NAME.in to Serve, lets the input end and
// compares the output with testdata/NAME.golden (timestamps normalised).
// Each file's requests are answered in a deterministic order: turns of one
// conversation run in sequence and invalid requests are answered inline.
func TestGolden(t *testing.T) {
	tests := []struct {
		name  string
		opts  func(*Options)
		check func(t *testing.T, rs []resp, model *scriptModel, logs string)
	}{
		{name: "turns", check: checkTurns},
		{name: "approve_all", opts: func(o *Options) { o.ApproveAll = true }},
		{name: "invalid", check: func(t *testing.T, rs []resp, _ *scriptModel, logs string) {
			for _, want := range []string{`msg="malformed JSON; line skipped" line=1`, `msg="malformed JSON; line skipped" line=2`} {
				if !strings.Contains(logs, want) {
					t.Errorf("logs lack %q:\n%s", want, logs)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata", tt.name+".in"))
			if err != nil {
				t.Fatal(err)
			}
			model := &scriptModel{replies: standardScript()}
			eng, ws := newEngine(t, model)
			var logs syncBuffer
			opts := Options{Engine: eng, Workspace: ws, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
			if tt.opts != nil {
				tt.opts(&opts)
			}
			out := newRecorder()
			start := time.Now()
			if err := New(opts).Serve(context.Background(), bytes.NewReader(in), out); err != nil {
				t.Fatalf("Serve: %v", err)
			}
			lines := out.snapshot()
			if len(out.bad) > 0 {
				t.Errorf("writes that were not exactly one line: %q", out.bad)
			}
			checkContract(t, lines, start)
			got := normalise(lines)
			golden := filepath.Join("testdata", tt.name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("output differs from %s (go test -update rewrites it)\ngot:\n%s\nwant:\n%s", golden, got, want)
			}
			if tt.check != nil {
				tt.check(t, parseAll(t, lines), model, logs.String())
			}
		})
	}
}

// checkTurns checks the first turn of testdata/turns.in field by field
// against the contract's streaming example, and that its attachment
// reached the model.
func checkTurns(t *testing.T, rs []resp, model *scriptModel, _ string) {
	t.Helper()
	var types []string
	var tokens string
	var data []string
	for _, r := range rs {
		if r.id() != "req-1" {
			continue
		}
		types = append(types, r.Type)
		tokens += r.Token
		if r.Data != nil {
			data = append(data, string(r.Data))
		}
	}
	wantTypes := "token token tool_use tool_result token token done"
	if strings.Join(types, " ") != wantTypes {
		t.Errorf("req-1 types = %v, want %s", types, wantTypes)
	}
	if tokens != "Let me look.src holds index.ts and app.tsx." {
		t.Errorf("req-1 tokens = %q", tokens)
	}
	wantData := []string{
		`{"toolId":"call_1","toolName":"list_files","input":{"path":"src"}}`,
		`{"toolId":"call_1","toolName":"list_files","result":{"files":["index.ts","app.tsx"]}}`,
	}
	if strings.Join(data, "\n") != strings.Join(wantData, "\n") {
		t.Errorf("req-1 data =\n%s\nwant\n%s", strings.Join(data, "\n"), strings.Join(wantData, "\n"))
	}
	users := model.seenUsers()
	if len(users) == 0 || !strings.Contains(users[0], "Attached file notes.txt (text/plain):") || !strings.Contains(users[0], "remember the milk") {
		t.Errorf("the attachment did not reach the model: %q", users)
	}
	if r, _ := terminalOf(rs, "req-6"); r.Type != "error" || r.Error != "script: connection refused" {
		t.Errorf("failed turn answered with %s", r.raw)
	}
}

func TestConcurrentConversations(t *testing.T) {
	gateA, gateB := make(chan struct{}), make(chan struct{})
	model := &scriptModel{
		replies: map[string][]reply{
			"A slow": {{chunks: []engine.ChatChunk{text("A "), text("done.")}}},
			"B slow": {{chunks: []engine.ChatChunk{text("B "), text("done.")}}},
		},
		gates: map[string]chan struct{}{"A slow": gateA, "B slow": gateB},
	}
	h := startServe(t, model, nil)
	h.send(t,
		`{"id":"a","kind":"user_message","message":"A slow","metadata":{"conversationId":"conv-a"}}`,
		`{"id":"b","kind":"user_message","message":"B slow","metadata":{"conversationId":"conv-b"}}`)
	// Both turns are in the model at once: conversations do not wait for
	// each other.
	model.waitEntered(t, "A slow", "B slow")

	h.send(t,
		`{"id":"s-a","kind":"get_status","metadata":{"conversationId":"conv-a"}}`,
		`{"id":"s-b","kind":"get_status","metadata":{"conversationId":"conv-b"}}`,
		`{"id":"s-default","kind":"get_status"}`)
	rs := h.out.waitFor(t, "three statuses", hasTerminal("s-a", "s-b", "s-default"))
	for id, want := range map[string]string{"s-a": "busy", "s-b": "busy", "s-default": "idle"} {
		if got := statusOf(t, rs, id).State; got != want {
			t.Errorf("%s: state %q, want %q", id, got, want)
		}
	}

	close(gateB)
	rs = h.out.waitFor(t, "b to finish", hasTerminal("b"))
	if _, ok := terminalOf(rs, "a"); ok {
		t.Fatalf("a finished while its model call was held")
	}
	close(gateA)
	rs = h.out.waitFor(t, "a to finish", hasTerminal("a"))
	if ia, ib := indexOf(rs, "a", "done"), indexOf(rs, "b", "done"); ib < 0 || ia < ib {
		t.Errorf("done of b at %d, done of a at %d; want b's first", ib, ia)
	}
	for id, want := range map[string]string{"a": "A done.", "b": "B done."} {
		var got string
		for _, r := range rs {
			if r.id() == id {
				got += r.Token
			}
		}
		if got != want {
			t.Errorf("tokens of %s = %q, want %q", id, got, want)
		}
	}

	h.in.Close()
	if err := h.wait(t); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	checkContract(t, h.out.snapshot(), h.start)
}

func statusOf(t *testing.T, rs []resp, id string) statusData {
	t.Helper()
	r, ok := terminalOf(rs, id)
	if !ok || r.Type != "status" {
		t.Fatalf("no status for %s: %+v", id, r)
	}
	var d statusData
	if err := json.Unmarshal(r.Data, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestStatus(t *testing.T) {
	gate := make(chan struct{})
	model := &scriptModel{replies: standardScript(), gates: map[string]chan struct{}{"Hello gated": gate}}
	model.replies["Hello gated"] = []reply{{chunks: []engine.ChatChunk{text("Hi.")}}}
	h := startServe(t, model, nil)

	// A status read right after the message counts it, even before the
	// turn reaches the model.
	h.send(t, `{"id":"g1","kind":"user_message","message":"Hello gated"}`, `{"id":"st1","kind":"get_status"}`)
	rs := h.out.waitFor(t, "st1", hasTerminal("st1"))
	if got := statusOf(t, rs, "st1"); got.State != "busy" || got.ConversationLength != 0 {
		t.Errorf("st1 = %+v, want busy with length 0", got)
	}
	model.waitEntered(t, "Hello gated")
	h.send(t, `{"id":"st2","kind":"get_status","metadata":{"conversationId":null}}`)
	rs = h.out.waitFor(t, "st2", hasTerminal("st2"))
	if got := statusOf(t, rs, "st2"); got.State != "busy" {
		t.Errorf("st2 = %+v, want busy", got)
	}

	close(gate)
	h.out.waitFor(t, "g1", hasTerminal("g1"))
	// A status sent after done sees the turn in the history.
	h.send(t, `{"id":"st3","kind":"get_status"}`)
	rs = h.out.waitFor(t, "st3", hasTerminal("st3"))
	st3 := statusOf(t, rs, "st3")
	if st3.State != "idle" || st3.ConversationLength != 2 {
		t.Errorf("st3 = %+v, want idle with length 2 (user, assistant)", st3)
	}

	// A turn with a tool call adds the user message and two assistant
	// messages (the one calling the tool, the answer).
	h.send(t, `{"id":"t2","kind":"user_message","message":"List the files in src."}`)
	h.out.waitFor(t, "t2", hasTerminal("t2"))
	h.send(t, `{"id":"st4","kind":"get_status"}`)
	rs = h.out.waitFor(t, "st4", hasTerminal("st4"))
	st4 := statusOf(t, rs, "st4")
	if st4.State != "idle" || st4.ConversationLength != 5 {
		t.Errorf("st4 = %+v, want idle with length 5", st4)
	}
	if maxUp := time.Since(h.eng.Started()).Milliseconds(); st4.Uptime < st3.Uptime || st4.Uptime > maxUp {
		t.Errorf("uptimes %d then %d, want non-decreasing and at most %d", st3.Uptime, st4.Uptime, maxUp)
	}
	// Another conversation is unaffected.
	h.send(t, `{"id":"st5","kind":"get_status","metadata":{"conversationId":"other"}}`)
	rs = h.out.waitFor(t, "st5", hasTerminal("st5"))
	if got := statusOf(t, rs, "st5"); got.State != "idle" || got.ConversationLength != 0 {
		t.Errorf("st5 = %+v, want idle with length 0", got)
	}
	checkContract(t, h.out.snapshot(), h.start)
}

func TestClearHistory(t *testing.T) {
	gate := make(chan struct{})
	model := &scriptModel{replies: standardScript(), gates: map[string]chan struct{}{"Hello gated": gate}}
	model.replies["Hello gated"] = []reply{{chunks: []engine.ChatChunk{text("Hi.")}}}
	h := startServe(t, model, nil)
	conv := `,"metadata":{"conversationId":"conv-c"}}`

	h.send(t, `{"id":"t1","kind":"user_message","message":"Hello"`+conv)
	h.out.waitFor(t, "t1", hasTerminal("t1"))

	// clear_history waits for the running turn and answers after it.
	h.send(t, `{"id":"t2","kind":"user_message","message":"Hello gated"`+conv, `{"id":"c1","kind":"clear_history"`+conv,
		`{"id":"sync","kind":"get_status","metadata":{"conversationId":"none"}}`)
	model.waitEntered(t, "Hello", "Hello gated")
	h.out.waitFor(t, "the status", hasTerminal("sync")) // c1 has been accepted
	time.Sleep(100 * time.Millisecond)
	if _, ok := terminalOf(parseAll(t, h.out.snapshot()), "c1"); ok {
		t.Fatal("clear_history answered while a turn of its conversation was running")
	}
	close(gate)
	rs := h.out.waitFor(t, "t2 and c1", hasTerminal("t2", "c1"))
	if it2, ic1 := indexOf(rs, "t2", "done"), indexOf(rs, "c1", "done"); it2 < 0 || ic1 < it2 {
		t.Errorf("done of t2 at %d, done of c1 at %d; want t2's first", it2, ic1)
	}
	h.send(t, `{"id":"s1","kind":"get_status"`+conv)
	rs = h.out.waitFor(t, "s1", hasTerminal("s1"))
	if got := statusOf(t, rs, "s1"); got.ConversationLength != 0 {
		t.Errorf("after clear_history: %+v, want length 0", got)
	}

	// The conversation goes on from an empty history.
	h.send(t, `{"id":"t3","kind":"user_message","message":"Hello"`+conv)
	h.out.waitFor(t, "t3", hasTerminal("t3"))
	h.send(t, `{"id":"s3","kind":"get_status"`+conv)
	rs = h.out.waitFor(t, "s3", hasTerminal("s3"))
	if got := statusOf(t, rs, "s3"); got.ConversationLength != 2 {
		t.Errorf("after a new turn: %+v, want length 2", got)
	}

	// Conversations that never had a turn have nothing to clear.
	h.send(t, `{"id":"c2","kind":"clear_history","metadata":{"conversationId":"never"}}`, `{"id":"c3","kind":"clear_history"}`)
	rs = h.out.waitFor(t, "c2 and c3", hasTerminal("c2", "c3"))
	for _, id := range []string{"c2", "c3"} {
		if r, _ := terminalOf(rs, id); r.Type != "done" {
			t.Errorf("%s answered with %s, want done", id, r.raw)
		}
	}
	checkContract(t, h.out.snapshot(), h.start)
}

func TestEndOfInputWaitsForInFlight(t *testing.T) {
	gate := make(chan struct{})
	model := &scriptModel{replies: standardScript(), gates: map[string]chan struct{}{"List the files in src.": gate}}
	h := startServe(t, model, nil)
	h.send(t, `{"id":"1","kind":"user_message","message":"List the files in src."}`)
	model.waitEntered(t, "List the files in src.")
	h.in.Close()
	select {
	case err := <-h.done:
		t.Fatalf("Serve returned %v at the end of the input with a turn running", err)
	case <-time.After(150 * time.Millisecond):
	}
	close(gate)
	if err := h.wait(t); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	lines := h.out.snapshot()
	checkContract(t, lines, h.start)
	rs := parseAll(t, lines)
	if last := rs[len(rs)-1]; last.Type != "done" || last.id() != "1" {
		t.Errorf("last line %s, want the done of request 1", last.raw)
	}
	if indexOf(rs, "1", "tool_result") < 0 {
		t.Errorf("the turn's tool_result is missing:\n%s", strings.Join(lines, "\n"))
	}
}

func TestCancelEndsInFlight(t *testing.T) {
	gateA, gateB := make(chan struct{}), make(chan struct{})
	defer close(gateA)
	defer close(gateB)
	model := &scriptModel{replies: standardScript(), gates: map[string]chan struct{}{"A slow": gateA, "B slow": gateB}}
	h := startServe(t, model, nil)
	h.send(t,
		`{"id":"a","kind":"user_message","message":"A slow","metadata":{"conversationId":"conv-a"}}`,
		`{"id":"a2","kind":"user_message","message":"Hello","metadata":{"conversationId":"conv-a"}}`,
		`{"id":"b","kind":"user_message","message":"B slow","metadata":{"conversationId":"conv-b"}}`,
		`{"id":"c","kind":"clear_history","metadata":{"conversationId":"conv-b"}}`,
		`{"id":"sync","kind":"get_status"}`)
	model.waitEntered(t, "A slow", "B slow")
	// The status is answered by the reading loop: every request before it
	// has been accepted.
	h.out.waitFor(t, "the status", hasTerminal("sync"))

	// The input stays open: Serve must return anyway.
	h.cancel()
	if err := h.wait(t); err != nil {
		t.Fatalf("Serve after cancel: %v", err)
	}
	lines := h.out.snapshot()
	checkContract(t, lines, h.start)
	rs := parseAll(t, lines)
	for _, id := range []string{"a", "a2", "b", "c"} {
		r, ok := terminalOf(rs, id)
		if !ok || r.Type != "error" || r.Error != cancelledText {
			t.Errorf("%s ended with %q, want error %q", id, r.raw, cancelledText)
		}
	}
	if got := len(model.seenUsers()); got != 2 {
		t.Errorf("the model was called %d times, want 2 (queued requests must not start)", got)
	}
}

func TestMalformedJSONIsLoggedAndSkipped(t *testing.T) {
	h := startServe(t, &scriptModel{replies: standardScript()}, nil)
	h.send(t, `{"id":"x","kind":"user_message","message":"Hello"`, `{"id":"s","kind":"get_status"}`)
	h.out.waitFor(t, "status after a malformed line", hasTerminal("s"))
	if logs := h.logs.String(); !strings.Contains(logs, `msg="malformed JSON; line skipped" line=1`) {
		t.Errorf("no log of the malformed line:\n%s", logs)
	}
	if rs := parseAll(t, h.out.snapshot()); len(rs) != 2 {
		t.Errorf("got %d lines, want ready and status", len(rs))
	}
	checkContract(t, h.out.snapshot(), h.start)
}

func TestInvalidRequests(t *testing.T) {
	h := startServe(t, &scriptModel{replies: standardScript()}, nil)
	tests := []struct{ line, id, err string }{
		{`{"kind":"get_status"}`, "", "request has no id; every request needs a string id"},
		{`{"id":"u1","kind":"cancel"}`, "u1", `unknown request kind "cancel"; expected user_message, clear_history or get_status`},
		{`{"id":"u2","kind":"user_message","message":""}`, "u2", "message is empty"},
		{`{"id":"u3","kind":"user_message","message":"hi","attachments":[{"path":5}]}`, "u3", "attachments[0].path must be a string, got number"},
		{`[]`, "", "a request must be a JSON object, got array"},
	}
	for _, tt := range tests {
		before := len(h.out.snapshot())
		h.send(t, tt.line)
		rs := h.out.waitFor(t, "the error for "+tt.line, func(rs []resp) bool { return len(rs) > before })
		got := rs[before]
		if got.Type != "error" || got.ID == nil || *got.ID != tt.id || got.Error != tt.err {
			t.Errorf("%s answered with %s, want error %q for id %q", tt.line, got.raw, tt.err, tt.id)
		}
	}
	checkContract(t, h.out.snapshot(), h.start)
}

func TestLongLinesAreSkipped(t *testing.T) {
	h := startServe(t, &scriptModel{replies: standardScript()}, func(o *Options) { o.MaxLineBytes = 256 })
	long := `{"id":"long","kind":"user_message","message":"` + strings.Repeat("x", 300) + `"}`
	h.send(t, strings.Repeat("y", 5000), long, `{"id":"s","kind":"get_status"}`)
	rs := h.out.waitFor(t, "status after long lines", hasTerminal("s"))
	if len(rs) != 2 {
		t.Errorf("got %d lines, want ready and status: %v", len(rs), h.out.snapshot())
	}
	logs := h.logs.String()
	for _, want := range []string{`msg="request line too long; skipped" line=1 bytes=5000 max=256`, `msg="request line too long; skipped" line=2 bytes=`} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
}

func TestDuplicateIDInFlight(t *testing.T) {
	gate := make(chan struct{})
	model := &scriptModel{replies: standardScript(), gates: map[string]chan struct{}{"A slow": gate}}
	model.replies["A slow"] = []reply{{chunks: []engine.ChatChunk{text("A.")}}}
	h := startServe(t, model, nil)
	h.send(t, `{"id":"dup","kind":"user_message","message":"A slow"}`)
	model.waitEntered(t, "A slow")
	h.send(t, `{"id":"dup","kind":"get_status"}`)
	rs := h.out.waitFor(t, "the duplicate's error", hasTerminal("dup"))
	r, _ := terminalOf(rs, "dup")
	want := `request id "dup" is already in use by a request that has not finished; use a new id for every request`
	if r.Type != "error" || r.Error != want {
		t.Errorf("duplicate answered with %s", r.raw)
	}
	close(gate)
	rs = h.out.waitFor(t, "the turn's done", func(rs []resp) bool { return indexOf(rs, "dup", "done") >= 0 })
	// Once finished, the id may be used again.
	h.send(t, `{"id":"dup","kind":"get_status"}`)
	h.out.waitFor(t, "a status for the reused id", func(rs []resp) bool { return indexOf(rs, "dup", "status") >= 0 })
	checkContract(t, h.out.snapshot(), h.start, "dup")
}

func TestWriteFailureStopsServe(t *testing.T) {
	gate := make(chan struct{})
	defer close(gate)
	model := &scriptModel{replies: standardScript(), gates: map[string]chan struct{}{"A slow": gate}}
	h := startServe(t, model, nil)
	h.send(t, `{"id":"a","kind":"user_message","message":"A slow","metadata":{"conversationId":"a"}}`)
	model.waitEntered(t, "A slow")
	// From now on every write fails. The first response of b fails, which
	// must also end a, whose model call is held.
	h.out.mu.Lock()
	h.out.failAt = h.out.writes + 1
	h.out.mu.Unlock()
	h.send(t, `{"id":"b","kind":"user_message","message":"Hello","metadata":{"conversationId":"b"}}`)
	err := h.wait(t)
	if !errors.Is(err, io.ErrClosedPipe) || !strings.HasPrefix(err.Error(), "ndjson: write response: ") {
		t.Fatalf("Serve = %v, want a write error wrapping %v", err, io.ErrClosedPipe)
	}
}

func TestServeNeedsEngineAndWorkspace(t *testing.T) {
	eng, ws := newEngine(t, &scriptModel{})
	for _, tt := range []struct {
		opts Options
		want string
	}{
		{Options{Workspace: ws}, "ndjson: Options.Engine is nil"},
		{Options{Engine: eng}, "ndjson: Options.Workspace is nil"},
	} {
		var out bytes.Buffer
		err := New(tt.opts).Serve(context.Background(), strings.NewReader(""), &out)
		if err == nil || err.Error() != tt.want {
			t.Errorf("err = %v, want %q", err, tt.want)
		}
		if out.Len() != 0 {
			t.Errorf("wrote %q before failing", out.String())
		}
	}
}

func TestTurnWithoutModel(t *testing.T) {
	eng, err := engine.New(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := eng.OpenWorkspace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out := newRecorder()
	in := `{"id":"1","kind":"user_message","message":"hi"}` + "\n"
	if err := New(Options{Engine: eng, Workspace: ws}).Serve(context.Background(), strings.NewReader(in), out); err != nil {
		t.Fatal(err)
	}
	rs := parseAll(t, out.snapshot())
	r, _ := terminalOf(rs, "1")
	if r.Type != "error" || !strings.Contains(r.Error, "no model chosen") {
		t.Errorf("got %s, want an error naming the missing model", r.raw)
	}
}

func TestCancelUnblocksFileRead(t *testing.T) {
	eng, ws := newEngine(t, &scriptModel{replies: standardScript()})
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	defer pr.Close()
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	out := newRecorder()
	done := make(chan error, 1)
	go func() { done <- New(Options{Engine: eng, Workspace: ws}).Serve(ctx, pr, out) }()
	if _, err := io.WriteString(pw, `{"id":"1","kind":"get_status"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "the status", hasTerminal("1"))
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Serve did not return after cancel")
	}
	// The goroutine reading the pipe ends too, though the pipe is open.
	deadline := time.Now().Add(waitTimeout)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, %d before Serve", runtime.NumGoroutine(), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

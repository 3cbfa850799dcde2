package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

// step is one scripted model reply.
type step struct {
	text  string
	calls []engine.ToolCall
	err   error
	block bool // wait for ctx to end
}

// scriptModel plays steps in order and records every request.
type scriptModel struct {
	mu    sync.Mutex
	steps []step
	reqs  []engine.ChatRequest
}

func (m *scriptModel) ListModels(context.Context) ([]engine.ModelInfo, error) {
	return []engine.ModelInfo{{Name: "m1"}}, nil
}

func (m *scriptModel) Embed(context.Context, engine.EmbedRequest) (engine.EmbedResponse, error) {
	return engine.EmbedResponse{}, errors.New("no embeddings")
}

func (m *scriptModel) Chat(ctx context.Context, req engine.ChatRequest, on func(engine.ChatChunk) error) error {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	if len(m.steps) == 0 {
		m.mu.Unlock()
		return errors.New("script exhausted")
	}
	st := m.steps[0]
	m.steps = m.steps[1:]
	m.mu.Unlock()
	if st.block {
		<-ctx.Done()
		return ctx.Err()
	}
	if st.err != nil {
		return st.err
	}
	for _, w := range strings.SplitAfter(st.text, " ") {
		if w != "" {
			if err := on(engine.ChatChunk{Text: w}); err != nil {
				return err
			}
		}
	}
	for i := range st.calls {
		if err := on(engine.ChatChunk{ToolCall: &st.calls[i]}); err != nil {
			return err
		}
	}
	if err := on(engine.ChatChunk{Usage: &engine.Usage{PromptTokens: 10, CompletionTokens: 5}}); err != nil {
		return err
	}
	return on(engine.ChatChunk{DoneReason: "stop"})
}

func (m *scriptModel) requests() []engine.ChatRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.reqs)
}

// toolbox is an in-process Toolset: read (read-only), write (needs
// approval), fail, slow and big.
type toolbox struct {
	invoked  []string
	overlays []map[string]engine.OverlayFile // each call's InvokeRequest.Overlay
}

func (tb *toolbox) Tools(context.Context) ([]engine.ToolSpec, error) {
	schema := json.RawMessage(`{"type":"object"}`)
	return []engine.ToolSpec{
		{Name: "read", InputSchema: schema, Risk: engine.RiskLow, ReadOnly: true},
		{Name: "write", InputSchema: schema, Risk: engine.RiskMedium, NeedsApproval: true},
		{Name: "fail", InputSchema: schema, Risk: engine.RiskLow, ReadOnly: true},
		{Name: "slow", InputSchema: schema, Risk: engine.RiskLow, ReadOnly: true},
		{Name: "big", InputSchema: schema, Risk: engine.RiskLow, ReadOnly: true},
		// A tool whose source sets its own deadline.
		{Name: "slow_timed", InputSchema: schema, Risk: engine.RiskLow, ReadOnly: true, Timeout: 60 * time.Millisecond},
	}, nil
}

func (tb *toolbox) Invoke(ctx context.Context, req engine.InvokeRequest, on func(engine.ToolUpdate)) (engine.ToolResult, error) {
	tb.invoked = append(tb.invoked, req.Tool)
	tb.overlays = append(tb.overlays, req.Overlay)
	switch req.Tool {
	case "read":
		on(engine.ToolUpdate{Progress: &engine.ToolProgress{Message: "reading"}})
		return engine.JSONResult(map[string]string{"content": "package main", "root": req.WorkspaceRoot}, "1 line")
	case "write":
		return engine.JSONResult(map[string]any{"files_modified": []string{"a.go"}}, "wrote a.go")
	case "fail":
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeNotFound, "no such file: x.go")
	case "slow", "slow_timed":
		<-ctx.Done()
		return engine.ToolResult{}, ctx.Err()
	case "big":
		return engine.JSONResult(map[string]string{"data": strings.Repeat("x", 5000)}, "big")
	}
	return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeUnknownTool, "no %s", req.Tool)
}

func call(id, name, args string) engine.ToolCall {
	return engine.ToolCall{ID: id, Name: name, Args: json.RawMessage(args)}
}

type fixture struct {
	eng   *engine.Engine
	model *scriptModel
	tools *toolbox
	sess  *engine.Session
}

func newFixture(t *testing.T, opts engine.Options, steps ...step) *fixture {
	t.Helper()
	f := &fixture{model: &scriptModel{steps: steps}, tools: &toolbox{}}
	opts.Models = map[string]engine.Model{"script": f.model}
	opts.Tools = f.tools
	opts.Model = engine.ModelRef{Provider: "script", Name: "m1"}
	eng, err := engine.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := eng.OpenWorkspace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f.eng = eng
	f.sess, err = eng.NewSession(ws, "")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// run runs one turn and returns its result and events.
func (f *fixture) run(t *testing.T, ctx context.Context, msg string, opts engine.TurnOptions) (engine.TurnResult, []engine.Event) {
	t.Helper()
	var mu sync.Mutex
	var events []engine.Event
	opts.OnEvent = func(e engine.Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	res, err := f.sess.Run(ctx, engine.TurnInput{Message: msg}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res, events
}

// kinds renders events compactly: "thinking", "tool_call:read:started", ...
func kinds(events []engine.Event) []string {
	var out []string
	for _, e := range events {
		switch d := e.Data.(type) {
		case *engine.ToolCallEvent:
			out = append(out, fmt.Sprintf("tool_call:%s:%s", d.Name, d.Status))
		case *engine.FinalEvent:
			out = append(out, "final:"+string(d.Status))
		case *engine.ErrorEvent:
			out = append(out, fmt.Sprintf("error:%s:%v", d.Code, d.Recoverable))
		case *engine.TokenEvent:
			if len(out) == 0 || out[len(out)-1] != "token" {
				out = append(out, "token")
			}
		default:
			out = append(out, e.Data.EventKind())
		}
	}
	return out
}

func TestTurnPlanToolsAndAnswer(t *testing.T) {
	f := newFixture(t, engine.Options{},
		step{text: "Let me look. ", calls: []engine.ToolCall{
			call("", "update_plan", `{"steps":[{"description":"Read main","files_involved":["main.go"]}],"rationale":"small"}`),
			call("", "read", `{"path":"main.go"}`),
		}},
		step{text: "It is a main package."},
	)
	res, events := f.run(t, context.Background(), "what is main.go?", engine.TurnOptions{})
	want := []string{"thinking", "token", "thinking", "tool_call:update_plan:started", "plan", "tool_call:update_plan:completed",
		"tool_call:read:started", "tool_call:read:running", "tool_call:read:completed", "thinking", "token", "final:completed"}
	if got := kinds(events); !slices.Equal(got, want) {
		t.Fatalf("events\n got %v\nwant %v", got, want)
	}
	for i, e := range events {
		if e.Seq != uint64(i+1) || e.SessionID != f.sess.ID() || e.TurnID != res.TurnID {
			t.Fatalf("event %d: seq %d session %s turn %s", i, e.Seq, e.SessionID, e.TurnID)
		}
	}
	var plan *engine.PlanEvent
	for _, e := range events {
		if p, ok := e.Data.(*engine.PlanEvent); ok {
			plan = p
		}
	}
	if plan == nil || len(plan.Steps) != 1 || plan.Steps[0].Number != 1 || plan.Steps[0].FilesInvolved[0] != "main.go" || plan.Rationale != "small" {
		t.Errorf("plan = %+v", plan)
	}
	if res.Status != engine.TurnCompleted || res.Message != "It is a main package." {
		t.Errorf("result = %+v", res)
	}
	md := res.Metadata
	if md.ModelCalls != 2 || md.ToolCalls != 2 || md.TokensUsed != 30 || !slices.Equal(md.ToolsUsed, []string{"update_plan", "read"}) || md.Model != "script:m1" {
		t.Errorf("metadata = %+v", md)
	}
	// The second model call saw both tool results, tied to unique call ids.
	reqs := f.model.requests()
	msgs := reqs[1].Messages
	if msgs[0].Role != engine.RoleSystem || !strings.Contains(msgs[0].Content, f.sess.Workspace().Root) {
		t.Errorf("system prompt = %q", msgs[0].Content)
	}
	last := msgs[len(msgs)-1]
	asst := msgs[len(msgs)-3]
	if last.Role != engine.RoleTool || last.ToolName != "read" || !strings.Contains(last.Content, "package main") ||
		last.ToolCallID != asst.ToolCalls[1].ID || asst.ToolCalls[0].ID == asst.ToolCalls[1].ID || asst.ToolCalls[0].ID == "" {
		t.Errorf("tool messages: %+v / %+v", asst, last)
	}
	if !strings.Contains(last.Content, f.sess.Workspace().Root) {
		t.Errorf("tool did not get the workspace root: %s", last.Content)
	}
	if !slices.ContainsFunc(reqs[0].Tools, func(s engine.ToolSpec) bool { return s.Name == "update_plan" }) {
		t.Error("update_plan not offered to the model")
	}
}

func TestHistoryAcrossTurns(t *testing.T) {
	f := newFixture(t, engine.Options{}, step{text: "first answer"}, step{text: "second answer"})
	f.run(t, context.Background(), "one", engine.TurnOptions{})
	f.run(t, context.Background(), "two", engine.TurnOptions{})
	msgs := f.model.requests()[1].Messages
	var got []string
	for _, m := range msgs[1:] {
		got = append(got, string(m.Role)+":"+m.Content)
	}
	want := []string{"user:one", "assistant:first answer", "user:two"}
	if !slices.Equal(got, want) {
		t.Errorf("second turn saw %v, want %v", got, want)
	}
	if st := f.sess.Status(); st.Messages != 4 || st.Turns != 2 || st.Busy || st.LastSeq == 0 {
		t.Errorf("status = %+v", st)
	}
	if err := f.sess.ClearHistory(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(f.sess.History()); n != 0 {
		t.Errorf("history after clear has %d messages", n)
	}
}

type fakeHost struct {
	approve bool
	asked   []engine.ApprovalRequest
}

func (h *fakeHost) RequestApproval(_ context.Context, r engine.ApprovalRequest) (engine.ApprovalDecision, error) {
	h.asked = append(h.asked, r)
	return engine.ApprovalDecision{Approved: h.approve}, nil
}

func TestApprovalPolicy(t *testing.T) {
	writeCall := step{calls: []engine.ToolCall{call("c1", "write", `{"path":"a.go"}`)}}
	cases := []struct {
		name      string
		opts      engine.TurnOptions
		host      *fakeHost
		wantKinds []string
		ran       bool
		reason    string
	}{
		{"no host denies", engine.TurnOptions{}, nil,
			[]string{"thinking", "thinking", "tool_call:write:denied", "error:POLICY_VIOLATION:true", "thinking", "token", "final:completed"},
			false, "cannot ask"},
		{"approve all runs", engine.TurnOptions{ApproveAll: true}, nil,
			[]string{"thinking", "thinking", "tool_call:write:started", "tool_call:write:completed", "thinking", "token", "final:completed"},
			true, ""},
		{"host approves", engine.TurnOptions{}, &fakeHost{approve: true},
			[]string{"thinking", "thinking", "approval_request", "approval_result", "tool_call:write:started", "tool_call:write:completed", "thinking", "token", "final:completed"},
			true, ""},
		{"host denies", engine.TurnOptions{}, &fakeHost{approve: false},
			[]string{"thinking", "thinking", "approval_request", "approval_result", "tool_call:write:denied", "error:POLICY_VIOLATION:true", "thinking", "token", "final:completed"},
			false, "the user denied it"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, engine.Options{}, writeCall, step{text: "done"})
			if tc.host != nil {
				tc.opts.Host = tc.host
			}
			_, events := f.run(t, context.Background(), "write it", tc.opts)
			if got := kinds(events); !slices.Equal(got, tc.wantKinds) {
				t.Fatalf("events\n got %v\nwant %v", got, tc.wantKinds)
			}
			if ran := slices.Contains(f.tools.invoked, "write"); ran != tc.ran {
				t.Errorf("write ran = %v, want %v", ran, tc.ran)
			}
			if tc.host != nil {
				r := tc.host.asked[0]
				if r.Tool != "write" || r.CallID != "c1" || r.Risk.Level != engine.RiskMedium || len(r.Risk.Reasons) == 0 || r.ID == "" {
					t.Errorf("approval request = %+v", r)
				}
			}
			if tc.reason != "" {
				msgs := f.model.requests()[1].Messages
				if tm := msgs[len(msgs)-1]; tm.Role != engine.RoleTool || !strings.Contains(tm.Content, tc.reason) || !strings.Contains(tm.Content, "permission_denied") {
					t.Errorf("model was told %q, want the reason %q", tm.Content, tc.reason)
				}
			}
		})
	}
}

func TestToolFailureIsRecoverable(t *testing.T) {
	f := newFixture(t, engine.Options{},
		step{calls: []engine.ToolCall{call("c1", "fail", `{}`), call("c2", "nope", `{}`), call("c3", "read", `{not json`)}},
		step{text: "recovered"})
	res, events := f.run(t, context.Background(), "go", engine.TurnOptions{})
	want := []string{"thinking", "thinking", "tool_call:fail:started", "tool_call:fail:failed", "error:TOOL_ERROR:true",
		"tool_call:nope:failed", "error:TOOL_ERROR:true", "tool_call:read:failed", "error:TOOL_ERROR:true", "thinking", "token", "final:completed"}
	if got := kinds(events); !slices.Equal(got, want) {
		t.Fatalf("events\n got %v\nwant %v", got, want)
	}
	if res.Status != engine.TurnCompleted {
		t.Errorf("status %s", res.Status)
	}
	var failed *engine.ToolCallEvent
	for _, e := range events {
		if d, ok := e.Data.(*engine.ToolCallEvent); ok && d.Status == engine.ToolFailed && failed == nil {
			failed = d
		}
	}
	if failed.ErrorCode != engine.ToolCodeNotFound || failed.Error != "no such file: x.go" {
		t.Errorf("failed event = %+v", failed)
	}
	msgs := f.model.requests()[1].Messages
	tail := msgs[len(msgs)-3:]
	for i, want := range []string{"no such file", `there is no tool named \"nope\"`, "not valid JSON"} {
		if !strings.Contains(tail[i].Content, want) {
			t.Errorf("tool message %d = %s, want %q", i, tail[i].Content, want)
		}
	}
}

func TestModelErrorEndsTurn(t *testing.T) {
	merr := &engine.ModelError{Provider: "ollama", Kind: engine.ErrModelNotFound, Message: `model "x" not found, try pulling it first`}
	f := newFixture(t, engine.Options{}, step{err: merr})
	res, events := f.run(t, context.Background(), "hi", engine.TurnOptions{})
	if got := kinds(events); !slices.Equal(got, []string{"thinking", "error:MODEL_ERROR:false", "final:error"}) {
		t.Fatalf("events %v", got)
	}
	if res.Status != engine.TurnError || res.Error != `ollama: model "x" not found, try pulling it first` {
		t.Errorf("result = %+v", res)
	}
}

// lateTimerCtx is a context whose deadline has passed by the clock while
// its timer has not run yet (as on a loaded machine): Err is still nil.
type lateTimerCtx struct{ context.Context }

func (lateTimerCtx) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// TestTimeoutBeforeTheTimerRuns: a model plugin's copy of the deadline
// fires and its error comes back before this process's timer ran; the
// turn still ends as timed out, not as a model error (issue 14 item 3).
func TestTimeoutBeforeTheTimerRuns(t *testing.T) {
	merr := &engine.ModelError{Provider: "replay", Kind: engine.ErrTimeout, Message: "context deadline exceeded"}
	f := newFixture(t, engine.Options{}, step{err: merr})
	res, _ := f.run(t, lateTimerCtx{context.Background()}, "hi", engine.TurnOptions{})
	if res.Status != engine.TurnTimeout {
		t.Errorf("result = %+v, want status timeout", res)
	}
}

func TestStepLimit(t *testing.T) {
	loop := step{calls: []engine.ToolCall{call("", "read", `{}`)}}
	f := newFixture(t, engine.Options{MaxSteps: 2}, loop, loop, loop)
	res, _ := f.run(t, context.Background(), "loop", engine.TurnOptions{})
	if res.Status != engine.TurnError || !strings.Contains(res.Error, "stopped after 2 model calls") {
		t.Errorf("result = %+v", res)
	}
}

func TestToolTimeout(t *testing.T) {
	f := newFixture(t, engine.Options{ToolTimeout: 50 * time.Millisecond},
		step{calls: []engine.ToolCall{call("c1", "slow", `{}`)}}, step{text: "ok"})
	res, events := f.run(t, context.Background(), "slow", engine.TurnOptions{})
	var failed *engine.ToolCallEvent
	for _, e := range events {
		if d, ok := e.Data.(*engine.ToolCallEvent); ok && d.Status == engine.ToolFailed {
			failed = d
		}
	}
	if failed == nil || failed.ErrorCode != engine.ToolCodeTimeout || !strings.Contains(failed.Error, "did not finish within 50ms") {
		t.Fatalf("failed event = %+v", failed)
	}
	if res.Status != engine.TurnCompleted {
		t.Errorf("status = %s", res.Status)
	}
}

// TestToolTimeoutPerTool: a tool's own Timeout (from its plugin or MCP
// server configuration) is its deadline, not Options.ToolTimeout (issue 20
// item 8: one fixed deadline for every tool).
func TestToolTimeoutPerTool(t *testing.T) {
	f := newFixture(t, engine.Options{ToolTimeout: 10 * time.Minute},
		step{calls: []engine.ToolCall{call("c1", "slow_timed", `{}`)}}, step{text: "ok"})
	done := make(chan struct{})
	var events []engine.Event
	go func() {
		defer close(done)
		_, events = f.run(t, context.Background(), "slow", engine.TurnOptions{})
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the call still runs 60 s later: its own 60 ms deadline was not applied")
	}
	var failed *engine.ToolCallEvent
	for _, e := range events {
		if d, ok := e.Data.(*engine.ToolCallEvent); ok && d.Status == engine.ToolFailed {
			failed = d
		}
	}
	if failed == nil || failed.ErrorCode != engine.ToolCodeTimeout || !strings.Contains(failed.Error, "did not finish within 60ms") {
		t.Fatalf("failed event = %+v", failed)
	}
}

// TestRunningEventsCarryRemainingTime: progress of a running call says how
// long it has left before its deadline.
func TestRunningEventsCarryRemainingTime(t *testing.T) {
	f := newFixture(t, engine.Options{ToolTimeout: 90 * time.Second},
		step{calls: []engine.ToolCall{call("c1", "read", `{}`)}}, step{text: "ok"})
	_, events := f.run(t, context.Background(), "read", engine.TurnOptions{})
	var running *engine.ToolCallEvent
	for _, e := range events {
		if d, ok := e.Data.(*engine.ToolCallEvent); ok && d.Status == engine.ToolRunning {
			running = d
		}
	}
	if running == nil || running.Remaining <= 0 || running.Remaining > 90*time.Second {
		t.Fatalf("running event %+v: want the time left of the 90 s deadline", running)
	}
}

func TestResultTruncatedForModel(t *testing.T) {
	f := newFixture(t, engine.Options{MaxToolResultBytes: 1000},
		step{calls: []engine.ToolCall{call("c1", "big", `{}`)}}, step{text: "ok"})
	f.run(t, context.Background(), "big", engine.TurnOptions{})
	msgs := f.model.requests()[1].Messages
	tm := msgs[len(msgs)-1].Content
	var cut struct {
		Truncated bool
		Partial   string
	}
	if err := json.Unmarshal([]byte(tm), &cut); err != nil || !cut.Truncated || len(cut.Partial) > 1010 {
		t.Errorf("model saw %d bytes: %.200s (%v)", len(tm), tm, err)
	}
}

func TestCancellation(t *testing.T) {
	cases := []struct {
		name  string
		steps []step
	}{
		{"during model call", []step{{block: true}}},
		{"during tool call", []step{{calls: []engine.ToolCall{call("c1", "slow", `{}`)}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			f := newFixture(t, engine.Options{}, tc.steps...)
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel)
			res, events := f.run(t, ctx, "wait", engine.TurnOptions{})
			if res.Status != engine.TurnCancelled {
				t.Fatalf("status = %s (%s)", res.Status, res.Error)
			}
			if fin, ok := events[len(events)-1].Data.(*engine.FinalEvent); !ok || fin.Status != engine.TurnCancelled {
				t.Errorf("last event = %+v", events[len(events)-1].Data)
			}
			if f.sess.Status().Busy {
				t.Error("session still busy")
			}
			deadline := time.Now().Add(2 * time.Second)
			for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if n := runtime.NumGoroutine(); n > before {
				t.Errorf("%d goroutines left behind", n-before)
			}
		})
	}
}

func TestTurnsOfASessionAreSerialized(t *testing.T) {
	f := newFixture(t, engine.Options{}, step{block: true}, step{text: "second"})
	ctx, cancel := context.WithCancel(context.Background())
	firstDone := make(chan engine.TurnResult)
	go func() {
		res, _ := f.sess.Run(ctx, engine.TurnInput{Message: "first"}, engine.TurnOptions{})
		firstDone <- res
	}()
	for !f.sess.Status().Busy {
		time.Sleep(5 * time.Millisecond)
	}
	secondDone := make(chan engine.TurnResult)
	go func() {
		res, _ := f.sess.Run(context.Background(), engine.TurnInput{Message: "second"}, engine.TurnOptions{})
		secondDone <- res
	}()
	select {
	case <-secondDone:
		t.Fatal("second turn ran while the first was running")
	case <-time.After(100 * time.Millisecond):
	}
	cancel()
	if r := <-firstDone; r.Status != engine.TurnCancelled {
		t.Errorf("first: %s", r.Status)
	}
	if r := <-secondDone; r.Status != engine.TurnCompleted || r.Message != "second" {
		t.Errorf("second: %+v", r)
	}
	// A turn waiting for the lock gives up with its context.
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	f.model.steps = []step{{block: true}}
	blockCtx, stop := context.WithCancel(context.Background())
	defer stop()
	go f.sess.Run(blockCtx, engine.TurnInput{Message: "hold"}, engine.TurnOptions{})
	for !f.sess.Status().Busy {
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := f.sess.Run(ctx2, engine.TurnInput{Message: "late"}, engine.TurnOptions{}); err == nil {
		t.Error("Run with a cancelled context waited and ran")
	}
}

func TestAttachments(t *testing.T) {
	f := newFixture(t, engine.Options{MaxAttachmentBytes: 64}, step{text: "ok"})
	root := f.sess.Workspace().Root
	os.WriteFile(filepath.Join(root, "notes.txt"), []byte("remember the milk"), 0o644)
	os.WriteFile(filepath.Join(root, "blob.bin"), []byte{0, 1, 2, 3}, 0o644)
	os.WriteFile(filepath.Join(root, "long.txt"), []byte(strings.Repeat("a", 100)), 0o644)
	var events []engine.Event
	_, err := f.sess.Run(context.Background(), engine.TurnInput{Message: "see attached", Attachments: []engine.Attachment{
		{Path: "notes.txt", MIME: "text/plain"},
		{Path: filepath.Join(root, "blob.bin"), MIME: "application/octet-stream"},
		{Path: "missing.txt", MIME: "text/plain"},
		{Path: "long.txt", MIME: "text/plain"},
	}}, engine.TurnOptions{OnEvent: func(e engine.Event) { events = append(events, e) }})
	if err != nil {
		t.Fatal(err)
	}
	user := f.model.requests()[0].Messages[1].Content
	for _, want := range []string{"see attached", "remember the milk", "blob.bin (application/octet-stream) not included: binary", "missing.txt (text/plain) not included", "[cut at 64 bytes]"} {
		if !strings.Contains(user, want) {
			t.Errorf("user message lacks %q:\n%s", want, user)
		}
	}
	if got := kinds(events); !slices.Equal(got[:3], []string{"thinking", "error:INTERNAL:true", "error:INTERNAL:true"}) {
		t.Errorf("events %v", got)
	}
}

func TestModelSelection(t *testing.T) {
	f := newFixture(t, engine.Options{}, step{text: "ok"})
	if _, err := f.sess.Run(context.Background(), engine.TurnInput{Message: "x", Model: engine.ModelRef{Provider: "nope", Name: "m"}}, engine.TurnOptions{}); !errors.Is(err, engine.ErrUnknownProvider) {
		t.Errorf("unknown provider: %v", err)
	}
	if _, err := f.sess.Run(context.Background(), engine.TurnInput{}, engine.TurnOptions{}); !errors.Is(err, engine.ErrInvalidRequest) {
		t.Errorf("empty message: %v", err)
	}
	ctx := context.Background()
	if err := f.eng.SetCurrentModel(ctx, engine.ModelRef{Provider: "script", Name: "m2"}); !errors.Is(err, engine.ErrModelNotFound) {
		t.Errorf("unlisted model: %v", err)
	}
	if err := f.eng.SetCurrentModel(ctx, engine.ModelRef{Provider: "script", Name: "m1"}); err != nil {
		t.Error(err)
	}
	if _, err := engine.New(engine.Options{Model: engine.ModelRef{Provider: "x", Name: "y"}}); !errors.Is(err, engine.ErrUnknownProvider) {
		t.Errorf("New with unknown provider: %v", err)
	}
}

func TestParseModelRef(t *testing.T) {
	cases := []struct {
		in       string
		provider string
		name     string
		ok       bool
	}{
		{"ollama:qwen2.5-coder:7b", "ollama", "qwen2.5-coder:7b", true},
		{"replay:examples/replay/tour.jsonl", "replay", "examples/replay/tour.jsonl", true},
		{"openai:gpt-4o", "openai", "gpt-4o", true},
		{"ollama", "", "", false},
		{":x", "", "", false},
		{"x:", "", "", false},
	}
	for _, tc := range cases {
		got, err := engine.ParseModelRef(tc.in)
		if (err == nil) != tc.ok || got.Provider != tc.provider || got.Name != tc.name {
			t.Errorf("ParseModelRef(%q) = %+v, %v", tc.in, got, err)
		}
		if tc.ok && got.String() != tc.in {
			t.Errorf("String() = %q, want %q", got.String(), tc.in)
		}
	}
}

func TestPlanValidation(t *testing.T) {
	f := newFixture(t, engine.Options{},
		step{calls: []engine.ToolCall{call("c1", "update_plan", `{"steps":[]}`), call("c2", "update_plan", `{"steps":[{"description":" "}]}`)}},
		step{text: "ok"})
	_, events := f.run(t, context.Background(), "plan", engine.TurnOptions{})
	var errs []string
	for _, e := range events {
		if d, ok := e.Data.(*engine.ToolCallEvent); ok && d.Status == engine.ToolFailed {
			errs = append(errs, d.Error)
		}
		if _, ok := e.Data.(*engine.PlanEvent); ok {
			t.Error("an invalid plan was published")
		}
	}
	if len(errs) != 2 || !strings.Contains(errs[0], "steps is empty") || !strings.Contains(errs[1], "step 1 has no description") {
		t.Errorf("errors = %v", errs)
	}
}

func TestApprovalPreview(t *testing.T) {
	content := strings.Repeat("line\n", 25)
	args, _ := json.Marshal(map[string]string{"path": "a.go", "content": content})
	f := newFixture(t, engine.Options{}, step{calls: []engine.ToolCall{call("c1", "write", string(args)),
		call("c2", "write", `{"command":"go test ./..."}`), call("c3", "write", `{"x":1}`)}}, step{text: "ok"})
	host := &fakeHost{approve: true}
	f.run(t, context.Background(), "write", engine.TurnOptions{Host: host})
	if len(host.asked) != 3 {
		t.Fatalf("asked %d times", len(host.asked))
	}
	p := host.asked[0].Preview
	if p == nil || p.Type != "text" || !strings.HasPrefix(p.Content, "a.go (125 bytes):\nline\n") || !strings.HasSuffix(p.Content, "… 5 more lines") {
		t.Errorf("write preview = %+v", p)
	}
	if p := host.asked[1].Preview; p == nil || p.Type != "command" || p.Content != "go test ./..." {
		t.Errorf("command preview = %+v", p)
	}
	if host.asked[2].Preview != nil {
		t.Errorf("preview for opaque args = %+v", host.asked[2].Preview)
	}
}

// stubRetriever is an in-test Retriever: it reports its stages and returns
// fixed snippets, or fails.
type stubRetriever struct {
	fail bool
	got  engine.RetrievalRequest
}

func (r *stubRetriever) Retrieve(_ context.Context, req engine.RetrievalRequest, emit func(engine.RetrievalEvent)) (engine.RetrievalResult, error) {
	r.got = req
	if r.fail {
		return engine.RetrievalResult{}, errors.New("index unreadable")
	}
	for _, st := range []string{engine.StageSymbolSearch, engine.StageTextSearch, engine.StageVectorSearch, engine.StageReranking} {
		emit(engine.RetrievalEvent{Stage: st, Count: 1, Message: st + " done"})
	}
	return engine.RetrievalResult{Snippets: []engine.Snippet{{Path: "a.go", StartLine: 3, EndLine: 4, Language: "go", Kind: "function", Name: "Run", Text: "func Run() {\n}\n"}}, Tokens: 5}, nil
}

func TestRetrievalStage(t *testing.T) {
	r := &stubRetriever{}
	f := newFixture(t, engine.Options{Retriever: r, Chat: engine.ChatOptions{NumCtx: 8000}}, step{text: "one"}, step{text: "two"})
	res, events := f.run(t, context.Background(), "where is Run?", engine.TurnOptions{})
	want := []string{"thinking", "thinking", "retrieval", "retrieval", "retrieval", "retrieval", "token", "final:completed"}
	if got := kinds(events); !slices.Equal(got, want) {
		t.Fatalf("events\n got %v\nwant %v", got, want)
	}
	if r.got.Query != "where is Run?" || r.got.TokenBudget != 2000 || r.got.Root != f.sess.Workspace().Root {
		t.Errorf("request = %+v", r.got)
	}
	if res.Metadata.RetrievedSnippets != 1 {
		t.Errorf("metadata = %+v", res.Metadata)
	}
	msgs := f.model.requests()[0].Messages
	if len(msgs) != 3 || msgs[1].Role != engine.RoleSystem || !strings.Contains(msgs[1].Content, "a.go:3-4 (function Run)\n```go\nfunc Run() {\n}\n```") {
		t.Fatalf("context message = %+v", msgs)
	}
	// The context is not kept in history: the next turn retrieves anew.
	f.run(t, context.Background(), "and now?", engine.TurnOptions{})
	for _, m := range f.sess.History() {
		if strings.Contains(m.Content, "Code from the workspace") {
			t.Error("retrieved context was saved in the history")
		}
	}

	r.fail = true
	_, events = f.run(t, context.Background(), "again", engine.TurnOptions{})
	if got := kinds(events); !slices.Contains(got, "error:RETRIEVAL_FAILED:true") || got[len(got)-1] != "final:error" && got[len(got)-1] != "final:completed" {
		t.Errorf("events after a failed retrieval: %v", got)
	}
}

func TestCloseSession(t *testing.T) {
	e := newFixture(t, engine.Options{}, step{text: "answer"}).eng
	ws, err := e.OpenWorkspace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.NewSession(ws, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.CloseSession(t.Context(), s.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Session(s.ID()); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("Session after CloseSession: %v, want ErrNotFound", err)
	}
	if err := e.CloseSession(t.Context(), s.ID()); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("second CloseSession: %v, want ErrNotFound", err)
	}
}

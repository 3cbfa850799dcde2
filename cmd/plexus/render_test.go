package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

func TestFormatArgs(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"path":"main.go","start_line":1,"end_line":40}`, "end_line=40 path=main.go start_line=1"},
		{`{"pattern":"func New","path":"engine"}`, `path=engine pattern="func New"`},
		{`{"steps":[1,2,3],"opts":{"a":1}}`, "opts={…} steps=[3 items]"},
		{`{"command":""}`, `command=""`},
		{`not json`, "not json"},
		{`{"content":"` + strings.Repeat("x", 100) + `"}`, "content=" + strings.Repeat("x", 59) + "…"},
	}
	for _, tc := range cases {
		if got := formatArgs(json.RawMessage(tc.in)); got != tc.want {
			t.Errorf("formatArgs(%s) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestTerminalHost(t *testing.T) {
	req := engine.ApprovalRequest{Tool: "run_command", Args: json.RawMessage(`{"command":"make test"}`),
		Risk:    engine.Risk{Level: engine.RiskHigh, Reasons: []string{"runs a process"}},
		Preview: &engine.Preview{Type: "command", Content: "make test"}}
	cases := []struct {
		input    string
		approved bool
		reason   string
	}{
		{"y\n", true, "approved at the terminal"},
		{"YES\n", true, "approved at the terminal"},
		{"n\n", false, "the user denied it at the terminal"},
		{"\n", false, "the user denied it at the terminal"},
		{"", false, "no answer (end of input)"},
	}
	for _, tc := range cases {
		var out bytes.Buffer
		broke := false
		h := &terminalHost{in: bufio.NewReader(strings.NewReader(tc.input)), out: &out, before: func() { broke = true }}
		dec, err := h.RequestApproval(context.Background(), req)
		if err != nil || dec.Approved != tc.approved || dec.Reason != tc.reason {
			t.Errorf("input %q: %+v, %v", tc.input, dec, err)
		}
		if !broke || !strings.Contains(out.String(), "? Allow run_command command=\"make test\"\n  risk high: runs a process\n  command: make test\n  [y]es / [N]o: ") {
			t.Errorf("prompt:\n%s", out.String())
		}
	}
	// A turn cancelled while the prompt waits gets the context's error.
	pr, _ := bufioPipe()
	h := &terminalHost{in: pr, out: &bytes.Buffer{}, before: func() {}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := h.RequestApproval(ctx, req); err == nil {
		t.Error("no error after the context ended")
	}
}

// bufioPipe is a reader that never delivers input.
func bufioPipe() (*bufio.Reader, func()) {
	ch := make(chan struct{})
	return bufio.NewReader(blockingReader(ch)), func() { close(ch) }
}

type blockingReader chan struct{}

func (b blockingReader) Read([]byte) (int, error) {
	<-b
	return 0, nil
}

func TestRendererSeparatesAnswerFromStatus(t *testing.T) {
	var out, errw bytes.Buffer
	r := &renderer{out: &out, errw: &errw}
	for _, d := range []engine.EventData{
		&engine.RetrievalEvent{Stage: engine.StageTextSearch, Count: 3, Message: "3 chunks match"},
		&engine.TokenEvent{Text: "Looking"},
		&engine.ToolCallEvent{Name: "read_file", Args: json.RawMessage(`{"path":"a.go"}`), Status: engine.ToolCompleted, Summary: "3 lines of a.go", Duration: 1500 * time.Microsecond},
		&engine.ToolCallEvent{Name: "write_file", Args: json.RawMessage(`{"path":"a.go"}`), Status: engine.ToolDenied, Error: "write_file was not run: denied"},
		&engine.TokenEvent{Text: "Done."},
		&engine.FinalEvent{Status: engine.TurnCompleted, Metadata: engine.TurnMetadata{RetrievedSnippets: 4, ToolCalls: 2, TokensUsed: 42, Duration: time.Second, Model: "replay:x"}},
	} {
		r.event(engine.Event{Data: d})
	}
	if got, want := out.String(), "Looking\nDone.\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	want := "· text_search: 3 chunks match\n✓ read_file path=a.go — 3 lines of a.go (2ms)\n⊘ write_file path=a.go — write_file was not run: denied\n— completed · 4 snippets retrieved · 2 tool calls · 42 tokens · 1s · replay:x\n"
	if errw.String() != want {
		t.Errorf("stderr =\n%s\nwant\n%s", errw.String(), want)
	}
}

// TestRendererShowsTimeLeft: with -v, a running tool's progress line says
// how long the call has before its deadline (issue 20 item 8).
func TestRendererShowsTimeLeft(t *testing.T) {
	var out, errw bytes.Buffer
	r := &renderer{out: &out, errw: &errw, verbose: true}
	r.event(engine.Event{Data: &engine.ToolCallEvent{Name: "count_lines_of_code", Status: engine.ToolRunning,
		Update: &engine.ToolUpdate{Progress: &engine.ToolProgress{Message: "counting src"}}, Remaining: 112*time.Second + 400*time.Millisecond}})
	if want := "  … counting src (1m52s left)\n"; errw.String() != want {
		t.Errorf("stderr = %q, want %q", errw.String(), want)
	}
}

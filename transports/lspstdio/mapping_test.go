package lspstdio

import (
	"encoding/json"
	"testing"

	"github.com/plexus-agent/plexus/engine"
)

// TestTaskMapper maps one event of each kind, in a turn's order, and
// checks the notifications, encoded as the client gets them.
func TestTaskMapper(t *testing.T) {
	pct := 40.0
	cases := []struct {
		name string
		ev   engine.EventData
		want []string // method and params JSON, one per notification
	}{
		{"thinking", &engine.ThinkingEvent{Phase: engine.PhaseAnalyzing, Message: "Reading the request"},
			[]string{`$/statusUpdate {"message":"Reading the request"}`}},
		{"retrieval", &engine.RetrievalEvent{Stage: "symbol_search", Count: 3},
			[]string{`$/statusUpdate {"message":"symbol_search: 3 results"}`}},
		{"first text", &engine.TokenEvent{Text: "Let me look."},
			[]string{`$/partialResult {"taskId":"t1","content":"Let me look.","type":"text"}`}},
		{"plan", &engine.PlanEvent{Steps: []engine.PlanStep{{Number: 1, Description: "Read main.go", FilesInvolved: []string{"main.go"}, Status: engine.StepInProgress}}, Rationale: "Start there."},
			[]string{`$/partialResult {"taskId":"t1","content":"Plan:\n1. Read main.go [in_progress] (main.go)\nStart there.\n","type":"thought"}`}},
		{"update_plan call", &engine.ToolCallEvent{CallID: "c0", Name: "update_plan", Status: engine.ToolCompleted}, nil},
		{"tool started", &engine.ToolCallEvent{CallID: "c1", Name: "read_file", Args: json.RawMessage(`{ "path": "main.go" }`), Status: engine.ToolStarted},
			[]string{`$/partialResult {"taskId":"t1","content":"Calling read_file {\"path\":\"main.go\"}\n","type":"thought"}`, `$/statusUpdate {"message":"Running read_file"}`}},
		{"tool progress", &engine.ToolCallEvent{CallID: "c1", Name: "read_file", Status: engine.ToolRunning, Update: &engine.ToolUpdate{Progress: &engine.ToolProgress{Message: "reading", Percentage: &pct}}},
			[]string{`$/statusUpdate {"message":"read_file: reading","progress":40}`}},
		{"tool output", &engine.ToolCallEvent{CallID: "c1", Name: "read_file", Status: engine.ToolRunning, Update: &engine.ToolUpdate{Output: &engine.ToolOutput{Stream: "stdout", Text: "x"}}}, nil},
		{"tool completed", &engine.ToolCallEvent{CallID: "c1", Name: "read_file", Status: engine.ToolCompleted, Summary: "3 lines"},
			[]string{`$/partialResult {"taskId":"t1","content":"read_file: 3 lines\n","type":"thought"}`}},
		{"tool failed", &engine.ToolCallEvent{CallID: "c2", Name: "read_file", Status: engine.ToolFailed, Error: "no\nsuch file", ErrorCode: engine.ToolCodeNotFound},
			[]string{`$/partialResult {"taskId":"t1","content":"read_file failed (not_found): no such file\n","type":"thought"}`}},
		{"tool denied", &engine.ToolCallEvent{CallID: "c3", Name: "write_file", Status: engine.ToolDenied, Error: "the user denied it"},
			[]string{`$/partialResult {"taskId":"t1","content":"write_file was not run: the user denied it\n","type":"thought"}`}},
		{"approval", &engine.ApprovalEvent{Request: engine.ApprovalRequest{ID: "apr_1", Tool: "write_file", Description: "write_file wants to write a.go"}},
			[]string{`$/statusUpdate {"message":"Waiting for approval: write_file wants to write a.go"}`}},
		{"patch proposed", &engine.PatchProposedEvent{Set: engine.PatchSet{ID: "pset_1", Files: []engine.FilePatch{{Path: "a.go", Diff: "--- a/a.go\n+++ b/a.go\n"}}}},
			[]string{`$/partialResult {"taskId":"t1","content":"--- a/a.go\n+++ b/a.go\n","type":"code"}`}},
		{"patch result", &engine.PatchResultEvent{SetID: "pset_1", Status: engine.PatchPartiallyApplied, Applied: []string{"a.go"}, Rejected: []string{"b.go"}},
			[]string{`$/partialResult {"taskId":"t1","content":"Changes partially applied; applied: a.go; not applied: b.go\n","type":"thought"}`}},
		{"recoverable error", &engine.ErrorEvent{Code: engine.CodeToolError, Message: "read_file failed", Recoverable: true},
			[]string{`$/logMessage {"type":"warn","message":"task t1: read_file failed"}`}},
		{"text after tools", &engine.TokenEvent{Text: "Done."},
			[]string{`$/partialResult {"taskId":"t1","content":"\n\nDone.","type":"text"}`}},
		{"more text", &engine.TokenEvent{Text: " Really."},
			[]string{`$/partialResult {"taskId":"t1","content":" Really.","type":"text"}`}},
		{"unrecoverable error", &engine.ErrorEvent{Code: engine.CodeModelError, Message: "down"}, nil},
		{"final", &engine.FinalEvent{Status: engine.TurnError, Error: "down"}, nil},
	}
	m := newTaskMapper("t1")
	for _, c := range cases {
		var got []string
		for _, n := range m.notes(engine.Event{Data: c.ev}) {
			b, err := json.Marshal(n.params)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, n.method+" "+string(b))
		}
		if len(got) != len(c.want) {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s: got %s\nwant %s", c.name, got[i], c.want[i])
			}
		}
	}
	if m.lastErr == nil || m.lastErr.Code != engine.CodeModelError {
		t.Errorf("last error %+v", m.lastErr)
	}
}

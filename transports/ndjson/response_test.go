package ndjson

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/plexus-agent/plexus/engine"
)

// encodeAll encodes messages as the lineWriter does, timestamps zero.
func encodeAll(t *testing.T, ms []message) []string {
	t.Helper()
	var out []string
	for _, m := range ms {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(m); err != nil {
			t.Fatalf("encode %#v: %v", m, err)
		}
		out = append(out, strings.TrimSuffix(b.String(), "\n"))
	}
	return out
}

func TestTurnMapperWire(t *testing.T) {
	args := json.RawMessage(`{"path":"src"}`)
	tests := []struct {
		name string
		ev   []engine.EventData // fed in order to one mapper
		want []string           // lines of the last event
	}{
		{name: "token", ev: []engine.EventData{&engine.TokenEvent{Text: "Hel\"lo"}},
			want: []string{`{"type":"token","id":"r1","token":"Hel\"lo","timestamp":0}`}},
		{name: "empty token dropped", ev: []engine.EventData{&engine.TokenEvent{}}},
		{name: "thinking dropped", ev: []engine.EventData{&engine.ThinkingEvent{Phase: engine.PhaseAnalyzing, Message: "x"}}},
		{name: "plan dropped", ev: []engine.EventData{&engine.PlanEvent{Steps: []engine.PlanStep{{Number: 1, Description: "x"}}}}},
		{name: "approval dropped", ev: []engine.EventData{&engine.ApprovalEvent{}}},
		{name: "error event dropped", ev: []engine.EventData{&engine.ErrorEvent{Code: engine.CodeToolError, Message: "x", Recoverable: true}}},
		{name: "tool started", ev: []engine.EventData{&engine.ToolCallEvent{CallID: "c1", Name: "list_files", Args: args, Status: engine.ToolStarted}},
			want: []string{`{"type":"tool_use","id":"r1","data":{"toolId":"c1","toolName":"list_files","input":{"path":"src"}},"timestamp":0}`}},
		{name: "tool running dropped", ev: []engine.EventData{
			&engine.ToolCallEvent{CallID: "c1", Name: "list_files", Args: args, Status: engine.ToolStarted},
			&engine.ToolCallEvent{CallID: "c1", Name: "list_files", Args: args, Status: engine.ToolRunning,
				Update: &engine.ToolUpdate{Progress: &engine.ToolProgress{Message: "half"}}},
		}},
		{name: "tool completed", ev: []engine.EventData{
			&engine.ToolCallEvent{CallID: "c1", Name: "list_files", Args: args, Status: engine.ToolStarted},
			&engine.ToolCallEvent{CallID: "c1", Name: "list_files", Args: args, Status: engine.ToolCompleted,
				Result: json.RawMessage(`{"files":["index.ts","app.tsx"]}`), Summary: "2 files"},
		}, want: []string{`{"type":"tool_result","id":"r1","data":{"toolId":"c1","toolName":"list_files","result":{"files":["index.ts","app.tsx"]}},"timestamp":0}`}},
		{name: "tool failed after start", ev: []engine.EventData{
			&engine.ToolCallEvent{CallID: "c1", Name: "read_file", Args: args, Status: engine.ToolStarted},
			&engine.ToolCallEvent{CallID: "c1", Name: "read_file", Args: args, Status: engine.ToolFailed,
				Error: "src does not exist", ErrorCode: engine.ToolCodeNotFound},
		}, want: []string{`{"type":"tool_result","id":"r1","data":{"toolId":"c1","toolName":"read_file","result":{"error":"src does not exist","code":"not_found"}},"timestamp":0}`}},
		{name: "tool denied without start gets its tool_use", ev: []engine.EventData{
			&engine.ToolCallEvent{CallID: "c2", Name: "write_file", Args: args, Status: engine.ToolDenied,
				Error: "write_file was not run: no", ErrorCode: engine.ToolCodePermissionDenied},
		}, want: []string{
			`{"type":"tool_use","id":"r1","data":{"toolId":"c2","toolName":"write_file","input":{"path":"src"}},"timestamp":0}`,
			`{"type":"tool_result","id":"r1","data":{"toolId":"c2","toolName":"write_file","result":{"error":"write_file was not run: no","code":"permission_denied"}},"timestamp":0}`,
		}},
		{name: "arguments that are not JSON", ev: []engine.EventData{
			&engine.ToolCallEvent{CallID: "c3", Name: "list_files", Args: json.RawMessage(`{"path":`), Status: engine.ToolFailed,
				Error: "the arguments of list_files are not valid JSON", ErrorCode: engine.ToolCodeInvalidInput},
		}, want: []string{
			`{"type":"tool_use","id":"r1","data":{"toolId":"c3","toolName":"list_files","input":"{\"path\":"},"timestamp":0}`,
			`{"type":"tool_result","id":"r1","data":{"toolId":"c3","toolName":"list_files","result":{"error":"the arguments of list_files are not valid JSON","code":"invalid_input"}},"timestamp":0}`,
		}},
		{name: "failure without code or text", ev: []engine.EventData{
			&engine.ToolCallEvent{CallID: "c4", Name: "x", Status: engine.ToolFailed},
		}, want: []string{
			`{"type":"tool_use","id":"r1","data":{"toolId":"c4","toolName":"x","input":{}},"timestamp":0}`,
			`{"type":"tool_result","id":"r1","data":{"toolId":"c4","toolName":"x","result":{"error":"x failed","code":"failed"}},"timestamp":0}`,
		}},
		{name: "completed result that is not JSON", ev: []engine.EventData{
			&engine.ToolCallEvent{CallID: "c5", Name: "x", Args: args, Status: engine.ToolStarted},
			&engine.ToolCallEvent{CallID: "c5", Name: "x", Args: args, Status: engine.ToolCompleted, Result: json.RawMessage(`plain`)},
		}, want: []string{`{"type":"tool_result","id":"r1","data":{"toolId":"c5","toolName":"x","result":"plain"},"timestamp":0}`}},
		{name: "final completed", ev: []engine.EventData{&engine.FinalEvent{Status: engine.TurnCompleted, Message: "answer"}},
			want: []string{`{"type":"done","id":"r1","timestamp":0}`}},
		{name: "final error", ev: []engine.EventData{&engine.FinalEvent{Status: engine.TurnError, Error: "ollama: model \"x\" not found"}},
			want: []string{`{"type":"error","id":"r1","error":"ollama: model \"x\" not found","timestamp":0}`}},
		{name: "final timeout", ev: []engine.EventData{&engine.FinalEvent{Status: engine.TurnTimeout, Error: "the turn ran past its deadline"}},
			want: []string{`{"type":"error","id":"r1","error":"the turn ran past its deadline","timestamp":0}`}},
		{name: "final cancelled", ev: []engine.EventData{&engine.FinalEvent{Status: engine.TurnCancelled, Error: "cancelled"}},
			want: []string{`{"type":"error","id":"r1","error":"request cancelled: the agent is shutting down","timestamp":0}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newTurnMapper("r1")
			var last []message
			for i, d := range tt.ev {
				last = m.wire(engine.Event{Seq: uint64(i + 1), Data: d})
			}
			got := encodeAll(t, last)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			for _, msg := range last {
				_, final := tt.ev[len(tt.ev)-1].(*engine.FinalEvent)
				if isTerminal(msg) != final {
					t.Errorf("isTerminal(%T) = %v", msg, !final)
				}
			}
		})
	}
}

func TestReadyLine(t *testing.T) {
	got := encodeAll(t, []message{newReady()})[0]
	want := `{"type":"ready","version":"1.0.0","capabilities":["streaming","tools","attachments"],"timestamp":0}`
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

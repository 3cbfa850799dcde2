package lspstdio

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/creachadair/jrpc2"
	"github.com/creachadair/jrpc2/channel"

	"github.com/plexus-agent/plexus/engine"
)

// TestTaskStreamsAndCompletes runs one task: initialize, executeTask with
// an editor context, a turn that calls an engine tool; the answer streams
// as $/partialResult text, the tool call as thoughts, and the result
// comes last.
func TestTaskStreamsAndCompletes(t *testing.T) {
	model := &scriptModel{replies: map[string][]reply{
		"What is in this project?": {
			{chunks: []engine.ChatChunk{text("Let me look."), call("c1", "list_files", `{"path":"."}`),
				{Usage: &engine.Usage{PromptTokens: 40, CompletionTokens: 6}}}},
			{chunks: []engine.ChatChunk{text("It holds "), text("main.go "), text("and notes.txt."),
				{Usage: &engine.Usage{PromptTokens: 60, CompletionTokens: 8}}}},
		},
	}}
	h := start(t, model, nil)
	h.initialize(map[string]any{"someEditorSetting": true})
	id := h.task("t1", "What is in this project?", map[string]any{
		"activeEditorContent": "package main\n\nfunc main() { println(\"unsaved\") }\n",
		"activeEditorPath":    h.ws.Root + "/main.go",
		"selection":           "func main()",
		"openFiles":           []string{"main.go"},
		"relevantFiles":       []string{"main.go"},
	})
	res := h.taskResult(id)
	if res.Status != "completed" || res.Message != "It holds main.go and notes.txt." {
		t.Fatalf("result %+v", res)
	}
	if md := res.Metadata; md == nil || md.TokensUsed != 114 || md.ModelCalls != 2 || strings.Join(md.ToolsUsed, ",") != "list_files" {
		t.Errorf("metadata %+v", res.Metadata)
	}
	ms := h.snapshot()
	if got := partials(ms, "t1", "text"); got != "Let me look.\n\nIt holds main.go and notes.txt." {
		t.Errorf("text partials %q", got)
	}
	thoughts := partials(ms, "t1", "thought")
	for _, want := range []string{`Calling list_files {"path":"."}`, "list_files: 2 files"} {
		if !strings.Contains(thoughts, want) {
			t.Errorf("thoughts lack %q:\n%s", want, thoughts)
		}
	}
	// Shapes: exactly the contract's fields.
	for _, m := range ms {
		want := map[string]string{
			"$/partialResult": "content,taskId,type",
			"$/logMessage":    "message,type",
			"$/taskError":     "details,message,taskId",
		}[m.Method]
		if want != "" && keysOf(t, m.Params) != want {
			t.Errorf("%s params %s", m.Method, m.Params)
		}
		if m.Method == "$/statusUpdate" {
			if k := keysOf(t, m.Params); k != "message" && k != "message,progress" {
				t.Errorf("$/statusUpdate params %s", m.Params)
			}
		}
	}
	if !has("$/logMessage", func(m msg) bool { return strings.Contains(m.param("message"), "Plexus is ready") })(ms) {
		t.Errorf("no ready $/logMessage:\n%s", dump(ms))
	}
	if !has("$/statusUpdate", func(m msg) bool { return m.param("message") == "list_files: listing" })(ms) {
		t.Errorf("no progress $/statusUpdate:\n%s", dump(ms))
	}
	// The result is the last message of the task.
	if last := ms[len(ms)-1]; !last.isResponse() || string(last.ID) != id {
		t.Errorf("the last message is not the result: %s", last.raw)
	}
	// The output is nothing but frames, though the logger wrote at debug
	// level all along.
	if n := len(checkOutput(t, h.rawOutput())); n != len(ms) {
		t.Errorf("%d frames written, the client read %d", n, len(ms))
	}
	// The model saw the selection, the editor's content and the engine's
	// context section built from the paths.
	user := ""
	for _, m := range model.requests()[0].Messages {
		if m.Role == engine.RoleUser {
			user = m.Content
		}
	}
	for _, want := range []string{"Selected text in the active editor (main.go):\n```go\nfunc main()\n```",
		"as the editor holds it (unsaved changes included):\n```go\npackage main", `println("unsaved")`, "unsaved changes"} {
		if !strings.Contains(user, want) {
			t.Errorf("the user message lacks %q:\n%s", want, user)
		}
	}
	// The model was offered the default host tool.
	var names []string
	for _, sp := range model.requests()[0].Tools {
		names = append(names, sp.Name)
	}
	if !strings.Contains(strings.Join(names, ","), "read_buffer") {
		t.Errorf("tools offered %v", names)
	}
}

// hostToolScript calls read_buffer and then answers.
func hostToolScript(prompt string) map[string][]reply {
	return map[string][]reply{prompt: {
		{chunks: []engine.ChatChunk{call("c1", "read_buffer", `{"path":"main.go"}`)}},
		{chunks: []engine.ChatChunk{text("The buffer says hello.")}},
	}}
}

// TestHostToolRoundTrip answers $/requestToolExecution each way the
// contract allows: as the response to the request, and with a toolResponse
// call (request or notification) after acknowledging the request with
// null.
func TestHostToolRoundTrip(t *testing.T) {
	const buffer = "package main // unsaved edit"
	cases := []struct {
		name   string
		answer func(h *harness, m msg) (any, *jrpc2.Error, bool)
		// check inspects the messages once the task is done.
		check func(t *testing.T, h *harness, ms []msg)
	}{
		{name: "response", answer: func(_ *harness, m msg) (any, *jrpc2.Error, bool) {
			return map[string]any{"content": buffer}, nil, true
		}},
		{name: "toolResponse request", answer: func(h *harness, m msg) (any, *jrpc2.Error, bool) {
			id := h.request("toolResponse", map[string]any{"toolCallId": m.param("toolCallId"), "result": map[string]any{"content": buffer}, "error": nil})
			h.waitFor("the toolResponse answer", func(ms []msg) bool {
				for _, r := range ms {
					if r.isResponse() && string(r.ID) == id {
						return true
					}
				}
				return false
			})
			return nil, nil, true // the acknowledgement, after the answer
		}, check: func(t *testing.T, h *harness, ms []msg) {
			// Request 1 is executeTask, 2 the toolResponse.
			if m := h.response("2"); m.Error != nil || string(m.Result) != "null" {
				t.Errorf("toolResponse answer %s", m.raw)
			}
		}},
		{name: "toolResponse notification then null", answer: func(h *harness, m msg) (any, *jrpc2.Error, bool) {
			h.notification("toolResponse", map[string]any{"toolCallId": m.param("toolCallId"), "result": map[string]any{"content": buffer}, "error": nil})
			return nil, nil, true
		}},
		{name: "null then toolResponse", answer: func(h *harness, m msg) (any, *jrpc2.Error, bool) {
			go func() {
				time.Sleep(50 * time.Millisecond) // the acknowledgement goes first
				h.notification("toolResponse", map[string]any{"toolCallId": m.param("toolCallId"), "result": map[string]any{"content": buffer}})
			}()
			return nil, nil, true
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, &scriptModel{replies: hostToolScript("Read the buffer.")}, nil)
			var requests []msg
			h.setHandler(func(m msg) (any, *jrpc2.Error, bool) {
				requests = append(requests, m)
				return tc.answer(h, m)
			})
			h.initialize(nil)
			res := h.taskResult(h.task("t1", "Read the buffer.", nil))
			if res.Status != "completed" || res.Message != "The buffer says hello." {
				t.Fatalf("result %+v", res)
			}
			if len(requests) != 1 {
				t.Fatalf("%d server requests, want 1", len(requests))
			}
			r := requests[0]
			if r.Method != "$/requestToolExecution" || r.param("toolName") != "read_buffer" || r.param("taskId") != "t1" || !strings.HasPrefix(r.param("toolCallId"), "tc_") {
				t.Errorf("request %s", r.raw)
			}
			if keysOf(t, r.Params) != "taskId,toolCallId,toolInput,toolName" {
				t.Errorf("request params %s", r.Params)
			}
			var in map[string]any
			json.Unmarshal(mustField(t, r.Params, "toolInput"), &in)
			if in["path"] != "main.go" {
				t.Errorf("toolInput %v", in)
			}
			tools := h.model.toolMessages("Read the buffer.")
			if len(tools) != 1 || !strings.Contains(tools[0], buffer) {
				t.Errorf("the model got %q", tools)
			}
			ms := h.snapshot()
			if th := partials(ms, "t1", "thought"); !strings.Contains(th, "read_buffer: answered by the editor") {
				t.Errorf("thoughts %q", th)
			}
			// No error went back for the acknowledgement.
			for _, m := range ms {
				if m.Error != nil {
					t.Errorf("error message %s", m.raw)
				}
			}
			if tc.check != nil {
				tc.check(t, h, ms)
			}
		})
	}
}

func mustField(t *testing.T, raw json.RawMessage, key string) json.RawMessage {
	t.Helper()
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatal(err)
	}
	return obj[key]
}

// TestHostToolError: the host's error (code -32003, by response or by
// toolResponse) becomes a tool error the model sees; the turn goes on.
func TestHostToolError(t *testing.T) {
	for _, viaToolResponse := range []bool{false, true} {
		name := "response"
		if viaToolResponse {
			name = "toolResponse"
		}
		t.Run(name, func(t *testing.T) {
			h := start(t, &scriptModel{replies: hostToolScript("Read the buffer.")}, nil)
			h.setHandler(func(m msg) (any, *jrpc2.Error, bool) {
				if viaToolResponse {
					h.notification("toolResponse", map[string]any{"toolCallId": m.param("toolCallId"), "result": nil,
						"error": map[string]any{"code": -32003, "message": "the buffer was closed"}})
					return nil, nil, true
				}
				return nil, &jrpc2.Error{Code: -32003, Message: "the buffer was closed"}, true
			})
			h.initialize(nil)
			res := h.taskResult(h.task("t1", "Read the buffer.", nil))
			if res.Status != "completed" {
				t.Fatalf("result %+v", res)
			}
			tools := h.model.toolMessages("Read the buffer.")
			if len(tools) != 1 || !strings.Contains(tools[0], "the editor reported an error running read_buffer (code -32003): the buffer was closed") {
				t.Errorf("the model got %q", tools)
			}
			ms := h.snapshot()
			if th := partials(ms, "t1", "thought"); !strings.Contains(th, "read_buffer failed (failed): the editor reported an error") {
				t.Errorf("thoughts %q", th)
			}
			if !has("$/logMessage", func(m msg) bool {
				return m.param("type") == "warn" && strings.Contains(m.param("message"), "buffer was closed")
			})(ms) {
				t.Errorf("no warning $/logMessage:\n%s", dump(ms))
			}
		})
	}
}

// TestToolResponseUnknownID: a toolResponse whose toolCallId matches
// nothing is -32602 (as a request) or a $/logMessage error (as a
// notification); one for a call already answered says so.
func TestToolResponseUnknownID(t *testing.T) {
	h := start(t, &scriptModel{replies: hostToolScript("Read the buffer.")}, nil)
	var answered atomic.Value
	h.setHandler(func(m msg) (any, *jrpc2.Error, bool) {
		answered.Store(m.param("toolCallId"))
		return map[string]any{"content": "x"}, nil, true
	})
	h.initialize(nil)

	e := h.errorOf(h.request("toolResponse", map[string]any{"toolCallId": "tc_nothing", "result": 1}))
	if e.Code != jrpc2.InvalidParams || !strings.Contains(e.Message, `toolCallId "tc_nothing" matches no $/requestToolExecution`) {
		t.Errorf("unknown id: %v", e)
	}
	h.notification("toolResponse", map[string]any{"toolCallId": "tc_other", "result": 1})
	h.waitFor("a $/logMessage error", has("$/logMessage", func(m msg) bool {
		return m.param("type") == "error" && strings.Contains(m.param("message"), `"tc_other" matches no`)
	}))
	e = h.errorOf(h.request("toolResponse", map[string]any{"result": 1}))
	if e.Code != jrpc2.InvalidParams || !strings.Contains(e.Message, "toolCallId must be a non-empty string") {
		t.Errorf("no id: %v", e)
	}
	e = h.errorOf(h.request("toolResponse", map[string]any{"toolCallId": 5}))
	if e.Code != jrpc2.InvalidParams || !strings.Contains(e.Message, "toolCallId must be a string, not a number") {
		t.Errorf("numeric id: %v", e)
	}

	if res := h.taskResult(h.task("t1", "Read the buffer.", nil)); res.Status != "completed" {
		t.Fatalf("result %+v", res)
	}
	id, _ := answered.Load().(string)
	e = h.errorOf(h.request("toolResponse", map[string]any{"toolCallId": id, "result": 2}))
	if e.Code != jrpc2.InvalidParams || !strings.Contains(e.Message, "is no longer pending") {
		t.Errorf("answered id: %v", e)
	}
}

// TestHostToolTimeout: a host that never answers fails the call with a
// timeout after hostToolTimeoutMs; the turn goes on, and a late answer is
// refused.
func TestHostToolTimeout(t *testing.T) {
	h := start(t, &scriptModel{replies: hostToolScript("Read the buffer.")}, nil)
	var id atomic.Value
	h.setHandler(func(m msg) (any, *jrpc2.Error, bool) {
		id.Store(m.param("toolCallId"))
		return nil, nil, false // never answers
	})
	h.initialize(map[string]any{"hostToolTimeoutMs": 300})
	began := time.Now()
	res := h.taskResult(h.task("t1", "Read the buffer.", nil))
	if res.Status != "completed" {
		t.Fatalf("result %+v", res)
	}
	if d := time.Since(began); d < 300*time.Millisecond || d > 5*time.Second {
		t.Errorf("the task took %s with a 300ms host tool timeout", d)
	}
	tools := h.model.toolMessages("Read the buffer.")
	if len(tools) != 1 || !strings.Contains(tools[0], "the editor did not answer read_buffer within 300ms") || !strings.Contains(tools[0], "timeout") {
		t.Errorf("the model got %q", tools)
	}
	e := h.errorOf(h.request("toolResponse", map[string]any{"toolCallId": id.Load(), "result": "late"}))
	if e.Code != jrpc2.InvalidParams || !strings.Contains(e.Message, "no longer pending") {
		t.Errorf("late answer: %v", e)
	}
}

// TestApprovalThroughHost: a host tool that needs approval is asked about
// with toolName "approve" first; approved it runs, denied the model hears
// why.
func TestApprovalThroughHost(t *testing.T) {
	script := func(prompt string) map[string][]reply {
		return map[string][]reply{prompt: {
			{chunks: []engine.ChatChunk{call("c1", "apply_edit", `{"path":"main.go","text":"x"}`)}},
			{chunks: []engine.ChatChunk{text("Done.")}},
		}}
	}
	hostTools := []map[string]any{{"name": "apply_edit", "description": "Apply an edit in the editor.", "inputSchema": map[string]any{"type": "object"}}}
	for _, approve := range []bool{true, false} {
		t.Run(map[bool]string{true: "approved", false: "denied"}[approve], func(t *testing.T) {
			h := start(t, &scriptModel{replies: script("Edit it.")}, nil)
			var asked []msg
			h.setHandler(func(m msg) (any, *jrpc2.Error, bool) {
				asked = append(asked, m)
				if m.param("toolName") == "approve" {
					return map[string]any{"approved": approve, "reason": "not now"}, nil, true
				}
				return map[string]any{"applied": true}, nil, true
			})
			h.initialize(map[string]any{"hostTools": hostTools})
			if res := h.taskResult(h.task("t1", "Edit it.", nil)); res.Status != "completed" {
				t.Fatalf("result %+v", res)
			}
			want := 1
			if approve {
				want = 2
			}
			if len(asked) != want || asked[0].param("toolName") != "approve" {
				t.Fatalf("server requests %v", dump(asked))
			}
			var in approvalInput
			json.Unmarshal(mustField(t, asked[0].Params, "toolInput"), &in)
			if in.Tool != "apply_edit" || in.ToolCallID != "c1" || in.Risk.Level != "medium" || !strings.HasPrefix(in.RequestID, "apr_") {
				t.Errorf("approval input %+v", in)
			}
			tools := h.model.toolMessages("Edit it.")
			switch {
			case approve && (len(tools) != 1 || !strings.Contains(tools[0], `"applied":true`)):
				t.Errorf("the model got %q", tools)
			case !approve && (len(tools) != 1 || !strings.Contains(tools[0], "not now")):
				t.Errorf("the model got %q", tools)
			}
		})
	}
}

// TestSecondTaskQueued: executeTask requests run one at a time in arrival
// order; a later one waits (with a $/statusUpdate saying so) and runs when
// the first ends; beyond MaxQueuedTasks one is refused with -32001, and a
// taskId in use with -32602.
func TestSecondTaskQueued(t *testing.T) {
	gate := make(chan struct{})
	model := &scriptModel{
		replies: map[string][]reply{
			"First.":  {{chunks: []engine.ChatChunk{text("one")}}},
			"Second.": {{chunks: []engine.ChatChunk{text("two")}}},
		},
		gates: map[string]chan struct{}{"First.": gate},
	}
	h := start(t, model, func(o *Options) { o.MaxQueuedTasks = 1 })
	h.initialize(nil)
	first := h.task("t1", "First.", nil)
	model.waitEntered(t, "First.")
	second := h.task("t2", "Second.", nil)
	h.waitFor("the queued status", has("$/statusUpdate", func(m msg) bool { return strings.Contains(m.param("message"), "Task t2 is queued") }))
	third := h.task("t3", "Third.", nil)
	if e := h.errorOf(third); e.Code != CodeTaskError || !strings.Contains(e.Message, "1 tasks are already waiting") {
		t.Errorf("third: %v", e)
	}
	close(gate)
	if r := h.taskResult(first); r.Message != "one" {
		t.Errorf("first %+v", r)
	}
	if r := h.taskResult(second); r.Message != "two" {
		t.Errorf("second %+v", r)
	}
	// t2 streamed only after t1's result.
	ms := h.snapshot()
	iFirst, iSecondStart := -1, -1
	for i, m := range ms {
		if m.isResponse() && string(m.ID) == first {
			iFirst = i
		}
		if m.Method == "$/partialResult" && m.param("taskId") == "t2" && iSecondStart < 0 {
			iSecondStart = i
		}
	}
	if iFirst < 0 || iSecondStart < iFirst {
		t.Errorf("t2 streamed before t1's result:\n%s", dump(ms))
	}

	// A taskId in use is refused.
	gate2 := make(chan struct{})
	model.gates["Slow."] = gate2
	model.replies["Slow."] = []reply{{chunks: []engine.ChatChunk{text("slow")}}}
	slow := h.task("t9", "Slow.", nil)
	model.waitEntered(t, "Slow.")
	if e := h.errorOf(h.task("t9", "Slow.", nil)); e.Code != jrpc2.InvalidParams || !strings.Contains(e.Message, `taskId "t9" is already running or queued`) {
		t.Errorf("duplicate: %v", e)
	}
	close(gate2)
	h.taskResult(slow)
}

// TestCancelRequest: $/cancelRequest cancels the running task; its result
// is status error.
func TestCancelRequest(t *testing.T) {
	gate := make(chan struct{})
	defer close(gate)
	model := &scriptModel{
		replies: map[string][]reply{"Wait.": {{chunks: []engine.ChatChunk{text("never")}}}},
		gates:   map[string]chan struct{}{"Wait.": gate},
	}
	h := start(t, model, nil)
	h.initialize(nil)
	id := h.task("t1", "Wait.", nil)
	model.waitEntered(t, "Wait.")
	h.notification("$/cancelRequest", map[string]any{"id": json.RawMessage(id)})
	res := h.taskResult(id)
	if res.Status != "error" || res.Message != "the task was cancelled by the client ($/cancelRequest)" {
		t.Errorf("result %+v", res)
	}
	ms := h.waitFor("$/taskError", has("$/taskError", nil))
	te := filter(ms, methodIs("$/taskError"))[0]
	if te.param("taskId") != "t1" || !strings.Contains(string(te.Params), `"status":"cancelled"`) {
		t.Errorf("$/taskError %s", te.raw)
	}
}

// TestShutdown: shutdown cancels the running task (its result and
// $/taskError are written) and Serve returns nil while the input is still
// open; as a request it is answered first.
func TestShutdown(t *testing.T) {
	for _, asRequest := range []bool{false, true} {
		t.Run(map[bool]string{false: "notification", true: "request"}[asRequest], func(t *testing.T) {
			gate := make(chan struct{})
			defer close(gate)
			model := &scriptModel{
				replies: map[string][]reply{"Wait.": {{chunks: []engine.ChatChunk{text("never")}}}},
				gates:   map[string]chan struct{}{"Wait.": gate},
			}
			h := start(t, model, nil)
			h.initialize(nil)
			id := h.task("t1", "Wait.", nil)
			model.waitEntered(t, "Wait.")
			var sid string
			if asRequest {
				sid = h.request("shutdown", nil)
			} else {
				h.notification("shutdown", nil)
			}
			select {
			case err := <-h.done:
				h.done <- err
				if err != nil {
					t.Errorf("Serve: %v", err)
				}
			case <-time.After(waitTimeout):
				t.Fatal("Serve did not return after shutdown")
			}
			res := h.taskResult(id)
			if res.Status != "error" || !strings.Contains(res.Message, "shutting down") {
				t.Errorf("result %+v", res)
			}
			ms := h.snapshot()
			if !has("$/taskError", func(m msg) bool { return strings.Contains(m.param("message"), "shutting down") })(ms) {
				t.Errorf("no $/taskError:\n%s", dump(ms))
			}
			if asRequest {
				if m := h.response(sid); m.Error != nil || string(m.Result) != "null" {
					t.Errorf("shutdown response %s", m.raw)
				}
			}
			if _, err := h.eng.Session("nothing"); !errors.Is(err, engine.ErrNotFound) {
				t.Errorf("engine: %v", err)
			}
		})
	}
}

// TestInitializeAndConfigErrors covers -32000 (before and after a failed
// initialize), -32002 (updateConfiguration) and their $/logMessage forms
// for notifications.
func TestInitializeAndConfigErrors(t *testing.T) {
	model := &scriptModel{replies: map[string][]reply{"Hi.": {{chunks: []engine.ChatChunk{text("hello")}}}}}
	h := start(t, model, func(o *Options) { o.Workspace = nil })

	if e := h.errorOf(h.task("t0", "Hi.", nil)); e.Code != CodeInitError || !strings.Contains(e.Message, "not initialized: send initialize first") {
		t.Errorf("task before initialize: %v", e)
	}
	if e := h.errorOf(h.request("updateConfiguration", map[string]any{"updatedConfig": map[string]any{}})); e.Code != CodeInitError {
		t.Errorf("update before initialize: %v", e)
	}
	// No workspaceRoot and no default workspace.
	if e := h.errorOf(h.request("initialize", map[string]any{"initialConfig": map[string]any{}})); e.Code != CodeInitError || !strings.Contains(e.Message, "no workspaceRoot") {
		t.Errorf("no workspace: %v", e)
	}
	// A workspaceRoot that is not a directory.
	h.notification("initialize", map[string]any{"workspaceRoot": h.ws.Root + "/main.go"})
	h.waitFor("the initialize error", has("$/logMessage", func(m msg) bool {
		return m.param("type") == "error" && strings.Contains(m.param("message"), "initialize failed (-32000): workspaceRoot")
	}))
	if e := h.errorOf(h.task("t0", "Hi.", nil)); e.Code != CodeInitError || !strings.Contains(e.Message, "failed to initialize") {
		t.Errorf("task after a failed initialize: %v", e)
	}
	// Invalid initialConfig.
	for _, cfg := range []map[string]any{
		{"hostTools": []map[string]any{{"name": "approve"}}},
		{"hostTools": []map[string]any{{"name": "bad name"}}},
		{"hostTools": "read_buffer"},
		{"model": "nope"},
		{"model": "other:x"},
		{"hostToolTimeoutMs": -1},
	} {
		if e := h.errorOf(h.request("initialize", map[string]any{"workspaceRoot": h.ws.Root, "initialConfig": cfg})); e.Code != CodeInitError || !strings.Contains(e.Message, "initialConfig: ") {
			t.Errorf("initialConfig %v: %v", cfg, e)
		}
	}
	// Wrong types are invalid params.
	if e := h.errorOf(h.request("initialize", map[string]any{"workspaceRoot": 3})); e.Code != jrpc2.InvalidParams {
		t.Errorf("numeric workspaceRoot: %v", e)
	}

	// A good initialize (as a request: its result), a second one refused.
	var init initializeResult
	h.result(h.request("initialize", map[string]any{"workspaceRoot": "file://" + h.ws.Root, "initialConfig": map[string]any{
		"model": "script:test", "hostTools": []map[string]any{{"name": "read_buffer", "readOnly": true}, {"name": "run_in_terminal"}},
	}}), &init)
	if init.WorkspaceRoot != h.ws.Root || init.Model != "script:test" || strings.Join(init.HostTools, ",") != "read_buffer,run_in_terminal" || init.ServerInfo.Name != "plexus" {
		t.Errorf("initialize result %+v", init)
	}
	if e := h.errorOf(h.request("initialize", map[string]any{"workspaceRoot": h.ws.Root})); e.Code != CodeInitError || !strings.Contains(e.Message, "already initialized") {
		t.Errorf("second initialize: %v", e)
	}

	// updateConfiguration: errors are -32002; the request form answers
	// null; the notification form reports errors as $/logMessage.
	for _, cfg := range []any{map[string]any{"model": "missing:x"}, map[string]any{"hostTools": []any{1}}, nil, "x"} {
		if e := h.errorOf(h.request("updateConfiguration", map[string]any{"updatedConfig": cfg})); e.Code != CodeConfigError {
			t.Errorf("updatedConfig %v: %v", cfg, e)
		}
	}
	// A model the provider does not list is accepted (the provider is
	// asked in the background) and the host is warned, naming why.
	h.result(h.request("updateConfiguration", map[string]any{"updatedConfig": map[string]any{"model": "script:gpt-9"}}), nil)
	h.waitFor("the model warning", has("$/logMessage", func(m msg) bool {
		return m.param("type") == "warn" && strings.Contains(m.param("message"), `Tasks with model script:gpt-9 will fail: `) && strings.Contains(m.param("message"), `model "gpt-9" is not among the 1 models`)
	}))
	h.result(h.request("updateConfiguration", map[string]any{"updatedConfig": map[string]any{"model": "script:test"}}), nil)
	h.notification("updateConfiguration", map[string]any{"updatedConfig": map[string]any{"approvalTimeoutMs": "soon"}})
	h.waitFor("the configuration error", has("$/logMessage", func(m msg) bool {
		return m.param("type") == "error" && strings.Contains(m.param("message"), "updateConfiguration failed (-32002): updatedConfig: approvalTimeoutMs")
	}))
	if m := h.response(h.request("updateConfiguration", map[string]any{"updatedConfig": map[string]any{"hostTools": []map[string]any{{"name": "open_diff", "readOnly": true}}}})); m.Error != nil {
		t.Errorf("good update: %s", m.raw)
	}
	// The next task offers the new host tools.
	if res := h.taskResult(h.task("t1", "Hi.", nil)); res.Status != "completed" {
		t.Fatalf("result %+v", res)
	}
	var names []string
	for _, sp := range model.requests()[0].Tools {
		names = append(names, sp.Name)
	}
	if got := strings.Join(names, ","); !strings.Contains(got, "open_diff") || strings.Contains(got, "run_in_terminal") {
		t.Errorf("tools offered %s", got)
	}
}

// TestTaskParamErrors: bad executeTask params are -32602, bad context
// -32004; none of them runs a turn.
func TestTaskParamErrors(t *testing.T) {
	model := &scriptModel{}
	h := start(t, model, nil)
	h.initialize(nil)
	cases := []struct {
		params map[string]any
		code   jrpc2.Code
		text   string
	}{
		{map[string]any{"prompt": "x"}, jrpc2.InvalidParams, "taskId must be a non-empty string"},
		{map[string]any{"taskId": "a", "prompt": " "}, jrpc2.InvalidParams, "prompt must be a non-empty string"},
		{map[string]any{"taskId": 1, "prompt": "x"}, jrpc2.InvalidParams, "taskId must be a string, not a number"},
		{map[string]any{"taskId": "a", "prompt": "x", "context": "main.go"}, CodeContextError, "context must be an object"},
		{map[string]any{"taskId": "a", "prompt": "x", "context": map[string]any{"openFiles": "main.go"}}, CodeContextError, "openFiles must be a array"},
		{map[string]any{"taskId": "a", "prompt": "x", "context": map[string]any{"activeEditorPath": "../secret.txt"}}, CodeContextError, `paths outside the workspace`},
		{map[string]any{"taskId": "a", "prompt": "x", "context": map[string]any{"relevantFiles": []string{"/etc/passwd"}}}, CodeContextError, `"/etc/passwd" (outside the workspace)`},
	}
	for _, c := range cases {
		e := h.errorOf(h.request("executeTask", c.params))
		if e.Code != c.code || !strings.Contains(e.Message, c.text) {
			t.Errorf("%v: got %v, want %d %q", c.params, e, c.code, c.text)
		}
	}
	if n := len(model.requests()); n != 0 {
		t.Errorf("%d model calls", n)
	}
}

// TestJRPC2Client drives the server with jrpc2's own client over
// channel.LSP, answering $/requestToolExecution from its callback handler.
func TestJRPC2Client(t *testing.T) {
	model := &scriptModel{replies: hostToolScript("Read the buffer.")}
	eng, ws := newEngine(t, model)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- New(Options{Engine: eng, Workspace: ws}).Serve(context.Background(), inR, outW)
		outW.Close()
	}()
	var texts strings.Builder
	var notes atomic.Int32
	cli := jrpc2.NewClient(channel.LSP(outR, inW), &jrpc2.ClientOptions{
		OnNotify: func(req *jrpc2.Request) {
			notes.Add(1)
			var p partialResult
			if req.Method() == "$/partialResult" && req.UnmarshalParams(&p) == nil && p.Type == "text" {
				texts.WriteString(p.Content)
			}
		},
		OnCallback: func(ctx context.Context, req *jrpc2.Request) (any, error) {
			var p requestToolParams
			if err := req.UnmarshalParams(&p); err != nil {
				return nil, err
			}
			return map[string]any{"content": "buffer of " + string(p.ToolInput)}, nil
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := cli.Notify(ctx, "initialize", map[string]any{"workspaceRoot": nil, "initialConfig": map[string]any{}, "environment": map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	var res taskResult
	if err := cli.CallResult(ctx, "executeTask", map[string]any{"taskId": "t1", "prompt": "Read the buffer.", "context": nil}, &res); err != nil {
		t.Fatal(err)
	}
	if res.Status != "completed" || res.Message != "The buffer says hello." {
		t.Errorf("result %+v", res)
	}
	if tools := model.toolMessages("Read the buffer."); len(tools) != 1 || !strings.Contains(tools[0], `buffer of {\"path\":\"main.go\"}`) {
		t.Errorf("the model got %q", tools)
	}
	// shutdown as the contract has it, a notification (TestShutdown covers
	// the request form over raw framing: jrpc2's client may see the end of
	// the input before it hands over the response, a race of the client's).
	if err := cli.Notify(ctx, "shutdown", nil); err != nil {
		t.Errorf("shutdown: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Serve did not return")
	}
	cli.Close()
	inW.Close()
	if notes.Load() == 0 {
		t.Error("no notifications")
	}
}

// TestInputEndCancelsTasks: the end of the input (the host closed the
// pipe) cancels the running task, whose result is still written, and
// Serve returns nil.
func TestInputEndCancelsTasks(t *testing.T) {
	gate := make(chan struct{})
	defer close(gate)
	model := &scriptModel{
		replies: map[string][]reply{"Wait.": {{chunks: []engine.ChatChunk{text("never")}}}},
		gates:   map[string]chan struct{}{"Wait.": gate},
	}
	h := start(t, model, nil)
	h.initialize(nil)
	id := h.task("t1", "Wait.", nil)
	model.waitEntered(t, "Wait.")
	h.in.Close()
	if res := h.taskResult(id); res.Status != "error" || !strings.Contains(res.Message, "shutting down") {
		t.Errorf("result %+v", res)
	}
	select {
	case err := <-h.done:
		h.done <- err
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Serve did not return")
	}
	checkOutput(t, h.rawOutput())
}

// failingWriter fails every write after the first n.
type failingWriter struct {
	n      atomic.Int32
	writes atomic.Int32
}

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.writes.Add(1) > w.n.Load() {
		return 0, io.ErrClosedPipe
	}
	return len(p), nil
}

// TestWriteFailure: a failed write stops Serve, which returns the error.
func TestWriteFailure(t *testing.T) {
	model := &scriptModel{replies: map[string][]reply{"Hi.": {{chunks: []engine.ChatChunk{text("a"), text("b"), text("c")}}}}}
	eng, ws := newEngine(t, model)
	inR, inW := io.Pipe()
	defer inW.Close()
	w := &failingWriter{}
	w.n.Store(2)
	done := make(chan error, 1)
	go func() { done <- New(Options{Engine: eng, Workspace: ws}).Serve(context.Background(), inR, w) }()
	go func() {
		ch := channel.LSP(strings.NewReader(""), inW)
		ch.Send([]byte(`{"jsonrpc":"2.0","method":"initialize","params":{}}`))
		ch.Send([]byte(`{"jsonrpc":"2.0","id":1,"method":"executeTask","params":{"taskId":"t1","prompt":"Hi."}}`))
	}()
	select {
	case err := <-done:
		if err == nil || !errors.Is(err, io.ErrClosedPipe) || !strings.Contains(err.Error(), "lspstdio: write") {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Serve did not return after a failed write")
	}
}

// TestSecondResponseToServerRequest: a second response to a
// $/requestToolExecution (the host answered twice) is dropped, not handed
// to jrpc2, which would answer it with an error under its id (the id of
// the host's own executeTask 1): the server never answers a response.
func TestSecondResponseToServerRequest(t *testing.T) {
	buffer := map[string]any{"content": "package main"}
	cases := []struct {
		name   string
		second map[string]any // the members of the second response besides jsonrpc and id
		ack    bool           // answer by toolResponse, after a null acknowledgement
	}{
		{name: "result twice", second: map[string]any{"result": buffer}},
		{name: "result then error", second: map[string]any{"error": map[string]any{"code": -32003, "message": "again"}}},
		{name: "result then null", second: map[string]any{"result": nil}},
		{name: "null twice then toolResponse", ack: true, second: map[string]any{"result": nil}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, &scriptModel{replies: hostToolScript("Read the buffer.")}, nil)
			h.setHandler(func(m msg) (any, *jrpc2.Error, bool) {
				first := map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": buffer}
				if tc.ack {
					first["result"] = nil
				}
				h.send(first)
				second := map[string]any{"jsonrpc": "2.0", "id": m.ID}
				for k, v := range tc.second {
					second[k] = v
				}
				h.send(second)
				if tc.ack {
					h.notification("toolResponse", map[string]any{"toolCallId": m.param("toolCallId"), "result": buffer})
				}
				return nil, nil, false
			})
			h.initialize(nil)
			id := h.task("t1", "Read the buffer.", nil)
			if id != "1" {
				t.Fatalf("executeTask id %s, want 1 (the id of the server's request)", id)
			}
			res := h.taskResult(id)
			if res.Status != "completed" || res.Message != "The buffer says hello." {
				t.Fatalf("result %+v", res)
			}
			// A request after the responses: everything before it was read.
			h.result(h.request("updateConfiguration", map[string]any{"updatedConfig": map[string]any{}}), nil)
			ms := h.snapshot()
			if errs := errorMessages(ms); len(errs) != 0 {
				t.Errorf("error responses:\n%s", dump(errs))
			}
			if n := len(filter(ms, func(m msg) bool { return m.isResponse() && string(m.ID) == "1" })); n != 1 {
				t.Errorf("%d responses with id 1:\n%s", n, dump(ms))
			}
			if tools := h.model.toolMessages("Read the buffer."); len(tools) != 1 || !strings.Contains(tools[0], "package main") {
				t.Errorf("the model got %q", tools)
			}
			h.waitLog("response to no pending request of this server")
		})
	}
}

// TestExecuteTaskNotification: executeTask sent as a notification runs in
// the queue like a request (serially, in order) without holding up the
// messages after it: a request is answered while it runs, and a host tool
// answered by a toolResponse notification gets its answer.
func TestExecuteTaskNotification(t *testing.T) {
	gate := make(chan struct{})
	model := &scriptModel{
		replies: map[string][]reply{
			"First.": {{chunks: []engine.ChatChunk{text("one")}}},
		},
		gates: map[string]chan struct{}{"First.": gate},
	}
	for k, v := range hostToolScript("Read the buffer.") {
		model.replies[k] = v
	}
	h := start(t, model, nil)
	h.setHandler(func(m msg) (any, *jrpc2.Error, bool) {
		h.notification("toolResponse", map[string]any{"toolCallId": m.param("toolCallId"), "result": map[string]any{"content": "unsaved buffer"}})
		return nil, nil, true // the acknowledgement
	})
	h.initialize(map[string]any{"hostToolTimeoutMs": 5000})
	h.notification("executeTask", map[string]any{"taskId": "a", "prompt": "First."})
	model.waitEntered(t, "First.")
	h.notification("executeTask", map[string]any{"taskId": "b", "prompt": "Read the buffer."})
	h.waitFor("b queued", has("$/statusUpdate", func(m msg) bool { return m.param("message") == "Task b is queued until the running task ends" }))
	// Answered while task a runs (jrpc2 would hold it until a's handler
	// returned).
	h.result(h.request("updateConfiguration", map[string]any{"updatedConfig": map[string]any{}}), nil)
	close(gate)
	ms := h.waitFor("task b completed", has("$/statusUpdate", func(m msg) bool { return m.param("message") == "Task b completed" }))
	aDone, bStart := -1, -1
	for i, m := range ms {
		switch m.param("message") {
		case "Task a completed":
			aDone = i
		case "Task b started":
			bStart = i
		}
	}
	if aDone < 0 || bStart < aDone {
		t.Errorf("b started before a ended:\n%s", dump(ms))
	}
	if tools := model.toolMessages("Read the buffer."); len(tools) != 1 || !strings.Contains(tools[0], "unsaved buffer") {
		t.Errorf("the model got %q", tools)
	}
	if errs := errorMessages(ms); len(errs) != 0 {
		t.Errorf("error responses:\n%s", dump(errs))
	}
}

// TestConfigurationAtTaskStart: a queued task runs with the configuration
// in force when it starts, not when it arrived.
func TestConfigurationAtTaskStart(t *testing.T) {
	gate := make(chan struct{})
	model := &scriptModel{
		replies: map[string][]reply{
			"First.":  {{chunks: []engine.ChatChunk{text("one")}}},
			"Second.": {{chunks: []engine.ChatChunk{text("two")}}},
		},
		gates: map[string]chan struct{}{"First.": gate},
	}
	h := start(t, model, nil)
	h.initialize(nil)
	first := h.task("t1", "First.", nil)
	model.waitEntered(t, "First.")
	second := h.task("t2", "Second.", nil)
	h.waitFor("t2 queued", has("$/statusUpdate", func(m msg) bool { return strings.Contains(m.param("message"), "Task t2 is queued") }))
	h.result(h.request("updateConfiguration", map[string]any{"updatedConfig": map[string]any{"hostTools": []map[string]any{{"name": "open_diff", "readOnly": true}}}}), nil)
	close(gate)
	h.taskResult(first)
	h.taskResult(second)
	tools := map[string]string{}
	for _, r := range model.requests() {
		var names []string
		for _, sp := range r.Tools {
			names = append(names, sp.Name)
		}
		user := ""
		for _, m := range r.Messages {
			if m.Role == engine.RoleUser {
				user = m.Content // the turn's own, the last
			}
		}
		tools[user] = strings.Join(names, ",")
	}
	if got := tools["First."]; !strings.Contains(got, "read_buffer") || strings.Contains(got, "open_diff") {
		t.Errorf("the running task's tools changed: %s", got)
	}
	if got := tools["Second."]; !strings.Contains(got, "open_diff") || strings.Contains(got, "read_buffer") {
		t.Errorf("the queued task did not get the new configuration: %s", got)
	}
}

// TestHostCallGivenUp: after the host tool timeout, the request stays
// pending only for callbackLinger; then its callback ends, and a late
// response is dropped (no error goes back).
func TestHostCallGivenUp(t *testing.T) {
	h := start(t, &scriptModel{replies: hostToolScript("Read the buffer.")}, func(o *Options) { o.callbackLinger = 50 * time.Millisecond })
	reqs := make(chan msg, 1)
	h.setHandler(func(m msg) (any, *jrpc2.Error, bool) {
		reqs <- m
		return nil, nil, false // never answers in time
	})
	h.initialize(map[string]any{"hostToolTimeoutMs": 100})
	if res := h.taskResult(h.task("t1", "Read the buffer.", nil)); res.Status != "completed" {
		t.Fatalf("result %+v", res)
	}
	// The callback ends while the connection is open.
	h.waitLog("host request given up")
	m := <-reqs
	h.send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{"content": "late"}})
	h.result(h.request("updateConfiguration", map[string]any{"updatedConfig": map[string]any{}}), nil)
	if errs := errorMessages(h.snapshot()); len(errs) != 0 {
		t.Errorf("error responses:\n%s", dump(errs))
	}
	h.waitLog("response to no pending request of this server")
}

// TestHostToolTimeoutCappedByEngine: a host tool timeout longer than the
// engine's tool deadline is cut to end before it, so the model gets this
// package's timeout message, not the engine's.
func TestHostToolTimeoutCappedByEngine(t *testing.T) {
	h := startWith(t, &scriptModel{replies: hostToolScript("Read the buffer.")},
		func(o *engine.Options) { o.ToolTimeout = time.Second }, nil)
	h.setHandler(func(m msg) (any, *jrpc2.Error, bool) { return nil, nil, false })
	h.initialize(map[string]any{"hostToolTimeoutMs": 3600000})
	if res := h.taskResult(h.task("t1", "Read the buffer.", nil)); res.Status != "completed" {
		t.Fatalf("result %+v", res)
	}
	tools := h.model.toolMessages("Read the buffer.")
	if len(tools) != 1 || !strings.Contains(tools[0], "the editor did not answer read_buffer within 9") || !strings.Contains(tools[0], "timeout") {
		t.Errorf("the model got %q", tools)
	}
}

// TestParseMillis: the timeouts are checked as milliseconds, before the
// conversion to a Duration (which 1e20 ms would overflow).
func TestParseMillis(t *testing.T) {
	cases := []struct {
		in   string
		want time.Duration // 0: an error
	}{
		{"1", time.Millisecond},
		{"1.5", 1500 * time.Microsecond},
		{"300", 300 * time.Millisecond},
		{"3600000", time.Hour},
		{"3600001", 0},
		{"1e20", 0},
		{"9.3e15", 0},
		{"1e300", 0},
		{"1e400", 0},
		{"-1", 0},
		{"-1e20", 0},
		{"0", 0},
		{"0.5", 0},
		{`"5"`, 0},
	}
	for _, c := range cases {
		d, err := parseMillis(json.RawMessage(c.in))
		switch {
		case c.want == 0 && err == nil:
			t.Errorf("%s: %v, want an error", c.in, d)
		case c.want != 0 && (err != nil || d != c.want):
			t.Errorf("%s: %v, %v; want %v", c.in, d, err, c.want)
		}
	}
	// Through updateConfiguration: -32002.
	h := start(t, &scriptModel{}, nil)
	h.initialize(nil)
	for _, v := range []any{1e20, json.RawMessage("1e300"), -5} {
		e := h.errorOf(h.request("updateConfiguration", map[string]any{"updatedConfig": map[string]any{"hostToolTimeoutMs": v}}))
		if e.Code != CodeConfigError || !strings.Contains(e.Message, "hostToolTimeoutMs") {
			t.Errorf("%v: %v", v, e)
		}
	}
}

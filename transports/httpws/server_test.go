package httpws_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/transports/httpws"
)

const editArgs = `{"path": "calc.go", "old_string": "\treturn a - b\n", "new_string": "\treturn a + b\n", "rationale": "sum"}`

func TestCancelEndsTheTurn(t *testing.T) {
	gate := make(chan struct{})
	ts := newTestServer(t, map[string][]step{"wait": {{text: "never", gate: gate}}})
	c := ts.connect(t, ts.newSession(t))
	c.send(map[string]any{"type": "client.cancel"})
	if e := c.until("server.error"); errCode(e) != "INVALID_REQUEST" {
		t.Errorf("cancel without a turn: %v", e)
	}
	c.send(map[string]any{"type": "client.user_message", "message": "wait"})
	c.until("assistant.thinking")
	c.send(map[string]any{"type": "client.cancel", "reason": "user_cancelled"})
	final := c.until("assistant.message_final")
	md := final["metadata"].(map[string]any)
	if md["success"] != false || md["status"] != "cancelled" {
		t.Errorf("final after cancel: %v", final)
	}
	if st := c.until("session.state")["state"].(map[string]any); st["busy"] != false {
		t.Errorf("state after cancel: %v", st)
	}
}

func TestContextUpdateReachesTheNextTurn(t *testing.T) {
	ts := newTestServer(t, map[string][]step{"what is wrong?": {{text: "this"}}})
	c := ts.connect(t, ts.newSession(t))
	c.send(map[string]any{"type": "client.context_update", "updates": map[string]any{
		"diagnostics": []any{map[string]any{"file_path": "calc.go", "severity": "error", "message": "unused variable zork", "line": 3, "character": 1}},
	}})
	c.send(map[string]any{"type": "client.user_message", "message": "what is wrong?"})
	c.until("assistant.message_final")
	users, _ := ts.model.seen()
	if len(users) != 1 || !strings.Contains(users[0], "unused variable zork") {
		t.Errorf("the model's user message lacks the updated diagnostics: %q", users)
	}
}

func TestCommandRunsInTheClientTerminal(t *testing.T) {
	ts := newTestServer(t, map[string][]step{"test it": {
		{calls: []engine.ToolCall{callOf("c1", "run_command", `{"command": "go test ./..."}`)}},
		{text: "tests pass"},
	}})
	c := ts.connect(t, ts.newSession(t), "terminal_exec")
	c.send(map[string]any{"type": "client.user_message", "message": "test it"})
	ask := c.until("command.request_approval")
	if ask["requires_approval"] != true || ask["command"] != "go test ./..." {
		t.Fatalf("approval request %v", ask)
	}
	c.send(map[string]any{"type": "client.approval_response", "request_id": ask["command_id"], "approved": true})
	run := c.until("command.request_approval")
	if run["requires_approval"] != false || run["command_id"] != ask["command_id"] {
		t.Fatalf("run request %v", run)
	}
	c.send(map[string]any{"type": "client.command_result", "command_id": run["command_id"], "command": "go test ./...",
		"exit_code": 0, "stdout": "ok  example.com/calc 0.01s", "stderr": "", "duration_ms": 1200})
	final := c.until("assistant.message_final")
	if final["metadata"].(map[string]any)["success"] != true {
		t.Fatalf("final %v", final)
	}
	_, tools := ts.model.seen()
	if len(tools) != 1 || !strings.Contains(tools[0], "example.com/calc 0.01s") || !strings.Contains(tools[0], `"exit_code":0`) {
		t.Errorf("the model got %q", tools)
	}
	c.send(map[string]any{"type": "client.command_result", "command_id": run["command_id"], "exit_code": 0})
	if e := c.until("server.error"); errCode(e) != "NOT_FOUND" {
		t.Errorf("late command result: %v", e)
	}
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func TestClientAppliesThePatch(t *testing.T) {
	for _, tc := range []struct {
		name       string
		hash       func(newHash string) string
		success    bool
		wantStatus string
	}{
		{"right hash", func(h string) string { return h }, true, "applied"},
		{"wrong hash", func(string) string { return sha("something else") }, true, "failed"},
		{"client failure", func(h string) string { return h }, false, "failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestServer(t, map[string][]step{"fix": {{calls: []engine.ToolCall{callOf("e1", "edit_file", editArgs)}}, {text: "done"}}})
			c := ts.connect(t, ts.newSession(t), "patch_apply")
			c.send(map[string]any{"type": "client.user_message", "message": "fix"})
			prop := c.until("patch.proposed")
			ask := c.until("tool.request_approval")
			c.send(map[string]any{"type": "client.approval_response", "request_id": ask["request_id"], "approved": true, "scope": "all"})
			res := map[string]any{"type": "client.patch_apply_result", "patch_id": prop["patch_id"], "file_path": "calc.go",
				"success": tc.success, "error": nil, "applied_hash": tc.hash(prop["new_hash"].(string))}
			if !tc.success {
				res["error"] = map[string]any{"message": "the file is open with unsaved changes", "type": "conflict"}
			}
			c.send(res)
			got := c.until("patch.result")
			if got["status"] != tc.wantStatus || got["client_side"] != true {
				t.Errorf("patch.result %v", got)
			}
			c.until("assistant.message_final")
			// The server never wrote the file: the client applies.
			if data, _ := os.ReadFile(filepath.Join(ts.root, "calc.go")); !strings.Contains(string(data), "a - b") {
				t.Errorf("the server wrote calc.go:\n%s", data)
			}
		})
	}
}

func TestHunkScopedApprovalAndDenial(t *testing.T) {
	ts := newTestServer(t, map[string][]step{
		"fix": {{calls: []engine.ToolCall{callOf("e1", "edit_file", editArgs)}}, {text: "done"}},
		"no":  {{calls: []engine.ToolCall{callOf("e2", "write_file", `{"path": "new.go", "content": "package calc\n"}`)}}, {text: "ok"}},
	})
	c := ts.connect(t, ts.newSession(t))
	c.send(map[string]any{"type": "client.user_message", "message": "fix"})
	ask := c.until("tool.request_approval")
	c.send(map[string]any{"type": "client.approval_response", "request_id": ask["request_id"], "approved": true, "scope": "hunk", "file_path": "calc.go", "hunks": []int{0}})
	if res := c.until("patch.result"); res["status"] != "applied" {
		t.Fatalf("hunk approval: %v", res)
	}
	c.until("session.state")
	c.send(map[string]any{"type": "client.user_message", "message": "no"})
	ask = c.until("tool.request_approval")
	c.send(map[string]any{"type": "client.approval_response", "request_id": ask["request_id"], "approved": false})
	if res := c.until("patch.result"); res["status"] != "rejected" {
		t.Fatalf("denial: %v", res)
	}
	if _, err := os.Stat(filepath.Join(ts.root, "new.go")); err == nil {
		t.Error("a denied file was written")
	}
}

func TestBadMessagesGetErrorsAndTheConnectionLives(t *testing.T) {
	ts := newTestServer(t, map[string][]step{"hi": {{text: "hello"}}}, func(o *httpws.Options) { o.MaxMessageBytes = 4096 })
	sessID := ts.newSession(t)
	loadSchemas(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw, _, err := websocket.Dial(ctx, strings.Replace(ts.url, "http", "ws", 1)+"/v1/sessions/"+sessID+"/stream",
		&websocket.DialOptions{HTTPHeader: map[string][]string{"Authorization": {"Bearer " + ts.token}}})
	if err != nil {
		t.Fatal(err)
	}
	c := &client{t: t, c: raw}
	c.send(map[string]any{"type": "client.user_message", "message": "hi"})
	if e := c.until("server.error"); !strings.Contains(e["error"].(map[string]any)["message"].(string), "client.hello first") {
		t.Errorf("message before hello: %v", e)
	}
	c.send(map[string]any{"type": "client.hello", "client_info": map[string]any{"name": "t", "version": "1", "capabilities": []string{}}})
	c.until("session.state")
	for _, tc := range []struct {
		msg, field, want string
	}{
		{`not json`, "", "not a JSON object"},
		{`{"type": "client.nonsense"}`, "", "unknown message type"},
		{`{"type": "client.user_message"}`, "/message", "is required"},
		{`{"type": "client.user_message", "message": "hi", "extra": 1}`, "/extra", "not a known member"},
		{`{"type": "client.approval_response", "approved": true}`, "/request_id", "is required"},
		{`{"type": "client.approval_response", "request_id": "apr_x", "approved": "yes"}`, "/approved", ""},
		{`{"type": "client.file_changes", "changes": []}`, "/changes", ""},
		{`{"type": "client.hello", "client_info": {"name": "t", "version": "1", "capabilities": []}}`, "", "already received"},
		{`{"type": "client.approval_response", "request_id": "apr_0000", "approved": true}`, "", "no pending approval"},
	} {
		c.sendRaw([]byte(tc.msg))
		e := c.until("server.error")
		body := e["error"].(map[string]any)
		details, _ := body["details"].(map[string]any)
		if tc.field != "" && details["field"] != tc.field {
			t.Errorf("%s: field %v, want %s (%v)", tc.msg, details["field"], tc.field, body)
		}
		if !strings.Contains(body["message"].(string), tc.want) || body["recoverable"] != true {
			t.Errorf("%s: %v", tc.msg, body)
		}
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	raw.Write(ctx2, websocket.MessageBinary, []byte{1, 2, 3})
	cancel2()
	if e := c.until("server.error"); !strings.Contains(fmt.Sprint(e), "binary") {
		t.Errorf("binary: %v", e)
	}
	// The connection still serves a turn.
	c.send(map[string]any{"type": "client.user_message", "message": "hi"})
	if f := c.until("assistant.message_final"); f["message"] != "hello" {
		t.Errorf("final %v", f)
	}
	// A message over the limit closes the connection with 1009.
	c.send(map[string]any{"type": "client.user_message", "message": strings.Repeat("x", 5000)})
	for {
		_, err := c.read()
		if err != nil {
			if websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
				t.Errorf("oversized message: %v, want close 1009", err)
			}
			break
		}
	}
	// The server keeps serving.
	c2 := ts.connect(t, sessID)
	c2.send(map[string]any{"type": "client.user_message", "message": "hi"})
	c2.until("assistant.message_final")
}

func TestShutdownCancelsTurnsAndClosesStreams(t *testing.T) {
	gate := make(chan struct{})
	ts := newTestServer(t, map[string][]step{"wait": {{text: "never", gate: gate}}}, func(o *httpws.Options) { o.ShutdownGrace = 200 * time.Millisecond })
	sessID := ts.newSession(t)
	c := ts.connect(t, sessID)
	c.send(map[string]any{"type": "client.user_message", "message": "wait"})
	c.until("assistant.thinking")
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- ts.srv.Shutdown(ctx)
	}()
	final := c.until("assistant.message_final")
	if final["metadata"].(map[string]any)["status"] != "cancelled" {
		t.Errorf("final at shutdown: %v", final)
	}
	for {
		if _, err := c.read(); err != nil {
			if websocket.CloseStatus(err) != websocket.StatusGoingAway {
				t.Errorf("close at shutdown: %v, want 1001", err)
			}
			break
		}
	}
	if err := <-done; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	// The cancelled turn's events are stored.
	evs, err := ts.eng.Events(context.Background(), sessID, 0, 0)
	if err != nil || len(evs) == 0 || evs[len(evs)-1].Data.EventKind() != "final" {
		t.Errorf("stored events %v, %v", len(evs), err)
	}
}

func TestDeleteSessionClosesItsStreams(t *testing.T) {
	ts := newTestServer(t, map[string][]step{})
	sessID := ts.newSession(t)
	c := ts.connect(t, sessID)
	if code, _ := ts.do(t, "DELETE", "/v1/sessions/"+sessID, ""); code != 204 {
		t.Fatalf("DELETE: %d", code)
	}
	for {
		if _, err := c.read(); err != nil {
			if websocket.CloseStatus(err) != websocket.StatusNormalClosure {
				t.Errorf("close after delete: %v", err)
			}
			break
		}
	}
	if code, body := ts.do(t, "GET", "/v1/sessions/"+sessID, ""); code != 404 || errCode(body) != "NOT_FOUND" {
		t.Errorf("GET deleted session: %d %v", code, body)
	}
	if code, _ := ts.do(t, "DELETE", "/v1/sessions/"+sessID, ""); code != 404 {
		t.Errorf("DELETE twice: %d", code)
	}
}

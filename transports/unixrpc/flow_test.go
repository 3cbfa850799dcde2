package unixrpc_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/transports/unixrpc"
)

// The three message-flow examples of protocols/jsonrpc-unix-socket.md,
// over a real socket, each checked in order.

func TestExampleSimpleQuery(t *testing.T) {
	e := newEnv(t)
	e.model.set("explain ls command", step{chunks: []string{"The ls", " command", " lists files..."}, delay: 20 * time.Millisecond})
	c := e.dial(t)

	initID := c.send("initialize", initParams)
	if r := c.response(initID); r.Error != nil || r.str("status") != "ready" {
		t.Fatalf("initialize: %s", r.raw)
	}
	qid := c.send("agent.query", map[string]any{
		"message": "explain ls command",
		"context": map[string]any{"cwd": e.root, "shell": "bash", "env": map[string]string{"USER": "user"}},
		"options": map[string]any{"stream": true, "max_tokens": 2048, "temperature": 0.7, "tools_enabled": true, "require_approval": true},
	})
	q := c.response(qid)
	queryID := q.str("query_id")
	if q.Error != nil || queryID == "" || q.str("status") != "processing" {
		t.Fatalf("agent.query: %s", q.raw)
	}
	done := c.waitFor("stream.complete", func(m msg) bool { return m.str("query_id") == queryID })
	if done.str("status") != "success" {
		t.Fatalf("stream.complete: %s", done.raw)
	}

	msgs := c.messages()
	tok := func(text string) expect {
		return note("stream.token", func(m msg) bool { return m.str("token") == text && m.str("query_id") == queryID })
	}
	checkOrder(t, msgs,
		resp(initID, func(m msg) bool { return m.str("status") == "ready" }),
		resp(qid, func(m msg) bool { return m.str("query_id") == queryID && m.str("status") == "processing" }),
		tok("The ls"), tok(" command"), tok(" lists files..."),
		note("stream.complete", func(m msg) bool { return m.str("status") == "success" }),
	)
	if got, want := strings.Join(tokensOf(t, msgs, queryID), "|"), "The ls| command| lists files..."; got != want {
		t.Errorf("tokens %q, want %q", got, want)
	}
	// The response comes before any notification of the query.
	for _, m := range msgs {
		if m.isResponse() && string(m.ID) == qid {
			break
		}
		if m.str("query_id") == queryID {
			t.Fatalf("%s of the query came before its response", m.Method)
		}
	}
	md := done.get("metadata").(map[string]any)
	for _, k := range []string{"total_tokens", "tokens_per_second", "tools_executed", "model_used", "duration_ms"} {
		if _, ok := md[k]; !ok {
			t.Errorf("stream.complete metadata lacks %s: %s", k, done.raw)
		}
	}
	if md["total_tokens"].(float64) != 3 || md["model_used"] != "script:test" {
		t.Errorf("metadata %v", md)
	}
	// The terminal context reached the model after the message.
	users := e.model.userMessages()
	if len(users) != 1 || !strings.Contains(users[0], "Working directory: "+e.root) || !strings.Contains(users[0], "Shell: bash") {
		t.Errorf("user message %q lacks the terminal context", users)
	}
	if strings.Contains(users[0], "USER") {
		t.Errorf("the environment reached the model: %q", users[0])
	}
}

func TestExampleQueryWithToolApproval(t *testing.T) {
	e := newEnv(t)
	e.model.set("optimize my code",
		step{calls: []callT{callOf("call_1", "file_read", `{"path":"calc.go"}`)}},
		step{chunks: []string{"Here is the fixed function:\n", "```go\nfunc Add(a, b int) int {\n", "\treturn a + b\n}\n```\n", "It adds now."}},
	)
	c := e.initialized(t)
	qid := c.send("agent.query", map[string]any{"message": "optimize my code"})
	queryID := c.response(qid).str("query_id")

	ra := c.waitFor("tool.request_approval", nil)
	if ra.str("tool.name") != "file_read" || ra.str("query_id") != queryID || ra.str("execution_id") != "call_1" ||
		ra.str("arguments.path") != "calc.go" || ra.str("tool.category") != "file_system" ||
		ra.str("risk_assessment.level") != "low" || ra.get("timeout").(float64) <= 0 || ra.str("tool.description") == "" {
		t.Fatalf("tool.request_approval: %s", ra.raw)
	}
	aid := c.send("tool.approve", map[string]any{"execution_id": ra.str("execution_id"), "approved": true,
		"options": map[string]any{"remember_choice": false, "apply_to_similar": false}})
	if r := c.response(aid); r.str("status") != "approved" || r.str("execution_id") != "call_1" {
		t.Fatalf("tool.approve: %s", r.raw)
	}
	done := c.waitFor("stream.complete", func(m msg) bool { return m.str("query_id") == queryID })
	if done.str("status") != "success" {
		t.Fatalf("stream.complete: %s", done.raw)
	}

	msgs := c.messages()
	checkOrder(t, msgs,
		resp(qid, func(m msg) bool { return m.str("status") == "processing" }),
		note("agent.thinking", func(m msg) bool { return m.str("phase") == "analyzing" }),
		note("tool.request_approval", func(m msg) bool { return m.str("tool.name") == "file_read" }),
		resp(aid, func(m msg) bool { return m.str("status") == "approved" }),
		note("tool.progress", func(m msg) bool { return m.get("progress.percentage") == 50.0 && m.str("execution_id") == "call_1" }),
		note("tool.complete", func(m msg) bool { return m.str("status") == "success" && m.str("execution_id") == "call_1" }),
		note("stream.block", func(m msg) bool { return m.str("block.type") == "code" }),
		note("stream.complete", func(m msg) bool { return m.str("status") == "success" }),
	)
	var code msg
	for _, m := range msgs {
		if m.Method == "stream.block" && m.str("block.type") == "code" {
			code = m
		}
	}
	if code.str("block.language") != "go" || code.str("block.content") != "func Add(a, b int) int {\n\treturn a + b\n}\n" ||
		code.str("query_id") != queryID || !strings.HasPrefix(code.str("block_id"), "block-") {
		t.Errorf("code block: %s", code.raw)
	}
	for _, m := range msgs {
		if m.Method == "tool.complete" && !strings.Contains(m.str("result.output"), "func Add") {
			t.Errorf("tool.complete output: %s", m.raw)
		}
	}
	if tools := done.get("metadata.tools_executed").([]any); len(tools) != 1 || tools[0] != "file_read" {
		t.Errorf("tools_executed %v", tools)
	}
}

func TestExampleCancellation(t *testing.T) {
	e := newEnv(t)
	e.model.set("long running query", step{chunks: []string{"Processing..."}, gate: make(chan struct{})})
	c := e.initialized(t)
	qid := c.send("agent.query", map[string]any{"message": "long running query"})
	queryID := c.response(qid).str("query_id")
	c.waitFor("stream.token", func(m msg) bool { return m.str("token") == "Processing..." })

	cid := c.send("agent.cancel", map[string]any{"query_id": queryID})
	if r := c.response(cid); r.get("cancelled") != true || r.str("query_id") != queryID {
		t.Fatalf("agent.cancel: %s", r.raw)
	}
	done := c.waitFor("stream.complete", func(m msg) bool { return m.str("query_id") == queryID })
	if done.str("status") != "cancelled" {
		t.Fatalf("stream.complete: %s", done.raw)
	}
	checkOrder(t, c.messages(),
		resp(qid, func(m msg) bool { return m.str("query_id") == queryID }),
		note("stream.token", func(m msg) bool { return m.str("token") == "Processing..." }),
		resp(cid, func(m msg) bool { return m.get("cancelled") == true }),
		note("stream.complete", func(m msg) bool { return m.str("status") == "cancelled" }),
	)
	// Cancelling again: nothing is running any more.
	if r := c.call("agent.cancel", map[string]any{"query_id": queryID}); r.Error != nil || r.get("cancelled") != false {
		t.Errorf("second agent.cancel: %s", r.raw)
	}
}

// TestApproveRememberChoice: remember_choice feeds the workspace policy,
// so the same call is not asked about again.
func TestApproveRememberChoice(t *testing.T) {
	e := newEnv(t)
	read := step{calls: []callT{callOf("", "file_read", `{"path":"calc.go"}`)}}
	e.model.set("read it", read, step{chunks: []string{"done"}})
	c := e.initialized(t)

	q1 := c.call("agent.query", map[string]any{"message": "read it"}).str("query_id")
	ra := c.waitFor("tool.request_approval", nil)
	if r := c.call("tool.approve", map[string]any{"execution_id": ra.str("execution_id"), "approved": true,
		"options": map[string]any{"remember_choice": true}}); r.str("status") != "approved" {
		t.Fatalf("tool.approve: %s", r.raw)
	}
	c.waitFor("stream.complete", func(m msg) bool { return m.str("query_id") == q1 })

	q2 := c.call("agent.query", map[string]any{"message": "read it"}).str("query_id")
	done := c.waitFor("stream.complete", func(m msg) bool { return m.str("query_id") == q2 })
	if done.str("status") != "success" {
		t.Fatalf("second query: %s", done.raw)
	}
	for _, m := range c.messages() {
		if m.Method == "tool.request_approval" && m.str("query_id") == q2 {
			t.Fatal("the remembered call was asked about again")
		}
	}
	doc, err := e.eng.Policy(context.Background(), mustWorkspace(t, e))
	if err != nil {
		t.Fatal(err)
	}
	var pol struct {
		Rules []struct {
			Tool   string `json:"tool"`
			Action string `json:"action"`
			Source string `json:"source"`
		} `json:"rules"`
	}
	json.Unmarshal(doc, &pol)
	found := false
	for _, r := range pol.Rules {
		found = found || (r.Tool == "file_read" && r.Action == "allow" && r.Source == "remembered")
	}
	if !found {
		t.Errorf("no remembered rule for file_read in %s", doc)
	}
}

// TestApprovalOverMessageLimit: an approval request over the message
// limit is sent with its arguments cut (marked truncated), not dropped
// while the call waits for an answer that cannot come.
func TestApprovalOverMessageLimit(t *testing.T) {
	e := newEnv(t, func(o *unixrpc.Options) { o.MaxMessageBytes = 32 << 10 })
	long := strings.Repeat("d/", 50<<10) + "calc.go"
	e.model.set("read it",
		step{calls: []callT{callOf("call_big", "file_read", `{"path":"`+long+`"}`)}},
		step{chunks: []string{"done"}},
	)
	c := e.initialized(t)
	queryID := c.call("agent.query", map[string]any{"message": "read it"}).str("query_id")
	ra := c.waitFor("tool.request_approval", nil)
	if ra.str("execution_id") != "call_big" || ra.get("arguments.truncated") != true ||
		!strings.HasPrefix(ra.str("arguments.excerpt"), `{"path":"d/d/`) || len(ra.raw) > 32<<10 {
		t.Fatalf("tool.request_approval (%d bytes): %.300s", len(ra.raw), ra.raw)
	}
	if r := c.call("tool.approve", map[string]any{"execution_id": "call_big", "approved": false}); r.Error != nil {
		t.Fatal(r.raw)
	}
	if m := c.waitFor("tool.complete", nil); m.str("status") != "denied" {
		t.Errorf("tool.complete: %.300s", m.raw)
	}
	c.waitFor("stream.complete", func(m msg) bool { return m.str("query_id") == queryID })
}

package unixrpc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/transports/unixrpc"
)

func withVersion(v string) map[string]any {
	p := map[string]any{}
	for k, x := range initParams {
		p[k] = x
	}
	if v == "<none>" {
		delete(p, "protocol_version")
	} else {
		p["protocol_version"] = v
	}
	return p
}

func TestVersionNegotiation(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		client, want string // want "" means refused
		msg          string
	}{
		{"1.0.0", "1.0.0", ""},
		{"1.4.2", "1.0.0", ""},
		{"1", "1.0.0", ""},
		{"1.0.0-rc.1+build5", "1.0.0", ""},
		{"2.0.0", "", "protocol_version 2.0.0 is not supported: this server speaks 1.x"},
		{"0.9.0", "", "protocol_version 0.9.0 is not supported"},
		{"one", "", "is not a semantic version"},
		{"01.0.0", "", "is not a semantic version"},
		{"<none>", "", "protocol_version is required"},
	}
	for _, tt := range tests {
		t.Run(tt.client, func(t *testing.T) {
			c := e.dial(t)
			r := c.call("initialize", withVersion(tt.client))
			if tt.want != "" {
				if r.Error != nil || r.str("protocol_version") != tt.want || r.str("status") != "ready" {
					t.Fatalf("got %s, want protocol_version %s", r.raw, tt.want)
				}
				if r.str("server_info.name") != "plexus" || r.str("server_info.version") != "test" {
					t.Errorf("server_info: %s", r.raw)
				}
				models, _ := r.get("models").([]any)
				if len(models) != 1 || models[0].(map[string]any)["name"] != "script:test" || models[0].(map[string]any)["type"] != "chat" {
					t.Errorf("models: %s", r.raw)
				}
				if lim := r.get("limits").(map[string]any); lim["max_message_bytes"] != float64(10<<20) || lim["max_requests_per_second"] != 100.0 || lim["max_concurrent_queries"] != 3.0 {
					t.Errorf("limits: %v", lim)
				}
				return
			}
			if errCode(r) != -32602 || !strings.Contains(r.Error.Message, tt.msg) || !strings.HasPrefix(r.Error.Message, "Invalid params: ") {
				t.Fatalf("got %s, want -32602 with %q", r.raw, tt.msg)
			}
			if !strings.Contains(string(r.Error.Data), `"reason":"unsupported_protocol_version"`) || !strings.Contains(string(r.Error.Data), `"server_version":"1.0.0"`) {
				t.Errorf("data: %s", r.Error.Data)
			}
			// A refused handshake can be tried again on the same connection.
			if r := c.call("initialize", initParams); r.Error != nil {
				t.Errorf("initialize after a refusal: %s", r.raw)
			}
		})
	}
}

// TestErrorCodes sends what the table's protocol codes are for, on a
// live connection, and checks each answer's code and id.
func TestErrorCodes(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name, line string
		code       int
		id         string // the response's id ("null" when none can be read)
		inMessage  string
	}{
		{"invalid JSON", `{"jsonrpc":"2.0","id":1,"method":`, -32700, "null", "Parse error"},
		{"not JSON at all", `hello`, -32700, "null", "not valid JSON"},
		{"batch", `[{"jsonrpc":"2.0","id":2,"method":"context.update"}]`, -32600, "null", "batches are not supported"},
		{"not an object", `42`, -32600, "null", "must be a JSON object"},
		{"wrong version", `{"jsonrpc":"1.0","id":3,"method":"context.update"}`, -32600, "3", `jsonrpc must be "2.0"`},
		{"no version", `{"id":4,"method":"context.update"}`, -32600, "4", `jsonrpc must be "2.0"`},
		{"no method", `{"jsonrpc":"2.0","id":5}`, -32600, "5", "method is missing"},
		{"a response", `{"jsonrpc":"2.0","id":6,"result":{}}`, -32600, "6", "takes no responses"},
		{"bad id", `{"jsonrpc":"2.0","id":{"x":1},"method":"context.update"}`, -32600, "null", "id must be"},
		{"method not a string", `{"jsonrpc":"2.0","id":7,"method":7}`, -32600, "7", "method must be"},
		{"scalar params", `{"jsonrpc":"2.0","id":8,"method":"context.update","params":"x"}`, -32600, "8", "params must be"},
		{"unknown member", `{"jsonrpc":"2.0","id":9,"method":"context.update","extra":1}`, -32600, "9", `unknown member "extra"`},
		{"initialize twice", `{"jsonrpc":"2.0","id":10,"method":"initialize","params":{"protocol_version":"1.0.0"}}`, -32600, "10", "already received"},
		{"unknown method", `{"jsonrpc":"2.0","id":"m","method":"agent.fly"}`, -32601, `"m"`, `Method not found: "agent.fly"`},
		{"array params", `{"jsonrpc":"2.0","id":11,"method":"agent.query","params":["hi"]}`, -32602, "11", "params must be an object"},
		{"missing message", `{"jsonrpc":"2.0","id":12,"method":"agent.query","params":{}}`, -32602, "12", "message is required"},
		{"wrong type", `{"jsonrpc":"2.0","id":13,"method":"agent.query","params":{"message":5}}`, -32602, "13", "message must be a string, not number"},
		{"bad model", `{"jsonrpc":"2.0","id":14,"method":"agent.query","params":{"message":"hi","options":{"model":"nocolon"}}}`, -32602, "14", "PROVIDER:MODEL"},
		{"cancel without id", `{"jsonrpc":"2.0","id":15,"method":"agent.cancel","params":{}}`, -32602, "15", "query_id is required"},
		{"approve unknown", `{"jsonrpc":"2.0","id":16,"method":"tool.approve","params":{"execution_id":"exec-x","approved":true}}`, -32602, "16", "no approval with execution_id exec-x"},
		{"approve without answer", `{"jsonrpc":"2.0","id":17,"method":"tool.approve","params":{"execution_id":"exec-x"}}`, -32602, "17", "approved is required"},
	}
	c := e.initialized(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			from := len(c.messages())
			c.writeRaw(tt.line + "\n")
			m, _ := c.await(from, "an error response", func(m msg) bool { return m.isResponse() })
			if errCode(m) != tt.code || string(m.ID) != tt.id || !strings.Contains(m.Error.Message, tt.inMessage) {
				t.Fatalf("got %s, want code %d id %s message with %q", m.raw, tt.code, tt.id, tt.inMessage)
			}
		})
	}
	// The connection still works after all of that.
	if r := c.call("context.update", map[string]any{"cwd": "/tmp"}); r.Error != nil || r.get("updated") != true {
		t.Fatalf("context.update: %s", r.raw)
	}

	t.Run("before initialize", func(t *testing.T) {
		c := e.dial(t)
		r := c.call("agent.query", map[string]any{"message": "hi"})
		if errCode(r) != -32600 || !strings.Contains(string(r.Error.Data), "not_initialized") {
			t.Fatalf("got %s", r.raw)
		}
	})
	t.Run("blank lines and CRLF", func(t *testing.T) {
		c := e.dial(t)
		c.writeRaw("\n\r\n   \n" + `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocol_version":"1.0.0"}}` + "\r\n")
		if r := c.response("1"); r.Error != nil {
			t.Fatalf("got %s", r.raw)
		}
	})
	t.Run("truncated message at the end", func(t *testing.T) {
		c := e.dial(t)
		c.writeRaw(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocol_ver`)
		c.nc.(interface{ CloseWrite() error }).CloseWrite()
		m, _ := c.await(0, "the error", func(m msg) bool { return m.isResponse() })
		if errCode(m) != -32700 || string(m.ID) != "null" || !strings.Contains(m.Error.Message, "ended inside a message") {
			t.Fatalf("got %s", m.raw)
		}
		c.waitClosed()
	})
}

// TestEngineErrorCodes reaches the table's agent codes through queries.
func TestEngineErrorCodes(t *testing.T) {
	e := newEnv(t, func(o *unixrpc.Options) {
		o.QueryTimeout = 1500 * time.Millisecond
		o.ApprovalTimeout = 200 * time.Millisecond
	})
	c := e.initialized(t)
	run := func(t *testing.T, message string) (string, msg) {
		t.Helper()
		id := c.call("agent.query", map[string]any{"message": message}).str("query_id")
		return id, c.waitFor("stream.complete", func(m msg) bool { return m.str("query_id") == id })
	}
	streamErr := func(t *testing.T, qid string) msg {
		t.Helper()
		for _, m := range c.messages() {
			if m.Method == "stream.error" && m.str("query_id") == qid {
				return m
			}
		}
		t.Fatalf("no stream.error for %s", qid)
		return msg{}
	}
	toolDone := func(t *testing.T, qid string) msg {
		t.Helper()
		for _, m := range c.messages() {
			if m.Method == "tool.complete" && m.str("query_id") == qid {
				return m
			}
		}
		t.Fatalf("no tool.complete for %s", qid)
		return msg{}
	}

	t.Run("-32001 model error", func(t *testing.T) {
		e.model.set("model breaks", step{err: &engine.ModelError{Provider: "script", Kind: engine.ErrModelUnavailable, Message: "CUDA out of memory"}})
		qid, done := run(t, "model breaks")
		se := streamErr(t, qid)
		if se.get("error.code") != -32001.0 || se.str("error.message") != "LLM inference failed" || !strings.Contains(se.str("error.details"), "CUDA out of memory") {
			t.Errorf("stream.error: %s", se.raw)
		}
		if done.str("status") != "error" || !strings.Contains(done.str("metadata.error"), "CUDA") {
			t.Errorf("stream.complete: %s", done.raw)
		}
	})
	t.Run("-32002 tool error", func(t *testing.T) {
		e.model.set("tool breaks", step{calls: []callT{callOf("call_f", "fail_tool", `{}`)}}, step{chunks: []string{"it failed"}})
		qid, done := run(t, "tool breaks")
		tc := toolDone(t, qid)
		if tc.str("status") != "error" || tc.get("result.error.code") != -32002.0 || !strings.Contains(tc.str("result.error.details"), "always does") {
			t.Errorf("tool.complete: %s", tc.raw)
		}
		if done.str("status") != "success" {
			t.Errorf("stream.complete: %s", done.raw)
		}
	})
	t.Run("-32003 query timeout", func(t *testing.T) {
		e.model.set("takes forever", step{gate: make(chan struct{})})
		qid, done := run(t, "takes forever")
		if se := streamErr(t, qid); se.get("error.code") != -32003.0 {
			t.Errorf("stream.error: %s", se.raw)
		}
		if done.str("status") != "timeout" {
			t.Errorf("stream.complete: %s", done.raw)
		}
	})
	t.Run("-32003 approval timed out", func(t *testing.T) {
		e.model.set("nobody answers", step{calls: []callT{callOf("call_t", "file_read", `{"path":"calc.go"}`)}}, step{chunks: []string{"ok"}})
		qid, _ := run(t, "nobody answers")
		if tc := toolDone(t, qid); tc.str("status") != "denied" || tc.get("result.error.code") != -32005.0 {
			t.Errorf("tool.complete: %s", tc.raw)
		}
		r := c.call("tool.approve", map[string]any{"execution_id": "call_t", "approved": true})
		if errCode(r) != -32003 {
			t.Errorf("late tool.approve: %s", r.raw)
		}
	})
	t.Run("-32004 approval of a cancelled query", func(t *testing.T) {
		e.model.set("cancel me", step{calls: []callT{callOf("call_c", "file_read", `{"path":"calc.go"}`)}})
		qid := c.call("agent.query", map[string]any{"message": "cancel me"}).str("query_id")
		c.waitFor("tool.request_approval", func(m msg) bool { return m.str("query_id") == qid })
		c.call("agent.cancel", map[string]any{"query_id": qid})
		done := c.waitFor("stream.complete", func(m msg) bool { return m.str("query_id") == qid })
		if done.str("status") != "cancelled" {
			t.Errorf("stream.complete: %s", done.raw)
		}
		r := c.call("tool.approve", map[string]any{"execution_id": "call_c", "approved": true})
		if errCode(r) != -32004 {
			t.Errorf("tool.approve: %s", r.raw)
		}
	})
	t.Run("-32005 rejected call", func(t *testing.T) {
		e.model.set("reject it", step{calls: []callT{callOf("call_r", "file_read", `{"path":"calc.go"}`)}}, step{chunks: []string{"ok"}})
		qid := c.call("agent.query", map[string]any{"message": "reject it"}).str("query_id")
		c.waitFor("tool.request_approval", func(m msg) bool { return m.str("query_id") == qid })
		if r := c.call("tool.approve", map[string]any{"execution_id": "call_r", "approved": false}); r.str("status") != "rejected" {
			t.Fatalf("tool.approve: %s", r.raw)
		}
		c.waitFor("stream.complete", func(m msg) bool { return m.str("query_id") == qid })
		if tc := toolDone(t, qid); tc.str("status") != "denied" || tc.get("result.error.code") != -32005.0 {
			t.Errorf("tool.complete: %s", tc.raw)
		}
		if r := c.call("tool.approve", map[string]any{"execution_id": "call_r", "approved": true}); errCode(r) != -32602 ||
			!strings.Contains(string(r.Error.Data), "already_answered") {
			t.Errorf("second tool.approve: %s", r.raw)
		}
	})
	t.Run("-32000 engine refuses", func(t *testing.T) {
		r := c.call("agent.query", map[string]any{"message": "hi", "options": map[string]any{"model": "nosuch:model"}})
		qid := r.str("query_id")
		done := c.waitFor("stream.complete", func(m msg) bool { return m.str("query_id") == qid })
		if done.str("status") != "error" {
			t.Errorf("stream.complete: %s", done.raw)
		}
		if se := streamErr(t, qid); se.get("error.code") != -32001.0 || !strings.Contains(se.str("error.details"), "unknown model provider") {
			t.Errorf("stream.error: %s", se.raw)
		}
	})
}

func TestOversizedMessage(t *testing.T) {
	e := newEnv(t)
	c := e.initialized(t)
	// Just under the limit is served.
	pad := (10 << 20) - 200
	line := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"context.update","params":{"shell":"bash","cwd":"%s"}}`, strings.Repeat("a", pad))
	if len(line) > 10<<20 {
		t.Fatalf("test line is %d bytes", len(line))
	}
	c.writeRaw(line + "\n")
	if r := c.response("1"); r.Error != nil {
		t.Fatalf("a message under the limit: %.200s", r.raw)
	}
	// One byte over: -32600, then the connection closes.
	over := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"context.update","params":{"cwd":"%s"}}`, strings.Repeat("a", 10<<20))
	go func() { c.nc.Write([]byte(over + "\n")) }()
	m, _ := c.await(0, "the size error", func(m msg) bool { return m.isResponse() && string(m.ID) == "null" })
	if errCode(m) != -32600 || !strings.Contains(string(m.Error.Data), "message_too_large") {
		t.Fatalf("got %s", m.raw)
	}
	c.waitClosed()
	// The server goes on serving.
	e.initialized(t)
}

func TestRateLimit(t *testing.T) {
	e := newEnv(t)
	c := e.initialized(t)
	var b strings.Builder
	const n = 160
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"context.update","params":{"shell":"bash"}}`+"\n", 1000+i)
	}
	start := time.Now()
	c.writeRaw(b.String())
	ok, limited := 0, 0
	for i := 0; i < n; i++ {
		r := c.response(fmt.Sprint(1000 + i))
		switch {
		case r.Error == nil:
			ok++
		case r.Error.Code == -32000 && strings.Contains(string(r.Error.Data), `"reason":"rate_limited"`) && strings.Contains(string(r.Error.Data), "retry_after_ms"):
			limited++
		default:
			t.Fatalf("unexpected answer %s", r.raw)
		}
	}
	// initialize took one token; the bucket refills at 100/s meanwhile.
	allowed := 99 + int(time.Since(start).Seconds()*100) + 1
	if ok > allowed || limited == 0 || ok+limited != n {
		t.Fatalf("%d served, %d limited (at most %d may be served)", ok, limited, allowed)
	}
	time.Sleep(time.Second)
	if r := c.call("context.update", map[string]any{"shell": "zsh"}); r.Error != nil {
		t.Fatalf("after a second: %s", r.raw)
	}
}

func TestConcurrentQueryLimit(t *testing.T) {
	e := newEnv(t)
	gate := make(chan struct{})
	e.model.set("wait", step{chunks: []string{"waiting"}, gate: gate})
	e.model.set("after", step{chunks: []string{"done"}})
	c := e.initialized(t)
	var ids []string
	for i := 0; i < 3; i++ {
		r := c.call("agent.query", map[string]any{"message": "wait"})
		if r.Error != nil {
			t.Fatalf("query %d: %s", i+1, r.raw)
		}
		ids = append(ids, r.str("query_id"))
	}
	r := c.call("agent.query", map[string]any{"message": "after"})
	if errCode(r) != -32000 || !strings.Contains(string(r.Error.Data), `"reason":"too_many_queries"`) || !strings.Contains(string(r.Error.Data), `"limit":3`) {
		t.Fatalf("4th query: %s", r.raw)
	}
	// Queries of a connection run one after another: the 2nd and 3rd
	// wait. Cancelling the waiting 3rd frees a slot at once.
	c.call("agent.cancel", map[string]any{"query_id": ids[2]})
	if done := c.waitFor("stream.complete", func(m msg) bool { return m.str("query_id") == ids[2] }); done.str("status") != "cancelled" {
		t.Fatalf("cancelled waiting query: %s", done.raw)
	}
	for _, m := range c.messages() {
		if m.Method == "stream.token" && m.str("query_id") == ids[2] {
			t.Fatal("a cancelled waiting query ran")
		}
	}
	r = c.call("agent.query", map[string]any{"message": "after"})
	if r.Error != nil {
		t.Fatalf("query after a slot freed: %s", r.raw)
	}
	last := r.str("query_id")
	close(gate)
	c.pos = 0
	order := []string{}
	for range 3 {
		m := c.waitFor("stream.complete", func(m msg) bool { return m.str("query_id") != ids[2] })
		if m.str("status") != "success" {
			t.Fatalf("stream.complete: %s", m.raw)
		}
		order = append(order, m.str("query_id"))
	}
	if want := []string{ids[0], ids[1], last}; strings.Join(order, ",") != strings.Join(want, ",") {
		t.Errorf("queries completed in order %v, want %v", order, want)
	}
}

// TestQueriesAdmittedInArrivalOrder: four agent.query requests written
// back to back in one write (each reply held open): the first three are
// accepted and the fourth refused, every time, and the accepted ones run
// in the order sent. A query with invalid params among them takes no
// place.
func TestQueriesAdmittedInArrivalOrder(t *testing.T) {
	e := newEnv(t)
	gate := make(chan struct{})
	defer close(gate)
	for _, p := range []string{"q1", "q2", "q3", "q4", "q5"} {
		e.model.set(p, step{chunks: []string{"working on " + p}, gate: gate})
	}
	for round := range 8 {
		c := e.initialized(t)
		var b strings.Builder
		for i, p := range []string{"q1", "", "q2", "q3", "q4", "q5"} {
			fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"agent.query","params":{"message":%q}}`+"\n", 100+i, p)
		}
		c.writeRaw(b.String())
		want := []string{"accepted", "invalid", "accepted", "accepted", "refused", "refused"}
		for i, w := range want {
			r := c.response(fmt.Sprint(100 + i))
			got := "accepted"
			switch {
			case errCode(r) == -32602:
				got = "invalid"
			case errCode(r) == -32000 && strings.Contains(string(r.Error.Data), `"reason":"too_many_queries"`):
				got = "refused"
			case r.Error != nil:
				got = r.raw
			}
			if got != w {
				t.Fatalf("round %d: request %d (%d in order) was %s, want %s", round, 100+i, i+1, got, w)
			}
		}
		// The first query sent runs; the others wait their turn (and are
		// cancelled with the connection).
		first := c.response("100").str("query_id")
		c.await(0, "the first query's stream", func(m msg) bool {
			return (m.Method == "stream.token" || m.Method == "stream.tokens") && m.str("query_id") == first
		})
		c.nc.Close()
	}
	users := e.model.userMessages()
	if len(users) < 8 {
		t.Errorf("the model was asked %d times in 8 rounds", len(users))
	}
	for _, u := range users {
		if !strings.HasPrefix(u, "q1") {
			t.Errorf("the model was asked %q; only q1, the first query of each round, may run", u)
		}
	}
}

func TestSeveralClients(t *testing.T) {
	e := newEnv(t)
	const n = 6
	for i := 0; i < n; i++ {
		e.model.set(fmt.Sprintf("client %d", i), step{chunks: []string{fmt.Sprintf("answer %d", i), " done"}, delay: 5 * time.Millisecond})
	}
	paths := make([]string, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Go(func() {
			c := e.initialized(t)
			qid := c.call("agent.query", map[string]any{"message": fmt.Sprintf("client %d", i)}).str("query_id")
			done := c.waitFor("stream.complete", func(m msg) bool { return m.str("query_id") == qid })
			if done.str("status") != "success" {
				t.Errorf("client %d: %s", i, done.raw)
			}
			msgs := c.messages()
			if got := strings.Join(tokensOf(t, msgs, qid), ""); got != fmt.Sprintf("answer %d done", i) {
				t.Errorf("client %d got %q", i, got)
			}
			for _, m := range msgs {
				if q := m.str("query_id"); !m.isResponse() && q != "" && q != qid {
					t.Errorf("client %d got a message of another client's query: %s", i, m.raw)
				}
			}
			paths[i] = c.call("session.save", map[string]any{}).str("path")
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, p := range paths {
		if p == "" || seen[p] {
			t.Fatalf("clients do not have sessions of their own: %v", paths)
		}
		seen[p] = true
	}
	// Each client's session saw only its own message.
	for _, h := range e.model.turnHistories() {
		if len(h) != 1 {
			t.Errorf("a turn saw the history %q", h)
		}
	}
}

// TestBatching: a client that reads slower than tokens arrive gets the
// queued tokens as stream.tokens.
func TestBatching(t *testing.T) {
	e := newEnv(t)
	const n = 600
	chunks := make([]string, n)
	for i := range chunks {
		chunks[i] = fmt.Sprintf("%04d%s", i, strings.Repeat("x", 2044))
	}
	emitted := make(chan struct{})
	e.model.set("flood", step{chunks: chunks, emitted: emitted})
	// Stop reading after the handshake while the model streams more than
	// the socket buffers hold.
	raw := dialRaw(t, e.sock)
	raw.call(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocol_version":"1.0.0"}}`)
	raw.write(t, `{"jsonrpc":"2.0","id":2,"method":"agent.query","params":{"message":"flood"}}`)
	select {
	case <-emitted:
	case <-time.After(waitTimeout):
		t.Fatal("the model did not finish")
	}
	time.Sleep(100 * time.Millisecond)
	var msgs []msg
	for {
		m := raw.read(t)
		msgs = append(msgs, m)
		if m.Method == "stream.complete" {
			break
		}
	}
	qid := ""
	batches := 0
	for _, m := range msgs {
		if string(m.ID) == "2" {
			qid = m.str("query_id")
		}
		if m.Method == "stream.tokens" {
			batches++
		}
	}
	got := tokensOf(t, msgs, qid)
	if strings.Join(got, "") != strings.Join(chunks, "") {
		t.Fatalf("got %d tokens, not the %d sent in order", len(got), n)
	}
	if batches == 0 {
		t.Fatal("no stream.tokens although the client did not read")
	}
	t.Logf("%d tokens arrived in %d messages (%d stream.tokens)", n, len(msgs), batches)
}

// TestSlowClientDisconnected: a client far behind is dropped; others are
// served on.
func TestSlowClientDisconnected(t *testing.T) {
	e := newEnv(t, func(o *unixrpc.Options) { o.MaxQueueBytes = 256 << 10 })
	chunks := make([]string, 2000)
	for i := range chunks {
		chunks[i] = strings.Repeat("y", 2048)
	}
	e.model.set("flood", step{chunks: chunks})
	raw := dialRaw(t, e.sock)
	raw.call(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocol_version":"1.0.0"}}`)
	raw.write(t, `{"jsonrpc":"2.0","id":2,"method":"agent.query","params":{"message":"flood"}}`)
	// Never read; once the server drops the connection, writing fails.
	deadline := time.Now().Add(waitTimeout)
	for {
		if _, err := raw.nc.Write([]byte(`{"jsonrpc":"2.0","method":"context.update","params":{}}` + "\n")); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the slow client was not disconnected")
		}
		time.Sleep(20 * time.Millisecond)
	}
	c := e.initialized(t)
	if r := c.call("context.update", map[string]any{"cwd": "/"}); r.Error != nil {
		t.Fatal(r.raw)
	}
}

func TestContextAndSuggestion(t *testing.T) {
	e := newEnv(t)
	e.model.set("why did it fail?", step{chunks: []string{"because"}})
	c := e.initialized(t)
	one, zero := 1, 0
	c.notify("context.update", map[string]any{
		"cwd": e.root, "env": map[string]string{"PWD": e.root}, "terminal_size": map[string]any{"cols": 100, "rows": 30},
		"recent_commands": []map[string]any{
			{"command": "cargo test -- --nocapture", "exit_code": zero, "timestamp": 1},
			{"command": "cargo test", "exit_code": one, "timestamp": 2},
		},
		"recent_output": "thread 'main' panicked at src/main.rs:3",
	})
	s := c.waitFor("suggestion.inline", nil)
	if s.str("suggestion") != "cargo test -- --nocapture" || s.str("source") != "command_history" || s.get("confidence") != 0.87 || s.str("context") == "" {
		t.Fatalf("suggestion.inline: %s", s.raw)
	}
	qid := c.call("agent.query", map[string]any{"message": "why did it fail?", "context": map[string]any{"open_files": []string{"calc.go", "/etc/passwd"}}}).str("query_id")
	c.waitFor("stream.complete", func(m msg) bool { return m.str("query_id") == qid })
	u := e.model.userMessages()[0]
	for _, want := range []string{"Working directory: " + e.root, "$ cargo test   (exit 1)", "panicked at src/main.rs:3", "calc.go"} {
		if !strings.Contains(u, want) {
			t.Errorf("the model's message lacks %q:\n%s", want, u)
		}
	}
	if strings.Contains(u, "/etc/passwd") {
		t.Errorf("a file outside the workspace was passed on:\n%s", u)
	}
	// The same context again suggests nothing new.
	for _, m := range c.messages() {
		if m.Method == "suggestion.inline" && m.str("suggestion") != "cargo test -- --nocapture" {
			t.Errorf("unexpected suggestion %s", m.raw)
		}
	}
	var n int
	for _, m := range c.messages() {
		if m.Method == "suggestion.inline" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d suggestions for one failed command", n)
	}
}

func TestStreamOffSendsTextBlock(t *testing.T) {
	e := newEnv(t)
	e.model.set("quiet", step{chunks: []string{"the ", "answer"}})
	c := e.initialized(t)
	qid := c.call("agent.query", map[string]any{"message": "quiet", "options": map[string]any{"stream": false}}).str("query_id")
	c.waitFor("stream.complete", func(m msg) bool { return m.str("query_id") == qid })
	msgs := c.messages()
	if toks := tokensOf(t, msgs, qid); len(toks) != 0 {
		t.Errorf("tokens were streamed: %v", toks)
	}
	checkOrder(t, msgs, note("stream.block", func(m msg) bool { return m.str("block.type") == "text" && m.str("block.content") == "the answer" }),
		note("stream.complete", nil))
}

// TestWriteTimeoutClosesConnection: a notification whose write times out
// (part of it may be on the socket) ends the connection; nothing is
// written after the cut message, so every complete line the client reads
// is JSON, and the client sees the connection close.
func TestWriteTimeoutClosesConnection(t *testing.T) {
	writeFailed := logSignal("write to the client failed")
	e := newEnv(t, func(o *unixrpc.Options) {
		o.WriteTimeout = 100 * time.Millisecond
		o.Logger = slog.New(writeFailed)
	})
	e.model.set("big", step{chunks: []string{strings.Repeat("y", 4<<20)}})
	raw := dialRaw(t, e.sock)
	raw.call(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocol_version":"1.0.0"}}`)
	raw.write(t, `{"jsonrpc":"2.0","id":2,"method":"agent.query","params":{"message":"big"}}`)
	// Not reading: the 4 MB token cannot be written within 100 ms. Wait
	// until the server says so (however long the turn takes to start).
	writeFailed.wait(t)
	// A request after the failed write: its response must not be glued
	// to the cut token (the write may fail once the server has closed).
	raw.nc.Write([]byte(`{"jsonrpc":"2.0","id":3,"method":"context.update","params":{"cwd":"/"}}` + "\n"))
	raw.nc.SetReadDeadline(time.Now().Add(waitTimeout))
	for {
		line, err := raw.r.ReadBytes('\n')
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal("the connection stayed open after a write timed out")
			}
			break // the connection closed (a cut last line has no newline)
		}
		if !json.Valid(line) {
			t.Fatalf("the server wrote a line that is not JSON (%d bytes): %.120q...", len(line), line)
		}
	}
}

// gatedModel lists its models once gate is closed (or its context ends).
type gatedModel struct {
	engine.Model
	gate chan struct{}
}

func (m *gatedModel) ListModels(ctx context.Context) ([]engine.ModelInfo, error) {
	select {
	case <-m.gate:
		return []engine.ModelInfo{{Name: "g1"}}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestDuplicateRequestID: a request reusing the id of one still in
// progress gets -32600 in the table's words with an object data; the id
// may be reused once answered.
func TestDuplicateRequestID(t *testing.T) {
	gm := &gatedModel{gate: make(chan struct{})}
	eng, err := engine.New(engine.Options{Models: map[string]engine.Model{"g": gm}})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(o *unixrpc.Options) { o.Engine = eng })
	c := e.dial(t)
	// initialize waits for the model list, so id 7 stays in flight.
	c.writeRaw(`{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocol_version":"1.0.0"}}` + "\n")
	c.writeRaw(`{"jsonrpc":"2.0","id":7,"method":"context.update","params":{}}` + "\n")
	m := c.response("7")
	var data map[string]any
	if errCode(m) != -32600 || !strings.HasPrefix(m.Error.Message, "Invalid Request") || json.Unmarshal(m.Error.Data, &data) != nil ||
		data["reason"] != "duplicate_id" || data["id"] != 7.0 {
		t.Fatalf("duplicate id: %s", m.raw)
	}
	close(gm.gate)
	if m, _ := c.await(0, "the initialize result", func(m msg) bool { return m.isResponse() && m.Error == nil }); string(m.ID) != "7" || m.str("status") != "ready" {
		t.Fatalf("initialize: %s", m.raw)
	}
	from := len(c.messages())
	c.writeRaw(`{"jsonrpc":"2.0","id":7,"method":"context.update","params":{}}` + "\n")
	if m, _ := c.await(from, "the context.update result", func(m msg) bool { return m.isResponse() }); m.Error != nil || m.get("updated") != true {
		t.Fatalf("reused id: %s", m.raw)
	}
}

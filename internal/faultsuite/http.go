package faultsuite

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/plexus-agent/plexus/engine/receipts"
	"github.com/plexus-agent/plexus/engine/store"
)

// noteScript returns a replay script of n turns: turn k writes
// notes/k.txt (a patch that needs approval), then answers in twelve
// streamed words.
func noteScript(n int) string {
	var b strings.Builder
	for k := range n {
		call, _ := json.Marshal(map[string]any{"text": fmt.Sprintf("Writing note %d.", k),
			"tool_calls": []any{map[string]any{"name": "write_file", "arguments": map[string]any{"path": fmt.Sprintf("notes/%d.txt", k), "content": noteContent(k), "create_dirs": true}}}})
		final, _ := json.Marshal(map[string]any{"text": fmt.Sprintf("Note %d is written, one two three four five six seven eight nine ten.", k), "delay_ms": 8})
		b.Write(call)
		b.WriteByte('\n')
		b.Write(final)
		b.WriteByte('\n')
	}
	return b.String()
}

func noteContent(k int) string { return fmt.Sprintf("note %d\n", k) }

var httpServing = regexp.MustCompile(`serving (http://\S+) `)

// httpRig is the http front-end's run: one server, a workspace and a
// session per client.
type httpRig struct {
	*Rig
	script  string
	url     string
	token   string
	clients []*httpClient
}

// httpClient is one client: its session and what it was told.
type httpClient struct {
	h       *httpRig
	n       int
	root    string // its workspace
	wsID    string
	session string
	turnNo  int

	// Acknowledged items.
	events    map[uint64]map[string]int // seq -> message type -> count
	turns     []*ackTurn                // turns with at least one event seen, in order
	approvals map[string]*ackApproval   // patch approval requests seen
	patches   []ackPatch                // patch sets seen applied
}

type ackTurn struct {
	prompt, id string
	// final is the status of the assistant.message_final seen ("" when
	// none was), text its message.
	final, text string
}

type ackApproval struct {
	turn     string
	resolved bool
}

type ackPatch struct {
	turn, setID, appliedID string
	files                  []string
}

// RunHTTP runs the http front-end's fault run.
func RunHTTP(t testing.TB, bin string, opts Options) {
	start := time.Now()
	h := &httpRig{Rig: NewRig(t, bin, "http", opts)}
	h.script = filepath.Join(t.TempDir(), "notes.jsonl")
	WriteFile(t, h.script, noteScript(400))
	for i := range opts.Clients {
		c := &httpClient{h: h, n: i, root: t.TempDir(), events: map[uint64]map[string]int{}, approvals: map[string]*ackApproval{}}
		WriteFile(t, filepath.Join(c.root, "README.md"), fmt.Sprintf("# workspace of client %d\n", i))
		h.clients = append(h.clients, c)
	}
	p := h.serve()
	for _, c := range h.clients {
		var ws struct {
			ID string `json:"workspace_id"`
		}
		h.rest("POST", "/v1/workspaces/register", fmt.Sprintf(`{"path": %q}`, c.root), &ws)
		var s struct {
			ID string `json:"session_id"`
		}
		h.rest("POST", "/v1/sessions", fmt.Sprintf(`{"workspace_id": %q}`, ws.ID), &s)
		c.wsID, c.session = ws.ID, s.ID
		h.Ack("sessions")
	}
	for range opts.Kills {
		h.load(p)
		h.Killed()
		p = h.serve()
		h.check()
	}
	// The last round: every client runs a turn to its end, the server
	// stops gracefully, and everything is checked once more.
	h.finish(p)
	h.Report(time.Since(start))
}

// serve starts the server and waits for it to listen.
func (h *httpRig) serve() *Proc {
	p := h.Start("serve", "--transport", "http", "-w", h.WS, "--model", "replay:"+h.script, "--embed-model", "none", "--addr", "127.0.0.1:0")
	h.url = p.WaitFor(h.t, httpServing, time.Minute)[1]
	tok, err := os.ReadFile(filepath.Join(h.Data, "http-token"))
	if err != nil {
		h.t.Fatal(err)
	}
	h.token = strings.TrimSpace(string(tok))
	return p
}

func (h *httpRig) rest(method, path, body string, out any) {
	h.t.Helper()
	req, _ := http.NewRequest(method, h.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+h.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		h.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		h.t.Fatalf("%s %s: %v %s", method, path, err, b)
	}
}

// load runs every client until the server is killed, at a seeded random
// point after the clients start.
func (h *httpRig) load(p *Proc) {
	var wg sync.WaitGroup
	for _, c := range h.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.work(p)
		}()
	}
	time.Sleep(h.Between(300*time.Millisecond, 2500*time.Millisecond))
	p.Kill()
	wg.Wait()
}

// finish runs one turn per client to its end, stops the server with
// SIGTERM, restarts it and checks.
func (h *httpRig) finish(p *Proc) {
	for _, c := range h.clients {
		conn := c.dial(false)
		if conn == nil {
			h.t.Fatalf("client %d cannot connect after the last restart", c.n)
		}
		c.answerPending(conn)
		if st := c.turn(conn, true); st != "completed" {
			h.t.Errorf("client %d: the turn after the last restart ended %q (the server does not serve again)", c.n, st)
		}
		conn.ws.CloseNow()
	}
	p.Term(h.t, time.Minute)
	p = h.serve()
	h.check()
	p.Term(h.t, time.Minute)
}

// wsConn is a client's WebSocket connection and its reader.
type wsConn struct {
	ws   *websocket.Conn
	msgs chan map[string]any
}

// dial connects to the session's stream (with replay, ?since=0: every
// stored event first) and sends client.hello; nil when the server is
// gone.
func (c *httpClient) dial(replay bool) *wsConn {
	h := c.h
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u := strings.Replace(h.url, "http://", "ws://", 1) + "/v1/sessions/" + c.session + "/stream"
	if replay {
		u += "?since=0"
	}
	ws, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + h.token}}})
	if err != nil {
		return nil
	}
	ws.SetReadLimit(64 << 20)
	conn := &wsConn{ws: ws, msgs: make(chan map[string]any, 1<<16)}
	go func() {
		defer close(conn.msgs)
		for {
			_, b, err := ws.Read(context.Background())
			if err != nil {
				return
			}
			var m map[string]any
			if json.Unmarshal(b, &m) == nil {
				conn.msgs <- m
			}
		}
	}()
	conn.send(map[string]any{"type": "client.hello", "client_info": map[string]any{"name": "faultsuite", "version": "1", "capabilities": []string{}}})
	return conn
}

func (w *wsConn) send(v any) bool {
	b, _ := json.Marshal(v)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return w.ws.Write(ctx, websocket.MessageText, b) == nil
}

// next returns the next message, or nil when the connection ended.
func (w *wsConn) next() map[string]any {
	select {
	case m, ok := <-w.msgs:
		if !ok {
			return nil
		}
		return m
	case <-time.After(time.Minute):
		return nil
	}
}

// work runs turns until the connection ends.
func (c *httpClient) work(p *Proc) {
	conn := c.dial(false)
	if conn == nil {
		return
	}
	defer conn.ws.CloseNow()
	c.answerPending(conn)
	for {
		switch c.turn(conn, false) {
		case "":
			return
		case "refused":
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// answerPending waits for session.state and approves the patch approvals
// it lists (those of turns the restart closed), recording what follows.
func (c *httpClient) answerPending(conn *wsConn) {
	for {
		m := conn.next()
		if m == nil {
			return
		}
		if m["type"] != "session.state" {
			continue
		}
		st, _ := m["state"].(map[string]any)
		pending, _ := st["pending_approvals"].([]any)
		for _, id := range pending {
			conn.send(map[string]any{"type": "client.approval_response", "request_id": id, "approved": true, "scope": "all"})
		}
		// Their approval.resolved and patch.result come on this stream
		// and are recorded as the next turn reads them.
		return
	}
}

// turn sends a user message and plays the turn to its final message. It
// returns the final status, or "" when the connection ended first.
// alwaysApprove answers every approval with yes; otherwise a seeded
// quarter are refused.
func (c *httpClient) turn(conn *wsConn, alwaysApprove bool) string {
	prompt := fmt.Sprintf("client %d request %d", c.n, c.turnNo)
	c.turnNo++
	if !conn.send(map[string]any{"type": "client.user_message", "message": prompt}) {
		return ""
	}
	var cur *ackTurn
	for {
		m := conn.next()
		if m == nil {
			return ""
		}
		turnID, _ := m["turn_id"].(string)
		typ, _ := m["type"].(string)
		if turnID == "" {
			if typ == "server.error" && cur == nil {
				c.h.t.Logf("client %d: %q refused: %v", c.n, prompt, m["error"])
				return "refused"
			}
			continue // not an event of a turn (hello, state)
		}
		seq := uint64(m["seq"].(float64))
		if c.events[seq] == nil {
			c.events[seq] = map[string]int{}
			c.h.Ack("events")
		}
		c.events[seq][typ]++
		// The turn's first event; others before it are answers to
		// approvals of turns the restart closed.
		if cur == nil && typ == "assistant.thinking" && c.turnOf(turnID) == nil {
			cur = &ackTurn{prompt: prompt, id: turnID}
			c.turns = append(c.turns, cur)
			c.h.Ack("turns")
		}
		switch typ {
		case "tool.request_approval":
			id, _ := m["request_id"].(string)
			if m["patch_set_id"] != nil {
				c.approvals[id] = &ackApproval{turn: turnID}
				c.h.Ack("approvals")
			}
			conn.send(map[string]any{"type": "client.approval_response", "request_id": id,
				"approved": alwaysApprove || c.h.Intn(4) > 0, "scope": "all"})
		case "approval.resolved":
			if a := c.approvals[fmt.Sprint(m["request_id"])]; a != nil {
				a.resolved = true
			}
		case "patch.result":
			if m["status"] == "applied" {
				var files []string
				for _, f := range m["applied_files"].([]any) {
					files = append(files, f.(string))
				}
				c.patches = append(c.patches, ackPatch{turn: turnID, setID: fmt.Sprint(m["patch_set_id"]), appliedID: fmt.Sprint(m["applied_id"]), files: files})
				c.h.Ack("patches")
			}
		case "assistant.message_final":
			md, _ := m["metadata"].(map[string]any)
			if t := c.turnOf(turnID); t != nil {
				t.final, _ = md["status"].(string)
				t.text, _ = m["message"].(string)
			}
			if cur != nil && turnID == cur.id {
				return cur.final
			}
		}
	}
}

func (c *httpClient) turnOf(id string) *ackTurn {
	for _, t := range c.turns {
		if t.id == id {
			return t
		}
	}
	return nil
}

// check checks every client's acknowledged items against the restarted
// server and the data directory.
func (h *httpRig) check() {
	h.CheckDatabase()
	h.CheckReceipts()
	st := h.OpenStore()
	defer st.Close()
	rcpts := h.Receipts(filepath.Join(h.Data, "receipts"))
	for _, c := range h.clients {
		c.check(st, rcpts)
	}
}

func (c *httpClient) check(st *store.Store, rcpts []receipts.Receipt) {
	h := c.h
	var sess struct {
		LastSeq  uint64 `json:"last_seq"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
		State struct {
			Pending []string `json:"pending_approvals"`
		} `json:"state"`
	}
	// The stream first: connecting loads the session, which closes the
	// interrupted turn.
	conn := c.dial(true)
	if conn == nil {
		h.t.Fatalf("client %d: the restarted server refuses the stream", c.n)
	}
	replay := map[uint64]map[string]int{}
	finals := map[string]string{}
	resolved := map[string]bool{}
	var last uint64
	ordered := true
	for {
		m := conn.next()
		if m == nil {
			h.t.Fatalf("client %d: the replay ended early", c.n)
		}
		if m["type"] == "session.state" {
			break
		}
		turnID, _ := m["turn_id"].(string)
		if turnID == "" {
			continue
		}
		seq := uint64(m["seq"].(float64))
		if seq < last {
			ordered = false
		}
		last = seq
		typ := m["type"].(string)
		if replay[seq] == nil {
			replay[seq] = map[string]int{}
		}
		replay[seq][typ]++
		switch typ {
		case "assistant.message_final":
			md, _ := m["metadata"].(map[string]any)
			finals[turnID], _ = md["status"].(string)
		case "approval.resolved":
			resolved[fmt.Sprint(m["request_id"])] = true
		}
	}
	conn.ws.CloseNow()
	h.rest("GET", "/v1/sessions/"+c.session, "", &sess)

	h.Check(ordered, "client %d: the replayed events are out of order", c.n)
	// No gaps: every number up to the last is an event of the stream.
	for seq := uint64(1); seq <= sess.LastSeq; seq++ {
		if replay[seq] == nil {
			h.Check(false, "client %d: event %d of %d is missing from the replay", c.n, seq, sess.LastSeq)
			break
		}
	}
	for seq, types := range c.events {
		for typ, n := range types {
			h.Check(replay[seq][typ] >= n, "client %d: event %d (%s) was delivered but is not replayed", c.n, seq, typ)
		}
	}
	// History: the request of every turn seen, in order; the answer of
	// every turn seen completed; a final message for every turn seen.
	users := []int{}
	for i, m := range sess.Messages {
		if m.Role == "user" {
			users = append(users, i)
		}
	}
	at := 0
	for _, t := range c.turns {
		found := -1
		for i := at; i < len(users); i++ {
			if sess.Messages[users[i]].Content == t.prompt {
				found, at = users[i], i+1
				break
			}
		}
		h.Check(found >= 0, "client %d: the request %q of turn %s is not in the history (in order)", c.n, t.prompt, t.id)
		if found >= 0 && t.final == "completed" {
			end := len(sess.Messages)
			if at < len(users) {
				end = users[at]
			}
			answered := slices.ContainsFunc(sess.Messages[found:end], func(m struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			}) bool {
				return m.Role == "assistant" && m.Content == t.text
			})
			h.Check(answered, "client %d: the answer of completed turn %s is not in the history", c.n, t.id)
		}
		h.Check(finals[t.id] != "", "client %d: turn %s has no final message after the restart", c.n, t.id)
		if t.final != "" {
			h.Check(finals[t.id] == t.final, "client %d: turn %s ended %q, the replay says %q", c.n, t.id, t.final, finals[t.id])
		}
	}
	// Approvals: answered, or still pending.
	for id, a := range c.approvals {
		h.Check(a.resolved || resolved[id] || slices.Contains(sess.State.Pending, id),
			"client %d: approval request %s is neither answered nor pending", c.n, id)
	}
	// Patches: on disk, in the undo records, in the receipts.
	applied := h.AppliedIDs(st, c.wsID)
	for _, p := range c.patches {
		for _, f := range p.files {
			var k int
			fmt.Sscanf(filepath.Base(f), "%d.txt", &k)
			b, err := os.ReadFile(filepath.Join(c.root, f))
			h.Check(err == nil && string(b) == noteContent(k), "client %d: applied file %s holds %q (%v)", c.n, f, b, err)
		}
		h.Check(applied[p.appliedID] != nil, "client %d: applied change %s (patch set %s) has no undo record", c.n, p.appliedID, p.setID)
		h.Check(slices.ContainsFunc(rcpts, func(r receipts.Receipt) bool {
			return r.Kind == receipts.KindPatchApply && r.Session == c.session && r.Turn == p.turn
		}), "client %d: applied patch set %s has no patch_apply receipt", c.n, p.setID)
	}
}

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/plexus-agent/plexus/internal/acptest"
)

// The drivers of the scenario suite, one per front-end: each speaks its
// protocol to the real binary, as its client would.

// frontEnds is the suite's columns. caps are what each protocol can
// express (the reasons for the others are in each driver's comment).
var frontEnds = []frontEnd{
	// ndjson: turns run without a Host (no way to ask), no request
	// cancels a turn, conversations live in the process's memory.
	{name: "ndjson", caps: []string{capStream, capTools, capMalformed}, start: startNDJSONDriver},
	// lsp-stdio: approvals through $/requestToolExecution "approve",
	// $/cancelRequest; the connection's session lives in memory.
	{name: "lsp-stdio", caps: []string{capStream, capTools, capApprove, capCancel, capMalformed}, start: startLSPDriver},
	// unix: session.save before the restart, session.load after it.
	{name: "unix", caps: []string{capStream, capTools, capApprove, capCancel, capMalformed, capResume}, start: startUnixDriver},
	// http: sessions are stored; the WebSocket reconnects after a restart.
	{name: "http", caps: []string{capStream, capTools, capApprove, capCancel, capMalformed, capResume}, start: startHTTPDriver},
	// task: one request, one answer (nothing streams, nothing is asked:
	// a task never writes), tools named in toolsUsed.
	{name: "task", caps: []string{capTools, capMalformed}, start: startTaskDriver},
	// acp: everything.
	{name: "acp", caps: []string{capStream, capTools, capApprove, capCancel, capMalformed, capResume}, start: startACPDriver},
}

// scenarioTimeout bounds one wait of a driver.
const scenarioTimeout = 60 * time.Second

func driverCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout)
	t.Cleanup(cancel)
	return ctx
}

// lineReader reads JSON lines from r into a channel.
func lineReader(r io.Reader) <-chan map[string]any {
	ch := make(chan map[string]any, 4096)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				m = map[string]any{"NOT_JSON": sc.Text()}
			}
			ch <- m
		}
	}()
	return ch
}

func next(t *testing.T, ch <-chan map[string]any, p *plexusProc) map[string]any {
	t.Helper()
	select {
	case m, ok := <-ch:
		if !ok {
			t.Fatalf("plexus closed its output\nstderr:\n%s", p.stderrText())
		}
		if m["NOT_JSON"] != nil {
			t.Fatalf("plexus wrote a line that is not JSON: %v", m["NOT_JSON"])
		}
		return m
	case <-time.After(scenarioTimeout):
		t.Fatalf("no message within %s\nstderr:\n%s", scenarioTimeout, p.stderrText())
	}
	return nil
}

func mapOf(v any) map[string]any { m, _ := v.(map[string]any); return m }

// countWords says whether enough of a cancellable answer has streamed.
func streamedSome(text string) bool { return len(strings.Fields(text)) >= 2 }

// ---- ndjson ----

type ndjsonDriver struct {
	p     *plexusProc
	in    io.WriteCloser
	lines <-chan map[string]any
	n     int
}

func startNDJSONDriver(t *testing.T, p *plexusProc) scenarioClient {
	in, out := p.start(t, "ndjson", nil)
	d := &ndjsonDriver{p: p, in: in, lines: lineReader(out)}
	if m := next(t, d.lines, p); m["type"] != "ready" {
		t.Fatalf("first line %v", m)
	}
	return d
}

func (d *ndjsonDriver) send(t *testing.T, v any) {
	b, _ := json.Marshal(v)
	if _, err := d.in.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
}

func (d *ndjsonDriver) turn(t *testing.T, prompt string, o turnOpts) turnResult {
	d.n++
	id := fmt.Sprintf("q%d", d.n)
	d.send(t, map[string]any{"id": id, "kind": "user_message", "message": prompt})
	r := turnResult{tools: map[string]string{}}
	names := map[string]string{}
	for {
		m := next(t, d.lines, d.p)
		if m["id"] != id {
			continue
		}
		switch m["type"] {
		case "token":
			r.text += m["token"].(string)
			r.pieces++
		case "tool_use":
			data := mapOf(m["data"])
			names[data["toolId"].(string)] = data["toolName"].(string)
		case "tool_result":
			data := mapOf(m["data"])
			st := "completed"
			if mapOf(data["result"])["error"] != nil {
				st = "failed"
			}
			r.tools[names[data["toolId"].(string)]] = st
		case "done":
			r.status = "completed"
			return r
		case "error":
			r.status = "error"
			return r
		}
	}
}

func (d *ndjsonDriver) malformed(t *testing.T) string {
	// A line that is not JSON is skipped (no id to answer); a request
	// without a kind gets an error.
	io.WriteString(d.in, "{this is not json\n")
	d.send(t, map[string]any{"id": "bad-1", "message": "no kind"})
	for {
		m := next(t, d.lines, d.p)
		if m["id"] == "bad-1" && m["type"] == "error" {
			return fmt.Sprint(m["error"])
		}
	}
}

func (d *ndjsonDriver) restart(t *testing.T) scenarioClient {
	t.Fatal("ndjson cannot resume")
	return nil
}

// ---- lsp-stdio ----

type lspDriver struct {
	p   *plexusProc
	in  io.WriteCloser
	wmu sync.Mutex
	out chan map[string]any
	n   int
}

func startLSPDriver(t *testing.T, p *plexusProc) scenarioClient {
	in, out := p.start(t, "lsp-stdio", nil)
	d := &lspDriver{p: p, in: in, out: make(chan map[string]any, 4096)}
	go func() {
		defer close(d.out)
		br := bufio.NewReader(out)
		for {
			n := -1
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					return
				}
				line = strings.TrimRight(line, "\r\n")
				if line == "" {
					break
				}
				if v, ok := strings.CutPrefix(line, "Content-Length: "); ok {
					n, _ = strconv.Atoi(v)
				}
			}
			body := make([]byte, n)
			if _, err := io.ReadFull(br, body); err != nil {
				return
			}
			var m map[string]any
			if json.Unmarshal(body, &m) != nil {
				m = map[string]any{"NOT_JSON": string(body)}
			}
			d.out <- m
		}
	}()
	d.n++
	d.write(t, map[string]any{"jsonrpc": "2.0", "id": d.n, "method": "initialize", "params": map[string]any{"workspaceRoot": p.ws, "initialConfig": map[string]any{"hostTools": []any{}}}})
	for {
		if m := next(t, d.out, p); m["id"] == float64(d.n) {
			if m["error"] != nil {
				t.Fatalf("initialize: %v", m)
			}
			return d
		}
	}
}

func (d *lspDriver) writeRaw(t *testing.T, body []byte) {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	if _, err := fmt.Fprintf(d.in, "Content-Length: %d\r\n\r\n%s", len(body), body); err != nil {
		t.Fatal(err)
	}
}

func (d *lspDriver) write(t *testing.T, v any) {
	b, _ := json.Marshal(v)
	d.writeRaw(t, b)
}

// lspThought parses the thoughts that name tool calls.
var lspThought = regexp.MustCompile(`^(?:Calling (\S+) |(\S+): |(\S+) failed |(\S+) was not run)`)

func (d *lspDriver) turn(t *testing.T, prompt string, o turnOpts) turnResult {
	d.n++
	id := d.n
	task := fmt.Sprintf("task-%d", id)
	d.write(t, map[string]any{"jsonrpc": "2.0", "id": id, "method": "executeTask", "params": map[string]any{"taskId": task, "prompt": prompt}})
	r := turnResult{tools: map[string]string{}}
	var streamed string
	cancelled := false
	for {
		m := next(t, d.out, d.p)
		switch {
		case m["method"] == "$/partialResult":
			p := mapOf(m["params"])
			content, _ := p["content"].(string)
			switch p["type"] {
			case "text":
				streamed += content
				r.pieces++
			case "thought":
				if g := lspThought.FindStringSubmatch(content); g != nil {
					switch {
					case g[1] != "":
						r.tools[g[1]] = "started"
					case g[2] != "" && r.tools[g[2]] != "":
						r.tools[g[2]] = "completed"
					case g[3] != "":
						r.tools[g[3]] = "failed"
					case g[4] != "":
						r.tools[g[4]] = "failed"
					}
				}
			}
			if o.cancel && !cancelled && streamedSome(streamed) {
				cancelled = true
				d.write(t, map[string]any{"jsonrpc": "2.0", "method": "$/cancelRequest", "params": map[string]any{"id": id}})
			}
		case m["method"] == "$/requestToolExecution":
			p := mapOf(m["params"])
			if p["toolName"] != "approve" {
				d.write(t, map[string]any{"jsonrpc": "2.0", "id": m["id"], "error": map[string]any{"code": -32601, "message": "no such host tool"}})
				continue
			}
			r.asked++
			d.write(t, map[string]any{"jsonrpc": "2.0", "id": m["id"], "result": map[string]any{"approved": o.approve}})
		case m["id"] == float64(id):
			res := mapOf(m["result"])
			r.text, _ = res["message"].(string)
			switch {
			case res["status"] == "completed":
				r.status = "completed"
			case strings.Contains(fmt.Sprint(res["message"]), "cancelled"):
				r.status, r.text = "cancelled", streamed
			default:
				r.status = "error"
			}
			return r
		}
	}
}

func (d *lspDriver) malformed(t *testing.T) string {
	d.writeRaw(t, []byte(`{"jsonrpc": "2.0", "id": 77, "method": `))
	for {
		if m := next(t, d.out, d.p); m["error"] != nil && m["id"] == nil {
			return fmt.Sprint(m["error"])
		}
	}
}

func (d *lspDriver) restart(t *testing.T) scenarioClient {
	t.Fatal("lsp-stdio cannot resume")
	return nil
}

// ---- unix ----

type unixDriver struct {
	p    *plexusProc
	sock string
	conn net.Conn
	wmu  sync.Mutex
	in   <-chan map[string]any
	n    int
}

var unixServing = regexp.MustCompile(`serving JSON-RPC on unix socket`)

func startUnixDriver(t *testing.T, p *plexusProc) scenarioClient {
	d := &unixDriver{p: p, sock: filepath.Join(t.TempDir(), "plexus.sock")}
	d.connect(t)
	return d
}

func (d *unixDriver) connect(t *testing.T) {
	ready := make(chan struct{})
	var once sync.Once
	d.p.start(t, "unix", func(line string) {
		if unixServing.MatchString(line) {
			once.Do(func() { close(ready) })
		}
	}, "--socket", d.sock)
	select {
	case <-ready:
	case <-time.After(scenarioTimeout):
		t.Fatalf("no serving line\n%s", d.p.stderrText())
	}
	c, err := net.Dial("unix", d.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	d.conn, d.in = c, lineReader(c)
	if r := d.call(t, "initialize", map[string]any{"protocol_version": "1.0.0", "client_info": map[string]any{"name": "scenarios", "version": "1"}}); mapOf(r["result"])["status"] != "ready" {
		t.Fatalf("initialize %v", r)
	}
}

func (d *unixDriver) send(t *testing.T, v any) {
	b, _ := json.Marshal(v)
	d.wmu.Lock()
	defer d.wmu.Unlock()
	if _, err := d.conn.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
}

// call sends a request and returns its response (skipping notifications).
func (d *unixDriver) call(t *testing.T, method string, params any) map[string]any {
	d.n++
	id := d.n
	d.send(t, map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	for {
		if m := next(t, d.in, d.p); m["id"] == float64(id) {
			return m
		}
	}
}

func (d *unixDriver) turn(t *testing.T, prompt string, o turnOpts) turnResult {
	d.n++
	id := d.n
	d.send(t, map[string]any{"jsonrpc": "2.0", "id": id, "method": "agent.query", "params": map[string]any{"message": prompt}})
	r := turnResult{tools: map[string]string{}}
	queryID, cancelled := "", false
	for {
		m := next(t, d.in, d.p)
		p := mapOf(m["params"])
		if m["id"] == float64(id) {
			queryID, _ = mapOf(m["result"])["query_id"].(string)
			continue
		}
		switch m["method"] {
		case "stream.token":
			r.text += p["token"].(string)
			r.pieces++
		case "stream.tokens":
			for _, tk := range p["tokens"].([]any) {
				r.text += mapOf(tk)["token"].(string)
				r.pieces++
			}
		case "tool.complete":
			st := "failed"
			if p["status"] == "success" {
				st = "completed"
			}
			r.tools[p["execution_id"].(string)] = st
		case "tool.request_approval":
			r.asked++
			d.n++
			d.send(t, map[string]any{"jsonrpc": "2.0", "id": d.n, "method": "tool.approve", "params": map[string]any{"execution_id": p["execution_id"], "approved": o.approve}})
		case "stream.complete":
			switch p["status"] {
			case "success":
				r.status = "completed"
			case "cancelled":
				r.status = "cancelled"
			default:
				r.status = "error"
			}
			return r
		}
		if o.cancel && !cancelled && queryID != "" && streamedSome(r.text) {
			cancelled = true
			d.n++
			d.send(t, map[string]any{"jsonrpc": "2.0", "id": d.n, "method": "agent.cancel", "params": map[string]any{"query_id": queryID}})
		}
	}
}

func (d *unixDriver) malformed(t *testing.T) string {
	d.wmu.Lock()
	d.conn.Write([]byte("{this is not json\n"))
	d.wmu.Unlock()
	for {
		if m := next(t, d.in, d.p); m["error"] != nil && m["id"] == nil {
			return fmt.Sprint(m["error"])
		}
	}
}

// restart saves the session to a file, restarts plexus and loads it.
func (d *unixDriver) restart(t *testing.T) scenarioClient {
	path := filepath.Join(d.p.dataDir, "sessions", "scenario.json")
	if r := d.call(t, "session.save", map[string]any{"path": path}); r["error"] != nil {
		t.Fatalf("session.save: %v", r)
	}
	d.conn.Close()
	d.p.stop()
	d.connect(t)
	if r := d.call(t, "session.load", map[string]any{"path": path}); r["error"] != nil {
		t.Fatalf("session.load: %v", r)
	}
	return d
}

// ---- http ----

type httpDriver struct {
	p          *plexusProc
	url, token string
	session    string
	ws         *websocket.Conn
	msgs       chan map[string]any
}

var httpServing = regexp.MustCompile(`serving (http://\S+) `)

func startHTTPDriver(t *testing.T, p *plexusProc) scenarioClient {
	d := &httpDriver{p: p}
	d.serve(t)
	var wss struct {
		Workspaces []map[string]any `json:"workspaces"`
	}
	d.rest(t, "GET", "/v1/workspaces", "", &wss)
	if len(wss.Workspaces) != 1 {
		t.Fatalf("workspaces %v", wss)
	}
	var s map[string]any
	d.rest(t, "POST", "/v1/sessions", fmt.Sprintf(`{"workspace_id": %q}`, wss.Workspaces[0]["workspace_id"]), &s)
	d.session, _ = s["session_id"].(string)
	d.dial(t)
	return d
}

func (d *httpDriver) serve(t *testing.T) {
	found := make(chan string, 1)
	d.p.start(t, "http", func(line string) {
		if m := httpServing.FindStringSubmatch(line); m != nil {
			select {
			case found <- m[1]:
			default:
			}
		}
	}, "--addr", "127.0.0.1:0")
	select {
	case d.url = <-found:
	case <-time.After(scenarioTimeout):
		t.Fatalf("no serving line\n%s", d.p.stderrText())
	}
	tok, err := os.ReadFile(filepath.Join(d.p.dataDir, "http-token"))
	if err != nil {
		t.Fatal(err)
	}
	d.token = strings.TrimSpace(string(tok))
}

func (d *httpDriver) rest(t *testing.T, method, path, body string, out any) {
	req, _ := http.NewRequest(method, d.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+d.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s %s: %v %s", method, path, err, b)
	}
}

func (d *httpDriver) dial(t *testing.T) {
	ctx := driverCtx(t)
	u := strings.Replace(d.url, "http://", "ws://", 1) + "/v1/sessions/" + d.session + "/stream"
	c, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + d.token}}})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(64 << 20)
	t.Cleanup(func() { c.CloseNow() })
	d.ws, d.msgs = c, make(chan map[string]any, 4096)
	go func(msgs chan map[string]any) {
		defer close(msgs)
		for {
			_, b, err := c.Read(context.Background())
			if err != nil {
				return
			}
			var m map[string]any
			json.Unmarshal(b, &m)
			msgs <- m
		}
	}(d.msgs)
	d.send(t, map[string]any{"type": "client.hello", "client_info": map[string]any{"name": "scenarios", "version": "1", "capabilities": []string{}}})
	for next(t, d.msgs, d.p)["type"] != "server.hello" {
	}
}

func (d *httpDriver) send(t *testing.T, v any) {
	b, _ := json.Marshal(v)
	if err := d.ws.Write(driverCtx(t), websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
}

func (d *httpDriver) turn(t *testing.T, prompt string, o turnOpts) turnResult {
	d.send(t, map[string]any{"type": "client.user_message", "message": prompt})
	r := turnResult{tools: map[string]string{}}
	cancelled := false
	for {
		m := next(t, d.msgs, d.p)
		switch m["type"] {
		case "assistant.token":
			r.text += m["token"].(string)
			r.pieces++
		case "tool.execute":
			name, _ := m["tool_name"].(string)
			r.tools[name], _ = m["status"].(string)
		case "tool.request_approval", "command.request_approval":
			r.asked++
			d.send(t, map[string]any{"type": "client.approval_response", "request_id": m["request_id"], "approved": o.approve})
		case "assistant.message_final":
			switch mapOf(m["metadata"])["status"] {
			case "completed":
				r.status = "completed"
			case "cancelled":
				r.status = "cancelled"
			default:
				r.status = "error"
			}
			return r
		}
		if o.cancel && !cancelled && streamedSome(r.text) {
			cancelled = true
			d.send(t, map[string]any{"type": "client.cancel", "reason": "the scenario cancels"})
		}
	}
}

func (d *httpDriver) malformed(t *testing.T) string {
	if err := d.ws.Write(driverCtx(t), websocket.MessageText, []byte("{this is not json")); err != nil {
		t.Fatal(err)
	}
	for {
		if m := next(t, d.msgs, d.p); m["type"] == "server.error" {
			return fmt.Sprint(m["error"])
		}
	}
}

func (d *httpDriver) restart(t *testing.T) scenarioClient {
	d.ws.CloseNow()
	d.p.stop()
	d.serve(t)
	d.dial(t)
	return d
}

// ---- task ----

type taskDriver struct {
	p   *plexusProc
	url string
	n   int
}

var taskServing = regexp.MustCompile(`serving tasks on (http://\S+/api/task/process)`)

func startTaskDriver(t *testing.T, p *plexusProc) scenarioClient {
	found := make(chan string, 1)
	p.start(t, "task", func(line string) {
		if m := taskServing.FindStringSubmatch(line); m != nil {
			select {
			case found <- m[1]:
			default:
			}
		}
	}, "--addr", "127.0.0.1:0")
	select {
	case u := <-found:
		return &taskDriver{p: p, url: u}
	case <-time.After(scenarioTimeout):
		t.Fatalf("no serving line\n%s", p.stderrText())
	}
	return nil
}

func (d *taskDriver) post(t *testing.T, body string) (int, map[string]any) {
	resp, err := http.Post(d.url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%d, not JSON: %s", resp.StatusCode, b)
	}
	return resp.StatusCode, out
}

func (d *taskDriver) turn(t *testing.T, prompt string, o turnOpts) turnResult {
	d.n++
	body, _ := json.Marshal(map[string]any{"task": map[string]any{"id": fmt.Sprintf("t%d", d.n), "type": "general",
		"data": map[string]any{"prompt": prompt}}, "repoId": "scenarios"})
	code, out := d.post(t, string(body))
	r := turnResult{tools: map[string]string{}, status: "error"}
	if code != 200 {
		r.text = fmt.Sprint(out)
		return r
	}
	res := mapOf(out["result"])
	r.status, r.pieces = "completed", 1
	r.text, _ = res["output"].(string)
	for _, tool := range res["toolsUsed"].([]any) {
		r.tools[tool.(string)] = ""
	}
	return r
}

func (d *taskDriver) malformed(t *testing.T) string {
	code, out := d.post(t, `{"task": {"id": "bad", "type": "general"`)
	if code != 400 {
		t.Errorf("malformed task: %d %v", code, out)
	}
	return fmt.Sprint(code, " ", out["error"])
}

func (d *taskDriver) restart(t *testing.T) scenarioClient {
	t.Fatal("task cannot resume")
	return nil
}

// ---- acp ----

type acpDriver struct {
	p         *plexusProc
	in        io.WriteCloser
	c         *acptest.Client
	sessionID string

	mu    sync.Mutex
	opts  turnOpts
	asked int
}

func startACPDriver(t *testing.T, p *plexusProc) scenarioClient {
	d := &acpDriver{p: p}
	d.connect(t)
	var res struct {
		SessionID string `json:"sessionId"`
	}
	d.call(t, "session/new", map[string]any{"cwd": p.ws, "mcpServers": []any{}}, &res)
	d.sessionID = res.SessionID
	return d
}

func (d *acpDriver) connect(t *testing.T) {
	in, out := d.p.start(t, "acp", nil)
	d.in = in
	d.c = acptest.NewClient(out, in, d.handle)
	t.Cleanup(func() {
		if v := d.c.Violations(); len(v) > 0 {
			t.Errorf("plexus sent %d messages ACP does not allow:\n%s", len(v), strings.Join(v, "\n"))
		}
	})
	d.call(t, "initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "scenarios", "version": "1"}}, nil)
}

func (d *acpDriver) handle(method string, params json.RawMessage) (any, *acptest.RPCError) {
	if method != "session/request_permission" {
		return nil, &acptest.RPCError{Code: -32601, Message: "not offered: " + method}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asked++
	choice := "reject_once"
	if d.opts.approve {
		choice = "allow_once"
	}
	return map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": choice}}, nil
}

func (d *acpDriver) call(t *testing.T, method string, params, out any) {
	res, err := d.c.Call(driverCtx(t), method, params)
	if err != nil {
		t.Fatalf("%s: %v\nstderr:\n%s", method, err, d.p.stderrText())
	}
	if out != nil {
		json.Unmarshal(res, out)
	}
}

func (d *acpDriver) turn(t *testing.T, prompt string, o turnOpts) turnResult {
	d.mu.Lock()
	d.opts, d.asked = o, 0
	d.mu.Unlock()
	before := len(d.c.Updates())
	ch, err := d.c.Start("session/prompt", map[string]any{"sessionId": d.sessionID, "prompt": []any{map[string]any{"type": "text", "text": prompt}}})
	if err != nil {
		t.Fatal(err)
	}
	collect := func() turnResult {
		r := turnResult{tools: map[string]string{}}
		names := map[string]string{}
		for _, u := range d.c.Updates()[before:] {
			var up struct {
				SessionUpdate string `json:"sessionUpdate"`
				ToolCallID    string `json:"toolCallId"`
				Status        string `json:"status"`
				Meta          struct {
					ToolName string `json:"tool_name"`
				} `json:"_meta"`
				Content struct {
					Text string `json:"text"`
				} `json:"content"`
			}
			json.Unmarshal(u.Update, &up)
			switch up.SessionUpdate {
			case "agent_message_chunk":
				r.text += up.Content.Text
				r.pieces++
			case "tool_call":
				names[up.ToolCallID] = up.Meta.ToolName
				r.tools[up.Meta.ToolName] = up.Status
			case "tool_call_update":
				if up.Status != "" {
					r.tools[names[up.ToolCallID]] = up.Status
				}
			}
		}
		return r
	}
	if o.cancel {
		if err := d.c.WaitFor(driverCtx(t), func() bool { return streamedSome(collect().text) }); err != nil {
			t.Fatal(err)
		}
		d.c.Notify("session/cancel", map[string]any{"sessionId": d.sessionID})
	}
	res, err := d.c.Wait(driverCtx(t), ch)
	r := collect()
	d.mu.Lock()
	r.asked = d.asked
	d.mu.Unlock()
	var pr struct {
		StopReason string `json:"stopReason"`
	}
	json.Unmarshal(res, &pr)
	switch {
	case err != nil:
		r.status = "error"
	case pr.StopReason == "end_turn":
		r.status = "completed"
	case pr.StopReason == "cancelled":
		r.status = "cancelled"
	default:
		r.status = pr.StopReason
	}
	for name, st := range r.tools {
		if st != "completed" && st != "failed" {
			t.Errorf("tool call %s ended %q", name, st)
		}
	}
	return r
}

func (d *acpDriver) malformed(t *testing.T) string {
	d.c.WriteLine(`{"jsonrpc": "2.0", "id": 5, "method": "session/prompt", "params": {`)
	if err := d.c.WaitFor(driverCtx(t), func() bool { return len(d.c.NullErrors()) > 0 }); err != nil {
		t.Fatal(err)
	}
	return d.c.NullErrors()[0].Error()
}

// restart stops plexus (closing its input, as an editor does), starts it
// again and loads the session, which replays the conversation.
func (d *acpDriver) restart(t *testing.T) scenarioClient {
	d.in.Close()
	d.p.stop()
	d.connect(t)
	d.call(t, "session/load", map[string]any{"sessionId": d.sessionID, "cwd": d.p.ws, "mcpServers": []any{}}, nil)
	if n := len(d.c.Updates()); n == 0 {
		t.Errorf("session/load replayed nothing")
	}
	return d
}

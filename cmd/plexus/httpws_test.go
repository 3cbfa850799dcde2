package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/transports/httpws/schemas"
)

// fixScript is a /fix turn on the calc workspace (writeCalc): a plan and a
// read, an edit, a final answer; then a second turn that proposes another
// edit (used by the restart test).
const fixScript = `{"text": "", "tool_calls": [{"name": "update_plan", "arguments": {"steps": [{"description": "Read Add and its test", "files_involved": ["calc.go", "calc_test.go"], "status": "in_progress"}, {"description": "Make Add return the sum", "files_involved": ["calc.go"], "status": "pending"}], "rationale": "The test expects 5 for Add(2, 3); Add subtracts."}}, {"name": "read_file", "arguments": {"path": "calc.go"}}]}
{"text": "Add subtracts instead of adding.", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.go", "old_string": "\treturn a - b\n", "new_string": "\treturn a + b\n", "rationale": "Add must return the sum of its arguments.", "acceptance_criteria": ["go test ./... passes"]}}]}
{"text": "Fixed: Add now returns a + b, so TestAdd passes."}
{"text": "I'll document the package better.", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.go", "old_string": "// Package calc does arithmetic.\n", "new_string": "// Package calc does integer arithmetic.\n", "rationale": "A more precise package comment."}}]}
{"text": "Done."}
`

// calcFixture returns a calc workspace (writeCalc) and a replay script
// of fixScript.
func calcFixture(t *testing.T) (ws, script string) {
	t.Helper()
	ws, script = t.TempDir(), filepath.Join(t.TempDir(), "fix.jsonl")
	writeCalc(t, ws)
	writeFile(t, script, fixScript)
	return ws, script
}

// writeCalc writes a Go package whose Add subtracts, and its failing test.
func writeCalc(t *testing.T, dir string) {
	t.Helper()
	writeFile(t, filepath.Join(dir, "go.mod"), "module example.com/calc\n\ngo 1.22\n")
	writeFile(t, filepath.Join(dir, "calc.go"), "// Package calc does arithmetic.\npackage calc\n\n// Add returns the sum of a and b.\nfunc Add(a, b int) int {\n\treturn a - b\n}\n")
	writeFile(t, filepath.Join(dir, "calc_test.go"), "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif got := Add(2, 3); got != 5 {\n\t\tt.Fatalf(\"Add(2, 3) = %d, want 5\", got)\n\t}\n}\n")
}

var httpServingLine = regexp.MustCompile(`serving (http://\S+) `)

type httpServer struct {
	cmd     *exec.Cmd
	url     string
	token   string
	dataDir string
	stderr  *bytes.Buffer
}

// startHTTPServer runs plexus serve --transport http on a free loopback
// port with the data directory dataDir.
func startHTTPServer(t *testing.T, ws, dataDir, script string, extra ...string) *httpServer {
	t.Helper()
	args := append([]string{"serve", "--transport", "http", "--addr", "127.0.0.1:0", "-w", ws, "--model", "replay:" + script}, extra...)
	cmd := exec.Command(plexusBin, args...)
	cmd.Env = append(os.Environ(), "PLEXUS_PLUGIN_PATH="+t.TempDir(), "PLEXUS_DATA_DIR="+dataDir, "PLEXUS_TOKEN=", "PLEXUS_MODEL=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	s := &httpServer{cmd: cmd, dataDir: dataDir, stderr: &bytes.Buffer{}}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := httpServingLine.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case s.url = <-found:
	case <-time.After(60 * time.Second):
		t.Fatal("plexus serve --transport http did not say where it serves within 60s")
	}
	tok, err := os.ReadFile(filepath.Join(dataDir, "http-token"))
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(filepath.Join(dataDir, "http-token"))
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", fi.Mode().Perm())
	}
	s.token = strings.TrimSpace(string(tok))
	return s
}

// do sends a REST request with the token and decodes the JSON answer.
func (s *httpServer) do(t *testing.T, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(data) > 0 {
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatalf("%s %s: %d, not a JSON object: %s", method, path, resp.StatusCode, data)
		}
	}
	return resp.StatusCode, out
}

// wsSchemas validates server messages against schemas/ws.
type wsSchemas map[string]*jsonschema.Schema

func loadWSSchemas(t *testing.T) wsSchemas {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	files, _ := fs.Glob(schemas.FS, "ws/*.json")
	for _, f := range files {
		data, _ := fs.ReadFile(schemas.FS, f)
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.AddResource("https://plexus.dev/schemas/"+f, doc); err != nil {
			t.Fatal(err)
		}
	}
	out := wsSchemas{}
	for _, f := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(f, "ws/"), ".json")
		s, err := c.Compile("https://plexus.dev/schemas/" + f)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = s
	}
	return out
}

// wsClient is a test WebSocket client that checks every server message
// against its schema and that event seqs only grow.
type wsClient struct {
	t       *testing.T
	c       *websocket.Conn
	schemas wsSchemas
	lastSeq float64
	seen    []map[string]any
}

func (s *httpServer) dial(t *testing.T, sc wsSchemas, sessionID, query string, caps ...string) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := strings.Replace(s.url, "http://", "ws://", 1) + "/v1/sessions/" + sessionID + "/stream" + query
	c, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + s.token}}})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(16 << 20)
	t.Cleanup(func() { c.CloseNow() })
	w := &wsClient{t: t, c: c, schemas: sc}
	w.send(map[string]any{"type": "client.hello", "client_info": map[string]any{"name": "plexus-test", "version": "1", "capabilities": append([]string{}, caps...)}})
	return w
}

func (w *wsClient) send(v any) {
	w.t.Helper()
	data, _ := json.Marshal(v)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.c.Write(ctx, websocket.MessageText, data); err != nil {
		w.t.Fatal(err)
	}
}

// next reads one message, validating it.
func (w *wsClient) next() map[string]any {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, data, err := w.c.Read(ctx)
	if err != nil {
		w.t.Fatalf("read: %v (seen %v)", err, types(w.seen))
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		w.t.Fatal(err)
	}
	typ, _ := m["type"].(string)
	s, ok := w.schemas[typ]
	if !ok {
		w.t.Fatalf("message type %q has no schema: %s", typ, data)
	}
	doc, _ := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err := s.Validate(doc); err != nil {
		w.t.Fatalf("%s breaks its schema: %v\n%s", typ, err, data)
	}
	seq, _ := m["seq"].(float64)
	if seq < w.lastSeq {
		w.t.Fatalf("seq went back from %v to %v at %s", w.lastSeq, seq, data)
	}
	w.lastSeq = seq
	w.seen = append(w.seen, m)
	return m
}

// until reads messages up to and including one of type typ.
func (w *wsClient) until(typ string) map[string]any {
	w.t.Helper()
	for {
		m := w.next()
		if m["type"] == typ {
			return m
		}
		if m["type"] == "server.error" && m["error"].(map[string]any)["recoverable"] == false {
			w.t.Logf("unrecoverable error: %v", m)
		}
	}
}

func types(ms []map[string]any) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i], _ = m["type"].(string)
	}
	return out
}

func (w *wsClient) saw(typ string) []map[string]any {
	var out []map[string]any
	for _, m := range w.seen {
		if m["type"] == typ {
			out = append(out, m)
		}
	}
	return out
}

// fixMessage is the /fix user message with the context a VS Code client
// gathers.
func fixMessage() map[string]any {
	return map[string]any{
		"type":    "client.user_message",
		"message": "Fix the failing test",
		"context": map[string]any{
			"active_editor": map[string]any{
				"file_path": "calc.go", "language": "go",
				"selection":     map[string]any{"start": map[string]any{"line": 5, "character": 0}, "end": map[string]any{"line": 5, "character": 13}},
				"visible_range": map[string]any{"start": 0, "end": 7},
			},
			"diagnostics": []any{map[string]any{"file_path": "calc_test.go", "severity": "error", "message": "Add(2, 3) = -1, want 5", "line": 6, "character": 2, "source": "go test"}},
			"terminal_output": map[string]any{"command": "go test ./...", "exit_code": 1,
				"stdout": "--- FAIL: TestAdd\n    calc_test.go:7: Add(2, 3) = -1, want 5\nFAIL", "stderr": "", "timestamp": "2026-11-21T10:30:45Z"},
			"command": "/fix",
		},
	}
}

// setupSession registers nothing (serve registers -w) and creates a
// session; it returns the workspace and session ids.
func (s *httpServer) setupSession(t *testing.T) (string, string) {
	t.Helper()
	code, body := s.do(t, "GET", "/v1/workspaces", "")
	wss, _ := body["workspaces"].([]any)
	if code != 200 || len(wss) != 1 {
		t.Fatalf("GET /v1/workspaces: %d %v", code, body)
	}
	wsID := wss[0].(map[string]any)["workspace_id"].(string)
	code, body = s.do(t, "POST", "/v1/sessions", fmt.Sprintf(`{"workspace_id": %q}`, wsID))
	if code != 201 {
		t.Fatalf("POST /v1/sessions: %d %v", code, body)
	}
	return wsID, body["session_id"].(string)
}

// TestHTTPFixTurn drives plexus serve --transport http over real sockets
// through a /fix turn: hello, a user message with diagnostics, the plan,
// retrieval, tool events, the patch proposal, its approval, the applied
// patch, the final message and the session state. Every server message is
// checked against its JSON Schema.
func TestHTTPFixTurn(t *testing.T) {
	ws, script := calcFixture(t)
	srv := startHTTPServer(t, ws, t.TempDir(), script)
	_, sessID := srv.setupSession(t)
	sc := loadWSSchemas(t)

	c := srv.dial(t, sc, sessID, "")
	if m := c.next(); m["type"] != "server.hello" {
		t.Fatalf("first message %v, want server.hello", m)
	}
	if m := c.next(); m["type"] != "session.state" {
		t.Fatalf("second message %v, want session.state", m)
	}
	c.send(fixMessage())
	ask := c.until("tool.request_approval")
	for _, typ := range []string{"assistant.thinking", "agent.plan", "agent.retrieve.status", "tool.execute", "patch.proposed"} {
		if len(c.saw(typ)) == 0 {
			t.Errorf("no %s before the approval request; saw %v", typ, types(c.seen))
		}
	}
	plan := c.saw("agent.plan")[0]
	if steps := plan["steps"].([]any); len(steps) != 2 {
		t.Errorf("plan steps %v", steps)
	}
	prop := c.saw("patch.proposed")[0]
	if prop["file_path"] != "calc.go" || !strings.Contains(prop["diff"].(string), "+\treturn a + b") || len(prop["hunks"].([]any)) != 1 {
		t.Errorf("patch.proposed %v", prop)
	}
	if ask["tool_name"] != "write_file" || ask["patch_set_id"] != prop["patch_set_id"] {
		t.Errorf("approval request %v", ask)
	}
	c.send(map[string]any{"type": "client.approval_response", "request_id": ask["request_id"], "approved": true, "scope": "all"})
	res := c.until("patch.result")
	if res["status"] != "applied" {
		t.Fatalf("patch.result %v", res)
	}
	final := c.until("assistant.message_final")
	md := final["metadata"].(map[string]any)
	if md["success"] != true || md["files_modified"] != 1.0 || !strings.Contains(final["message"].(string), "Fixed") {
		t.Errorf("final %v", final)
	}
	st := c.until("session.state")["state"].(map[string]any)
	if applied := st["applied_patches"].([]any); len(applied) != 1 || applied[0] != prop["patch_id"] || len(st["pending_patches"].([]any)) != 0 || len(st["pending_approvals"].([]any)) != 0 {
		t.Errorf("session.state %v", st)
	}
	if st["total_steps"] != 2.0 || st["current_step"] != 1.0 {
		t.Errorf("steps in session.state %v", st)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "calc.go")); !bytes.Contains(got, []byte("return a + b")) {
		t.Errorf("calc.go was not fixed:\n%s", got)
	}
	// The model saw the /fix context: the diagnostic and the test output.
	code, body := srv.do(t, "GET", "/v1/sessions/"+sessID, "")
	msgs, _ := body["messages"].([]any)
	if code != 200 || len(msgs) < 2 {
		t.Fatalf("GET session: %d %v", code, body)
	}
	user := msgs[0].(map[string]any)["content"].(string)
	for _, want := range []string{"Add(2, 3) = -1, want 5", "go test ./..."} {
		if !strings.Contains(user, want) {
			t.Errorf("the user message lacks %q:\n%s", want, user)
		}
	}
}

// eventSeqs returns the seqs of the messages made from events (those with
// a turn_id), in order.
func eventSeqs(ms []map[string]any) []float64 {
	var out []float64
	for _, m := range ms {
		if _, ok := m["turn_id"]; ok {
			if n := len(out); n == 0 || out[n-1] != m["seq"].(float64) {
				out = append(out, m["seq"].(float64))
			}
		}
	}
	return out
}

// TestHTTPRestartKeepsSessionAndPendingApproval kills the server with
// SIGKILL while a patch waits for approval, starts it again on the same
// data directory, and checks that the session's history is the same,
// that a reconnecting client gets what it missed and a session.state
// listing the pending approval, and that approving it then applies the
// patch.
func TestHTTPRestartKeepsSessionAndPendingApproval(t *testing.T) {
	ws, script := calcFixture(t)
	dataDir := t.TempDir()
	srv := startHTTPServer(t, ws, dataDir, script)
	_, sessID := srv.setupSession(t)
	sc := loadWSSchemas(t)

	c := srv.dial(t, sc, sessID, "")
	c.send(fixMessage())
	ask := c.until("tool.request_approval")
	c.send(map[string]any{"type": "client.approval_response", "request_id": ask["request_id"], "approved": true, "scope": "all"})
	c.until("session.state")
	c.send(map[string]any{"type": "client.user_message", "message": "Improve the package comment"})
	ask2 := c.until("tool.request_approval")
	prop2 := c.saw("patch.proposed")[1]
	_, before := srv.do(t, "GET", "/v1/sessions/"+sessID, "")

	if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	srv.cmd.Wait()
	srv = startHTTPServer(t, ws, dataDir, script)
	code, after := srv.do(t, "GET", "/v1/sessions/"+sessID, "")
	if code != 200 {
		t.Fatalf("GET session after restart: %d %v", code, after)
	}
	// The history is what it was, plus the request of the turn the kill
	// interrupted (issue 14 item 2: it was lost), without an answer.
	bmsgs, amsgs := before["messages"].([]any), after["messages"].([]any)
	bm, _ := json.Marshal(bmsgs)
	am, _ := json.Marshal(amsgs[:min(len(amsgs), len(bmsgs))])
	if !bytes.Equal(bm, am) || len(bmsgs) == 0 || len(amsgs) != len(bmsgs)+1 {
		t.Errorf("history changed across the restart:\nbefore %s\nafter  %s", bm, am)
	} else if last := amsgs[len(amsgs)-1].(map[string]any); last["role"] != "user" || !strings.HasPrefix(last["content"].(string), "Improve the package comment") {
		t.Errorf("the interrupted turn's request is not kept: the history ends with %v", last)
	}
	st := after["state"].(map[string]any)
	if pa := st["pending_approvals"].([]any); len(pa) != 1 || pa[0] != ask2["request_id"] {
		t.Errorf("pending approvals after restart %v, want [%v]", pa, ask2["request_id"])
	}
	if pp := st["pending_patches"].([]any); len(pp) != 1 || pp[0] != prop2["patch_id"] {
		t.Errorf("pending patches after restart %v, want [%v]", pp, prop2["patch_id"])
	}

	// Reconnect with the last seq seen: the rest of the interrupted turn
	// (its closing final), then the state.
	r := srv.dial(t, sc, sessID, fmt.Sprintf("?since=%d", int(c.lastSeq)))
	if m := r.next(); m["type"] != "server.hello" {
		t.Fatalf("first message %v", m)
	}
	final := r.until("assistant.message_final")
	if final["seq"].(float64) <= c.lastSeq || final["metadata"].(map[string]any)["success"] != false {
		t.Errorf("replayed final %v (last seen seq %v)", final, c.lastSeq)
	}
	state := r.until("session.state")["state"].(map[string]any)
	if pa := state["pending_approvals"].([]any); len(pa) != 1 || pa[0] != ask2["request_id"] {
		t.Errorf("session.state on reconnect %v", state)
	}
	for _, seq := range eventSeqs(r.seen) {
		if seq <= c.lastSeq {
			t.Errorf("replayed seq %v, which the client had seen", seq)
		}
	}
	r.send(map[string]any{"type": "client.approval_response", "request_id": ask2["request_id"], "approved": true, "scope": "all"})
	if res := r.until("patch.result"); res["status"] != "applied" {
		t.Fatalf("patch.result after restart %v", res)
	}
	state = r.until("session.state")["state"].(map[string]any)
	if len(state["pending_approvals"].([]any)) != 0 || len(state["applied_patches"].([]any)) != 2 {
		t.Errorf("state after approving %v", state)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "calc.go")); !bytes.Contains(got, []byte("integer arithmetic")) || !bytes.Contains(got, []byte("a + b")) {
		t.Errorf("calc.go after approving the pending patch:\n%s", got)
	}
	// A second answer finds nothing pending.
	r.send(map[string]any{"type": "client.approval_response", "request_id": ask2["request_id"], "approved": true})
	if e := r.until("server.error"); e["error"].(map[string]any)["code"] != "NOT_FOUND" {
		t.Errorf("second answer: %v", e)
	}
}

// TestHTTPResumeAndTwoClients runs a turn watched by two clients: both
// get the same events; the second client's message while the turn runs is
// refused with SESSION_BUSY; the second client answers the approval; a
// third client resuming from the middle gets exactly the events after
// its seq.
func TestHTTPResumeAndTwoClients(t *testing.T) {
	ws, script := calcFixture(t)
	srv := startHTTPServer(t, ws, t.TempDir(), script)
	_, sessID := srv.setupSession(t)
	sc := loadWSSchemas(t)

	a := srv.dial(t, sc, sessID, "")
	b := srv.dial(t, sc, sessID, "")
	a.until("session.state")
	b.until("session.state")
	a.send(fixMessage())
	ask := a.until("tool.request_approval")
	b.until("tool.request_approval")
	b.send(map[string]any{"type": "client.user_message", "message": "and another thing"})
	if e := b.until("server.error"); e["error"].(map[string]any)["code"] != "SESSION_BUSY" {
		t.Fatalf("second message while the turn runs: %v", e)
	}
	b.send(map[string]any{"type": "client.approval_response", "request_id": ask["request_id"], "approved": true, "scope": "file", "file_path": "calc.go"})
	a.until("session.state")
	b.until("session.state")
	as, bs := eventSeqs(a.seen), eventSeqs(b.seen)
	if fmt.Sprint(as) != fmt.Sprint(bs) || len(as) < 10 {
		t.Errorf("the two clients saw different events:\n%v\n%v", as, bs)
	}
	for i := 1; i < len(as); i++ {
		if as[i] != as[i-1]+1 {
			t.Errorf("gap in the event seqs at %v: %v", as[i-1], as)
			break
		}
	}
	mid := as[len(as)/2]
	r := srv.dial(t, sc, sessID, fmt.Sprintf("?since=%d", int(mid)))
	r.until("session.state")
	var want []float64
	for _, s := range as {
		if s > mid {
			want = append(want, s)
		}
	}
	if got := eventSeqs(r.seen); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("resumed after %v: got %v, want %v", mid, got, want)
	}
	// cumulative_text is rebuilt for a turn resumed in the middle.
	for _, m := range r.saw("assistant.token") {
		if !strings.HasSuffix(m["cumulative_text"].(string), m["token"].(string)) {
			t.Errorf("token %v", m)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "calc.go")); !bytes.Contains(got, []byte("return a + b")) {
		t.Errorf("calc.go not fixed after the file-scoped approval:\n%s", got)
	}
}

// TestHTTPRequiresToken checks that every endpoint answers 401 without
// the bearer token (or with a wrong one) and that the WebSocket upgrade is
// refused.
func TestHTTPRequiresToken(t *testing.T) {
	ws, script := calcFixture(t)
	srv := startHTTPServer(t, ws, t.TempDir(), script)
	wsID, sessID := srv.setupSession(t)
	endpoints := []struct{ method, path string }{
		{"GET", "/v1/health"}, {"GET", "/v1/workspaces"}, {"POST", "/v1/workspaces/register"},
		{"GET", "/v1/workspaces/" + wsID}, {"GET", "/v1/workspaces/" + wsID + "/policy"}, {"PUT", "/v1/workspaces/" + wsID + "/policy"},
		{"POST", "/v1/workspaces/" + wsID + "/index/rebuild"}, {"POST", "/v1/workspaces/" + wsID + "/index/refresh"},
		{"POST", "/v1/workspaces/" + wsID + "/index/incremental"}, {"GET", "/v1/workspaces/" + wsID + "/index/status"},
		{"POST", "/v1/sessions"}, {"GET", "/v1/sessions?workspace_id=" + wsID}, {"GET", "/v1/sessions/" + sessID},
		{"DELETE", "/v1/sessions/" + sessID}, {"GET", "/v1/models"}, {"GET", "/v1/models/current"}, {"PUT", "/v1/models/current"},
		{"GET", "/v1/sessions/" + sessID + "/stream"}, {"GET", "/v1/no-such-thing"},
	}
	for _, auth := range []string{"", "Bearer wrong-token", "Basic " + srv.token, "Bearer " + srv.token + "x"} {
		for _, ep := range endpoints {
			req, _ := http.NewRequest(ep.method, srv.url+ep.path, strings.NewReader("{}"))
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 401 || !strings.Contains(string(body), `"UNAUTHORIZED"`) || resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s with %q: %d %s", ep.method, ep.path, auth, resp.StatusCode, body)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		h := http.Header{}
		if auth != "" {
			h.Set("Authorization", auth)
		}
		_, resp, err := websocket.Dial(ctx, strings.Replace(srv.url, "http", "ws", 1)+"/v1/sessions/"+sessID+"/stream", &websocket.DialOptions{HTTPHeader: h})
		cancel()
		if err == nil || resp == nil || resp.StatusCode != 401 {
			t.Errorf("WebSocket upgrade with %q: err %v, response %v", auth, err, resp)
		}
	}
	// The session is still there: nothing was deleted without the token.
	if code, _ := srv.do(t, "GET", "/v1/sessions/"+sessID, ""); code != 200 {
		t.Errorf("session after unauthorized DELETE: %d", code)
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key, PEM.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "plexus test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeFile(t, certFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	writeFile(t, keyFile, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})))
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestHTTPServeTLSAndShutdown serves TLS from --tls-cert/--tls-key, runs
// REST and a WebSocket over it, then sends SIGTERM: the stream closes with
// 1001 and the process exits 0. A non-loopback --addr without TLS is
// refused.
func TestHTTPServeTLSAndShutdown(t *testing.T) {
	ws, script := calcFixture(t)

	r := plexus(t, ws, "", nil, "serve", "--transport", "http", "--addr", "0.0.0.0:0", "--model", "replay:"+script)
	if r.code != 2 || !strings.Contains(r.stderr, "not a loopback address") {
		t.Errorf("plain HTTP on 0.0.0.0: exit %d, %s", r.code, r.stderr)
	}

	certFile, keyFile, pool := selfSigned(t, t.TempDir())
	httpsServing := regexp.MustCompile(`serving (https://\S+) `)
	cmd := exec.Command(plexusBin, "serve", "--transport", "http", "--addr", "127.0.0.1:0", "-w", ws, "--model", "replay:"+script,
		"--tls-cert", certFile, "--tls-key", keyFile, "--token", "s3cret-token")
	cmd.Env = append(os.Environ(), "PLEXUS_PLUGIN_PATH="+t.TempDir(), "PLEXUS_DATA_DIR="+t.TempDir())
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	found := make(chan string, 1)
	var errText bytes.Buffer
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			errText.WriteString(sc.Text() + "\n")
			if m := httpsServing.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	var base string
	select {
	case base = <-found:
	case <-time.After(60 * time.Second):
		t.Fatal("no serving line")
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, _ := http.NewRequest("GET", base+"/v1/health", nil)
	req.Header.Set("Authorization", "Bearer s3cret-token")
	resp, err := client.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /v1/health over TLS: %v %v", resp, err)
	}
	resp.Body.Close()
	srv := &httpServer{url: base, token: "s3cret-token"}
	_, body := func() (int, map[string]any) {
		req, _ := http.NewRequest("POST", base+"/v1/sessions", strings.NewReader(fmt.Sprintf(`{"workspace_id": %q}`, engineWorkspaceID(t, ws))))
		req.Header.Set("Authorization", "Bearer s3cret-token")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}()
	sessID, _ := body["session_id"].(string)
	if sessID == "" {
		t.Fatalf("create session over TLS: %v", body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, strings.Replace(base, "https://", "wss://", 1)+"/v1/sessions/"+sessID+"/stream",
		&websocket.DialOptions{HTTPClient: client, HTTPHeader: http.Header{"Authorization": {"Bearer " + srv.token}}})
	if err != nil {
		t.Fatal(err)
	}
	w := &wsClient{t: t, c: c, schemas: loadWSSchemas(t)}
	w.send(map[string]any{"type": "client.hello", "client_info": map[string]any{"name": "t", "version": "1", "capabilities": []string{}}})
	w.until("session.state")

	cmd.Process.Signal(syscall.SIGTERM)
	for {
		rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, _, err := c.Read(rctx)
		rcancel()
		if err != nil {
			if websocket.CloseStatus(err) != websocket.StatusGoingAway {
				t.Errorf("stream at SIGTERM: %v, want close 1001", err)
			}
			break
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("plexus serve after SIGTERM: %v\n%s", err, errText.String())
	}
}

// engineWorkspaceID is the id plexus gives the workspace at dir.
func engineWorkspaceID(t *testing.T, dir string) string {
	t.Helper()
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return engine.WorkspaceID(real)
}

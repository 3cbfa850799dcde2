package httpws_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/transports/httpws"
)

// TestREST runs every endpoint with good and bad input; every answer is
// checked against openapi.json by do.
func TestREST(t *testing.T) {
	ts := newTestServer(t, map[string][]step{}, func(o *httpws.Options) { o.MaxMessageBytes = 2048 })
	other := t.TempDir()
	file := filepath.Join(other, "f.txt")
	os.WriteFile(file, []byte("x"), 0o644)

	type call struct {
		method, path, body string
		status             int
		code, field        string
	}
	for _, c := range []call{
		{"GET", "/v1/health", "", 200, "", ""},
		{"GET", "/v1/workspaces", "", 200, "", ""},
		{"GET", "/v1/workspaces/" + ts.wsID, "", 200, "", ""},
		{"GET", "/v1/workspaces/ws_000000000000", "", 404, "NOT_FOUND", ""},
		{"POST", "/v1/workspaces/register", `{"path": "` + other + `", "name": "other"}`, 201, "", ""},
		{"POST", "/v1/workspaces/register", `{"path": "` + other + `"}`, 200, "", ""},
		{"POST", "/v1/workspaces/register", `{}`, 400, "INVALID_REQUEST", "/path"},
		{"POST", "/v1/workspaces/register", `{"path": ""}`, 400, "INVALID_REQUEST", "/path"},
		{"POST", "/v1/workspaces/register", `{"path": "` + file + `"}`, 400, "INVALID_REQUEST", "/path"},
		{"POST", "/v1/workspaces/register", `{"path": "/x", "colour": "red"}`, 400, "INVALID_REQUEST", "/colour"},
		{"POST", "/v1/workspaces/register", `{"path": 7}`, 400, "INVALID_REQUEST", "/path"},
		{"POST", "/v1/workspaces/register", `[1,`, 400, "INVALID_REQUEST", "body"},
		{"POST", "/v1/workspaces/register", ``, 400, "INVALID_REQUEST", "body"},
		{"POST", "/v1/workspaces/register", `{"path": "` + strings.Repeat("a", 3000) + `"}`, 413, "PAYLOAD_TOO_LARGE", ""},
		{"GET", "/v1/workspaces/" + ts.wsID + "/policy", "", 200, "", ""},
		{"PUT", "/v1/workspaces/" + ts.wsID + "/policy", `{"version": 1, "rules": [{"tool": "run_command", "commands": ["go test *"], "action": "allow"}]}`, 200, "", ""},
		{"PUT", "/v1/workspaces/" + ts.wsID + "/policy", `{"version": 1, "rules": [{"tool": "run_command", "action": "sometimes"}]}`, 400, "INVALID_REQUEST", ""},
		{"PUT", "/v1/workspaces/" + ts.wsID + "/policy", `"no"`, 400, "INVALID_REQUEST", ""},
		{"POST", "/v1/sessions", `{"workspace_id": "ws_000000000000"}`, 404, "NOT_FOUND", "/workspace_id"},
		{"POST", "/v1/sessions", `{"workspace_id": "nope"}`, 400, "INVALID_REQUEST", "/workspace_id"},
		{"GET", "/v1/sessions?workspace_id=ws_000000000000", "", 400, "INVALID_REQUEST", "workspace_id"},
		{"GET", "/v1/sessions/ses_0000000000000000", "", 404, "NOT_FOUND", ""},
		{"DELETE", "/v1/sessions/ses_0000000000000000", "", 404, "NOT_FOUND", ""},
		{"GET", "/v1/models", "", 200, "", ""},
		{"GET", "/v1/models/current", "", 200, "", ""},
		{"PUT", "/v1/models/current", `{"provider": "script", "model_name": "test"}`, 200, "", ""},
		{"PUT", "/v1/models/current", `{"provider": "nobody", "model_name": "test"}`, 400, "MODEL_ERROR", "/provider"},
		{"PUT", "/v1/models/current", `{"provider": "script", "model_name": "gpt-9"}`, 400, "MODEL_ERROR", "/model_name"},
		{"PUT", "/v1/models/current", `{"provider": "script"}`, 400, "INVALID_REQUEST", "/model_name"},
		{"POST", "/v1/workspaces/" + ts.wsID + "/index/incremental", `{"changes": [{"type": "modified", "file_path": "calc.go"}]}`, 200, "", ""},
		{"POST", "/v1/workspaces/" + ts.wsID + "/index/incremental", `{"changes": [{"type": "renamed", "file_path": "calc.go"}]}`, 400, "INVALID_REQUEST", "/changes/0/type"},
		{"GET", "/v1/workspaces/" + ts.wsID + "/index/status", "", 200, "", ""},
	} {
		t.Run(fmt.Sprintf("%s %s %d", c.method, c.path, c.status), func(t *testing.T) {
			code, body := ts.do(t, c.method, c.path, c.body)
			if code != c.status {
				t.Fatalf("status %d, want %d: %v", code, c.status, body)
			}
			if c.code != "" && errCode(body) != c.code {
				t.Errorf("code %q, want %s: %v", errCode(body), c.code, body)
			}
			if c.field != "" {
				details, _ := body["error"].(map[string]any)["details"].(map[string]any)
				if details["field"] != c.field {
					t.Errorf("field %v, want %s: %v", details["field"], c.field, body)
				}
			}
		})
	}
	// The stored policy is what GET returns.
	_, pol := ts.do(t, "GET", "/v1/workspaces/"+ts.wsID+"/policy", "")
	if !strings.Contains(fmt.Sprint(pol), "go test *") {
		t.Errorf("policy after PUT: %v", pol)
	}
	// Sessions are listed by workspace.
	id := ts.newSession(t)
	_, list := ts.do(t, "GET", "/v1/sessions?workspace_id="+ts.wsID, "")
	if s := list["sessions"].([]any); len(s) != 1 || s[0].(map[string]any)["session_id"] != id {
		t.Errorf("sessions %v", list)
	}
	// Methods the path does not have.
	req, _ := http.NewRequest("PATCH", ts.url+"/v1/health", nil)
	req.Header.Set("Authorization", "Bearer "+ts.token)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 405 {
		t.Errorf("PATCH /v1/health: %v %v", resp, err)
	}
}

// TestIndexJobs starts a rebuild, sees it running in the status, gets a
// 409 for a second one, and sees it done after the build ends.
func TestIndexJobs(t *testing.T) {
	ts := newTestServer(t, map[string][]step{})
	base := "/v1/workspaces/" + ts.wsID + "/index/"
	code, body := ts.do(t, "POST", base+"rebuild", "")
	if code != 202 || body["job"].(map[string]any)["state"] != "running" {
		t.Fatalf("rebuild: %d %v", code, body)
	}
	if code, body := ts.do(t, "POST", base+"refresh", ""); code != 409 || errCode(body) != "CONFLICT" {
		t.Errorf("second build: %d %v", code, body)
	}
	_, st := ts.do(t, "GET", base+"status", "")
	if st["job"].(map[string]any)["kind"] != "rebuild" {
		t.Errorf("status %v", st)
	}
	close(ts.idx.release)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, st = ts.do(t, "GET", base+"status", "")
		if st["job"].(map[string]any)["state"] == "done" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job did not finish: %v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, _ := ts.do(t, "POST", base+"refresh", ""); code != 202 {
		t.Errorf("refresh after the rebuild: %d", code)
	}
	ts.idx.mu.Lock()
	defer ts.idx.mu.Unlock()
	if fmt.Sprint(ts.idx.builds) != "[true false]" {
		t.Errorf("builds %v", ts.idx.builds)
	}
}

// TestFileChangesUpdateTheIndex sends client.file_changes and gets
// index.updated.
func TestFileChangesUpdateTheIndex(t *testing.T) {
	ts := newTestServer(t, map[string][]step{})
	c := ts.connect(t, ts.newSession(t))
	c.send(map[string]any{"type": "client.file_changes", "changes": []any{
		map[string]any{"type": "created", "file_path": "new.go", "content_hash": "sha256:abc", "timestamp": "2026-11-21T10:35:12Z"},
		map[string]any{"type": "deleted", "file_path": "old.go"},
	}})
	if m := c.until("index.updated"); m["changes"] != 2.0 {
		t.Errorf("index.updated %v", m)
	}
	ts.idx.mu.Lock()
	defer ts.idx.mu.Unlock()
	if len(ts.idx.changes) != 1 || ts.idx.changes[0][1].Type != "deleted" || ts.idx.changes[0][0].Path != "new.go" {
		t.Errorf("changes %v", ts.idx.changes)
	}
}

// TestSessionModel switches one session's model with session_id (a
// Plexus extension of PUT /v1/models/current): the session's hello and
// GET with session_id show it, the server's current model stays, and a
// model without what turns need is refused naming the field.
func TestSessionModel(t *testing.T) {
	ts := newTestServer(t, map[string][]step{})
	id := ts.newSession(t)
	other := ts.newSession(t)
	for _, c := range []struct {
		body   string
		status int
		field  string
		msg    string
	}{
		{`{"provider": "embed", "model_name": "nomic", "session_id": "` + id + `"}`, 400, "/model_name", "cannot chat"},
		{`{"provider": "embed", "model_name": "nomic"}`, 400, "/model_name", "cannot chat"},
		{`{"provider": "script", "model_name": "test", "session_id": "ses_0000000000000000"}`, 404, "", ""},
		{`{"provider": "script", "model_name": "nope", "session_id": "` + id + `"}`, 400, "/model_name", "not among"},
	} {
		code, body := ts.do(t, "PUT", "/v1/models/current", c.body)
		e, _ := body["error"].(map[string]any)
		details, _ := e["details"].(map[string]any)
		if code != c.status || (c.field != "" && details["field"] != c.field) || !strings.Contains(fmt.Sprint(e["message"]), c.msg) {
			t.Errorf("PUT %s: %d %v", c.body, code, body)
		}
	}

	// A second provider's chat model, for one session only.
	code, body := ts.do(t, "PUT", "/v1/models/current", `{"provider": "script2", "model_name": "test", "session_id": "`+id+`"}`)
	if code != 200 || body["provider"] != "script2" {
		t.Fatalf("PUT with session_id: %d %v", code, body)
	}
	if _, cur := ts.do(t, "GET", "/v1/models/current?session_id="+id, ""); cur["provider"] != "script2" {
		t.Errorf("GET with session_id: %v", cur)
	}
	if _, cur := ts.do(t, "GET", "/v1/models/current", ""); cur["provider"] != "script" {
		t.Errorf("the server's current model changed: %v", cur)
	}
	if _, cur := ts.do(t, "GET", "/v1/models/current?session_id="+other, ""); cur["provider"] != "script" {
		t.Errorf("the other session's model changed: %v", cur)
	}
	if code, _ := ts.do(t, "GET", "/v1/models/current?session_id=ses_0000000000000000", ""); code != 404 {
		t.Errorf("GET with an unknown session: %d", code)
	}
	cl := ts.connect(t, id)
	var hello map[string]any
	for _, m := range cl.seen {
		if m["type"] == "server.hello" {
			hello = m
		}
	}
	model, _ := hello["server_info"].(map[string]any)["model"].(map[string]any)
	if model["provider"] != "script2" || model["model_name"] != "test" {
		t.Errorf("server.hello of the switched session: %v", hello)
	}
}

// TestRegisterWorkspaceRefusesRelativeAndRoot: a relative path (which the
// server would resolve against its own working directory) and the
// filesystem root, however it is spelt, are refused with a 400 naming
// /path and saying why; nothing is registered.
func TestRegisterWorkspaceRefusesRelativeAndRoot(t *testing.T) {
	ts := newTestServer(t, map[string][]step{})
	link := filepath.Join(t.TempDir(), "root")
	if err := os.Symlink("/", link); err != nil {
		t.Fatal(err)
	}
	_, before := ts.do(t, "GET", "/v1/workspaces", "")
	for _, c := range []struct{ path, want string }{
		{".", "is relative; give the workspace directory's absolute path"},
		{"calc", "is relative"},
		{"/", "is the filesystem root"},
		{"/tmp/..", "is the filesystem root"},
		{link, "is the filesystem root"},
	} {
		code, body := ts.do(t, "POST", "/v1/workspaces/register", fmt.Sprintf(`{"path": %q}`, c.path))
		e, _ := body["error"].(map[string]any)
		details, _ := e["details"].(map[string]any)
		if code != 400 || e["code"] != "INVALID_REQUEST" || details["field"] != "/path" || !strings.Contains(fmt.Sprint(e["message"]), c.want) {
			t.Errorf("register %q: %d %v, want 400 INVALID_REQUEST /path saying %q", c.path, code, body, c.want)
		}
	}
	if _, after := ts.do(t, "GET", "/v1/workspaces", ""); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("workspaces changed: %v, then %v", before, after)
	}
}

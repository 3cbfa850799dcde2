package httpws_test

import (
	"encoding/json"
	"io/fs"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/plexus-agent/plexus/transports/httpws/schemas"
)

// contractFileChanges is the changes array of the contract's
// client.file_changes example, with its types filled in.
const contractFileChanges = `[{"type": "created", "file_path": "src/utils/new_helper.ts", "content_hash": "sha256:abc123...", "timestamp": "2025-12-30T10:35:12Z"}]`

// TestFileChangesOutsideWorkspace: a change naming a path outside the
// workspace is the client's error on both paths (400 INVALID_REQUEST on
// REST naming the field, server.error POLICY_VIOLATION on the stream),
// and nothing reaches the index. It was 500 INDEX_FAILED (issue 14 item
// 7).
func TestFileChangesOutsideWorkspace(t *testing.T) {
	ts := newTestServer(t, map[string][]step{})
	base := "/v1/workspaces/" + ts.wsID + "/index/incremental"
	for i, path := range []string{"../escape.go", "/etc/passwd", filepath.Join(ts.root, "..", "x.go")} {
		body := `{"changes": [{"type": "modified", "file_path": "ok.go"}, {"type": "modified", "file_path": ` + jsonString(path) + `}]}`
		code, resp := ts.do(t, "POST", base, body)
		e, _ := resp["error"].(map[string]any)
		details, _ := e["details"].(map[string]any)
		if code != 400 || errCode(resp) != "INVALID_REQUEST" || details["field"] != "/changes/1/file_path" || !strings.Contains(e["message"].(string), "workspace") {
			t.Errorf("POST incremental with %q (%d): %d %v", path, i, code, resp)
		}
	}
	c := ts.connect(t, ts.newSession(t))
	c.send(map[string]any{"type": "client.file_changes", "changes": []any{map[string]any{"type": "created", "file_path": "../../etc/passwd"}}})
	if m := c.until("server.error"); errCode(m) != "POLICY_VIOLATION" {
		t.Errorf("client.file_changes outside the workspace: %v", m)
	}
	ts.idx.mu.Lock()
	defer ts.idx.mu.Unlock()
	if len(ts.idx.changes) != 0 {
		t.Errorf("the index got %v", ts.idx.changes)
	}
}

// TestContractFileChangesExample: the contract's own example is accepted
// by REST and by the stream alike (REST refused its content_hash).
func TestContractFileChangesExample(t *testing.T) {
	ts := newTestServer(t, map[string][]step{})
	code, resp := ts.do(t, "POST", "/v1/workspaces/"+ts.wsID+"/index/incremental", `{"changes": `+contractFileChanges+`}`)
	if code != 200 {
		t.Errorf("POST incremental with the contract's example: %d %v", code, resp)
	}
	var changes []any
	json.Unmarshal([]byte(contractFileChanges), &changes)
	c := ts.connect(t, ts.newSession(t))
	c.send(map[string]any{"type": "client.file_changes", "changes": changes})
	if m := c.until("index.updated"); m["changes"] != 1.0 {
		t.Errorf("index.updated %v", m)
	}
}

// TestFileChangeSchemasAgree: the REST body's FileChange and the
// stream's change item are one schema, so both accept the same changes.
func TestFileChangeSchemasAgree(t *testing.T) {
	var api struct {
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	var msg struct {
		Properties struct {
			Changes struct {
				Items any `json:"items"`
			} `json:"changes"`
		} `json:"properties"`
	}
	for name, v := range map[string]any{"openapi.json": &api, "ws/client.file_changes.json": &msg} {
		data, err := fs.ReadFile(schemas.FS, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, v); err != nil {
			t.Fatal(err)
		}
	}
	rest, ws := api.Components.Schemas["FileChange"], msg.Properties.Changes.Items
	if !reflect.DeepEqual(rest, ws) {
		a, _ := json.Marshal(rest)
		b, _ := json.Marshal(ws)
		t.Errorf("the schemas differ:\nREST   %s\nstream %s", a, b)
	}
}

// TestListSessionsUnknownWorkspace: a workspace_id filter naming no
// workspace is 400 naming the parameter (it was 404).
func TestListSessionsUnknownWorkspace(t *testing.T) {
	ts := newTestServer(t, map[string][]step{})
	code, resp := ts.do(t, "GET", "/v1/sessions?workspace_id=bad", "")
	e, _ := resp["error"].(map[string]any)
	details, _ := e["details"].(map[string]any)
	if code != 400 || errCode(resp) != "INVALID_REQUEST" || details["field"] != "workspace_id" {
		t.Errorf("GET /v1/sessions?workspace_id=bad: %d %v", code, resp)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

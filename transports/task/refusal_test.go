package task

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-agent/plexus/internal/testtree"
)

// Requests the server refuses, each with its status, code and
// details.field (and a piece of the reason when it matters).
func TestRefusals(t *testing.T) {
	r := newRig(t, rigConfig{opts: func(o *Options) { o.MaxBodyBytes = 4096 }})
	outside := t.TempDir()
	testtree.Write(t, outside, map[string]string{"secret.txt": "secret\n"})
	testtree.Symlink(t, filepath.Join(outside, "secret.txt"), filepath.Join(r.ws, "src", "link.ts"))
	review := func(path string) string {
		return `{"task": {"id": "t", "type": "code_review", "data": {"file_path": ` + path + `}}, "repoId": "test-repo"}`
	}
	withRepo := func(repo string) string {
		return `{"task": {"id": "t", "type": "validation", "data": {}}, "repoId": ` + repo + `}`
	}
	withTask := func(members string) string {
		return `{"task": {"id": "t", "type": "general", "data": {"prompt": "hi"}` + members + `}, "repoId": "test-repo"}`
	}
	tests := []struct {
		name, method, path, body string
		status                   int
		code, field, reason      string
	}{
		{"unknown path", "POST", "/api/task", exampleRequest, 404, CodeInvalidRequest, "", "POST /api/task/process"},
		{"trailing slash", "POST", ProcessPath + "/", exampleRequest, 404, CodeInvalidRequest, "", ""},
		{"GET on the endpoint", "GET", ProcessPath, "", 405, CodeInvalidRequest, "", "POST"},
		{"POST on health", "POST", HealthPath, "", 405, CodeInvalidRequest, "", "GET"},
		{"body too large", "POST", ProcessPath, `{"task": {"id": "` + strings.Repeat("x", 5000) + `"}}`, 413, CodeInvalidRequest, "", "4096 bytes"},
		{"empty body", "POST", ProcessPath, "", 400, CodeInvalidRequest, "", "empty"},
		{"malformed JSON", "POST", ProcessPath, `{"task": {"id": "t",}, "repoId": "r"}`, 400, CodeInvalidRequest, "", "offset 20"},
		{"trailing data", "POST", ProcessPath, withRepo(`"r"`) + "x", 400, CodeInvalidRequest, "", "data after the JSON value"},
		{"duplicate member", "POST", ProcessPath, `{"repoId": "a", "repoId": "b", "task": {}}`, 400, CodeInvalidRequest, "", "duplicate"},
		{"not an object", "POST", ProcessPath, `[1, 2]`, 400, CodeInvalidRequest, "", "Expected object, got array"},
		{"missing task and repoId", "POST", ProcessPath, `{}`, 400, CodeInvalidRequest, "task", "Field is required"},
		{"missing repoId", "POST", ProcessPath, `{"task": {"id": "t", "type": "general", "data": {}}}`, 400, CodeInvalidRequest, "repoId", "Field is required"},
		{"missing data", "POST", ProcessPath, `{"task": {"id": "t", "type": "general"}, "repoId": "r"}`, 400, CodeInvalidRequest, "task.data", "Field is required"},
		{"empty id", "POST", ProcessPath, `{"task": {"id": "", "type": "general", "data": {}}, "repoId": "r"}`, 400, CodeInvalidRequest, "task.id", "Must not be empty"},
		{"id not a string", "POST", ProcessPath, `{"task": {"id": 7, "type": "general", "data": {}}, "repoId": "r"}`, 400, CodeInvalidRequest, "task.id", "Expected string, got number"},
		{"bad priority", "POST", ProcessPath, withTask(`, "priority": "urgent"`), 400, CodeInvalidRequest, "task.priority", "low, medium, high, critical"},
		{"negative timeout", "POST", ProcessPath, withTask(`, "timeout": -1`), 400, CodeInvalidRequest, "task.timeout", "at least 0"},
		{"requirement not boolean", "POST", ProcessPath, withTask(`, "requirements": {"security": "yes"}`), 400, CodeInvalidRequest, "task.requirements.security", "Expected boolean"},
		{"unknown type", "POST", ProcessPath, `{"task": {"id": "t", "type": "deploy", "data": {}}, "repoId": "r"}`, 400, CodeInvalidRequest, "task.type", "code_review, validation, general"},
		{"timeout above 300000", "POST", ProcessPath, withTask(`, "timeout": 300001`), 400, CodeInvalidRequest, "task.timeout", "300000"},
		{"retryCount above 5", "POST", ProcessPath, withTask(`, "retryCount": 6`), 400, CodeInvalidRequest, "task.retryCount", "0 to 5"},
		{"retryCount fraction", "POST", ProcessPath, withTask(`, "retryCount": 1.5`), 400, CodeInvalidRequest, "task.retryCount", "whole number"},
		{"repoId climbing out", "POST", ProcessPath, withRepo(`"../x"`), 400, CodeInvalidRequest, "repoId", "kebab-case"},
		{"repoId upper case", "POST", ProcessPath, withRepo(`"UPPER"`), 400, CodeInvalidRequest, "repoId", "kebab-case"},
		{"repoId with slash", "POST", ProcessPath, withRepo(`"a/b"`), 400, CodeInvalidRequest, "repoId", "kebab-case"},
		{"repoId with dot", "POST", ProcessPath, withRepo(`"."`), 400, CodeInvalidRequest, "repoId", "kebab-case"},
		{"repoId double dash", "POST", ProcessPath, withRepo(`"a--b"`), 400, CodeInvalidRequest, "repoId", "kebab-case"},
		{"repoId too long", "POST", ProcessPath, withRepo(`"` + strings.Repeat("a", 101) + `"`), 400, CodeInvalidRequest, "repoId", "100"},
		{"repoId device name", "POST", ProcessPath, withRepo(`"nul"`), 400, CodeInvalidRequest, "repoId", "reserved"},
		{"code_review without file_path", "POST", ProcessPath, `{"task": {"id": "t", "type": "code_review", "data": {"context": "pre-commit"}}, "repoId": "r"}`,
			400, CodeMissingField, "task.data.file_path", "Field is required for task type code_review"},
		{"general without prompt", "POST", ProcessPath, `{"task": {"id": "t", "type": "general", "data": {}}, "repoId": "r"}`,
			400, CodeMissingField, "task.data.prompt", "Field is required for task type general"},
		{"file_path climbing out", "POST", ProcessPath, review(`"../secret.txt"`), 400, CodeInvalidRequest, "task.data.file_path", "climbs out of"},
		{"file_path absolute outside", "POST", ProcessPath, review(`"/etc/passwd"`), 400, CodeInvalidRequest, "task.data.file_path", "outside"},
		{"file_path symlink outside", "POST", ProcessPath, review(`"src/link.ts"`), 400, CodeInvalidRequest, "task.data.file_path", "workspace"},
		{"file_path missing file", "POST", ProcessPath, review(`"src/none.ts"`), 400, CodeInvalidRequest, "task.data.file_path", "No file"},
		{"file_path a directory", "POST", ProcessPath, review(`"src"`), 400, CodeInvalidRequest, "task.data.file_path", "not a regular file"},
		{"file_path not a string", "POST", ProcessPath, review(`3`), 400, CodeInvalidRequest, "task.data.file_path", "Expected string, got number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := r.do(t, tt.method, tt.path, tt.body)
			if rep.status != tt.status {
				t.Fatalf("status %d, want %d: %s", rep.status, tt.status, rep.body)
			}
			e := rep.envelope(t)
			if e.Code != tt.code {
				t.Errorf("code %s, want %s", e.Code, tt.code)
			}
			if got, _ := e.Details["field"].(string); got != tt.field {
				t.Errorf("field %q, want %q: %s", got, tt.field, rep.body)
			}
			if reason, _ := e.Details["reason"].(string); !strings.Contains(reason+" "+e.Message, tt.reason) {
				t.Errorf("reason %q (message %q) lacks %q", reason, e.Message, tt.reason)
			}
			if tt.status == 405 && rep.header.Get("Allow") == "" {
				t.Errorf("405 without an Allow header")
			}
		})
	}
	if entries, _ := os.ReadDir(filepath.Join(r.zu, "ide", "receipts")); len(entries) != 0 {
		t.Errorf("refused requests left receipt logs: %v", entries)
	}
	for _, p := range []string{filepath.Join(r.zu, "x"), filepath.Join(r.zu, "ide", "x")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("repoId ../x escaped the receipts directory: %s exists", p)
		}
	}
}

// The 405 names the allowed methods in Allow.
func TestMethodNotAllowedAllow(t *testing.T) {
	r := newRig(t, rigConfig{})
	for path, want := range map[string]string{ProcessPath: "POST", HealthPath: "GET, HEAD"} {
		rep := r.do(t, http.MethodPut, path, "{}")
		if rep.status != http.StatusMethodNotAllowed || rep.header.Get("Allow") != want {
			t.Errorf("PUT %s: %d Allow %q, want 405 Allow %q", path, rep.status, rep.header.Get("Allow"), want)
		}
	}
}

// A request carrying an Origin header (a web page) is refused unless the
// origin is allowed.
func TestOrigin(t *testing.T) {
	r := newRig(t, rigConfig{opts: func(o *Options) { o.AllowOrigins = []string{"vscode-webview://abc"} }})
	for origin, want := range map[string]int{"http://evil.example": 403, "vscode-webview://abc": 200} {
		req, _ := http.NewRequest(http.MethodPost, r.ts.URL+ProcessPath, strings.NewReader(exampleRequest))
		req.Header.Set("Origin", origin)
		if rep := r.send(t, req); rep.status != want {
			t.Errorf("Origin %s: %d, want %d: %s", origin, rep.status, want, rep.body)
		}
	}
}

func TestHealth(t *testing.T) {
	r := newRig(t, rigConfig{})
	rep := r.do(t, http.MethodGet, HealthPath, "")
	assertJSONEqual(t, rep.body, `{"status": "ok"}`)
	if rep.status != http.StatusOK {
		t.Errorf("status %d", rep.status)
	}
	if rep := r.do(t, http.MethodHead, HealthPath, ""); rep.status != http.StatusOK {
		t.Errorf("HEAD: %d", rep.status)
	}
}

// TestCaseVariantMembers: a member named like a contract field in other
// letter case is refused, so it cannot replace the field the schema
// checked (encoding/json matches names case-insensitively).
func TestCaseVariantMembers(t *testing.T) {
	r := newRig(t, rigConfig{})
	for _, tc := range []struct{ body, field string }{
		{`{"task": {"id": "a", "type": "general", "data": {"prompt": "x"}}, "repoId": "test-repo", "repoid": "other-repo"}`, "repoid"},
		{`{"task": {"id": "a", "type": "general", "data": {"prompt": "x"}, "retrycount": -3}, "repoId": "test-repo"}`, "task.retrycount"},
		{`{"task": {"id": "a", "type": "general", "data": {"prompt": "x"}, "requirements": {"Security": 1}}, "repoId": "test-repo"}`, "task.requirements.Security"},
	} {
		rep := r.post(t, tc.body)
		e := rep.envelope(t)
		if rep.status != 400 || e.Code != CodeInvalidRequest || e.Details["field"] != tc.field {
			t.Errorf("%s: %d %+v; want 400 INVALID_REQUEST naming %s", tc.body, rep.status, e, tc.field)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(r.zu, "ide", "receipts", "other-repo")); len(entries) != 0 {
		t.Error("a receipt went to the repo named by the case variant")
	}
}

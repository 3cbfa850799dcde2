package task

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// FuzzDecodeRequest posts arbitrary bodies: the server never panics and
// answers 200 or a 4xx whose body is a schema-valid error envelope (or
// 504 for a task whose own timeout is under a second).
func FuzzDecodeRequest(f *testing.F) {
	for _, seed := range []string{
		exampleRequest,
		`{"task": {"id": "test-task", "type": "validation", "data": {}}, "repoId": "test-repo"}`,
		`{"task": {"type": "code_review", "data": {"file_path": "src/example.ts"}}, "repoId": "test-repo"}`,
		`{"task": {"id": "t", "type": "general", "data": {"prompt": "hi"}, "timeout": 300000, "retryCount": 5}, "repoId": "a-b"}`,
		`{"task": {"id": "t", "type": "code_review", "data": {"file_path": "../../etc/passwd"}}, "repoId": "r"}`,
		`{"task": {"id": "t", "type": "general", "data": {"prompt": "x"}, "priority": "critical"}, "repoId": "../x"}`,
		`{"task": {"id": "t",}, "repoId": "r"}`,
		`{"a":1,"a":2}`, `[]`, `null`, `"\ud800"`, `1e400`, ``, "{\"task\":\"\xff\"}",
		strings.Repeat("[", 2000),
	} {
		f.Add([]byte(seed))
	}
	r := newRig(f, rigConfig{})
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, ProcessPath, bytes.NewReader(body))
		w := httptest.NewRecorder()
		start := time.Now()
		r.srv.ServeHTTP(w, req)
		res := w.Result()
		b, _ := io.ReadAll(res.Body)
		rep := reply{status: res.StatusCode, header: res.Header, body: b}
		check(t, rep)
		switch {
		case rep.status == http.StatusOK, rep.status >= 400 && rep.status < 500:
		case rep.status == http.StatusGatewayTimeout && time.Since(start) < 2*time.Second:
			d, e := decodeRequest(body)
			if e != nil || d.timeout >= time.Second {
				t.Errorf("504 for a task with timeout %v", d.timeout)
			}
		default:
			t.Errorf("status %d for %q: %s", rep.status, body, b)
		}
	})
}

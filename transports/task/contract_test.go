package task

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/receipts"
)

// The contract's example request gets a 200 whose result carries the
// task id, success and an integer processing time, and whose receiptPath
// is the absolute path of an existing month file in the contract's layout.
func TestExampleRequest(t *testing.T) {
	r := newRig(t, rigConfig{})
	m := r.post(t, exampleRequest).success(t)
	res, ok := m["result"].(map[string]any)
	if !ok {
		t.Fatalf("result is not an object: %v", m)
	}
	if got := res["taskId"]; got != "test-task-001" {
		t.Errorf("taskId = %v", got)
	}
	if got := res["success"]; got != true {
		t.Errorf("success = %v", got)
	}
	pt, ok := res["processingTime"].(json.Number)
	if _, err := pt.Int64(); !ok || err != nil {
		t.Errorf("processingTime = %v, want an integer", res["processingTime"])
	}
	if got := res["type"]; got != "code_review" {
		t.Errorf("type = %v", got)
	}
	if got, _ := res["output"].(string); !strings.Contains(got, "No issues found") {
		t.Errorf("output = %q", got)
	}
	if got, _ := res["model"].(string); !strings.HasPrefix(got, "replay:") {
		t.Errorf("model = %q", got)
	}
	if _, ok := res["toolsUsed"].([]any); !ok {
		t.Errorf("toolsUsed = %v, want an array", res["toolsUsed"])
	}
	if _, ok := res["tokens"].(map[string]any); !ok {
		t.Errorf("tokens = %v, want an object", res["tokens"])
	}

	path, _ := m["receiptPath"].(string)
	now := time.Now().UTC()
	want := filepath.Join(r.zu, "ide", "receipts", "test-repo", now.Format("2006"), now.Format("01"), "receipts.jsonl")
	if !filepath.IsAbs(path) || path != want {
		t.Errorf("receiptPath = %q, want %q", path, want)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Errorf("receipt file: %v", err)
	}
}

// The contract's minimal task (a validation of the workspace) is accepted.
func TestMinimalTask(t *testing.T) {
	r := newRig(t, rigConfig{})
	m := r.post(t, `{"task": {"id": "test-task", "type": "validation", "data": {}}, "repoId": "test-repo"}`).success(t)
	res := m["result"].(map[string]any)
	if res["taskId"] != "test-task" || res["success"] != true || res["verdict"] != "pass" {
		t.Errorf("result = %v", res)
	}
}

// The contract's 400 example, byte for byte in meaning.
func TestExample400(t *testing.T) {
	r := newRig(t, rigConfig{})
	rep := r.post(t, `{"task": {"type": "code_review", "data": {"file_path": "src/example.ts"}}, "repoId": "test-repo"}`)
	if rep.status != http.StatusBadRequest {
		t.Fatalf("status %d", rep.status)
	}
	assertJSONEqual(t, rep.body, `{
  "error": {
    "code": "INVALID_REQUEST",
    "message": "Request body validation failed",
    "details": {
      "field": "task.id",
      "reason": "Field is required"
    }
  }
}`)
}

// A turn that fails (the model provider's error) gives the 500 example's
// shape, after retryCount retries.
func TestExample500(t *testing.T) {
	r := newRig(t, rigConfig{script: []string{`{"error": {"kind": "unavailable", "message": "Delegation failed"}}`}})
	start := time.Now()
	rep := r.post(t, taskBody("test-task-001", "high", `, "retryCount": 2`))
	e := rep.envelope(t)
	if rep.status != http.StatusInternalServerError || e.Code != CodeTaskProcessing || e.Message != "Failed to process task" {
		t.Fatalf("got %d %s", rep.status, rep.body)
	}
	assertKeys(t, e.Details, "taskId", "reason")
	if e.Details["taskId"] != "test-task-001" || !strings.Contains(e.Details["reason"].(string), "Delegation failed") {
		t.Errorf("details = %v", e.Details)
	}
	// Two retries wait 100 ms and 200 ms.
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("answered after %v; the retries' backoff is 300 ms", d)
	}
	list := listReceipts(t, r.receiptDir("test-repo"))
	if len(list) != 1 {
		t.Fatalf("%d receipts, want 1", len(list))
	}
	var data failureData
	json.Unmarshal(list[0].Receipt.Data, &data)
	if data.Success || data.Attempts != 3 || data.TaskID != "test-task-001" || !strings.Contains(list[0].Receipt.Reason, "Delegation failed") {
		t.Errorf("failure receipt: reason %q, data %s", list[0].Receipt.Reason, list[0].Receipt.Data)
	}
}

// Options.Ready failing gives the 503 example's shape, on the task
// endpoint and on /health.
func TestExample503(t *testing.T) {
	r := newRig(t, rigConfig{opts: func(o *Options) {
		o.Ready = func(context.Context) error { return errors.New("Agent not initialized") }
	}})
	for _, rep := range []reply{r.post(t, exampleRequest), r.do(t, http.MethodGet, HealthPath, "")} {
		e := rep.envelope(t)
		if rep.status != http.StatusServiceUnavailable || e.Code != CodeServiceUnavailable {
			t.Fatalf("got %d %s", rep.status, rep.body)
		}
		if !reflect.DeepEqual(e.Details, map[string]any{"reason": "Agent not initialized"}) {
			t.Errorf("details = %v", e.Details)
		}
	}
	if _, err := os.Stat(r.receiptDir("test-repo")); !os.IsNotExist(err) {
		t.Errorf("a refused task left a receipt log: %v", err)
	}
}

// A turn slower than task.timeout gives the 504 example's shape, at the
// deadline, with no partial result; the turn is cancelled.
func TestExample504(t *testing.T) {
	gate := newGate(func(string) bool { return true })
	r := newRig(t, rigConfig{wrap: func(m engine.Model) engine.Model { gate.Model = m; return gate }})
	start := time.Now()
	rep := r.post(t, taskBody("test-task-001", "medium", `, "timeout": 200`))
	if d := time.Since(start); d < 200*time.Millisecond || d > 5*time.Second {
		t.Errorf("answered after %v, want about 200 ms", d)
	}
	e := rep.envelope(t)
	if rep.status != http.StatusGatewayTimeout || e.Code != CodeTimeout || e.Message != "Request processing timeout" {
		t.Fatalf("got %d %s", rep.status, rep.body)
	}
	assertJSONEqual(t, mustJSON(t, e.Details), `{"taskId": "test-task-001", "timeoutMs": 200}`)
	waitFor(t, "the turn to be cancelled", func() bool { return gate.stoppedCalls() == 1 })
	list := listReceipts(t, r.receiptDir("test-repo"))
	if len(list) != 1 || !strings.Contains(list[0].Receipt.Reason, "timed out after 200 ms") {
		t.Errorf("receipts: %+v", list)
	}
}

// The same with a replay step that streams slowly (delay_ms): the engine
// turn itself is cut.
func TestTimeoutReplayDelay(t *testing.T) {
	r := newRig(t, rigConfig{script: []string{`{"text": "a slow answer", "delay_ms": 10000}`}})
	rep := r.post(t, taskBody("slow", "medium", `, "timeout": 150`))
	if e := rep.envelope(t); rep.status != http.StatusGatewayTimeout || e.Details["timeoutMs"] != 150.0 {
		t.Fatalf("got %d %s", rep.status, rep.body)
	}
	if strings.Contains(string(rep.body), "slow answer") {
		t.Errorf("partial result in a timeout: %s", rep.body)
	}
}

func assertJSONEqual(t testing.TB, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%v: %s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func assertKeys(t testing.TB, m map[string]any, keys ...string) {
	t.Helper()
	if len(m) != len(keys) {
		t.Errorf("details %v, want exactly the keys %v", m, keys)
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("details %v lack %q", m, k)
		}
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// listReceipts lists every receipt of the log in dir, after verifying it.
func listReceipts(t testing.TB, dir string) []receipts.Entry {
	t.Helper()
	ctx := context.Background()
	rd := receipts.NewReader(dir)
	if _, err := rd.Verify(ctx, receipts.VerifyOptions{RequireSigned: true}); err != nil {
		t.Fatalf("verify %s: %v", dir, err)
	}
	months, err := rd.Months(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var all []receipts.Entry
	for _, m := range months {
		list, err := rd.List(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, list...)
	}
	return all
}

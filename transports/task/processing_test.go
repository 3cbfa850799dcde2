package task

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofrs/flock"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/receipts"
	"github.com/plexus-agent/plexus/internal/testtree"
)

// A processed task has exactly one signed receipt of kind task, whose
// args_digest is that of the request's task object and whose data is the
// result; the public key sits beside the receipts and the private key is
// private.
func TestReceipt(t *testing.T) {
	r := newRig(t, rigConfig{})
	m := r.post(t, exampleRequest).success(t)
	list := listReceipts(t, r.receiptDir("test-repo"))
	if len(list) != 1 {
		t.Fatalf("%d receipts, want 1", len(list))
	}
	rc := list[0].Receipt
	if list[0].File != m["receiptPath"] {
		t.Errorf("receipt in %s, receiptPath %s", list[0].File, m["receiptPath"])
	}
	var wire struct{ Task json.RawMessage }
	json.Unmarshal([]byte(exampleRequest), &wire)
	digest, _ := receipts.ArgsDigest(wire.Task)
	if rc.Kind != receipts.KindTask || rc.Actor != "plexus-task" || rc.Tool != "code_review" || rc.ArgsDigest != digest ||
		rc.Reason != "" || rc.Session == "" || rc.Turn == "" || rc.KeyID == "" {
		t.Errorf("receipt %+v", rc)
	}
	var data, result map[string]any
	json.Unmarshal(rc.Data, &data)
	b, _ := json.Marshal(m["result"])
	json.Unmarshal(b, &result)
	if !reflect.DeepEqual(data, result) {
		t.Errorf("receipt data %v, result %v", data, result)
	}
	if _, err := os.Stat(filepath.Join(r.receiptDir("test-repo"), receipts.PublicKeyFile)); err != nil {
		t.Errorf("public key not published beside the receipts: %v", err)
	}
	fi, err := os.Stat(filepath.Join(r.zu, "ide", "keys", receipts.KeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("private key: %v %v", fi, err)
	}
}

// The prompt carries the file, the context and one focus paragraph per
// requirement set.
func TestCodeReviewPrompt(t *testing.T) {
	var mu sync.Mutex
	var prompt string
	r := newRig(t, rigConfig{wrap: func(m engine.Model) engine.Model {
		return modelFunc(func(ctx context.Context, req engine.ChatRequest, on func(engine.ChatChunk) error) error {
			mu.Lock()
			prompt = req.Messages[len(req.Messages)-1].Content
			mu.Unlock()
			return m.Chat(ctx, req, on)
		}, m)
	}})
	r.post(t, strings.Replace(exampleRequest, `"context": "pre-commit"`, `"context": "pre-commit", "ticket": 42`, 1)).success(t)
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"Review the file src/example.ts", "Security focus", "Context: pre-commit",
		`Task data: {"ticket":42}`, "Attached file src/example.ts", "return a + b;"} {
		if !strings.Contains(prompt, want) {
			t.Errorf("prompt lacks %q:\n%s", want, prompt)
		}
	}
	if strings.Contains(prompt, "Performance focus") || strings.Contains(prompt, "Compliance focus") {
		t.Errorf("prompt has a focus that was not asked for:\n%s", prompt)
	}
}

type modelFuncT struct {
	engine.Model
	chat func(context.Context, engine.ChatRequest, func(engine.ChatChunk) error) error
}

func (m modelFuncT) Chat(ctx context.Context, req engine.ChatRequest, on func(engine.ChatChunk) error) error {
	return m.chat(ctx, req, on)
}

func modelFunc(f func(context.Context, engine.ChatRequest, func(engine.ChatChunk) error) error, base engine.Model) engine.Model {
	return modelFuncT{Model: base, chat: f}
}

// With one worker busy, waiting tasks start by priority (critical, high,
// medium, low), and in arrival order within a priority.
func TestPriorityOrder(t *testing.T) {
	gate := newGate(func(marker string) bool { return marker == "id:first" })
	r := newRig(t, rigConfig{
		wrap: func(m engine.Model) engine.Model { gate.Model = m; return gate },
		opts: func(o *Options) { o.Concurrency = 1 },
	})
	var wg sync.WaitGroup
	post := func(id, priority string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if rep := r.post(t, taskBody(id, priority, "")); rep.status != http.StatusOK {
				t.Errorf("%s: %d %s", id, rep.status, rep.body)
			}
		}()
	}
	post("first", "low")
	<-gate.entered
	queued := []struct{ id, priority string }{
		{"low-1", "low"}, {"medium-1", "medium"}, {"high-1", "high"}, {"low-2", "low"},
		{"critical-1", "critical"}, {"medium-2", "medium"}, {"critical-2", "critical"},
	}
	for i, q := range queued {
		post(q.id, q.priority)
		waitFor(t, q.id+" to queue", func() bool { return r.srv.queue.len() == i+1 })
	}
	close(gate.release)
	wg.Wait()
	want := []string{"id:first", "id:critical-1", "id:critical-2", "id:high-1", "id:medium-1", "id:medium-2", "id:low-1", "id:low-2"}
	if got := gate.calls(); !reflect.DeepEqual(got, want) {
		t.Errorf("processing order\n got %v\nwant %v", got, want)
	}
}

// task.timeout covers the wait in the queue: a task that never reaches a
// worker gets 504, leaves the queue and has its receipt.
func TestTimeoutWhileQueued(t *testing.T) {
	gate := newGate(func(marker string) bool { return marker == "id:first" })
	r := newRig(t, rigConfig{
		wrap: func(m engine.Model) engine.Model { gate.Model = m; return gate },
		opts: func(o *Options) { o.Concurrency = 1 },
	})
	done := make(chan reply)
	go func() { done <- r.post(t, taskBody("first", "medium", "")) }()
	<-gate.entered
	rep := r.post(t, taskBody("second", "critical", `, "timeout": 100`))
	if e := rep.envelope(t); rep.status != http.StatusGatewayTimeout || e.Details["taskId"] != "second" {
		t.Fatalf("got %d %s", rep.status, rep.body)
	}
	if n := r.srv.queue.len(); n != 0 {
		t.Errorf("%d tasks still queued", n)
	}
	close(gate.release)
	(<-done).success(t)
	if got := gate.calls(); !reflect.DeepEqual(got, []string{"id:first"}) {
		t.Errorf("model calls %v: the timed-out task ran", got)
	}
	list := listReceipts(t, r.receiptDir("test-repo"))
	if len(list) != 2 || list[0].Receipt.Reason == "" || list[1].Receipt.Reason != "" {
		t.Errorf("receipts: %+v", list)
	}
}

// deadlineModel answers every call as a model plugin whose copy of the
// task's deadline fired: with its error, after setting passed (the
// clock has passed the deadline).
type deadlineModel struct {
	engine.Model
	passed atomic.Bool
}

func (m *deadlineModel) Chat(ctx context.Context, req engine.ChatRequest, onChunk func(engine.ChatChunk) error) error {
	m.passed.Store(true)
	return &engine.ModelError{Provider: "replay", Kind: engine.ErrTimeout, Message: "context deadline exceeded"}
}

// A task whose deadline passed is answered 504 even when the failure the
// turn reports (the plugin's deadline) arrives before this process's
// timer has run: with the server's clock past the deadline and the
// context not yet ended, it was 500 TASK_PROCESSING_ERROR "replay:
// context deadline exceeded" (issue 14 item 3).
func TestDeadlineBeforeTimerIs504(t *testing.T) {
	dm := &deadlineModel{}
	r := newRig(t, rigConfig{wrap: func(m engine.Model) engine.Model { dm.Model = m; return dm }})
	r.srv.now = func() time.Time {
		if dm.passed.Load() {
			return time.Now().Add(time.Hour)
		}
		return time.Now()
	}
	rep := r.post(t, taskBody("late-timer", "medium", `, "timeout": 60000, "retryCount": 2`))
	e := rep.envelope(t)
	if rep.status != http.StatusGatewayTimeout || e.Code != CodeTimeout {
		t.Fatalf("got %d %s, want 504 TIMEOUT", rep.status, rep.body)
	}
	assertJSONEqual(t, mustJSON(t, e.Details), `{"taskId": "late-timer", "timeoutMs": 60000}`)
	list := listReceipts(t, r.receiptDir("test-repo"))
	if len(list) != 1 || !strings.Contains(list[0].Receipt.Reason, "timed out after 60000 ms") {
		t.Errorf("receipts: %+v", list)
	}
}

// A failed turn is tried again: with retryCount 2, two failures and then
// an answer make a 200 after 3 attempts.
func TestRetrySucceeds(t *testing.T) {
	r := newRig(t, rigConfig{wrap: func(m engine.Model) engine.Model { return &flakyModel{Model: m, n: 2} }})
	m := r.post(t, taskBody("flaky", "medium", `, "retryCount": 2`)).success(t)
	if got := m["result"].(map[string]any)["attempts"]; got != json.Number("3") {
		t.Errorf("attempts = %v, want 3", got)
	}
	// Without retries the first failure is final.
	r2 := newRig(t, rigConfig{wrap: func(m engine.Model) engine.Model { return &flakyModel{Model: m, n: 1} }})
	rep := r2.post(t, taskBody("flaky", "medium", ""))
	if e := rep.envelope(t); rep.status != 500 || !strings.Contains(e.Details["reason"].(string), "connection refused") {
		t.Errorf("got %d %s", rep.status, rep.body)
	}
}

// A client that goes away cancels its task's turn; the task still gets
// its receipt, which says so.
func TestClientGone(t *testing.T) {
	gate := newGate(func(string) bool { return true })
	r := newRig(t, rigConfig{wrap: func(m engine.Model) engine.Model { gate.Model = m; return gate }})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.ts.URL+ProcessPath, strings.NewReader(taskBody("gone", "medium", "")))
	errc := make(chan error)
	go func() {
		resp, err := r.client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-gate.entered
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("request succeeded after cancel")
	}
	waitFor(t, "the turn to be cancelled", func() bool { return gate.stoppedCalls() == 1 })
	dir := r.receiptDir("test-repo")
	waitFor(t, "the receipt line", func() bool {
		rep, err := receipts.NewReader(dir).Verify(context.Background(), receipts.VerifyOptions{})
		return err == nil && rep.Receipts == 1
	})
	list := listReceipts(t, dir)
	if !strings.Contains(list[0].Receipt.Reason, "client closed the connection") {
		t.Errorf("reason %q", list[0].Receipt.Reason)
	}
}

// 200 tasks posted at once all succeed, and the log holds 200 whole,
// chained, signed receipts.
func TestConcurrentPosts(t *testing.T) {
	const n = 200
	r := newRig(t, rigConfig{})
	var wg sync.WaitGroup
	paths := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep := r.post(t, taskBody(fmt.Sprintf("task-%03d", i), []string{"low", "medium", "high", "critical"}[i%4], ""))
			if rep.status != http.StatusOK {
				t.Errorf("task %d: %d %s", i, rep.status, rep.body)
				return
			}
			var resp Response
			json.Unmarshal(rep.body, &resp)
			paths[i] = resp.ReceiptPath
		}()
	}
	wg.Wait()
	dir := r.receiptDir("test-repo")
	rep, err := receipts.NewReader(dir).Verify(context.Background(), receipts.VerifyOptions{RequireSigned: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Receipts != n || rep.Signed != n {
		t.Errorf("verified %d receipts (%d signed), want %d", rep.Receipts, rep.Signed, n)
	}
	for i, p := range paths {
		if p != "" && (!filepath.IsAbs(p) || filepath.Dir(filepath.Dir(filepath.Dir(p))) != dir || filepath.Base(p) != receipts.MonthFileName) {
			t.Errorf("task %d: receiptPath %q is not a month file of %s", i, p, dir)
		}
	}
	ids := map[string]bool{}
	for _, e := range listReceipts(t, dir) {
		var d Result
		json.Unmarshal(e.Receipt.Data, &d)
		ids[d.TaskID] = true
	}
	if len(ids) != n {
		t.Errorf("%d distinct task ids in the receipts, want %d", len(ids), n)
	}
	var files int
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if strings.HasSuffix(p, ".torn") {
			t.Errorf("torn line saved: %s", p)
		}
		if d != nil && d.Name() == receipts.MonthFileName {
			files++
		}
		return nil
	})
	if files == 0 {
		t.Error("no month file")
	}
}

// A receipt that cannot be written turns a processed task into 500
// RECEIPT_GENERATION_ERROR; a log that cannot be opened refuses the task
// before it runs.
func TestReceiptFailure(t *testing.T) {
	r := newRig(t, rigConfig{})
	year := time.Now().UTC().Format("2006")
	// A file where the year directory belongs: the append cannot create
	// its month file.
	testtree.Write(t, r.receiptDir("test-repo"), map[string]string{year: "not a directory"})
	// A file where a log directory belongs: the log cannot be opened.
	testtree.Write(t, filepath.Join(r.zu, "ide", "receipts"), map[string]string{"other-repo": "not a directory"})
	for _, repo := range []string{"test-repo", "other-repo"} {
		rep := r.post(t, strings.Replace(exampleRequest, `"test-repo"`, `"`+repo+`"`, 1))
		e := rep.envelope(t)
		if rep.status != http.StatusInternalServerError || e.Code != CodeReceiptGeneration || e.Message != "Failed to generate receipt" {
			t.Errorf("%s: %d %s", repo, rep.status, rep.body)
		}
		assertKeys(t, e.Details, "taskId", "reason")
		// The reason says what failed once (issue 20 item 12: it read
		// "append receipt: append receipt: mkdir ...").
		reason, _ := e.Details["reason"].(string)
		for _, prefix := range []string{"append receipt:", "open receipt log:"} {
			if strings.Count(reason, prefix) > 1 {
				t.Errorf("%s: the reason repeats %q: %s", repo, prefix, reason)
			}
		}
		if want := map[string]string{"test-repo": "append receipt: ", "other-repo": "open receipt log: "}[repo]; !strings.HasPrefix(reason, want) {
			t.Errorf("%s: reason %q, want it to start with %q", repo, reason, want)
		}
	}
}

// TestLockedRepoDoesNotStallOthers: while another process holds the lock
// of one repo's log, tasks for other repos are answered.
func TestLockedRepoDoesNotStallOthers(t *testing.T) {
	r := newRig(t, rigConfig{})
	dir := r.receiptDir("locked-repo")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	lock := flock.New(filepath.Join(dir, receipts.LockFile))
	if err := lock.Lock(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Unlock() }) // before the rig's cleanup closes the server
	go func() {
		// Waits for the lock; its answer does not matter here.
		req, _ := http.NewRequest(http.MethodPost, r.ts.URL+ProcessPath,
			strings.NewReader(strings.Replace(taskBody("stuck", "medium", ""), `"test-repo"`, `"locked-repo"`, 1)))
		if resp, err := r.client.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	time.Sleep(200 * time.Millisecond) // the stuck task is opening its log
	done := make(chan reply, 1)
	go func() { done <- r.post(t, taskBody("free", "medium", "")) }() // test-repo
	select {
	case rep := <-done:
		if rep.status != http.StatusOK {
			t.Errorf("task for another repo: %d %s", rep.status, rep.body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a task for another repo waited for the locked repo's log")
	}
}

package faultsuite

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine/receipts"
)

var taskServing = regexp.MustCompile(`serving tasks on (http://\S+/api/task/process)`)

// taskRepos are the repositories the task clients' receipts go to.
var taskRepos = []string{"fault-repo-a", "fault-repo-b"}

// taskRig is the task front-end's run.
type taskRig struct {
	*Rig
	script string
	url    string

	mu sync.Mutex
	// acked maps a task id to its repository and the status it was
	// answered with (200 or 504).
	acked map[string]ackTask
	next  int
}

type ackTask struct {
	repo   string
	status int
}

// RunTask runs the task front-end's fault run: clients post tasks (a
// quarter with a deadline shorter than the answer takes) until the
// server is killed.
func RunTask(t testing.TB, bin string, opts Options) {
	start := time.Now()
	r := &taskRig{Rig: NewRig(t, bin, "task", opts), acked: map[string]ackTask{}}
	r.script = filepath.Join(t.TempDir(), "answer.jsonl")
	WriteFile(t, r.script, `{"text": "Reviewed: one two three four five six seven eight nine ten eleven twelve.", "delay_ms": 12}`+"\n")
	WriteFile(t, filepath.Join(r.WS, "README.md"), "# tasks\n")
	p := r.serve()
	for range opts.Kills {
		r.load(p)
		r.Killed()
		p = r.serve()
		r.check()
	}
	// Serves again: one task per client answers 200.
	for i := range opts.Clients {
		if code, _ := r.post(fmt.Sprintf("final-%d", i), taskRepos[0], 0); code != http.StatusOK {
			t.Errorf("a task after the last restart was answered %d: the server does not serve again", code)
		}
	}
	p.Term(t, time.Minute)
	r.check()
	r.Report(time.Since(start))
}

func (r *taskRig) serve() *Proc {
	p := r.Start("serve", "--transport", "task", "-w", r.WS, "--model", "replay:"+r.script, "--embed-model", "none",
		"--addr", "127.0.0.1:0", "--concurrency", "2")
	r.url = p.WaitFor(r.t, taskServing, time.Minute)[1]
	return p
}

// post sends one task and records an acknowledged answer. timeoutMs 0
// leaves the default deadline.
func (r *taskRig) post(id, repo string, timeoutMs int) (int, map[string]any) {
	task := map[string]any{"id": id, "type": "general", "data": map[string]any{"prompt": "review " + id}}
	if timeoutMs > 0 {
		task["timeout"] = timeoutMs
	}
	body, _ := json.Marshal(map[string]any{"task": task, "repoId": repo})
	client := &http.Client{Timeout: time.Minute}
	resp, err := client.Post(r.url, "application/json", strings.NewReader(string(body)))
	if err != nil {
		return 0, nil // the server is gone
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil
	}
	var out map[string]any
	json.Unmarshal(b, &out)
	switch resp.StatusCode {
	case http.StatusOK, http.StatusGatewayTimeout:
		r.mu.Lock()
		r.acked[id] = ackTask{repo: repo, status: resp.StatusCode}
		r.mu.Unlock()
		r.Ack(fmt.Sprintf("tasks %d", resp.StatusCode))
	case http.StatusInternalServerError:
		// A task whose deadline passed is a 504, never a 500 (issue 14
		// item 3); a 500 is a failure the suite does not expect at all.
		r.Check(false, "task %s answered 500: %s", id, b)
	}
	return resp.StatusCode, out
}

// load runs the clients until the server is killed.
func (r *taskRig) load(p *Proc) {
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := range r.Opts.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r.mu.Lock()
				r.next++
				id := fmt.Sprintf("task-%d-%d", i, r.next)
				r.mu.Unlock()
				timeout := 0
				if r.Intn(4) == 0 {
					timeout = 100 + r.Intn(200) // often shorter than the answer
				}
				if code, _ := r.post(id, taskRepos[r.Intn(len(taskRepos))], timeout); code == 0 {
					return
				}
			}
		}()
	}
	time.Sleep(r.Between(300*time.Millisecond, 2500*time.Millisecond))
	p.Kill()
	close(stop)
	wg.Wait()
}

// check checks that every acknowledged task has its receipt (a success
// for a 200, a failure for a 504) in a log that verifies.
func (r *taskRig) check() {
	byRepo := map[string]map[string]receipts.Receipt{}
	for _, repo := range taskRepos {
		dir := filepath.Join(r.Data, "ide", "receipts", repo)
		byRepo[repo] = map[string]receipts.Receipt{}
		if !r.anyAcked(repo) {
			continue
		}
		r.CheckReceipts("--repo", repo)
		for _, rc := range r.Receipts(dir) {
			var d struct {
				TaskID string `json:"taskId"`
			}
			json.Unmarshal(rc.Data, &d)
			byRepo[repo][d.TaskID] = rc
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, a := range r.acked {
		rc, ok := byRepo[a.repo][id]
		r.Check(ok, "task %s was answered %d but has no receipt in %s", id, a.status, a.repo)
		if ok {
			r.Check((a.status == http.StatusOK) == (rc.Reason == ""), "task %s was answered %d, its receipt says %q", id, a.status, rc.Reason)
		}
	}
}

func (r *taskRig) anyAcked(repo string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.acked {
		if a.repo == repo {
			return true
		}
	}
	return false
}

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine/receipts"
)

// taskServer is a running `plexus serve --transport task`.
type taskServer struct {
	cmd *exec.Cmd
	url string // http://127.0.0.1:PORT/api/task/process
}

var servingLine = regexp.MustCompile(`serving tasks on (http://\S+/api/task/process)`)

// startTaskServer starts the real binary on a free port with the replay
// script, receipts under zuRoot, and waits for its "serving" line.
func startTaskServer(t *testing.T, ws, zuRoot, script string) *taskServer {
	t.Helper()
	return startTaskServerWith(t, zuRoot, "--concurrency", "4", "-w", ws, "--model", "replay:"+script)
}

// startTaskServerWith starts `plexus serve --transport task` on a free
// port with args, receipts under zuRoot, and waits for its "serving" line.
func startTaskServerWith(t *testing.T, zuRoot string, args ...string) *taskServer {
	t.Helper()
	cmd := exec.Command(plexusBin, append([]string{"serve", "--transport", "task", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), "PLEXUS_PLUGIN_PATH="+t.TempDir(), "PLEXUS_DATA_DIR="+t.TempDir(), "ZU_ROOT="+zuRoot)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := servingLine.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case u := <-found:
		return &taskServer{cmd: cmd, url: u}
	case <-time.After(30 * time.Second):
		t.Fatal("plexus serve --transport task did not say where it serves within 30s")
	}
	return nil
}

func postTask(client *http.Client, url, id string) (int, []byte, error) {
	body := fmt.Sprintf(`{"task": {"id": %q, "type": "general", "data": {"prompt": "say ok"}}, "repoId": "burst-repo"}`, id)
	resp, err := client.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// TestTaskReceiptsSurviveSIGKILL runs two task servers on one ZU_ROOT,
// sends them a burst of tasks, and kills both with SIGKILL in the middle
// of it. Every task whose 200 arrived must have its receipt in the log,
// intact, and the log must verify up to (at most) one torn line per month
// file being written; a restarted server repairs the torn line and
// appends; plexus receipts verify --repo accepts the log, and reports a
// tampered line.
func TestTaskReceiptsSurviveSIGKILL(t *testing.T) {
	ws, zu := t.TempDir(), t.TempDir()
	script := filepath.Join(t.TempDir(), "ok.jsonl")
	writeFile(t, script, `{"text": "ok"}`+"\n")
	servers := []*taskServer{startTaskServer(t, ws, zu, script), startTaskServer(t, ws, zu, script)}

	var mu sync.Mutex
	var acked []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 30 * time.Second}
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("task-%d-%d", w, i)
				code, body, err := postTask(client, servers[w%2].url, id)
				if err != nil {
					return // the server is gone
				}
				if code != http.StatusOK {
					t.Errorf("%s: status %d: %s", id, code, body)
					return
				}
				var resp struct {
					Result struct {
						TaskID string `json:"taskId"`
					} `json:"result"`
					ReceiptPath string `json:"receiptPath"`
				}
				if err := json.Unmarshal(body, &resp); err != nil || resp.Result.TaskID != id || resp.ReceiptPath == "" {
					t.Errorf("%s: response %s", id, body)
					return
				}
				mu.Lock()
				acked = append(acked, id)
				mu.Unlock()
			}
		}()
	}
	// Let the burst run until a good number of tasks are acknowledged,
	// then kill both servers without warning.
	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 150 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, s := range servers {
		s.cmd.Process.Signal(syscall.SIGKILL)
	}
	close(stop)
	wg.Wait()
	for _, s := range servers {
		s.cmd.Wait()
	}
	mu.Lock()
	ackedNow := append([]string(nil), acked...)
	mu.Unlock()
	if len(ackedNow) < 50 {
		t.Fatalf("only %d tasks were acknowledged before the kill", len(ackedNow))
	}

	dir := filepath.Join(zu, "ide", "receipts", "burst-repo")
	rep, err := receipts.NewReader(dir).Verify(t.Context(), receipts.VerifyOptions{RequireSigned: true})
	if err != nil && !errors.Is(err, receipts.ErrTruncated) {
		t.Fatalf("the log is damaged beyond a torn last line: %v (%d receipts verified)", err, rep.Receipts)
	}
	entries, _ := receipts.NewReader(dir).List(t.Context(), receipts.Month{})
	logged := map[string]bool{}
	for _, e := range entries {
		var d struct {
			TaskID string `json:"taskId"`
		}
		json.Unmarshal(e.Receipt.Data, &d)
		logged[d.TaskID] = true
	}
	for _, id := range ackedNow {
		if !logged[id] {
			t.Errorf("task %s was acknowledged with 200 but its receipt is not in the log", id)
		}
	}
	t.Logf("%d tasks acknowledged before SIGKILL, %d receipts verified (torn line: %v)", len(ackedNow), rep.Receipts, err != nil)

	// A restarted server repairs a torn line and appends after it.
	s := startTaskServer(t, ws, zu, script)
	if code, body, err := postTask(client, s.url, "after-restart"); err != nil || code != http.StatusOK {
		t.Fatalf("after restart: %d %s %v", code, body, err)
	}
	env := []string{"ZU_ROOT=" + zu}
	if r := plexus(t, ws, "", env, "receipts", "verify", "--repo", "burst-repo"); r.code != 0 || !strings.Contains(r.stdout, "verified") {
		t.Fatalf("receipts verify after restart exited %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.cmd.Wait()

	// Tamper with one receipt in the middle: verify names its line.
	months, _ := receipts.NewReader(dir).Months(t.Context())
	file := months[0].File(dir)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	lines[10] = bytes.Replace(lines[10], []byte(`"plexus-task"`), []byte(`"someone-else"`), 1)
	if err := os.WriteFile(file, bytes.Join(lines, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	r := plexus(t, ws, "", env, "receipts", "verify", "--repo", "burst-repo")
	if r.code != 1 || !strings.Contains(r.stderr, fmt.Sprintf("receipts.jsonl:%d:", 11)) || !strings.Contains(r.stderr, "NOT intact") {
		t.Errorf("receipts verify of a tampered log exited %d, stderr %q; want 1 naming line 11", r.code, r.stderr)
	}
}

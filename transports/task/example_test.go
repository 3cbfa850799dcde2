package task_test

import (
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/models/replay"
	"github.com/plexus-agent/plexus/transports/task"
)

// A server on the replay model processes the contract's minimal task and
// answers with the result and the path of its receipt.
func ExampleServer() {
	tmp, err := os.MkdirTemp("", "task-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	script := filepath.Join(tmp, "script.jsonl")
	os.WriteFile(script, []byte(`{"text": "VERDICT: PASS\nNo errors found."}`+"\n"), 0o644)
	os.Mkdir(filepath.Join(tmp, "repo"), 0o755)

	eng, err := engine.New(engine.Options{
		Models: map[string]engine.Model{"replay": replay.New()},
		Model:  engine.ModelRef{Provider: "replay", Name: script},
	})
	if err != nil {
		log.Fatal(err)
	}
	ws, err := eng.OpenWorkspace(filepath.Join(tmp, "repo"))
	if err != nil {
		log.Fatal(err)
	}
	srv, err := task.New(task.Options{Engine: eng, Workspace: ws, ZURoot: filepath.Join(tmp, "zu")})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ts := httptest.NewServer(srv)
	defer ts.Close()

	resp, err := http.Post(ts.URL+task.ProcessPath, "application/json", strings.NewReader(
		`{"task": {"id": "test-task", "type": "validation", "data": {}}, "repoId": "test-repo"}`))
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	var out task.Response
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		log.Fatal(err)
	}
	rel, _ := filepath.Rel(tmp, out.ReceiptPath)
	fmt.Println(resp.StatusCode, out.Result.TaskID, out.Result.Success, out.Result.Verdict)
	fmt.Println(filepath.ToSlash(filepath.Dir(filepath.Dir(filepath.Dir(rel)))), filepath.Base(rel))
	// Output:
	// 200 test-task true pass
	// zu/ide/receipts/test-repo receipts.jsonl
}

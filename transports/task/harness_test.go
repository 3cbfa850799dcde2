package task

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/internal/testtree"
	"github.com/plexus-agent/plexus/models/replay"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// exampleRequest is the contract's example request, verbatim.
const exampleRequest = `{
  "task": {
    "id": "test-task-001",
    "type": "code_review",
    "priority": "medium",
    "data": {
      "file_path": "src/example.ts",
      "context": "pre-commit"
    },
    "requirements": {
      "security": true,
      "performance": false
    }
  },
  "repoId": "test-repo"
}`

// answerScript is a one-line replay script: every turn answers at once.
const answerScript = `{"text": "VERDICT: PASS\nNo issues found."}`

// workspaceFiles are the files of every test workspace.
var workspaceFiles = map[string]string{
	"src/example.ts": "export function add(a: number, b: number): number {\n  return a + b;\n}\n",
	"README.md":      "# test\n",
}

// rig is a Server on a real engine with the replay model, served over real
// HTTP by httptest.
type rig struct {
	srv    *Server
	ts     *httptest.Server
	eng    *engine.Engine
	ws     string // workspace directory
	zu     string // ZU_ROOT
	client *http.Client
}

type rigConfig struct {
	script []string                        // replay script lines; default answerScript
	wrap   func(engine.Model) engine.Model // wraps the replay model
	opts   func(*Options)
}

func newRig(t testing.TB, cfg rigConfig) *rig {
	t.Helper()
	ws := t.TempDir()
	testtree.Write(t, ws, workspaceFiles)
	script := cfg.script
	if script == nil {
		script = []string{answerScript}
	}
	scriptPath := filepath.Join(t.TempDir(), "script.jsonl")
	if err := os.WriteFile(scriptPath, []byte(strings.Join(script, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var model engine.Model = replay.New()
	if cfg.wrap != nil {
		model = cfg.wrap(model)
	}
	eng, err := engine.New(engine.Options{
		Models: map[string]engine.Model{"replay": model},
		Model:  engine.ModelRef{Provider: "replay", Name: scriptPath},
	})
	if err != nil {
		t.Fatal(err)
	}
	wsp, err := eng.OpenWorkspace(ws)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Engine: eng, Workspace: wsp, ZURoot: t.TempDir()}
	if cfg.opts != nil {
		cfg.opts(&opts)
	}
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	r := &rig{srv: srv, ts: ts, eng: eng, ws: ws, zu: opts.ZURoot, client: ts.Client()}
	t.Cleanup(func() {
		ts.Close()
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
	})
	return r
}

// reply is an HTTP response, its body checked against the contract's
// schemas.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// post sends body to ProcessPath and checks the response (see check).
func (r *rig) post(t testing.TB, body string) reply {
	t.Helper()
	return r.do(t, http.MethodPost, ProcessPath, body)
}

func (r *rig) do(t testing.TB, method, path, body string) reply {
	t.Helper()
	req, err := http.NewRequest(method, r.ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return r.send(t, req)
}

func (r *rig) send(t testing.TB, req *http.Request) reply {
	t.Helper()
	return roundTrip(t, r.client, req)
}

// roundTrip sends req and checks the response (see check). It may run on
// any goroutine: it reports failures with t.Error.
func roundTrip(t testing.TB, client *http.Client, req *http.Request) reply {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Error(err)
		return reply{}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Error(err)
	}
	rep := reply{status: resp.StatusCode, header: resp.Header, body: body}
	if req.Method != http.MethodHead {
		check(t, rep)
	}
	return rep
}

// check asserts what every response must be: JSON (Content-Type
// application/json) valid against the contract's success schema (200 on
// the task endpoint) or error-envelope schema (every status but 200).
func check(t testing.TB, rep reply) {
	t.Helper()
	if ct := rep.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(rep.body))
	if err != nil {
		t.Errorf("%d response is not JSON: %v\n%s", rep.status, err, rep.body)
		return
	}
	if rep.status == http.StatusOK {
		if strings.Contains(string(rep.body), `"status":"ok"`) {
			return // /health
		}
		if err := responseSchema.Validate(inst); err != nil {
			t.Errorf("200 body does not match the success schema: %v\n%s", err, rep.body)
		}
		return
	}
	if err := errorSchema.Validate(inst); err != nil {
		t.Errorf("%d body does not match the error-envelope schema: %v\n%s", rep.status, err, rep.body)
	}
}

// envelope decodes an error response.
func (rep reply) envelope(t testing.TB) *Error {
	t.Helper()
	var env ErrorEnvelope
	if err := json.Unmarshal(rep.body, &env); err != nil || env.Error == nil {
		t.Fatalf("not an error envelope: %v\n%s", err, rep.body)
	}
	return env.Error
}

// success decodes a 200 response; numbers stay json.Number so that their
// spelling can be checked.
func (rep reply) success(t testing.TB) map[string]any {
	t.Helper()
	if rep.status != http.StatusOK {
		t.Fatalf("status %d, want 200: %s", rep.status, rep.body)
	}
	d := json.NewDecoder(bytes.NewReader(rep.body))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// taskBody returns a request for a general task with id and priority
// whose prompt is "id:<id>", so that gateModel can tell tasks apart.
func taskBody(id, priority string, extra string) string {
	return `{"task": {"id": "` + id + `", "type": "general", "priority": "` + priority +
		`", "data": {"prompt": "id:` + id + `"}` + extra + `}, "repoId": "test-repo"}`
}

// gateModel wraps a model: it records the marker of every call (the first
// line of the last user message) and holds the calls block selects until
// release is closed or their context ends.
type gateModel struct {
	engine.Model
	block   func(marker string) bool
	entered chan string
	release chan struct{}

	mu      sync.Mutex
	order   []string
	stopped []string // markers of held calls whose context ended
}

func newGate(block func(string) bool) *gateModel {
	return &gateModel{block: block, entered: make(chan string, 100), release: make(chan struct{})}
}

func (g *gateModel) Chat(ctx context.Context, req engine.ChatRequest, onChunk func(engine.ChatChunk) error) error {
	marker := ""
	for _, m := range req.Messages {
		if m.Role == engine.RoleUser {
			marker, _, _ = strings.Cut(m.Content, "\n")
		}
	}
	g.mu.Lock()
	g.order = append(g.order, marker)
	g.mu.Unlock()
	if g.block != nil && g.block(marker) {
		g.entered <- marker
		select {
		case <-g.release:
		case <-ctx.Done():
			g.mu.Lock()
			g.stopped = append(g.stopped, marker)
			g.mu.Unlock()
			return ctx.Err()
		}
	}
	return g.Model.Chat(ctx, req, onChunk)
}

// stoppedCalls counts the held calls whose context ended.
func (g *gateModel) stoppedCalls() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.stopped)
}

func (g *gateModel) calls() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.order...)
}

// flakyModel fails its first n calls as an unreachable provider would.
type flakyModel struct {
	engine.Model
	mu sync.Mutex
	n  int
}

func (f *flakyModel) Chat(ctx context.Context, req engine.ChatRequest, onChunk func(engine.ChatChunk) error) error {
	f.mu.Lock()
	fail := f.n > 0
	f.n--
	f.mu.Unlock()
	if fail {
		return &engine.ModelError{Provider: "replay", Kind: engine.ErrModelUnavailable, Message: "connection refused"}
	}
	return f.Model.Chat(ctx, req, onChunk)
}

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// receiptDir is the receipt log directory of repoID.
func (r *rig) receiptDir(repoID string) string {
	return filepath.Join(r.zu, "ide", "receipts", repoID)
}

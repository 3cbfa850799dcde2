package httpws_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/patch"
	"github.com/plexus-agent/plexus/engine/policy"
	"github.com/plexus-agent/plexus/engine/store"
	"github.com/plexus-agent/plexus/internal/scripttest"
	fstools "github.com/plexus-agent/plexus/tools/fs"
	"github.com/plexus-agent/plexus/transports/httpws"
	"github.com/plexus-agent/plexus/transports/httpws/schemas"
)

// step is one scripted model reply; gate, when set, holds the reply until
// it is closed or the call's context ends.
type step struct {
	// lead is streamed before the gate, text after it.
	lead  string
	text  string
	calls []engine.ToolCall
	gate  chan struct{}
}

func callOf(id, name, args string) engine.ToolCall {
	return engine.ToolCall{ID: id, Name: name, Args: json.RawMessage(args)}
}

// scriptModel plays replies by the first line of the turn's user message:
// the k-th model call of a turn gets script[prompt][k].
type scriptModel struct {
	scripttest.Base
	script map[string][]step
	mu     sync.Mutex
	users  []string // user message contents seen
	tools  []string // tool message contents seen
}

func (m *scriptModel) Chat(ctx context.Context, req engine.ChatRequest, onChunk func(engine.ChatChunk) error) error {
	u, k, err := scripttest.Position(req)
	if err != nil {
		return err
	}
	content := req.Messages[u].Content
	m.mu.Lock()
	if k == 0 {
		m.users = append(m.users, content)
	}
	for _, msg := range req.Messages[u+1:] {
		if msg.Role == engine.RoleTool {
			m.tools = append(m.tools, msg.Content)
		}
	}
	m.mu.Unlock()
	prompt, _, _ := strings.Cut(content, "\n")
	steps := m.script[prompt]
	if k >= len(steps) {
		return fmt.Errorf("script: no step %d for %q", k, prompt)
	}
	st := steps[k]
	if st.lead != "" {
		if err := onChunk(engine.ChatChunk{Text: st.lead}); err != nil {
			return err
		}
	}
	if st.gate != nil {
		select {
		case <-st.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if st.text != "" {
		if err := onChunk(engine.ChatChunk{Text: st.text}); err != nil {
			return err
		}
	}
	for _, c := range st.calls {
		c := c
		if err := onChunk(engine.ChatChunk{ToolCall: &c}); err != nil {
			return err
		}
	}
	return nil
}

func (m *scriptModel) seen() (users, tools []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.users...), append([]string(nil), m.tools...)
}

// cmdTool adds a run_command spec (ToolKindCommand) to a toolset; in
// local_terminal mode the engine hands its calls to the client, so Invoke
// never runs for it in these tests.
type cmdTool struct{ engine.Toolset }

func (c cmdTool) Tools(ctx context.Context) ([]engine.ToolSpec, error) {
	specs, err := c.Toolset.Tools(ctx)
	return append(specs, engine.ToolSpec{
		Name: "run_command", Description: "Run a shell command.", Kind: engine.ToolKindCommand, Risk: engine.RiskHigh,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`),
	}), err
}

func (c cmdTool) Invoke(ctx context.Context, req engine.InvokeRequest, onUpdate func(engine.ToolUpdate)) (engine.ToolResult, error) {
	if req.Tool == "run_command" {
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeFailed, "the test server does not run commands")
	}
	return c.Toolset.Invoke(ctx, req, onUpdate)
}

// testServer is an in-process Server on a real loopback socket, with a
// real store, patcher and policy, and the file tools.
type testServer struct {
	srv   *httpws.Server
	eng   *engine.Engine
	model *scriptModel
	url   string
	root  string
	wsID  string
	token string
	idx   *fakeIndexer
}

// embedOnly is a provider whose one model only embeds.
type embedOnly struct{ scripttest.Base }

func (embedOnly) ListModels(context.Context) ([]engine.ModelInfo, error) {
	return []engine.ModelInfo{{Name: "nomic", Capabilities: []string{"embedding"}}}, nil
}

func (embedOnly) Chat(context.Context, engine.ChatRequest, func(engine.ChatChunk) error) error {
	return errors.New("embedOnly cannot chat")
}

func newTestServer(t *testing.T, script map[string][]step, opts ...func(*httpws.Options)) *testServer {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(context.Background(), filepath.Join(dir, "plexus.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	model := &scriptModel{script: script}
	eng, err := engine.New(engine.Options{
		Models: map[string]engine.Model{"script": model, "script2": &scriptModel{}, "embed": embedOnly{}}, Model: engine.ModelRef{Provider: "script", Name: "test"},
		Tools: cmdTool{fstools.New(fstools.Options{})}, Patcher: patch.NewPatcher(), Patches: st,
		Gatekeeper: policy.NewGatekeeper(st), Sessions: st, Workspaces: st,
	})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "calc.go"), []byte("package calc\n\nfunc Add(a, b int) int {\n\treturn a - b\n}\n"), 0o644)
	ts := &testServer{eng: eng, model: model, root: root, token: "test-token", idx: &fakeIndexer{release: make(chan struct{})}}
	o := httpws.Options{Engine: eng, Token: ts.token, Indexer: ts.idx, Version: "test"}
	for _, f := range opts {
		f(&o)
	}
	ts.srv, err = httpws.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go ts.srv.Serve(ln)
	t.Cleanup(func() { ts.srv.Close() })
	ts.url = "http://" + ln.Addr().String()
	rec, err := eng.RegisterWorkspace(context.Background(), root, "calc")
	if err != nil {
		t.Fatal(err)
	}
	ts.wsID = rec.ID
	return ts
}

// fakeIndexer records index calls; Build waits for release.
type fakeIndexer struct {
	mu      sync.Mutex
	builds  []bool
	changes [][]httpws.FileChange
	release chan struct{}
}

func (f *fakeIndexer) Build(ctx context.Context, root string, rebuild bool) (any, error) {
	f.mu.Lock()
	f.builds = append(f.builds, rebuild)
	f.mu.Unlock()
	select {
	case <-f.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return buildStats(1, rebuild), nil
}

// buildStats and indexStatus have the shapes of engine/index's BuildStats
// and Status, which cmd/plexus serves.
func buildStats(changed int, full bool) map[string]any {
	return map[string]any{"files": 1, "read": changed, "changed": changed, "removed": 0, "analyzed": changed, "reused": 0,
		"skipped": 0, "bytes": 60, "full": full, "duration_ns": 1000}
}

func (f *fakeIndexer) ApplyChanges(ctx context.Context, root string, changes []httpws.FileChange) (any, error) {
	f.mu.Lock()
	f.changes = append(f.changes, changes)
	f.mu.Unlock()
	return buildStats(len(changes), false), nil
}

func (f *fakeIndexer) Status(ctx context.Context, root string) (any, error) {
	return map[string]any{"root": root, "workspace_id": "ws_000000000000", "files": 1, "contents": 1, "chunks": 1, "symbols": 1,
		"delta_contents": 0, "last_update": "2026-11-21T10:00:00Z", "building": false, "database_bytes": 4096,
		"vectors": map[string]any{"available": false}}, nil
}

// openAPI validates REST answers against the responses of openapi.json.
var (
	openAPIOnce sync.Once
	openAPIc    *jsonschema.Compiler
	openAPIDoc  map[string]any
	wsSchemaSet map[string]*jsonschema.Schema
)

func loadSchemas(t *testing.T) {
	t.Helper()
	openAPIOnce.Do(func() {
		c := jsonschema.NewCompiler()
		c.AssertFormat()
		add := func(name, url string) {
			data, _ := fs.ReadFile(schemas.FS, name)
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
			if err != nil {
				panic(err)
			}
			c.AddResource(url, doc)
		}
		add("openapi.json", "https://plexus.dev/schemas/openapi.json")
		data, _ := fs.ReadFile(schemas.FS, "openapi.json")
		json.Unmarshal(data, &openAPIDoc)
		files, _ := fs.Glob(schemas.FS, "ws/*.json")
		for _, f := range files {
			add(f, "https://plexus.dev/schemas/"+f)
		}
		wsSchemaSet = map[string]*jsonschema.Schema{}
		for _, f := range files {
			s, err := c.Compile("https://plexus.dev/schemas/" + f)
			if err != nil {
				panic(err)
			}
			wsSchemaSet[strings.TrimSuffix(strings.TrimPrefix(f, "ws/"), ".json")] = s
		}
		openAPIc = c
	})
}

// checkREST validates a REST answer against the OpenAPI description of
// its operation and status; an undocumented status fails the test.
func checkREST(t *testing.T, method, path string, status int, body []byte) {
	t.Helper()
	loadSchemas(t)
	path, _, _ = strings.Cut(path, "?")
	// The template that fits with the most literal segments wins
	// (/v1/workspaces/register over /v1/workspaces/{workspace_id}).
	tmpl, best := "", -1
	for p := range openAPIDoc["paths"].(map[string]any) {
		if n := matchTemplate(p, path); n > best {
			tmpl, best = p, n
		}
	}
	if best < 0 {
		t.Fatalf("%s %s is not in openapi.json", method, path)
	}
	op, ok := openAPIDoc["paths"].(map[string]any)[tmpl].(map[string]any)[strings.ToLower(method)].(map[string]any)
	if !ok {
		t.Fatalf("%s %s is not in openapi.json", method, tmpl)
	}
	resp, ok := op["responses"].(map[string]any)[fmt.Sprint(status)].(map[string]any)
	if !ok {
		t.Fatalf("%s %s answered %d, which openapi.json does not list: %s", method, tmpl, status, body)
	}
	ptr := "/paths/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(tmpl) + "/" + strings.ToLower(method) +
		"/responses/" + fmt.Sprint(status)
	if ref, ok := resp["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/components/responses/")
		resp = openAPIDoc["components"].(map[string]any)["responses"].(map[string]any)[name].(map[string]any)
		ptr = "/components/responses/" + name
	}
	if _, hasBody := resp["content"]; !hasBody {
		if len(bytes.TrimSpace(body)) != 0 {
			t.Errorf("%s %s %d: openapi.json lists no body, got %s", method, tmpl, status, body)
		}
		return
	}
	ptr += "/content/application~1json/schema"
	s, err := openAPIc.Compile("https://plexus.dev/schemas/openapi.json#" + ptr)
	if err != nil {
		t.Fatalf("compile %s: %v", ptr, err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%s %s %d: not JSON: %s", method, tmpl, status, body)
	}
	if err := s.Validate(doc); err != nil {
		t.Errorf("%s %s %d breaks openapi.json: %v\n%s", method, tmpl, status, err, body)
	}
}

// matchTemplate returns how many literal segments of the OpenAPI path
// template tmpl path matches, or -1 when it does not fit.
func matchTemplate(tmpl, path string) int {
	a, b := strings.Split(tmpl, "/"), strings.Split(path, "/")
	if len(a) != len(b) {
		return -1
	}
	n := 0
	for i := range a {
		switch {
		case strings.HasPrefix(a[i], "{"):
		case a[i] == b[i]:
			n++
		default:
			return -1
		}
	}
	return n
}

// do sends a REST request with the token and checks the answer against
// openapi.json.
func (ts *testServer) do(t *testing.T, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, ts.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+ts.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	checkREST(t, method, path, resp.StatusCode, data)
	var out map[string]any
	json.Unmarshal(data, &out)
	return resp.StatusCode, out
}

func (ts *testServer) newSession(t *testing.T) string {
	t.Helper()
	code, body := ts.do(t, "POST", "/v1/sessions", fmt.Sprintf(`{"workspace_id": %q}`, ts.wsID))
	if code != 201 {
		t.Fatalf("create session: %d %v", code, body)
	}
	return body["session_id"].(string)
}

// client is a WebSocket test client that validates what it reads.
type client struct {
	t    *testing.T
	c    *websocket.Conn
	seen []map[string]any
}

func (ts *testServer) connect(t *testing.T, sessID string, caps ...string) *client {
	t.Helper()
	loadSchemas(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, strings.Replace(ts.url, "http", "ws", 1)+"/v1/sessions/"+sessID+"/stream",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + ts.token}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	cl := &client{t: t, c: c}
	cl.send(map[string]any{"type": "client.hello", "client_info": map[string]any{"name": "test", "version": "1", "capabilities": append([]string{}, caps...)}})
	cl.until("session.state")
	return cl
}

func (c *client) send(v any) {
	c.t.Helper()
	data, _ := json.Marshal(v)
	c.sendRaw(data)
}

func (c *client) sendRaw(data []byte) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.c.Write(ctx, websocket.MessageText, data); err != nil {
		c.t.Fatal(err)
	}
}

// read returns the next message, or the read error.
func (c *client) read() (map[string]any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, data, err := c.c.Read(ctx)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		c.t.Fatal(err)
	}
	typ, _ := m["type"].(string)
	s := wsSchemaSet[typ]
	if s == nil {
		c.t.Fatalf("no schema for %s", data)
	}
	doc, _ := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err := s.Validate(doc); err != nil {
		c.t.Errorf("%s breaks its schema: %v\n%s", typ, err, data)
	}
	c.seen = append(c.seen, m)
	return m, nil
}

func (c *client) until(typ string) map[string]any {
	c.t.Helper()
	for {
		m, err := c.read()
		if err != nil {
			c.t.Fatalf("waiting for %s: %v (seen %v)", typ, err, msgTypes(c.seen))
		}
		if m["type"] == typ {
			return m
		}
	}
}

func msgTypes(ms []map[string]any) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i], _ = m["type"].(string)
	}
	return out
}

func errCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

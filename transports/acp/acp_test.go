package acp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/patch"
	"github.com/plexus-agent/plexus/engine/policy"
	"github.com/plexus-agent/plexus/engine/store"
	"github.com/plexus-agent/plexus/internal/acptest"
	"github.com/plexus-agent/plexus/internal/testtree"
	"github.com/plexus-agent/plexus/models/replay"
	fstools "github.com/plexus-agent/plexus/tools/fs"
	"github.com/plexus-agent/plexus/transports/acp"
)

// waitTimeout bounds every wait of these tests.
const waitTimeout = 30 * time.Second

// calcFiles is the workspace: a Go module with a bug in Add.
var calcFiles = map[string]string{
	"go.mod":       "module example.com/calc\n\ngo 1.22\n",
	"calc.go":      "// Package calc does arithmetic.\npackage calc\n\n// Add returns the sum of a and b.\nfunc Add(a, b int) int {\n\treturn a - b\n}\n",
	"calc_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"Add(2, 3) != 5\")\n\t}\n}\n",
}

// env is an engine as the CLI wires it (replay model, file tools, patcher,
// policy, SQLite store) served by an acp.Server over pipes.
type env struct {
	root, dataDir, script string
	st                    *store.Store
	eng                   *engine.Engine
	stop                  func()
	client                *acptest.Client
	served                chan error
}

func newEnv(t *testing.T, root, dataDir, script string, handler acptest.Handler, opts acp.Options) *env {
	t.Helper()
	e := &env{root: root, dataDir: dataDir, script: script}
	st, err := store.Open(context.Background(), filepath.Join(dataDir, "plexus.db"))
	if err != nil {
		t.Fatal(err)
	}
	e.st = st
	tools := fstools.New(fstools.Options{})
	p := patch.NewPatcher()
	e.eng, err = engine.New(engine.Options{
		Models:     map[string]engine.Model{"replay": replay.New()},
		Tools:      tools,
		Patcher:    p,
		Patches:    st,
		Sessions:   st,
		Workspaces: st,
		Gatekeeper: policy.NewGatekeeper(st),
		Model:      engine.ModelRef{Provider: "replay", Name: script},
	})
	if err != nil {
		t.Fatal(err)
	}
	opts.Engine, opts.Patches = e.eng, st
	if testing.Verbose() {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	srv := acp.New(opts)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	e.served = make(chan error, 1)
	go func() {
		e.served <- srv.Serve(ctx, inR, outW)
		outW.Close()
	}()
	e.client = acptest.NewClient(outR, inW, handler)
	var once sync.Once
	e.stop = func() {
		once.Do(func() {
			inW.Close()
			select {
			case err := <-e.served:
				if err != nil {
					t.Errorf("Serve: %v", err)
				}
			case <-time.After(waitTimeout):
				t.Errorf("Serve did not return after the input closed")
			}
			cancel()
			tools.Close()
			p.Close()
			st.Close()
			if v := e.client.Violations(); len(v) > 0 {
				t.Errorf("the agent sent %d messages ACP does not allow:\n%s", len(v), strings.Join(v, "\n"))
			}
		})
	}
	t.Cleanup(e.stop)
	return e
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

func (e *env) call(t *testing.T, method string, params any, out any) {
	t.Helper()
	res, err := e.client.Call(ctxT(t), method, params)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	if out != nil {
		if err := json.Unmarshal(res, out); err != nil {
			t.Fatalf("%s result %s: %v", method, res, err)
		}
	}
}

func (e *env) initialize(t *testing.T, caps map[string]any) map[string]any {
	t.Helper()
	var res map[string]any
	e.call(t, "initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": caps,
		"clientInfo": map[string]any{"name": "acptest", "version": "1"}}, &res)
	return res
}

func (e *env) newSession(t *testing.T) string {
	t.Helper()
	var res struct {
		SessionID string `json:"sessionId"`
	}
	e.call(t, "session/new", map[string]any{"cwd": e.root, "mcpServers": []any{}}, &res)
	if res.SessionID == "" {
		t.Fatal("session/new gave no sessionId")
	}
	return res.SessionID
}

func (e *env) prompt(t *testing.T, sid, text string) (string, error) {
	t.Helper()
	res, err := e.client.Call(ctxT(t), "session/prompt", map[string]any{"sessionId": sid,
		"prompt": []any{map[string]any{"type": "text", "text": text}}})
	if err != nil {
		return "", err
	}
	var r struct {
		StopReason string `json:"stopReason"`
	}
	json.Unmarshal(res, &r)
	return r.StopReason, nil
}

// toolCalls folds the tool_call and tool_call_update notifications into
// each call's last state.
type toolCallState struct {
	ID        string           `json:"toolCallId"`
	Title     string           `json:"title"`
	Kind      string           `json:"kind"`
	Status    string           `json:"status"`
	Locations []map[string]any `json:"locations"`
	Content   []map[string]any `json:"content"`
	RawInput  json.RawMessage  `json:"rawInput"`
	RawOutput json.RawMessage  `json:"rawOutput"`
}

func toolCalls(ups []acptest.Update) (order []string, calls map[string]*toolCallState) {
	calls = map[string]*toolCallState{}
	for _, u := range ups {
		switch u.Kind() {
		case "tool_call":
			var c toolCallState
			json.Unmarshal(u.Update, &c)
			calls[c.ID] = &c
			order = append(order, c.ID)
		case "tool_call_update":
			var c toolCallState
			json.Unmarshal(u.Update, &c)
			old := calls[c.ID]
			if old == nil {
				continue
			}
			if c.Status != "" {
				old.Status = c.Status
			}
			if c.Title != "" {
				old.Title = c.Title
			}
			if c.Content != nil {
				old.Content = c.Content
			}
			if c.Locations != nil {
				old.Locations = c.Locations
			}
			if c.RawOutput != nil {
				old.RawOutput = c.RawOutput
			}
		}
	}
	return order, calls
}

func text(ups []acptest.Update, kind string) string {
	var b strings.Builder
	for _, u := range ups {
		if u.Kind() != kind {
			continue
		}
		var c struct {
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		json.Unmarshal(u.Update, &c)
		b.WriteString(c.Content.Text)
	}
	return b.String()
}

func writeScript(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "script.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// editScript reads calc.go, then proposes two edits (calc.go's fix, a new
// test in calc_test.go) and reports what was applied.
var editScript = []string{
	`{"text": "Let me read calc.go.", "tool_calls": [{"name": "read_file", "arguments": {"path": "calc.go"}}, {"name": "list_files", "arguments": {"path": "."}}]}`,
	`{"text": "Add subtracts. I'll fix it and add a test.", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.go", "old_string": "return a - b", "new_string": "return a + b"}}, {"name": "edit_file", "arguments": {"path": "calc_test.go", "old_string": "func TestAdd(", "new_string": "func TestAddZero(t *testing.T) {\n\tif Add(0, 0) != 0 {\n\t\tt.Fatal(\"Add(0, 0) != 0\")\n\t}\n}\n\nfunc TestAdd("}}]}`,
	`{"text": "{{ $p := get (.Result \"edit_file\") \"patch\" }}Applied: {{ join (get $p \"applied_files\") \", \" }}; not applied: {{ join (get $p \"rejected_files\") \", \" }}."}`,
	`{"text": "Still here."}`,
	`{"text": "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty", "delay_ms": 40}`,
}

// editorClient answers as an editor would: permission per file (allow
// calc.go, reject calc_test.go), an unsaved buffer of calc.go, writes to
// the disk.
type editorClient struct {
	root  string
	mu    sync.Mutex
	asks  []map[string]any
	read  []string
	wrote []string
}

func (c *editorClient) handle(method string, params json.RawMessage) (any, *acptest.RPCError) {
	var p map[string]any
	json.Unmarshal(params, &p)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch method {
	case "session/request_permission":
		c.asks = append(c.asks, p)
		tc, _ := p["toolCall"].(map[string]any)
		title, _ := tc["title"].(string)
		choice := "reject_once"
		if strings.HasSuffix(title, "calc.go") {
			choice = "allow_once"
		}
		return map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": choice}}, nil
	case "fs/read_text_file":
		path, _ := p["path"].(string)
		c.read = append(c.read, path)
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, &acptest.RPCError{Code: -32002, Message: err.Error()}
		}
		if filepath.Base(path) == "calc.go" {
			// The editor's buffer has an unsaved comment.
			b = []byte(strings.Replace(string(b), "// Add returns", "// Add (unsaved edit) returns", 1))
		}
		return map[string]any{"content": string(b)}, nil
	case "fs/write_text_file":
		path, _ := p["path"].(string)
		content, _ := p["content"].(string)
		c.wrote = append(c.wrote, path)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return nil, &acptest.RPCError{Code: -32603, Message: err.Error()}
		}
		return map[string]any{}, nil
	}
	return nil, &acptest.RPCError{Code: -32601, Message: "not offered: " + method}
}

func TestEditorTurnPermissionsCancelAndReload(t *testing.T) {
	root := t.TempDir()
	testtree.Write(t, root, calcFiles)
	dataDir := t.TempDir()
	script := writeScript(t, editScript...)
	ed := &editorClient{root: root}
	e := newEnv(t, root, dataDir, script, ed.handle, acp.Options{Version: "test"})

	res := e.initialize(t, map[string]any{"fs": map[string]any{"readTextFile": true, "writeTextFile": true}})
	caps, _ := res["agentCapabilities"].(map[string]any)
	if res["protocolVersion"] != float64(1) || caps["loadSession"] != true {
		t.Fatalf("initialize %v", res)
	}
	sid := e.newSession(t)
	ctx := ctxT(t)
	if err := e.client.WaitFor(ctx, func() bool {
		return slices.ContainsFunc(e.client.Updates(), func(u acptest.Update) bool { return u.Kind() == "available_commands_update" })
	}); err != nil {
		t.Fatalf("no available_commands_update: %v", err)
	}

	stop, err := e.prompt(t, sid, "Fix Add and test it")
	if err != nil || stop != "end_turn" {
		t.Fatalf("prompt: %q %v", stop, err)
	}
	ups := e.client.Updates()
	if got := text(ups, "agent_message_chunk"); !strings.Contains(got, "Applied: calc.go; not applied: calc_test.go.") {
		t.Errorf("agent text %q", got)
	}
	if got := text(ups, "agent_thought_chunk"); !strings.Contains(got, "Reading the request") {
		t.Errorf("thoughts %q", got)
	}
	order, calls := toolCalls(ups)
	if len(order) != 4 {
		t.Fatalf("tool calls %v", order)
	}
	for _, id := range order {
		if c := calls[id]; c.Status != "completed" && c.Status != "failed" {
			t.Errorf("tool call %s (%s) ended %q", id, c.Title, c.Status)
		}
	}
	read := calls[order[0]]
	if read.Kind != "read" || read.Title != "Read calc.go" || read.Status != "completed" ||
		len(read.Locations) != 1 || read.Locations[0]["path"] != filepath.Join(root, "calc.go") {
		t.Errorf("read call %+v", read)
	}
	if !strings.Contains(string(read.RawOutput), "unsaved edit") {
		t.Errorf("read_file did not read the editor's buffer: %s", read.RawOutput)
	}
	if list := calls[order[1]]; list.Kind != "search" || list.Title != "List ." {
		t.Errorf("list call %+v", list)
	}
	fix, test := calls[order[2]], calls[order[3]]
	if fix.Kind != "edit" || fix.Title != "Edit calc.go" || fix.Status != "completed" || test.Status != "failed" {
		t.Errorf("edit calls %+v\n%+v", fix, test)
	}
	if len(fix.Content) == 0 || fix.Content[0]["type"] != "diff" || fix.Content[0]["path"] != filepath.Join(root, "calc.go") ||
		!strings.Contains(fix.Content[0]["newText"].(string), "return a + b") {
		t.Errorf("fix content %v", fix.Content)
	}
	// Two permission requests, each on its edit call, with its diff.
	if len(ed.asks) != 2 {
		t.Fatalf("permission requests %v", ed.asks)
	}
	for i, want := range []string{fix.ID, test.ID} {
		tc := ed.asks[i]["toolCall"].(map[string]any)
		if tc["toolCallId"] != want {
			t.Errorf("permission %d is about %v, want %s", i, tc["toolCallId"], want)
		}
		if c, _ := tc["content"].([]any); len(c) != 1 || c[0].(map[string]any)["type"] != "diff" {
			t.Errorf("permission %d content %v", i, tc["content"])
		}
	}
	// Exactly the allowed change is on disk, written by the editor (on top
	// of its buffer), and plexus undo can take it back.
	got, _ := os.ReadFile(filepath.Join(root, "calc.go"))
	if !strings.Contains(string(got), "return a + b") || !strings.Contains(string(got), "unsaved edit") {
		t.Errorf("calc.go:\n%s", got)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "calc_test.go")); string(got) != calcFiles["calc_test.go"] {
		t.Errorf("calc_test.go changed:\n%s", got)
	}
	if !slices.Equal(ed.wrote, []string{filepath.Join(root, "calc.go")}) {
		t.Errorf("writes %v", ed.wrote)
	}
	ws, _ := e.eng.OpenWorkspace(root)
	if applied, err := e.eng.AppliedPatches(ctx, ws, 0); err != nil || len(applied) != 1 || applied[0].Files[0].Path != "calc.go" {
		t.Errorf("undo records %v %v", applied, err)
	}

	// A malformed line gets an error, and the next prompt works.
	e.client.WriteLine(`{"jsonrpc": "2.0", "id": 99, "method": `)
	if err := e.client.WaitFor(ctx, func() bool { return len(e.client.NullErrors()) == 1 }); err != nil {
		t.Fatal(err)
	}
	if ne := e.client.NullErrors()[0]; ne.Code != -32700 {
		t.Errorf("malformed line: %+v", ne)
	}
	if stop, err := e.prompt(t, sid, "Are you there?"); err != nil || stop != "end_turn" {
		t.Fatalf("prompt after the malformed line: %q %v", stop, err)
	}

	// Cancel mid-stream.
	before := len(e.client.Updates())
	ch, _ := e.client.Start("session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": "Count to twenty"}}})
	if err := e.client.WaitFor(ctx, func() bool {
		return strings.Contains(text(e.client.Updates()[before:], "agent_message_chunk"), "two")
	}); err != nil {
		t.Fatal(err)
	}
	e.client.Notify("session/cancel", map[string]any{"sessionId": sid})
	r, err := e.client.Wait(ctx, ch)
	if err != nil || !strings.Contains(string(r), `"cancelled"`) {
		t.Fatalf("cancelled prompt: %s %v", r, err)
	}
	if got := text(e.client.Updates()[before:], "agent_message_chunk"); strings.Contains(got, "twenty") {
		t.Errorf("the stream went on after the cancel: %q", got)
	}
	e.stop()

	// After a restart, session/load replays the conversation.
	e2 := newEnv(t, root, dataDir, script, ed.handle, acp.Options{Version: "test"})
	e2.initialize(t, map[string]any{})
	var lres map[string]any
	e2.call(t, "session/load", map[string]any{"sessionId": sid, "cwd": root, "mcpServers": []any{}}, &lres)
	ups2 := e2.client.Updates()
	var users []string
	for _, u := range ups2 {
		if u.Kind() == "user_message_chunk" {
			var c struct {
				Content struct{ Text string } `json:"content"`
			}
			json.Unmarshal(u.Update, &c)
			users = append(users, c.Content.Text)
		}
	}
	if len(users) != 3 || !strings.HasPrefix(users[0], "Fix Add and test it") || users[2] != "Count to twenty" {
		t.Errorf("replayed user messages %q", users)
	}
	if got := text(ups2, "agent_message_chunk"); !strings.Contains(got, "Applied: calc.go; not applied: calc_test.go.") || !strings.Contains(got, "Still here.") {
		t.Errorf("replayed agent text %q", got)
	}
	order2, calls2 := toolCalls(ups2)
	if len(order2) != 4 || calls2[order2[2]].Status != "completed" || calls2[order2[3]].Status != "failed" {
		t.Errorf("replayed tool calls %v", order2)
	}
	// The loaded session goes on.
	if stop, err := e2.prompt(t, sid, "Count again"); err != nil || stop != "end_turn" {
		t.Fatalf("prompt after load: %q %v", stop, err)
	}
	// A session that does not exist is -32002.
	_, err = e2.client.Call(ctx, "session/load", map[string]any{"sessionId": "ses_nope", "cwd": root, "mcpServers": []any{}})
	if re, ok := err.(*acptest.RPCError); !ok || re.Code != -32002 {
		t.Errorf("unknown session: %v", err)
	}
	var list struct {
		Sessions []map[string]any `json:"sessions"`
	}
	e2.call(t, "session/list", map[string]any{"cwd": root}, &list)
	if len(list.Sessions) != 1 || list.Sessions[0]["sessionId"] != sid {
		t.Errorf("session/list %v", list)
	}
}

func TestModes(t *testing.T) {
	script := writeScript(t,
		`{"text": "Fixing.", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.go", "old_string": "return a - b", "new_string": "return a + b"}}]}`,
		`{"text": "{{ get (get (.Result \"edit_file\") \"patch\") \"status\" }}"}`,
		`{"text": "Fixing again.", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.go", "old_string": "return a - b", "new_string": "return a + b"}}]}`,
		`{"text": "{{ get (get (.Result \"edit_file\") \"patch\") \"status\" }}"}`,
	)
	root := t.TempDir()
	testtree.Write(t, root, calcFiles)
	asked := 0
	e := newEnv(t, root, t.TempDir(), script, func(method string, _ json.RawMessage) (any, *acptest.RPCError) {
		asked++
		return map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": "allow_once"}}, nil
	}, acp.Options{})
	e.initialize(t, map[string]any{})
	sid := e.newSession(t)

	e.call(t, "session/set_mode", map[string]any{"sessionId": sid, "modeId": "read_only"}, nil)
	if stop, err := e.prompt(t, sid, "Fix it"); err != nil || stop != "end_turn" {
		t.Fatalf("%q %v", stop, err)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "calc.go")); string(got) != calcFiles["calc.go"] || asked != 0 {
		t.Errorf("read-only mode changed calc.go (asked %d):\n%s", asked, got)
	}
	if !strings.Contains(text(e.client.Updates(), "agent_message_chunk"), "rejected") {
		t.Errorf("text %q", text(e.client.Updates(), "agent_message_chunk"))
	}

	var opts struct {
		ConfigOptions []map[string]any `json:"configOptions"`
	}
	e.call(t, "session/set_config_option", map[string]any{"sessionId": sid, "configId": "mode", "value": "accept_edits"}, &opts)
	if len(opts.ConfigOptions) != 2 || opts.ConfigOptions[0]["currentValue"] != "accept_edits" {
		t.Errorf("config options %v", opts)
	}
	if stop, err := e.prompt(t, sid, "Fix it now"); err != nil || stop != "end_turn" {
		t.Fatalf("%q %v", stop, err)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "calc.go")); !strings.Contains(string(got), "return a + b") || asked != 0 {
		t.Errorf("accept-edits mode: asked %d, calc.go:\n%s", asked, got)
	}

	// Bad values are -32602 and change nothing.
	for _, p := range []map[string]any{
		{"sessionId": sid, "configId": "mode", "value": "yolo"},
		{"sessionId": sid, "configId": "model", "value": "nope:model"},
		{"sessionId": sid, "configId": "colour", "value": "red"},
	} {
		_, err := e.client.Call(ctxT(t), "session/set_config_option", p)
		if re, ok := err.(*acptest.RPCError); !ok || re.Code != -32602 {
			t.Errorf("%v: %v", p, err)
		}
	}
}

func TestBadInputKeepsServing(t *testing.T) {
	root := t.TempDir()
	testtree.Write(t, root, calcFiles)
	e := newEnv(t, root, t.TempDir(), writeScript(t, `{"text": "ok"}`), nil, acp.Options{MaxMessageBytes: 4096})
	ctx := ctxT(t)
	// Before initialize.
	if _, err := e.client.Call(ctx, "session/new", map[string]any{"cwd": root, "mcpServers": []any{}}); err == nil {
		t.Error("session/new before initialize succeeded")
	}
	e.initialize(t, map[string]any{})
	lines := []struct {
		line string
		code int
	}{
		{`{"jsonrpc": "2.0", "id": 1, "method": "initialize"`, -32700},
		{`[{"jsonrpc": "2.0", "id": 1, "method": "initialize"}]`, -32600},
		{`42`, -32600},
		{`{"jsonrpc": "1.0", "method": "session/cancel"}`, -32600},
		{`{"jsonrpc": "2.0", "id": {"a": 1}, "method": "initialize"}`, -32600},
		{`{"jsonrpc": "2.0"}`, -32600},
		{`{"jsonrpc": "2.0", "id": 5, "method": ""}`, -32600},
		{`{"jsonrpc": "2.0", "id": 6, "method": "session/new", "params": "x"}`, -32600},
		{`{"jsonrpc": "2.0", "method": "x", "params": {"pad": "` + strings.Repeat("a", 5000) + `"}}`, -32600},
	}
	for i, l := range lines {
		e.client.WriteLine(l.line)
		if err := e.client.WaitFor(ctx, func() bool { return len(e.client.NullErrors()) > i }); err != nil {
			t.Fatalf("no answer to %q", l.line)
		}
	}
	var codes []int
	for _, ne := range e.client.NullErrors() {
		codes = append(codes, ne.Code)
	}
	want := []int{-32700, -32600, -32600, -32600, -32600, -32600, -32600, -32600, -32600}
	if !slices.Equal(codes, want) {
		t.Errorf("errors %v, want %v", codes, want)
	}
	for _, c := range []struct {
		method string
		params any
		code   int
	}{
		{"no/such_method", map[string]any{}, -32601},
		{"session/new", map[string]any{"cwd": "relative/dir", "mcpServers": []any{}}, -32602},
		{"session/new", map[string]any{"cwd": filepath.Join(root, "calc.go"), "mcpServers": []any{}}, -32602},
		{"session/new", map[string]any{"mcpServers": []any{}}, -32602},
		{"session/prompt", map[string]any{"sessionId": "ses_unknown", "prompt": []any{map[string]any{"type": "text", "text": "hi"}}}, -32002},
		{"session/set_mode", map[string]any{"sessionId": "ses_unknown", "modeId": "ask"}, -32002},
		{"authenticate", map[string]any{"methodId": "password"}, -32602},
	} {
		_, err := e.client.Call(ctx, c.method, c.params)
		if re, ok := err.(*acptest.RPCError); !ok || re.Code != c.code {
			t.Errorf("%s %v: %v, want code %d", c.method, c.params, err, c.code)
		}
	}
	sid := e.newSession(t)
	_, err := e.client.Call(ctx, "session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "image", "data": "AAAA", "mimeType": "image/png"}}})
	if re, ok := err.(*acptest.RPCError); !ok || re.Code != -32602 {
		t.Errorf("image prompt: %v", err)
	}
	if stop, err := e.prompt(t, sid, "still serving?"); err != nil || stop != "end_turn" {
		t.Errorf("prompt after bad input: %q %v", stop, err)
	}
}

// TestPlanModeUpdateAndRememberedRejection: update_plan becomes a plan
// update; a mode set through the config option is confirmed with
// current_mode_update; reject_always is remembered, so the same change is
// refused next time without asking.
func TestPlanModeUpdateAndRememberedRejection(t *testing.T) {
	write := `{"name": "write_file", "arguments": {"path": "notes.txt", "content": "hello\n"}}`
	script := writeScript(t,
		`{"text": "Planning.", "tool_calls": [{"name": "update_plan", "arguments": {"steps": [{"description": "Write notes", "files_involved": ["notes.txt"], "status": "in_progress"}, {"description": "Report", "status": "pending"}]}}, `+write+`]}`,
		`{"text": "first: {{ get (get (.Result \"write_file\") \"patch\") \"status\" }}"}`,
		`{"text": "Again.", "tool_calls": [`+write+`]}`,
		`{"text": "second: {{ get (get (.Result \"write_file\") \"patch\") \"status\" }}"}`)
	root := t.TempDir()
	testtree.Write(t, root, calcFiles)
	var mu sync.Mutex
	asked := 0
	e := newEnv(t, root, t.TempDir(), script, func(method string, _ json.RawMessage) (any, *acptest.RPCError) {
		mu.Lock()
		defer mu.Unlock()
		asked++
		return map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": "reject_always"}}, nil
	}, acp.Options{})
	e.initialize(t, map[string]any{})
	sid := e.newSession(t)
	e.call(t, "session/set_config_option", map[string]any{"sessionId": sid, "configId": "mode", "value": "ask"}, nil)
	if stop, err := e.prompt(t, sid, "Write notes"); err != nil || stop != "end_turn" {
		t.Fatalf("%q %v", stop, err)
	}
	if stop, err := e.prompt(t, sid, "Write notes again"); err != nil || stop != "end_turn" {
		t.Fatalf("%q %v", stop, err)
	}
	ups := e.client.Updates()
	var plans, modes []map[string]any
	for _, u := range ups {
		var m map[string]any
		json.Unmarshal(u.Update, &m)
		switch u.Kind() {
		case "plan":
			plans = append(plans, m)
		case "current_mode_update":
			modes = append(modes, m)
		}
	}
	if len(modes) != 1 || modes[0]["currentModeId"] != "ask" {
		t.Errorf("mode updates %v", modes)
	}
	if len(plans) != 1 {
		t.Fatalf("plans %v", plans)
	}
	entries := plans[0]["entries"].([]any)
	first := entries[0].(map[string]any)
	if len(entries) != 2 || first["content"] != "Write notes (notes.txt)" || first["status"] != "in_progress" || first["priority"] != "medium" ||
		entries[1].(map[string]any)["status"] != "pending" {
		t.Errorf("plan entries %v", entries)
	}
	_, calls := toolCalls(ups)
	kinds := map[string]int{}
	for _, c := range calls {
		kinds[c.Kind]++
	}
	if kinds["think"] != 1 || kinds["edit"] != 2 {
		t.Errorf("tool call kinds %v", kinds)
	}
	got := text(ups, "agent_message_chunk")
	if !strings.Contains(got, "first: rejected") || !strings.Contains(got, "second: rejected") {
		t.Errorf("text %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if asked != 1 {
		t.Errorf("asked %d times; reject_always should have been remembered", asked)
	}
	if _, err := os.Stat(filepath.Join(root, "notes.txt")); err == nil {
		t.Error("notes.txt was written")
	}
}

// TestConcurrentSessions runs prompts in four sessions of one connection
// at once: each answers end_turn and gets exactly its own updates.
func TestConcurrentSessions(t *testing.T) {
	root := t.TempDir()
	testtree.Write(t, root, calcFiles)
	e := newEnv(t, root, t.TempDir(), writeScript(t,
		`{"text": "Reading.", "tool_calls": [{"name": "read_file", "arguments": {"path": "calc.go"}}]}`,
		`{"text": "calc.go has {{ get (.Result \"read_file\") \"total_lines\" }} lines.", "delay_ms": 5}`), nil, acp.Options{})
	e.initialize(t, map[string]any{})
	const n = 4
	sids := make([]string, n)
	for i := range sids {
		sids[i] = e.newSession(t)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for _, sid := range sids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.client.Call(ctxT(t), "session/prompt", map[string]any{"sessionId": sid,
				"prompt": []any{map[string]any{"type": "text", "text": "How long is calc.go?"}}})
			if err != nil || !strings.Contains(string(res), "end_turn") {
				errs <- fmt.Errorf("%s: %s %v", sid, res, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	per := map[string][]acptest.Update{}
	for _, u := range e.client.Updates() {
		per[u.SessionID] = append(per[u.SessionID], u)
	}
	for _, sid := range sids {
		if got := text(per[sid], "agent_message_chunk"); got != "Reading.calc.go has 7 lines." {
			t.Errorf("session %s text %q", sid, got)
		}
		order, calls := toolCalls(per[sid])
		if len(order) != 1 || calls[order[0]].Status != "completed" {
			t.Errorf("session %s tool calls %v", sid, order)
		}
	}
}

// TestPermissionCancelledOutcome: a client that cancels the turn answers
// its pending permission request "cancelled" (as ACP requires); the
// prompt then answers cancelled, nothing is written, and the edit's tool
// call ends failed.
func TestPermissionCancelledOutcome(t *testing.T) {
	root := t.TempDir()
	testtree.Write(t, root, calcFiles)
	e := newEnv(t, root, t.TempDir(), writeScript(t, editScript[1:]...), func(method string, _ json.RawMessage) (any, *acptest.RPCError) {
		return map[string]any{"outcome": map[string]any{"outcome": "cancelled"}}, nil
	}, acp.Options{})
	e.initialize(t, map[string]any{})
	sid := e.newSession(t)
	if stop, err := e.prompt(t, sid, "Fix Add"); err != nil || stop != "cancelled" {
		t.Fatalf("%q %v", stop, err)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "calc.go")); string(got) != calcFiles["calc.go"] {
		t.Errorf("calc.go changed:\n%s", got)
	}
	order, calls := toolCalls(e.client.Updates())
	if len(order) != 2 {
		t.Fatalf("tool calls %v", order)
	}
	for _, id := range order {
		if calls[id].Status != "failed" {
			t.Errorf("%s ended %q", calls[id].Title, calls[id].Status)
		}
	}
}

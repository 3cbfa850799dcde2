package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/plexus-agent/plexus/internal/acptest"
	"github.com/plexus-agent/plexus/internal/ollamatest"
)

// acpPlexus is `plexus serve --transport acp` in a fresh calc workspace
// with a replay script, and a validating ACP client (internal/acptest)
// on its stdio.
type acpPlexus struct {
	p     *plexusProc
	c     *acptest.Client
	stdin interface{ Close() error }
	ws    string
}

func startACP(t *testing.T, ws, script, dataDir string, handle acptest.Handler, extra ...string) *acpPlexus {
	t.Helper()
	a := &acpPlexus{p: &plexusProc{ws: ws, script: script, dataDir: dataDir, pluginDir: t.TempDir()}, ws: ws}
	in, out := a.p.start(t, "acp", nil, extra...)
	a.stdin = in
	a.c = acptest.NewClient(out, in, handle)
	t.Cleanup(func() {
		if v := a.c.Violations(); len(v) > 0 {
			t.Errorf("plexus sent %d messages ACP does not allow:\n%s", len(v), strings.Join(v, "\n"))
		}
	})
	return a
}

func (a *acpPlexus) call(t *testing.T, method string, params, out any) {
	t.Helper()
	res, err := a.c.Call(driverCtx(t), method, params)
	if err != nil {
		t.Fatalf("%s: %v\nstderr:\n%s", method, err, a.p.stderrText())
	}
	if out != nil {
		if err := json.Unmarshal(res, out); err != nil {
			t.Fatalf("%s: %v: %s", method, err, res)
		}
	}
}

func (a *acpPlexus) open(t *testing.T, caps map[string]any, mcpServers []any) string {
	t.Helper()
	a.call(t, "initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": caps}, nil)
	var s struct {
		SessionID string `json:"sessionId"`
	}
	a.call(t, "session/new", map[string]any{"cwd": a.ws, "mcpServers": mcpServers}, &s)
	return s.SessionID
}

func (a *acpPlexus) prompt(t *testing.T, sid, text string) string {
	t.Helper()
	var r struct {
		StopReason string `json:"stopReason"`
	}
	a.call(t, "session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": text}}}, &r)
	return r.StopReason
}

// updates returns the updates of one kind, decoded.
func (a *acpPlexus) updates(kind string) []map[string]any {
	var out []map[string]any
	for _, u := range a.c.Updates() {
		if u.Kind() == kind {
			var m map[string]any
			json.Unmarshal(u.Update, &m)
			out = append(out, m)
		}
	}
	return out
}

func (a *acpPlexus) agentText() string {
	var b strings.Builder
	for _, u := range a.updates("agent_message_chunk") {
		b.WriteString(mapOf(u["content"])["text"].(string))
	}
	return b.String()
}

func calcWorkspace(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	for name, content := range scenarioWorkspace {
		writeFile(t, filepath.Join(ws, name), content)
	}
	return ws
}

func scriptFile(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "script.jsonl")
	writeFile(t, p, strings.Join(lines, "\n")+"\n")
	return p
}

// TestACPSessionMCPServers passes an MCP server (a stdio server built from
// plugins/mcp/internal/noopserver) in session/new under a display name;
// its tool is offered to the model as SERVER__TOOL, called, and shown as
// a completed tool call.
func TestACPSessionMCPServers(t *testing.T) {
	server := filepath.Join(t.TempDir(), "noopserver")
	if out, err := exec.Command("go", "build", "-o", server, "../../plugins/mcp/internal/noopserver").CombinedOutput(); err != nil {
		t.Fatalf("build noopserver: %v\n%s", err, out)
	}
	script := scriptFile(t,
		`{"text": "Calling the editor's server.", "tool_calls": [{"name": "no-op-server__noop", "arguments": {}}]}`,
		`{"text": "It said {{ get (.Result \"no-op-server__noop\") \"text\" }}."}`)
	a := startACP(t, calcWorkspace(t), script, t.TempDir(), nil)
	sid := a.open(t, map[string]any{}, []any{map[string]any{"name": "No-op Server", "command": server, "args": []any{}, "env": []any{}}})
	if stop := a.prompt(t, sid, "Use the server"); stop != "end_turn" {
		t.Fatalf("stop %q", stop)
	}
	if got := a.agentText(); !strings.HasSuffix(got, "It said ok.") {
		t.Errorf("text %q", got)
	}
	calls := a.updates("tool_call")
	if len(calls) != 1 || mapOf(calls[0]["_meta"])["tool_name"] != "no-op-server__noop" {
		t.Fatalf("tool calls %v", calls)
	}
	last := ""
	for _, u := range a.updates("tool_call_update") {
		if s, _ := u["status"].(string); s != "" {
			last = s
		}
	}
	if last != "completed" {
		t.Errorf("the MCP call ended %q", last)
	}
	// A server of an unsupported transport is refused, naming it.
	_, err := a.c.Call(driverCtx(t), "session/new", map[string]any{"cwd": a.ws, "mcpServers": []any{
		map[string]any{"type": "sse", "name": "old", "url": "http://127.0.0.1:1/sse", "headers": []any{}}}})
	if re, ok := err.(*acptest.RPCError); !ok || re.Code != -32602 || !strings.Contains(re.Message, "SSE") {
		t.Errorf("sse server: %v", err)
	}
}

// TestACPClientTerminal runs a command in the client's terminal: the
// workspace policy runs commands in the local terminal, the client offers
// terminal/*, and answers the permission with allow_always, so the same
// command runs again without asking.
func TestACPClientTerminal(t *testing.T) {
	ws := calcWorkspace(t)
	dataDir := t.TempDir()
	policy := filepath.Join(t.TempDir(), "policy.json")
	writeFile(t, policy, `{"version": 1, "commands": {"mode": "local_terminal"}, "rules": []}`)
	if r := plexus(t, ws, "", []string{"PLEXUS_DATA_DIR=" + dataDir}, "policy", "set", "-w", ws, policy); r.code != 0 {
		t.Fatalf("policy set: %d %s", r.code, r.stderr)
	}
	script := scriptFile(t,
		`{"text": "Running it.", "tool_calls": [{"name": "run_command", "arguments": {"command": "echo from-the-terminal"}}]}`,
		`{"text": "exit {{ get (.Result \"run_command\") \"exit_code\" }}: {{ get (.Result \"run_command\") \"stdout\" }}"}`,
		`{"text": "Again.", "tool_calls": [{"name": "run_command", "arguments": {"command": "echo from-the-terminal"}}]}`,
		`{"text": "exit {{ get (.Result \"run_command\") \"exit_code\" }} again"}`)

	var mu sync.Mutex
	var methods []string
	type term struct {
		out  string
		code int
	}
	terms := map[string]*term{}
	asked := 0
	handle := func(method string, params json.RawMessage) (any, *acptest.RPCError) {
		var p map[string]any
		json.Unmarshal(params, &p)
		mu.Lock()
		defer mu.Unlock()
		methods = append(methods, method)
		switch method {
		case "session/request_permission":
			asked++
			return map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": "allow_always"}}, nil
		case "terminal/create":
			args := []string{}
			for _, a := range p["args"].([]any) {
				args = append(args, a.(string))
			}
			cmd := exec.Command(p["command"].(string), args...)
			cmd.Dir, _ = p["cwd"].(string)
			out, err := cmd.CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			id := "term-" + string(rune('a'+len(terms)))
			terms[id] = &term{out: string(out), code: code}
			return map[string]any{"terminalId": id}, nil
		case "terminal/wait_for_exit":
			return map[string]any{"exitCode": terms[p["terminalId"].(string)].code}, nil
		case "terminal/output":
			tm := terms[p["terminalId"].(string)]
			return map[string]any{"output": tm.out, "truncated": false, "exitStatus": map[string]any{"exitCode": tm.code}}, nil
		case "terminal/release", "terminal/kill":
			return map[string]any{}, nil
		}
		return nil, &acptest.RPCError{Code: -32601, Message: method}
	}
	a := startACP(t, ws, script, dataDir, handle)
	sid := a.open(t, map[string]any{"terminal": true}, []any{})
	if stop := a.prompt(t, sid, "Run it"); stop != "end_turn" {
		t.Fatalf("stop %q", stop)
	}
	if got := a.agentText(); !strings.Contains(got, "exit 0: from-the-terminal") {
		t.Errorf("text %q", got)
	}
	if stop := a.prompt(t, sid, "Run it again"); stop != "end_turn" {
		t.Fatalf("stop %q", stop)
	}
	mu.Lock()
	defer mu.Unlock()
	if asked != 1 {
		t.Errorf("asked %d times; allow_always should have been remembered", asked)
	}
	want := "session/request_permission terminal/create terminal/wait_for_exit terminal/output terminal/release terminal/create terminal/wait_for_exit terminal/output terminal/release"
	if got := strings.Join(methods, " "); got != want {
		t.Errorf("client methods\n got %s\nwant %s", got, want)
	}
	// The tool call shows the terminal.
	shown := false
	for _, u := range a.updates("tool_call_update") {
		for _, c := range anySlice(u["content"]) {
			if mapOf(c)["type"] == "terminal" {
				shown = true
			}
		}
	}
	if !shown {
		t.Error("no tool call showed the terminal")
	}
	// The remembered rule is in the workspace policy.
	a.stdin.Close()
	a.p.stop()
	if r := plexus(t, ws, "", []string{"PLEXUS_DATA_DIR=" + dataDir}, "policy", "show", "-w", ws); !strings.Contains(r.stdout, "echo from-the-terminal") {
		t.Errorf("policy after allow_always:\n%s", r.stdout)
	}
}

func anySlice(v any) []any { s, _ := v.([]any); return s }

// TestACPResumeAndClose: after a restart session/resume continues a
// session without replaying it; session/close ends it on the connection.
func TestACPResumeAndClose(t *testing.T) {
	ws, dataDir := calcWorkspace(t), t.TempDir()
	script := scriptFile(t, `{"text": "First."}`, `{"text": "Second, after {{ .Step }} answer."}`)
	a := startACP(t, ws, script, dataDir, nil)
	sid := a.open(t, map[string]any{}, []any{})
	a.prompt(t, sid, "one")
	a.stdin.Close()
	a.p.stop()

	b := startACP(t, ws, script, dataDir, nil)
	b.call(t, "initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}}, nil)
	var list struct {
		Sessions []map[string]any `json:"sessions"`
	}
	b.call(t, "session/list", map[string]any{}, &list)
	if len(list.Sessions) != 1 || list.Sessions[0]["sessionId"] != sid || list.Sessions[0]["cwd"] != a.p.ws {
		t.Errorf("session/list %v", list)
	}
	b.call(t, "session/resume", map[string]any{"sessionId": sid, "cwd": ws, "mcpServers": []any{}}, nil)
	if n := len(b.updates("user_message_chunk")); n != 0 {
		t.Errorf("session/resume replayed %d user messages", n)
	}
	if stop := b.prompt(t, sid, "two"); stop != "end_turn" || b.agentText() != "Second, after 1 answer." {
		t.Errorf("after resume: %q %q", stop, b.agentText())
	}
	b.call(t, "session/close", map[string]any{"sessionId": sid}, nil)
	_, err := b.c.Call(driverCtx(t), "session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": "three"}}})
	if re, ok := err.(*acptest.RPCError); !ok || re.Code != -32002 {
		t.Errorf("prompt after close: %v", err)
	}
	// Loading it in another directory is refused.
	_, err = b.c.Call(driverCtx(t), "session/load", map[string]any{"sessionId": sid, "cwd": t.TempDir(), "mcpServers": []any{}})
	if re, ok := err.(*acptest.RPCError); !ok || re.Code != -32602 {
		t.Errorf("load in another cwd: %v", err)
	}
}

// TestACPLiveOllamaUsage runs a turn with the real Ollama server of the
// tests: the answer streams and usage_update reports the tokens the
// provider counted against the model's context window.
func TestACPLiveOllamaUsage(t *testing.T) {
	srv := ollamatest.Shared(t)
	a := startACP(t, calcWorkspace(t), scriptFile(t, `{"text": "unused"}`), t.TempDir(), nil,
		"--ollama-host", srv.URL, "--model", "ollama:"+srv.ToolsModel, "--embed-model", "none")
	sid := a.open(t, map[string]any{}, []any{})
	if stop := a.prompt(t, sid, "Say hello"); stop != "end_turn" {
		t.Fatalf("stop %q\n%s", stop, a.p.stderrText())
	}
	if strings.TrimSpace(a.agentText()) == "" {
		t.Error("no answer streamed")
	}
	usage := a.updates("usage_update")
	if len(usage) != 1 {
		t.Fatalf("usage updates %v", usage)
	}
	if used, size := usage[0]["used"].(float64), usage[0]["size"].(float64); used <= 0 || size != float64(ollamatest.ContextLength) {
		t.Errorf("usage %v (window %d)", usage[0], ollamatest.ContextLength)
	}
	// The model option lists the server's models.
	var opts struct {
		ConfigOptions []map[string]any `json:"configOptions"`
	}
	a.call(t, "session/set_config_option", map[string]any{"sessionId": sid, "configId": "mode", "value": "ask"}, &opts)
	if len(opts.ConfigOptions) != 2 || opts.ConfigOptions[1]["currentValue"] != "ollama:"+srv.ToolsModel {
		t.Errorf("config options %v", opts.ConfigOptions)
	}
}

// TestACPKilledMidTurnThenLoaded kills plexus (SIGKILL) while a turn
// streams after a tool call, starts it again and loads the session: the
// replay has the interrupted turn, every tool call in it ended, and the
// session takes the next prompt.
func TestACPKilledMidTurnThenLoaded(t *testing.T) {
	ws, dataDir := calcWorkspace(t), t.TempDir()
	script := scriptFile(t,
		`{"text": "Reading first.", "tool_calls": [{"name": "read_file", "arguments": {"path": "calc.go"}}]}`,
		`{"text": "`+countToForty+`", "delay_ms": 50}`)
	a := startACP(t, ws, script, dataDir, nil)
	sid := a.open(t, map[string]any{}, []any{})
	if _, err := a.c.Start("session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": "Read and count"}}}); err != nil {
		t.Fatal(err)
	}
	if err := a.c.WaitFor(driverCtx(t), func() bool { return strings.Contains(a.agentText(), "three") }); err != nil {
		t.Fatal(err)
	}
	a.p.mu.Lock()
	a.p.cmd.Process.Kill()
	a.p.mu.Unlock()
	a.p.stop()

	b := startACP(t, ws, script, dataDir, nil)
	b.call(t, "initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}}, nil)
	b.call(t, "session/load", map[string]any{"sessionId": sid, "cwd": ws, "mcpServers": []any{}}, nil)
	users := b.updates("user_message_chunk")
	if len(users) != 1 || !strings.HasPrefix(mapOf(users[0]["content"])["text"].(string), "Read and count") {
		t.Errorf("replayed user messages %v", users)
	}
	status := map[string]string{}
	for _, u := range append(b.updates("tool_call"), b.updates("tool_call_update")...) {
		if s, _ := u["status"].(string); s != "" {
			status[u["toolCallId"].(string)] = s
		}
	}
	if len(status) != 1 {
		t.Errorf("replayed tool calls %v", status)
	}
	for id, s := range status {
		if s != "completed" && s != "failed" {
			t.Errorf("replayed tool call %s ended %q", id, s)
		}
	}
	if !strings.Contains(b.agentText(), "Reading first.") {
		t.Errorf("replayed text %q", b.agentText())
	}
	// The interrupted turn kept no answer: the next prompt plays the
	// counting line again, to its end.
	if stop := b.prompt(t, sid, "Count again"); stop != "end_turn" || !strings.HasSuffix(b.agentText(), "forty") {
		t.Errorf("after the load: %q %q", stop, b.agentText())
	}
}

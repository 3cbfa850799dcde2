package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// mcpConfig writes an MCP config naming the npm servers of
// plugins/mcp/testdata/npm, run with node: server-filesystem as "fs" on
// ws, server-everything as "every". It skips the test (fails it with
// PLEXUS_REQUIRE_NODE=1) when node or the npm install is missing.
func mcpConfig(t *testing.T, ws string) string {
	t.Helper()
	modules := filepath.Join(repoRoot, "plugins", "mcp", "testdata", "npm", "node_modules", "@modelcontextprotocol")
	node, err := exec.LookPath("node")
	missing := ""
	if err != nil {
		missing = "node is not on PATH"
	} else if _, err := os.Stat(filepath.Join(modules, "server-filesystem")); err != nil {
		missing = "plugins/mcp/testdata/npm/node_modules is missing (run npm ci --prefix plugins/mcp/testdata/npm)"
	}
	if missing != "" {
		if os.Getenv(requireNodeEnv) == "1" {
			t.Fatalf("%s, and %s=1", missing, requireNodeEnv)
		}
		t.Skipf("%s; set %s=1 to make this a failure", missing, requireNodeEnv)
	}
	cfg := map[string]any{"mcpServers": map[string]any{
		"fs":    map[string]any{"command": node, "args": []string{filepath.Join(modules, "server-filesystem", "dist", "index.js"), ws}},
		"every": map[string]any{"command": node, "args": []string{filepath.Join(modules, "server-everything", "dist", "index.js")}, "timeout": "30s"},
	}}
	b, _ := json.Marshal(cfg)
	path := filepath.Join(t.TempDir(), "mcp.json")
	writeFile(t, path, string(b))
	return path
}

// mcpScript is two turns. The first calls server-filesystem's
// read_text_file and server-everything's get-sum (read-only: no
// approval), then server-filesystem's write_file (approval, answered yes),
// then answers with text from the results. The second calls write_file
// again (approval, answered no) and reports the error code it got.
const mcpScript = `{"text": "Reading first.", "tool_calls": [{"name": "fs__read_text_file", "arguments": {"path": "notes.txt"}}, {"name": "every__get-sum", "arguments": {"a": 19, "b": 23}}]}
{"tool_calls": [{"name": "fs__write_file", "arguments": {"path": "answer.txt", "content": "The answer is 42.\n"}}]}
{"text": "{{ get (.Result \"every__get-sum\") \"text\" }} notes.txt says: {{ get (.Result \"fs__read_text_file\") \"text\" }}; wrote: {{ get (.Result \"fs__write_file\") \"text\" }}"}
{"tool_calls": [{"name": "fs__write_file", "arguments": {"path": "denied.txt", "content": "no"}}]}
{"text": "Not written: {{ get (.Result \"fs__write_file\") \"code\" }}"}
`

// TestReplayTurnWithMCPServers is the done-when of MCP servers as tool
// sources: a replay turn served over the Unix socket calls a tool of
// server-filesystem and one of server-everything through the engine, and
// server-filesystem's write_file only after an approval the client
// answers; a second turn's write is denied and not made.
func TestReplayTurnWithMCPServers(t *testing.T) {
	ws := t.TempDir()
	writeFile(t, filepath.Join(ws, "notes.txt"), "remember the milk\n")
	script := filepath.Join(t.TempDir(), "mcp.jsonl")
	writeFile(t, script, mcpScript)
	u := startUnix(t, "-w", ws, "--model", "replay:"+script, "--mcp-config", mcpConfig(t, ws))

	// query runs one agent.query, answering each approval with approve,
	// and returns the approval requests and completed tools (by name, in
	// order) and the answer.
	id := 10
	query := func(approve bool) (approvals []map[string]any, completed []string, answer string) {
		t.Helper()
		id++
		u.enc.Encode(map[string]any{"jsonrpc": "2.0", "id": id, "method": "agent.query", "params": map[string]any{"message": "Use the MCP tools"}})
		var statuses, all []string
		for {
			m := u.read()
			method, _ := m["method"].(string)
			p, _ := m["params"].(map[string]any)
			all = append(all, fmt.Sprint(m))
			switch method {
			case "tool.request_approval":
				approvals = append(approvals, p)
				id++
				u.enc.Encode(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tool.approve", "params": map[string]any{
					"execution_id": p["execution_id"], "approved": approve}})
			case "tool.complete":
				statuses = append(statuses, fmt.Sprint(p["status"]))
			case "stream.tokens":
				for _, tok := range p["tokens"].([]any) {
					answer += fmt.Sprint(tok.(map[string]any)["token"])
				}
			case "stream.complete":
				if p["status"] != "success" {
					t.Fatalf("stream.complete %v\n%s", p, strings.Join(all, "\n"))
				}
				tools, _ := p["metadata"].(map[string]any)["tools_executed"].([]any)
				for i, name := range tools {
					if i < len(statuses) {
						completed = append(completed, fmt.Sprintf("%s:%s", name, statuses[i]))
					}
				}
				if len(tools) != len(statuses) {
					t.Errorf("tools executed %v, statuses %v", tools, statuses)
				}
				return approvals, completed, answer
			}
		}
	}

	approvals, completed, answer := query(true)
	if len(approvals) != 1 {
		t.Fatalf("%d approval requests, want 1 (write_file only): %v", len(approvals), approvals)
	}
	if b, _ := json.Marshal(approvals[0]); !strings.Contains(string(b), "fs__write_file") || !strings.Contains(string(b), "answer.txt") {
		t.Errorf("approval request %s does not name fs__write_file and its path", b)
	}
	want := []string{"fs__read_text_file:success", "every__get-sum:success", "fs__write_file:success"}
	if strings.Join(completed, " ") != strings.Join(want, " ") {
		t.Errorf("completed tools %v, want %v", completed, want)
	}
	if data, err := os.ReadFile(filepath.Join(ws, "answer.txt")); err != nil || string(data) != "The answer is 42.\n" {
		t.Errorf("answer.txt: %q %v", data, err)
	}
	if !strings.Contains(answer, "The sum of 19 and 23 is 42.") {
		t.Errorf("answer %q lacks the sum", answer)
	}
	if !strings.Contains(answer, "notes.txt says: remember the milk") || !strings.Contains(answer, "wrote: Successfully wrote to answer.txt") {
		t.Errorf("answer %q", answer)
	}

	approvals, completed, answer = query(false)
	if len(approvals) != 1 || strings.Join(completed, " ") != "fs__write_file:denied" {
		t.Errorf("second turn: approvals %v, completed %v", approvals, completed)
	}
	if _, err := os.Stat(filepath.Join(ws, "denied.txt")); !os.IsNotExist(err) {
		t.Errorf("a denied write was made: %v", err)
	}
	if !strings.Contains(answer, "Not written: permission_denied") {
		t.Errorf("answer %q", answer)
	}
}

// TestPluginsListsMCPServers: plexus plugins lists each MCP server with
// its transport, command and tools, and a server that cannot start with
// its error, without hiding the others.
func TestPluginsListsMCPServers(t *testing.T) {
	ws := t.TempDir()
	cfgPath := mcpConfig(t, ws)
	var cfg map[string]map[string]any
	b, _ := os.ReadFile(cfgPath)
	json.Unmarshal(b, &cfg)
	cfg["mcpServers"]["gone"] = map[string]any{"command": "plexus-no-such-mcp-server"}
	b, _ = json.Marshal(cfg)
	writeFile(t, cfgPath, string(b))

	r := plexus(t, ws, "", []string{"PLEXUS_MCP_CONFIG=" + cfgPath}, "plugins")
	if r.code != 1 {
		t.Errorf("exit %d, want 1 (one server failed)\n%s", r.code, r.stderr)
	}
	// The node servers stopped with plexus (server-filesystem's argv
	// holds ws).
	for pid, argv := range processes(mustLookPath(t, "node")) {
		if strings.Contains(strings.Join(argv, " "), ws) {
			t.Errorf("MCP server process %d left behind: %v", pid, argv)
		}
	}
	for _, want := range []string{
		"mcp    every", "stdio: ", "server-everything/dist/index.js", "every__get-sum, ",
		"mcp    fs      secure-filesystem-server ", "mcp    every   mcp-servers/everything ", "fs__write_file (approval)", "fs__read_text_file, ",
		`mcp    gone`, `FAILED: start MCP server "gone" (stdio plexus-no-such-mcp-server): command "plexus-no-such-mcp-server" not found`,
		"tool   fs", "read_file, list_files",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("plexus plugins lacks %q:\n%s", want, r.stdout)
		}
	}

	// A config error names the file and field; a missing default file is
	// no error.
	writeFile(t, cfgPath, `{"mcpServers": {"x": {"command": "a", "url": "http://h/mcp"}}}`)
	r = plexus(t, ws, "", nil, "--mcp-config", cfgPath, "plugins")
	if r.code != 2 || !strings.Contains(r.stderr, "--mcp-config: "+cfgPath+`: mcpServers.x: has both "command" (stdio) and "url" (HTTP)`) {
		t.Errorf("bad config: exit %d\n%s", r.code, r.stderr)
	}
	r = plexus(t, ws, "", nil, "plugins")
	if r.code != 0 || strings.Contains(r.stdout, "mcp ") {
		t.Errorf("no config: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func mustLookPath(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

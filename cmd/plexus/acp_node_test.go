package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/internal/acpschema"
)

// TestServeACPNodeSDK runs examples/clients/acp-node/edit-session.mjs, an
// editor-like client on the npm @agentclientprotocol/sdk (2.x, its stable
// v1 client API), against the real binary on a copy of spf13/cobra with
// the replay script examples/replay/acp-session.jsonl: initialize and
// session/new; a prompt that streams text, reads files and proposes two
// edits, whose two permission requests are answered allow_once and
// reject_once; a prompt cancelled mid-stream; a restart and session/load;
// a malformed line and a last prompt. Every session/update is validated
// against the ACP v1 schema, and `plexus undo` takes the change back.
func TestServeACPNodeSDK(t *testing.T) {
	exampleDir, node := nodeExample(t, "acp-node", "@agentclientprotocol/sdk")
	ws, orig := cobraCopy(t)
	dataDir := t.TempDir()
	script := filepath.Join(repoRoot, "examples", "replay", "acp-session.jsonl")
	env := append(os.Environ(), "PLEXUS_BIN="+plexusBin, "PLEXUS_PLUGIN_PATH="+t.TempDir(), "PLEXUS_DATA_DIR="+dataDir,
		"PLEXUS_MODEL=", "PLEXUS_LOG_LEVEL=", "OLLAMA_HOST=", "OPENAI_BASE_URL=", "OPENAI_API_KEY=")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const prompt = "Document PositionalArgs and test NoArgs with two arguments"
	cmd := exec.CommandContext(ctx, node, "edit-session.mjs", "--cwd", ws, "--allow", "args.go",
		"--prompt", prompt, "--cancel-prompt", "Count to twenty", "--last-prompt", "Count again",
		"--", "--model", "replay:"+script)
	cmd.Dir, cmd.Env = exampleDir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	t.Cleanup(func() { noProcessesLeft(t, plexusBin) })

	var out struct {
		Initialize map[string]any `json:"initialize"`
		SessionID  string         `json:"sessionId"`
		Updates    []struct {
			Phase        string          `json:"phase"`
			Notification json.RawMessage `json:"notification"`
		} `json:"updates"`
		Permissions []struct {
			Phase    string         `json:"phase"`
			ToolCall map[string]any `json:"toolCall"`
			Answer   string         `json:"answer"`
		} `json:"permissions"`
		Reads          []string         `json:"reads"`
		Writes         []string         `json:"writes"`
		Stops          []map[string]any `json:"stops"`
		ExitCodes      []any            `json:"exitCodes"`
		Errors         []string         `json:"errors"`
		MalformedError map[string]any   `json:"malformedError"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &out); err != nil || runErr != nil {
		t.Fatalf("edit-session.mjs: %v %v\nstdout:\n%.4000s\nstderr:\n%s", runErr, err, stdout.String(), stderr.String())
	}
	defer func() {
		if t.Failed() {
			t.Logf("edit-session.mjs stderr:\n%s", stderr.String())
		}
	}()
	if len(out.Errors) > 0 {
		t.Errorf("client errors: %v", out.Errors)
	}
	var stops []string
	for _, s := range out.Stops {
		stops = append(stops, s["stopReason"].(string))
	}
	if strings.Join(stops, " ") != "end_turn cancelled end_turn" {
		t.Errorf("stop reasons %v", stops)
	}
	if len(out.ExitCodes) != 2 || out.ExitCodes[0] != float64(0) || out.ExitCodes[1] != float64(0) {
		t.Errorf("plexus exit codes %v", out.ExitCodes)
	}

	// Every update validates; fold the prompt's tool calls.
	type call struct {
		kind, title, status string
		locations           []any
		content             []any
	}
	calls := map[string]*call{}
	var callOrder []string
	texts := map[string]string{}
	var users []string
	for i, u := range out.Updates {
		if err := acpschema.Validate("SessionNotification", u.Notification); err != nil {
			t.Errorf("update %d (%s) does not validate: %v\n%s", i, u.Phase, err, u.Notification)
		}
		var n struct {
			SessionID string         `json:"sessionId"`
			Update    map[string]any `json:"update"`
		}
		json.Unmarshal(u.Notification, &n)
		if n.SessionID != out.SessionID {
			t.Errorf("update %d is for session %q", i, n.SessionID)
		}
		up := n.Update
		switch up["sessionUpdate"] {
		case "agent_message_chunk":
			texts[u.Phase] += up["content"].(map[string]any)["text"].(string)
		case "user_message_chunk":
			users = append(users, up["content"].(map[string]any)["text"].(string))
		case "tool_call":
			if u.Phase != "prompt" {
				continue
			}
			id := up["toolCallId"].(string)
			c := &call{kind: str(up["kind"]), title: str(up["title"]), status: str(up["status"])}
			c.locations, _ = up["locations"].([]any)
			calls[id] = c
			callOrder = append(callOrder, id)
		case "tool_call_update":
			c := calls[str(up["toolCallId"])]
			if u.Phase != "prompt" || c == nil {
				continue
			}
			if s := str(up["status"]); s != "" {
				c.status = s
			}
			if l, ok := up["locations"].([]any); ok {
				c.locations = l
			}
			if cn, ok := up["content"].([]any); ok {
				c.content = cn
			}
		}
	}
	if len(callOrder) != 4 {
		t.Fatalf("tool calls of the prompt: %v", callOrder)
	}
	for _, id := range callOrder {
		if c := calls[id]; c.status != "completed" && c.status != "failed" {
			t.Errorf("tool call %s (%s) left %q", id, c.title, c.status)
		}
	}
	read, search, docEdit, testEdit := calls[callOrder[0]], calls[callOrder[1]], calls[callOrder[2]], calls[callOrder[3]]
	if read.kind != "read" || read.title != "Read args.go (lines 1-40)" || read.status != "completed" || len(read.locations) != 1 ||
		read.locations[0].(map[string]any)["path"] != filepath.Join(ws, "args.go") || read.locations[0].(map[string]any)["line"] != float64(1) {
		t.Errorf("read call %+v", read)
	}
	if search.kind != "search" || search.status != "completed" || len(search.locations) < 2 {
		t.Errorf("search call %+v", search)
	}
	if docEdit.kind != "edit" || docEdit.title != "Edit args.go" || docEdit.status != "completed" ||
		testEdit.title != "Edit args_test.go" || testEdit.status != "failed" {
		t.Errorf("edit calls %+v\n%+v", docEdit, testEdit)
	}
	if len(docEdit.content) == 0 || docEdit.content[0].(map[string]any)["type"] != "diff" {
		t.Errorf("edit content %v", docEdit.content)
	}
	if want := "Applied to args.go; args_test.go stayed as it was"; !strings.Contains(texts["prompt"], want) {
		t.Errorf("prompt text lacks %q:\n%s", want, texts["prompt"])
	}
	if !strings.HasPrefix(texts["cancel"], "Counting") || strings.Contains(texts["cancel"], "twenty") {
		t.Errorf("the cancelled prompt streamed %q", texts["cancel"])
	}

	// The two permission requests, on the edit calls, with their diffs.
	if len(out.Permissions) != 2 {
		t.Fatalf("permission requests: %+v", out.Permissions)
	}
	for i, want := range []struct{ id, title, answer string }{
		{callOrder[2], "Edit args.go", "allow_once"}, {callOrder[3], "Edit args_test.go", "reject_once"},
	} {
		p := out.Permissions[i]
		if p.ToolCall["toolCallId"] != want.id || p.ToolCall["title"] != want.title || p.Answer != want.answer {
			t.Errorf("permission %d: %v %s", i, p.ToolCall["title"], p.Answer)
		}
		if err := acpschema.ValidateValue("ToolCallUpdate", p.ToolCall); err != nil {
			t.Errorf("permission %d: %v", i, err)
		}
	}

	// Exactly the allowed change is on disk, written by the editor.
	gotArgs, _ := os.ReadFile(filepath.Join(ws, "args.go"))
	origArgs, _ := os.ReadFile(filepath.Join(orig, "args.go"))
	if !bytes.Contains(gotArgs, []byte("// PositionalArgs validates the positional arguments of cmd")) {
		t.Errorf("args.go lacks the doc comment")
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "args_test.go")); !bytes.Equal(got, mustRead(t, filepath.Join(orig, "args_test.go"))) {
		t.Errorf("args_test.go changed")
	}
	if len(out.Writes) != 1 || out.Writes[0] != filepath.Join(ws, "args.go") {
		t.Errorf("fs/write_text_file calls %v", out.Writes)
	}
	if len(out.Reads) == 0 {
		t.Errorf("no fs/read_text_file call")
	}

	// session/load after the restart replayed the conversation.
	if len(users) != 2 || !strings.HasPrefix(users[0], prompt) || !strings.HasPrefix(users[1], "Count to twenty") {
		t.Errorf("replayed user messages %q", users)
	}
	if !strings.Contains(texts["load"], "Applied to args.go") {
		t.Errorf("replayed agent text %q", texts["load"])
	}
	if out.MalformedError["code"] != float64(-32700) {
		t.Errorf("malformed line: %v", out.MalformedError)
	}
	if !strings.Contains(texts["last"], "twenty") {
		t.Errorf("last prompt text %q", texts["last"])
	}

	// Plexus kept the undo record of the editor's write.
	r := plexus(t, ws, "", []string{"PLEXUS_DATA_DIR=" + dataDir}, "undo", "-w", ws)
	if r.code != 0 {
		t.Fatalf("plexus undo: %d\n%s", r.code, r.stderr)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "args.go")); !bytes.Equal(got, origArgs) {
		t.Errorf("args.go after undo differs from the original")
	}
}

func str(v any) string { s, _ := v.(string); return s }

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

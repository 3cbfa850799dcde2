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
)

// lspReadBufferScript is a turn that reads the editor's unsaved buffer of
// calc.go with the host tool read_buffer, then answers citing it.
const lspReadBufferScript = `{"text": "Let me read the editor's buffer of calc.go.", "tool_calls": [{"name": "read_buffer", "arguments": {"path": "calc.go"}}]}
{"text": "The editor holds this unsaved text: {{ get (.Result \"read_buffer\") \"content\" }}"}
`

// TestServeLSPStdioNodeVSCodeJSONRPC runs examples/clients/vscode-jsonrpc/
// run-task.mjs, a client on the npm package vscode-jsonrpc (the library of
// the VS Code extension the contract names), against the real binary:
// it spawns `plexus serve --transport lsp-stdio` as VS Code would, sends
// initialize (declaring read_buffer) and executeTask, answers the
// $/requestToolExecution round trip with the unsaved buffer, both ways the
// contract allows, and shuts plexus down.
func TestServeLSPStdioNodeVSCodeJSONRPC(t *testing.T) {
	exampleDir, node := nodeExample(t, "vscode-jsonrpc", "vscode-jsonrpc")

	const buffer = "func Add(a, b int) int { return a + b } // fixed in the editor, not saved"
	for _, answer := range []string{"toolResponse", "response"} {
		t.Run(answer, func(t *testing.T) {
			ws := t.TempDir()
			writeCalc(t, ws)
			script := filepath.Join(t.TempDir(), "read-buffer.jsonl")
			writeFile(t, script, lspReadBufferScript)

			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, "run-task.mjs",
				"--workspace", ws, "--task-id", "t-1", "--prompt", "What is unsaved in calc.go?",
				"--active-file", "calc.go", "--buffer", buffer, "--answer", answer,
				"--", "--model", "replay:"+script)
			cmd.Dir = exampleDir
			cmd.Env = append(os.Environ(), "PLEXUS_BIN="+plexusBin,
				"PLEXUS_PLUGIN_PATH="+t.TempDir(), "PLEXUS_DATA_DIR="+t.TempDir(), "PLEXUS_MODEL=", "PLEXUS_LOG_LEVEL=",
				"OLLAMA_HOST=", "OPENAI_BASE_URL=", "OPENAI_API_KEY=")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("node run-task.mjs: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
			}
			t.Cleanup(func() { noProcessesLeft(t, plexusBin) })

			var out struct {
				Result struct {
					Status   string         `json:"status"`
					Message  string         `json:"message"`
					Metadata map[string]any `json:"metadata"`
				} `json:"result"`
				PartialText  string `json:"partialText"`
				Thoughts     string `json:"thoughts"`
				ToolRequests []struct {
					ToolCallID string         `json:"toolCallId"`
					ToolName   string         `json:"toolName"`
					ToolInput  map[string]any `json:"toolInput"`
					TaskID     string         `json:"taskId"`
				} `json:"toolRequests"`
				TaskErrors    []any            `json:"taskErrors"`
				LogMessages   []map[string]any `json:"logMessages"`
				StatusUpdates int              `json:"statusUpdates"`
				Notifications map[string]int   `json:"notifications"`
				ExitCode      *int             `json:"exitCode"`
			}
			line := strings.TrimSpace(stdout.String())
			if strings.Count(line, "\n") != 0 || json.Unmarshal([]byte(line), &out) != nil {
				t.Fatalf("run-task.mjs did not print one JSON line:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
			}
			if out.Result.Status != "completed" || out.Result.Message != "The editor holds this unsaved text: "+buffer {
				t.Errorf("result %+v", out.Result)
			}
			if !strings.HasSuffix(out.PartialText, "\n\n"+out.Result.Message) || !strings.HasPrefix(out.PartialText, "Let me read the editor's buffer of calc.go.") {
				t.Errorf("partial text %q", out.PartialText)
			}
			if len(out.ToolRequests) != 1 {
				t.Fatalf("tool requests %+v", out.ToolRequests)
			}
			r := out.ToolRequests[0]
			if r.ToolName != "read_buffer" || r.ToolInput["path"] != "calc.go" || r.TaskID != "t-1" || !strings.HasPrefix(r.ToolCallID, "tc_") {
				t.Errorf("tool request %+v", r)
			}
			if !strings.Contains(out.Thoughts, "Calling read_buffer") || !strings.Contains(out.Thoughts, "read_buffer: answered by the editor") {
				t.Errorf("thoughts %q", out.Thoughts)
			}
			if len(out.TaskErrors) != 0 {
				t.Errorf("task errors %v", out.TaskErrors)
			}
			if out.StatusUpdates == 0 || out.Notifications["$/partialResult"] == 0 || len(out.LogMessages) == 0 {
				t.Errorf("notifications %v, log messages %v", out.Notifications, out.LogMessages)
			}
			if tools, _ := out.Result.Metadata["toolsUsed"].([]any); len(tools) != 1 || tools[0] != "read_buffer" {
				t.Errorf("metadata %v", out.Result.Metadata)
			}
			if out.ExitCode == nil || *out.ExitCode != 0 {
				t.Errorf("plexus exit code %v", out.ExitCode)
			}
			// The file on disk is untouched: the buffer was the editor's.
			if got, _ := os.ReadFile(filepath.Join(ws, "calc.go")); !bytes.Contains(got, []byte("return a - b")) {
				t.Errorf("calc.go changed:\n%s", got)
			}
			if t.Failed() {
				t.Logf("run-task.mjs stderr:\n%s", stderr.String())
			}
		})
	}
}

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPolicyDeniesCommandEvenWithApproveAll sets a workspace policy with
// plexus policy set, then plays a turn whose model runs two commands: one
// the policy denies (it must never run, even under --approve-all: deny
// wins) and one it allows, which runs in the sandbox: it writes inside the
// workspace but not outside. Every decision and the command leave a
// receipt, and plexus receipts verify accepts the log.
func TestPolicyDeniesCommandEvenWithApproveAll(t *testing.T) {
	ws := t.TempDir()
	data := t.TempDir()
	env := []string{"PLEXUS_DATA_DIR=" + data}
	outside := filepath.Join(t.TempDir(), "outside.txt")

	pol := filepath.Join(t.TempDir(), "policy.json")
	writeFile(t, pol, `{
  "version": 1,
  "commands": {"mode": "server_runner", "sandbox": {"network": false}},
  "rules": [
    {"tool": "run_command", "commands": ["touch *"], "action": "deny", "reason": "this project never touches files from the shell"},
    {"tool": "run_command", "commands": ["echo *"], "action": "allow"}
  ]
}`)
	if r := plexus(t, ws, "", env, "policy", "set", pol); r.code != 0 {
		t.Fatalf("policy set exited %d: %s", r.code, r.stderr)
	}
	r := plexus(t, ws, "", env, "policy", "show")
	if r.code != 0 || !strings.Contains(r.stdout, "this project never touches files from the shell") || !strings.Contains(r.stdout, `"server_runner"`) {
		t.Fatalf("policy show exited %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A bad document is refused with its field named, and the old one
	// stays.
	bad := filepath.Join(t.TempDir(), "bad.json")
	writeFile(t, bad, `{"version": 1, "rules": [{"tool": "run_command", "commands": ["touch *"], "action": "block"}]}`)
	if r := plexus(t, ws, "", env, "policy", "set", bad); r.code != 2 || !strings.Contains(r.stderr, "rules[0].action") {
		t.Errorf("policy set of a bad document exited %d, stderr %q; want 2 naming rules[0].action", r.code, r.stderr)
	}

	script := filepath.Join(t.TempDir(), "commands.jsonl")
	calls := []map[string]any{
		{"name": "run_command", "arguments": map[string]string{"command": "touch denied.txt"}},
		{"name": "run_command", "arguments": map[string]string{"command": "echo inside > inside.txt; echo outside > " + outside + "; echo done"}},
		{"name": "run_command", "arguments": map[string]string{"command": "echo allowed by the policy"}},
	}
	line1, _ := json.Marshal(map[string]any{"text": "Running two commands.", "tool_calls": calls})
	writeFile(t, script, string(line1)+"\n"+
		`{"text": "RESULTS {{ json .Results }}"}`+"\n")

	r = plexus(t, ws, "", env, "run", "--approve-all", "--model", "replay:"+script, "run the commands")
	if r.code != 0 {
		t.Fatalf("plexus run exited %d:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(ws, "denied.txt")); err == nil {
		t.Error("the denied command ran: denied.txt exists")
	}
	_, results, _ := strings.Cut(r.stdout, "RESULTS ")
	var res []map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(results)), &res); err != nil || len(res) != 3 {
		t.Fatalf("results %q: %v", results, err)
	}
	if msg, _ := res[0]["error"].(string); !strings.Contains(msg, "denied by the workspace policy") || !strings.Contains(msg, "never touches files") {
		t.Errorf("denied call's result %v does not say the policy denied it and why", res[0])
	}
	if b, err := os.ReadFile(filepath.Join(ws, "inside.txt")); err != nil || string(b) != "inside\n" {
		t.Errorf("the allowed command did not write inside the workspace: %q, %v (result %v)", b, err, res[1])
	}
	sandbox, _ := res[1]["sandbox"].(string)
	switch {
	case strings.HasPrefix(sandbox, "none"):
		t.Logf("no sandbox on this system (%s): not checking the write outside the workspace", sandbox)
	case fileExists(outside):
		t.Errorf("the command wrote %s outside the workspace in sandbox %q", outside, sandbox)
	}
	if stdout, _ := res[1]["stdout"].(string); !strings.HasSuffix(stdout, "done\n") {
		t.Errorf("allowed command's stdout %q", stdout)
	}

	// Receipts: the denial by the policy, the approval by --approve-all
	// and by the policy's allow rule, and the two commands that ran.
	r = plexus(t, ws, "", env, "receipts", "list")
	counts := map[string]int{}
	for line := range strings.Lines(r.stdout) {
		if f := strings.Fields(line); len(f) >= 4 {
			counts[f[2]+" "+f[3]]++
		}
	}
	for _, want := range []string{"denial policy", "approval approve-all", "approval policy", "command approve-all", "command policy"} {
		if counts[want] != 1 {
			t.Errorf("receipts list has %d receipts %q, want 1:\n%s", counts[want], want, r.stdout)
		}
	}
	if r := plexus(t, ws, "", env, "receipts", "verify"); r.code != 0 {
		t.Errorf("receipts verify exited %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

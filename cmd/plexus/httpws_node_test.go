package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// requireNodeEnv, set to 1 (CI sets it), makes the tests with npm clients
// fail instead of skip when node or an example's node_modules are missing.
const requireNodeEnv = "PLEXUS_REQUIRE_NODE"

// nodeExample returns the directory of examples/clients/NAME and the path
// of node, skipping the test (failing it with PLEXUS_REQUIRE_NODE=1) when
// node or the example's npm package pkg is not installed.
func nodeExample(t *testing.T, name, pkg string) (dir, node string) {
	t.Helper()
	dir = filepath.Join(repoRoot, "examples", "clients", name)
	node, err := exec.LookPath("node")
	missing := ""
	if err != nil {
		missing = "node is not on PATH"
	} else if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg)); err != nil {
		missing = fmt.Sprintf("examples/clients/%s/node_modules/%s is missing (run npm ci --prefix examples/clients/%s)", name, pkg, name)
	}
	if missing != "" {
		if os.Getenv(requireNodeEnv) == "1" {
			t.Fatalf("%s, and %s=1", missing, requireNodeEnv)
		}
		t.Skipf("%s; set %s=1 to make this a failure", missing, requireNodeEnv)
	}
	return dir, node
}

// TestHTTPFixTurnNodeWS runs the /fix turn of TestHTTPFixTurn with a
// client written with another WebSocket library than the server's: the
// example examples/clients/ws-node/fix-turn.mjs, on the npm package ws.
func TestHTTPFixTurnNodeWS(t *testing.T) {
	exampleDir, node := nodeExample(t, "ws-node", "ws")

	ws, script := calcFixture(t)
	srv := startHTTPServer(t, ws, t.TempDir(), script)
	_, sessID := srv.setupSession(t)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "fix-turn.mjs", "--url", srv.url, "--session", sessID)
	cmd.Dir = exampleDir
	// The token goes through the environment, as a user would pass it.
	cmd.Env = append(os.Environ(), "PLEXUS_TOKEN="+srv.token)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node fix-turn.mjs: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}

	var out struct {
		Types       []string       `json:"types"`
		Final       map[string]any `json:"final"`
		State       map[string]any `json:"state"`
		PatchResult map[string]any `json:"patch_result"`
	}
	line := strings.TrimSpace(stdout.String())
	if strings.Count(line, "\n") != 0 || json.Unmarshal([]byte(line), &out) != nil {
		t.Fatalf("fix-turn.mjs did not print one JSON line:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
	for _, typ := range []string{"server.hello", "agent.plan", "agent.retrieve.status", "tool.execute", "patch.proposed", "tool.request_approval", "patch.result", "assistant.message_final", "session.state"} {
		if !slices.Contains(out.Types, typ) {
			t.Errorf("no %s; saw %v", typ, out.Types)
		}
	}
	if out.PatchResult["status"] != "applied" {
		t.Errorf("patch_result %v", out.PatchResult)
	}
	if md, _ := out.Final["metadata"].(map[string]any); md["success"] != true {
		t.Errorf("final %v", out.Final)
	}
	if applied, _ := out.State["applied_patches"].([]any); len(applied) != 1 {
		t.Errorf("state %v, want one applied patch", out.State)
	} else if id, _ := applied[0].(string); id == "" {
		t.Errorf("state %v: applied patch id %v", out.State, applied[0])
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "calc.go")); !bytes.Contains(got, []byte("return a + b")) {
		t.Errorf("calc.go was not fixed:\n%s", got)
	}
	if t.Failed() {
		t.Logf("fix-turn.mjs stderr:\n%s", stderr.String())
	}
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/plugins/mcp"
)

// TestToolTimeoutFlags: --plugin-timeout gives one plugin's calls their
// own deadline (here the shell tool's, which by default allows 11
// minutes), the failure says so, and malformed or unknown settings are
// usage errors (issue 20 item 8: a fixed 11-minute deadline).
func TestToolTimeoutFlags(t *testing.T) {
	ws := t.TempDir()
	script := filepath.Join(t.TempDir(), "sleep.jsonl")
	os.WriteFile(script, []byte(`{"tool_calls": [{"id": "s", "name": "run_command", "arguments": {"command": "sleep 30"}}]}
{"text": "done"}
`), 0o644)
	r := plexus(t, ws, "", nil, "run", "--approve-all", "--plugin-timeout", "shell=1s", "--model", "replay:"+script, "sleep")
	if !strings.Contains(r.stderr, "run_command did not finish within 1s (its tool deadline)") {
		t.Errorf("exit %d; stderr lacks the 1 s deadline:\n%s", r.code, r.stderr)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tool-timeout", "soon"}, `--tool-timeout "soon": want a positive duration`},
		{[]string{"--plugin-timeout", "shell=-1s"}, `--plugin-timeout shell "-1s": want a positive duration`},
		{[]string{"--plugin-timeout", "nosuch=5s"}, `--plugin-timeout nosuch: no tool plugin or MCP server is named "nosuch" (tool plugins: fs, search, shell`},
	} {
		r := plexus(t, ws, "", nil, append([]string{"run", "--model", "replay:" + script}, append(tc.args, "sleep")...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr:\n%s\nwant %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	r = plexus(t, ws, "", []string{"PLEXUS_TOOL_TIMEOUT=later"}, "run", "--model", "replay:"+script, "sleep")
	if r.code != 2 || !strings.Contains(r.stderr, `$PLEXUS_TOOL_TIMEOUT "later"`) {
		t.Errorf("bad $PLEXUS_TOOL_TIMEOUT: exit %d\n%s", r.code, r.stderr)
	}
}

// TestPluginTimeoutReachesMCPServer: --plugin-timeout naming an MCP server
// replaces its configured "timeout"; the built-in shell keeps its long
// default unless named.
func TestPluginTimeoutReachesMCPServer(t *testing.T) {
	t.Setenv(envToolTimeout, "")
	f := timeoutFlags{plugins: map[string]string{"github": "5m"}}
	tt, err := f.parse()
	if err != nil {
		t.Fatal(err)
	}
	cfg := &mcp.Config{Servers: map[string]mcp.ServerConfig{"github": {Command: "x", Timeout: time.Second}, "fs": {Command: "y"}}}
	if err := tt.applyToMCP(cfg, nil); err != nil {
		t.Fatal(err)
	}
	if got := cfg.Servers["github"].Timeout; got != 5*time.Minute {
		t.Errorf("github server timeout %s, want 5m", got)
	}
	if got := cfg.Servers["fs"].Timeout; got != 0 {
		t.Errorf("fs server timeout %s, want its own (none)", got)
	}
	if got := tt.forPlugins()["shell"]; got != engine.DefaultToolTimeout {
		t.Errorf("shell plugin deadline %s, want %s", got, engine.DefaultToolTimeout)
	}
	if tt.global != defaultToolTimeout {
		t.Errorf("global %s, want the default %s", tt.global, defaultToolTimeout)
	}
}

package shell

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/plexus-agent/plexus/engine"
)

// TestSandboxHidesProcessEnvironment checks that a command under Landlock
// or in bubblewrap cannot read the secrets in the environment of a process
// outside the sandbox (as the engine and the plugins are) through
// /proc/PID/environ, which an unsandboxed one can.
func TestSandboxHidesProcessEnvironment(t *testing.T) {
	const canary = "sk-plexus-canary-77c1"
	holder := exec.Command("sleep", "60")
	holder.Env = append(os.Environ(), "OPENAI_API_KEY="+canary)
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	cmd := fmt.Sprintf(`cat /proc/%d/environ`, holder.Process.Pid)
	for _, mode := range []SandboxMode{SandboxLandlock, SandboxBubblewrap, SandboxNone} {
		t.Run(string(mode), func(t *testing.T) {
			tools := sandboxedTools(t, Options{Sandbox: mode})
			c := invoke(t.Context(), t, tools, t.TempDir(), args(cmd))
			if c.err != nil {
				t.Fatal(c.err)
			}
			leaked := strings.Contains(c.res.Stdout, canary)
			if mode == SandboxNone && !leaked {
				t.Errorf("unsandboxed, the other process's environment was not readable (stderr %q); the check proves nothing", c.res.Stderr)
			}
			if mode != SandboxNone && (leaked || c.res.ExitCode == 0) {
				t.Errorf("the sandboxed command read the other process's environment (exit %d, canary found: %v)", c.res.ExitCode, leaked)
			}
		})
	}
}

// TestSandboxCapabilities checks that a command run as root under Landlock
// keeps only the harmless capabilities (bubblewrap drops them all).
func TestSandboxCapabilities(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: not running as root, so the command has no capabilities to drop")
	}
	tools := sandboxedTools(t, Options{Sandbox: SandboxLandlock})
	c := invoke(t.Context(), t, tools, t.TempDir(), args(`grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb):' /proc/self/status`))
	if c.err != nil {
		t.Fatal(c.err)
	}
	keep := keptCapabilityMask()
	sets := map[string]uint64{}
	for line := range strings.Lines(c.res.Stdout) {
		name, hex, _ := strings.Cut(strings.TrimSpace(line), ":")
		v, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		sets[name] = v
	}
	if len(sets) != 5 {
		t.Fatalf("capability sets %v from %q", sets, c.res.Stdout)
	}
	if sets["CapBnd"] != keep {
		t.Errorf("bounding set %#x, want %#x", sets["CapBnd"], keep)
	}
	for name, v := range sets {
		if v&^keep != 0 {
			t.Errorf("%s %#x holds capabilities beyond %#x", name, v, keep)
		}
	}
	if sets["CapEff"]&(1<<21) != 0 { // CAP_SYS_ADMIN
		t.Error("the command has CAP_SYS_ADMIN")
	}
}

// TestSandboxRequiredButMissing checks that a sandbox the options demand
// but the system lacks fails every call, before anything runs.
func TestSandboxRequiredButMissing(t *testing.T) {
	tools := New(Options{Sandbox: SandboxBubblewrap, Bwrap: "/nonexistent/bwrap", KillGrace: testGrace})
	marker := filepath.Join(t.TempDir(), "ran")
	c := invoke(t.Context(), t, tools, t.TempDir(), args("touch "+marker))
	if got := toolCode(c.err); got != engine.ToolCodeFailed {
		t.Fatalf("err = %v (code %q), want code failed", c.err, got)
	}
	if msg := c.err.Error(); !strings.Contains(msg, "require the bubblewrap sandbox") || !strings.Contains(msg, "not installed") {
		t.Errorf("message %q", msg)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran")
	}
}

// TestParseLauncherArgs checks the launcher's command line.
func TestParseLauncherArgs(t *testing.T) {
	tests := []struct {
		args    string
		want    launcherConfig
		wantErr string
	}{
		{"--workspace /ws --tmp /t -- /bin/sh -c ls", launcherConfig{workspace: "/ws", tmp: "/t", statusFD: -1, argv: []string{"/bin/sh", "-c", "ls"}}, ""},
		{"--status-fd 3 --workspace /ws --tmp /t --write /a --write /b --allow-network -- prog",
			launcherConfig{workspace: "/ws", tmp: "/t", writable: []string{"/a", "/b"}, allowNetwork: true, statusFD: 3, argv: []string{"prog"}}, ""},
		{"--tmp /t -- prog", launcherConfig{statusFD: -1}, "--workspace and --tmp are required"},
		{"--workspace ws --tmp /t -- prog", launcherConfig{statusFD: -1}, "absolute"},
		{"--workspace /ws --tmp /t --", launcherConfig{statusFD: -1}, "no program"},
		{"--status-fd 3 --workspace /ws --tmp /t --write rel -- prog", launcherConfig{statusFD: 3}, "--write rel"},
		{"--status-fd 3 --bogus", launcherConfig{statusFD: 3}, "bogus"},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			got, err := parseLauncherArgs(strings.Fields(tt.args))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				if got.statusFD != tt.want.statusFD {
					t.Errorf("status fd after the error = %d, want %d", got.statusFD, tt.want.statusFD)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

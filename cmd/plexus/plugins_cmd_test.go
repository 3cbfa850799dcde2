package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPluginsInstallRefusesBuiltinName: `plexus plugins install --name
// plexus-tool-fs` is refused at install time, saying why and what to do
// (issue 20 item 9).
func TestPluginsInstallRefusesBuiltinName(t *testing.T) {
	src := filepath.Join(t.TempDir(), "loc")
	build := exec.Command("go", "build", "-o", src, "./examples/plexus-tool-loc")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build example plugin: %v\n%s", err, out)
	}
	dir := t.TempDir()
	r := plexus(t, t.TempDir(), "", []string{"PLEXUS_PLUGIN_PATH=" + dir}, "plugins", "install", "--name", "plexus-tool-fs", src)
	if r.code != 1 || !strings.Contains(r.stderr, `"fs" is the name of a built-in tool plugin, which plexus always uses instead`) ||
		!strings.Contains(r.stderr, "--name plexus-tool-NAME") {
		t.Errorf("install under a built-in's name: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("plugin directory after the refused install: %v", entries)
	}
}

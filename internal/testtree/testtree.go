// Package testtree builds directory trees for tests of code that works on
// a workspace: files with contents and symlinks, failing the test on any
// error.
package testtree

import (
	"os"
	"path/filepath"
	"testing"
)

// Write creates files (slash paths relative to dir, mapped to their
// contents) and the directories they need, with modes 0644 and 0755.
func Write(tb testing.TB, dir string, files map[string]string) {
	tb.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// Symlink creates link pointing at target.
func Symlink(tb testing.TB, target, link string) {
	tb.Helper()
	if err := os.Symlink(target, link); err != nil {
		tb.Fatal(err)
	}
}

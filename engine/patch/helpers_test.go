package patch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-agent/plexus/engine/workspace"
)

// newWorkspace creates a temporary workspace holding files (path → content;
// a path ending in "/" is an empty directory) and opens it.
func newWorkspace(t testing.TB, files map[string]string) (*workspace.Root, string) {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root, dir
}

// snapshot is every file and directory under dir: path → content, or "dir"
// for a directory, with the mode of each.
type snapshot map[string]string

// takeSnapshot records dir's tree (content and mode of every entry).
func takeSnapshot(t testing.TB, dir string) snapshot {
	t.Helper()
	s := snapshot{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			s[filepath.ToSlash(rel)] = fmt.Sprintf("dir %v", fi.Mode())
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			s[filepath.ToSlash(rel)] = "symlink " + target
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			s[filepath.ToSlash(rel)] = fmt.Sprintf("%v %q", fi.Mode(), b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// diffSnapshots describes how two snapshots differ, "" when equal.
func diffSnapshots(got, want snapshot) string {
	var out []string
	for p, w := range want {
		if g, ok := got[p]; !ok {
			out = append(out, fmt.Sprintf("%s: missing (want %s)", p, w))
		} else if g != w {
			out = append(out, fmt.Sprintf("%s: %s, want %s", p, g, w))
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			out = append(out, fmt.Sprintf("%s: unexpected %s", p, g))
		}
	}
	return strings.Join(out, "\n")
}

// readFile reads a workspace file, failing the test if it cannot.
func readFile(t testing.TB, dir, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// writeFile writes a workspace file.
func writeFile(t testing.TB, dir, p, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(p)), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// numbered is lines "1\n" … "n\n" with the given lines (1-based) replaced.
func numbered(n int, repl map[int]string) string {
	var sb strings.Builder
	for i := 1; i <= n; i++ {
		if r, ok := repl[i]; ok {
			sb.WriteString(r)
		} else {
			fmt.Fprintf(&sb, "%d\n", i)
		}
	}
	return sb.String()
}

// mustPropose proposes edits or fails the test.
func mustPropose(t testing.TB, edits ...Edit) *Set {
	t.Helper()
	s, err := Propose(edits, "rationale", []string{"tests pass"})
	if err != nil {
		t.Fatalf("Propose: %v", err)
	}
	return s
}

// modify is an edit of an existing file.
func modify(p, base, new string) Edit {
	return Edit{Path: p, Base: []byte(base), BaseExists: true, New: []byte(new)}
}

// isErr reports whether err matches target, for table checks.
func isErr(err, target error) bool { return errors.Is(err, target) }

// openRoot opens a second handle on a workspace directory.
func openRoot(dir string) (*workspace.Root, error) { return workspace.Open(dir) }

package patch

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitRepo is a scratch git repository for checking patches against git
// itself; nil when git is not installed.
type gitRepo struct {
	t   testing.TB
	dir string
	env []string
}

// newGitRepo initialises a repository in a temporary directory, isolated
// from the user's and the system's git configuration. It skips the test
// when git is not installed.
func newGitRepo(t testing.TB) *gitRepo {
	t.Helper()
	g := maybeGitRepo(t)
	if g == nil {
		t.Skip("git is not installed")
	}
	return g
}

// maybeGitRepo is newGitRepo, but returns nil when git is not installed.
func maybeGitRepo(t testing.TB) *gitRepo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		return nil
	}
	dir := t.TempDir()
	g := &gitRepo{t: t, dir: dir, env: append(os.Environ(),
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir,
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
	)}
	g.run(nil, "init", "-q", ".")
	return g
}

// run runs git with args in the repository and returns its stdout.
func (g *gitRepo) run(stdin []byte, args ...string) string {
	g.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = g.dir
	cmd.Env = g.env
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		g.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// set writes (exists) or removes the file p.
func (g *gitRepo) set(p string, content []byte, exists bool) {
	g.t.Helper()
	full := filepath.Join(g.dir, filepath.FromSlash(p))
	if !exists {
		if err := os.Remove(full); err != nil && !os.IsNotExist(err) {
			g.t.Fatal(err)
		}
		return
	}
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		g.t.Fatal(err)
	}
	if err := os.WriteFile(full, content, 0o644); err != nil {
		g.t.Fatal(err)
	}
}

// diff commits base (or no file), stages new (or no file) and returns
// git's diff of p without its index line.
func (g *gitRepo) diff(p string, base []byte, baseExists bool, new []byte, newExists bool) string {
	g.t.Helper()
	g.set(p, base, baseExists)
	g.run(nil, "add", "-A")
	g.run(nil, "commit", "-q", "--allow-empty", "-m", "base")
	g.set(p, new, newExists)
	g.run(nil, "add", "-A")
	out := g.run(nil, "diff", "--cached", "--no-color", "--no-ext-diff", "--no-renames", "-U3", "--", p)
	var keep []string
	for _, l := range strings.SplitAfter(out, "\n") {
		if !strings.HasPrefix(l, "index ") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "")
}

// apply commits base as p and runs git apply with diff, returning the
// file's content afterwards and whether it exists.
func (g *gitRepo) apply(p string, base []byte, baseExists bool, diff string) ([]byte, bool) {
	g.t.Helper()
	g.set(p, base, baseExists)
	g.run(nil, "add", "-A")
	g.run(nil, "commit", "-q", "--allow-empty", "-m", "base")
	g.run([]byte(diff), "apply", "--whitespace=nowarn", "-")
	b, err := os.ReadFile(filepath.Join(g.dir, filepath.FromSlash(p)))
	if os.IsNotExist(err) {
		return nil, false
	}
	if err != nil {
		g.t.Fatal(err)
	}
	return b, true
}

// TestGitAppliesRandomPatches checks that git apply accepts every
// proposed diff and produces exactly the new content, over random texts.
func TestGitAppliesRandomPatches(t *testing.T) {
	g := newGitRepo(t)
	gen := newTextGen(7)
	for i := range 40 {
		a, b := gen.pair()
		if a == b {
			continue
		}
		s := mustPropose(t, modify("r.txt", a, b))
		got, exists := g.apply("r.txt", []byte(a), true, s.Files[0].Diff)
		if !exists || string(got) != b {
			t.Fatalf("case %d: git apply gave %q (exists %v), want %q\ndiff:\n%s", i, got, exists, b, s.Files[0].Diff)
		}
	}
}

package main

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
)

// The change tests run a replay turn that edits two files of a real
// repository (a copy of github.com/spf13/cobra from the module cache, at
// the version go.mod pins) on a pseudo-terminal, answering the approval
// prompts as a person would.

const twoFileScript = "examples/replay/two-file-edit.jsonl"

// cobraCopy copies the cobra module's source into a writable temporary
// directory and returns it with the pristine source directory.
func cobraCopy(t *testing.T) (ws, orig string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/spf13/cobra").Output()
	if err != nil {
		t.Fatalf("locate cobra in the module cache: %v", err)
	}
	orig = strings.TrimSpace(string(out))
	ws = filepath.Join(t.TempDir(), "cobra")
	if err := os.CopyFS(ws, os.DirFS(orig)); err != nil {
		t.Fatal(err)
	}
	// The module cache is read-only; the copy must be writable like a
	// checkout.
	err = filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if d.IsDir() {
			mode = 0o755
		}
		return os.Chmod(p, mode)
	})
	if err != nil {
		t.Fatal(err)
	}
	return ws, orig
}

// sameTree fails the test unless every file under got has the bytes of the
// same file under want, and got has no file want lacks.
func sameTree(t *testing.T, got, want string) {
	t.Helper()
	seen := 0
	err := filepath.WalkDir(want, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(want, p)
		w, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		g, err := os.ReadFile(filepath.Join(got, rel))
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			return nil
		}
		if !bytes.Equal(g, w) {
			t.Errorf("%s differs from the original", rel)
		}
		seen++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	filepath.WalkDir(got, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	if n != seen {
		t.Errorf("%d files in the workspace, %d in the original", n, seen)
	}
}

// ptySession is a plexus process on a pseudo-terminal.
type ptySession struct {
	t    *testing.T
	cmd  *exec.Cmd
	tty  *os.File
	mu   sync.Mutex
	out  bytes.Buffer
	read int // bytes of out already matched by expect
	done chan struct{}
}

func startPTY(t *testing.T, dir string, env []string, args ...string) *ptySession {
	t.Helper()
	cmd := exec.Command(plexusBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PLEXUS_PLUGIN_PATH="+t.TempDir(), "PLEXUS_MODEL=", "OLLAMA_HOST=", "OPENAI_BASE_URL=", "OPENAI_API_KEY=", "TERM=dumb")
	cmd.Env = append(cmd.Env, env...)
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 50, Cols: 200})
	if err != nil {
		t.Fatalf("start plexus on a pty: %v", err)
	}
	s := &ptySession{t: t, cmd: cmd, tty: tty, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			s.mu.Lock()
			s.out.Write(buf[:n])
			s.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		tty.Close()
		noProcessesLeft(t, plexusBin)
	})
	return s
}

// expect waits until the output after the last match holds want.
func (s *ptySession) expect(want string) {
	s.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		rest := s.out.String()[s.read:]
		if i := strings.Index(rest, want); i >= 0 {
			s.read += i + len(want)
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		select {
		case <-s.done:
			s.mu.Lock()
			found := strings.Contains(s.out.String()[s.read:], want)
			s.mu.Unlock()
			if !found {
				s.t.Fatalf("plexus ended without printing %q:\n%s", want, s.output())
			}
		case <-time.After(20 * time.Millisecond):
		}
	}
	s.t.Fatalf("no %q within a minute:\n%s", want, s.output())
}

// answer types a line at the terminal.
func (s *ptySession) answer(line string) {
	s.t.Helper()
	if _, err := io.WriteString(s.tty, line+"\n"); err != nil {
		s.t.Fatal(err)
	}
}

// wait waits for the process to end and returns its exit code.
func (s *ptySession) wait() int {
	s.t.Helper()
	err := s.cmd.Wait()
	<-s.done
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	} else if err != nil {
		s.t.Fatal(err)
	}
	return 0
}

func (s *ptySession) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.ReplaceAll(s.out.String(), "\r\n", "\n")
}

func TestTwoFileChangeApproveOneFileThenUndo(t *testing.T) {
	ws, orig := cobraCopy(t)
	env := []string{"PLEXUS_DATA_DIR=" + t.TempDir()}
	s := startPTY(t, ws, env, "run", "--model", "replay:"+filepath.Join(repoRoot, twoFileScript),
		"Document PositionalArgs and test NoArgs with two arguments")

	// Both diffs are shown before the question.
	s.expect("? Apply 2 changed files")
	s.expect("diff --git a/args.go b/args.go")
	s.expect("+// PositionalArgs validates the positional arguments of cmd")
	s.expect("diff --git a/args_test.go b/args_test.go")
	s.expect("+func TestNoArgs_WithTwoArgs(t *testing.T) {")
	s.expect("[f]ile by file: ")
	s.answer("f")
	s.expect("modify args.go? [y/N]: ")
	s.answer("y")
	s.expect("modify args_test.go? [y/N]: ")
	s.answer("n")
	s.expect("applied args.go; not applied: args_test.go")
	if code := s.wait(); code != 0 {
		t.Fatalf("plexus run exited %d:\n%s", code, s.output())
	}
	out := s.output()
	if !strings.Contains(out, "patch set status: partially_applied") {
		t.Errorf("the model was not told the set was partially applied:\n%s", out)
	}

	// Exactly args.go changed, by exactly the proposed comment.
	before, _ := os.ReadFile(filepath.Join(orig, "args.go"))
	after, _ := os.ReadFile(filepath.Join(ws, "args.go"))
	typeLine := "type PositionalArgs func(cmd *Command, args []string) error\n"
	comment := "// PositionalArgs validates the positional arguments of cmd: it returns nil\n" +
		"// when args are acceptable and otherwise an error saying why. Set it as\n" +
		"// Command.Args; NoArgs, ExactArgs and the other validators below are\n" +
		"// ready-made PositionalArgs.\n"
	if want := strings.Replace(string(before), typeLine, comment+typeLine, 1); string(after) != want {
		t.Errorf("args.go after the apply is not the original plus the comment:\n%s", after)
	}
	for _, f := range []string{"args_test.go", "command.go", "README.md"} {
		a, _ := os.ReadFile(filepath.Join(orig, f))
		b, _ := os.ReadFile(filepath.Join(ws, f))
		if !bytes.Equal(a, b) {
			t.Errorf("%s changed though it was not approved", f)
		}
	}

	list := plexus(t, ws, "", env, "undo", "--list")
	if list.code != 0 || !strings.Contains(list.stdout, "args.go") || !strings.Contains(list.stdout, "applied") {
		t.Fatalf("undo --list (exit %d):\n%s%s", list.code, list.stdout, list.stderr)
	}
	undo := plexus(t, ws, "", env, "undo")
	if undo.code != 0 || !strings.Contains(undo.stdout+undo.stderr, "restored args.go") {
		t.Fatalf("undo (exit %d):\n%s%s", undo.code, undo.stdout, undo.stderr)
	}
	sameTree(t, ws, orig)

	// Nothing is left to undo, and saying so is not a success.
	again := plexus(t, ws, "", env, "undo")
	if again.code == 0 {
		t.Errorf("a second undo succeeded:\n%s%s", again.stdout, again.stderr)
	}
}

func TestApplyRefusesAFileChangedAfterTheProposal(t *testing.T) {
	ws, orig := cobraCopy(t)
	env := []string{"PLEXUS_DATA_DIR=" + t.TempDir()}
	s := startPTY(t, ws, env, "run", "--model", "replay:"+filepath.Join(repoRoot, twoFileScript),
		"Document PositionalArgs and test NoArgs with two arguments")
	s.expect("[f]ile by file: ")
	// Someone edits args_test.go while the change waits for approval.
	edited := filepath.Join(ws, "args_test.go")
	b, err := os.ReadFile(edited)
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, "\n// edited by hand\n"...)
	if err := os.WriteFile(edited, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s.answer("y")
	s.expect("args_test.go")
	if code := s.wait(); code != 0 {
		t.Fatalf("plexus run exited %d:\n%s", code, s.output())
	}
	out := s.output()
	if !strings.Contains(out, "conflict") || !strings.Contains(out, "args_test.go changed") {
		t.Errorf("no conflict naming args_test.go:\n%s", out)
	}
	// All or nothing: args.go was not applied either, and the hand edit is
	// kept.
	for _, f := range []string{"args.go"} {
		a, _ := os.ReadFile(filepath.Join(orig, f))
		c, _ := os.ReadFile(filepath.Join(ws, f))
		if !bytes.Equal(a, c) {
			t.Errorf("%s was changed though the set conflicted", f)
		}
	}
	if got, _ := os.ReadFile(edited); !bytes.Equal(got, b) {
		t.Error("the hand edit to args_test.go was overwritten")
	}
}

package patch

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/plexus-agent/plexus/engine"
)

// threeHunks is a 30-line file and an edit of it with three hunks.
var (
	threeBase = numbered(30, nil)
	threeNew  = numbered(30, map[int]string{2: "two\n", 15: "fifteen\n", 28: "28\n28b\n"})
)

func TestApplySelection(t *testing.T) {
	files := map[string]string{"a.txt": threeBase, "b.txt": "b1\nb2\n", "gone.txt": "bye\n"}
	edits := []Edit{
		modify("a.txt", threeBase, threeNew),
		modify("b.txt", "b1\nb2\n", "b1\nB2\n"),
		{Path: "gone.txt", Base: []byte("bye\n"), BaseExists: true, Delete: true},
		{Path: "sub/dir/new.txt", New: []byte("new\n")},
	}
	tests := []struct {
		name string
		sel  Selection
		want map[string]string // path → content after; "" with absent[path] for removed
		gone []string
	}{
		{
			name: "all",
			sel:  Selection{All: true},
			want: map[string]string{"a.txt": threeNew, "b.txt": "b1\nB2\n", "sub/dir/new.txt": "new\n"},
			gone: []string{"gone.txt"},
		},
		{
			name: "one file of two",
			sel:  Selection{Files: map[string]bool{"b.txt": true, "a.txt": false}},
			want: map[string]string{"a.txt": threeBase, "b.txt": "b1\nB2\n", "gone.txt": "bye\n"},
			gone: []string{"sub"},
		},
		{
			name: "hunks 0 and 2 of three",
			sel:  Selection{Hunks: map[string][]int{"a.txt": {2, 0}, "b.txt": {}}},
			want: map[string]string{"a.txt": numbered(30, map[int]string{2: "two\n", 28: "28\n28b\n"}), "b.txt": "b1\nb2\n"},
		},
		{
			name: "a whole file wins over its hunks",
			sel:  Selection{Files: map[string]bool{"a.txt": true}, Hunks: map[string][]int{"a.txt": {1}, "gone.txt": {0}}},
			want: map[string]string{"a.txt": threeNew, "b.txt": "b1\nb2\n"},
			gone: []string{"gone.txt"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, dir := newWorkspace(t, files)
			s := mustPropose(t, edits...)
			expected, err := s.Expected(tt.sel)
			if err != nil {
				t.Fatal(err)
			}
			a, err := Apply(root, s, tt.sel)
			if err != nil {
				t.Fatal(err)
			}
			for p, want := range tt.want {
				if got := readFile(t, dir, p); got != want {
					t.Errorf("%s = %q, want %q", p, got, want)
				}
			}
			for _, p := range tt.gone {
				if _, err := os.Lstat(filepath.Join(dir, p)); !os.IsNotExist(err) {
					t.Errorf("%s exists", p)
				}
			}
			// Expected names exactly the files Apply changed, with the
			// hashes it wrote.
			if len(expected) != len(a.Files) {
				t.Errorf("Expected has %d files, Apply changed %d", len(expected), len(a.Files))
			}
			for _, af := range a.Files {
				want, ok := expected[af.Path]
				if !ok {
					t.Errorf("Expected lacks %s", af.Path)
				}
				got := ""
				if b, err := os.ReadFile(filepath.Join(dir, af.Path)); err == nil {
					got = hashOf(b)
				}
				if got != want || af.AfterHash != want {
					t.Errorf("%s: on disk %s, Applied says %s, Expected says %s", af.Path, got, af.AfterHash, want)
				}
			}
		})
	}
}

func TestApplySelectionErrors(t *testing.T) {
	root, dir := newWorkspace(t, map[string]string{"a.txt": threeBase})
	s := mustPropose(t, modify("a.txt", threeBase, threeNew))
	before := takeSnapshot(t, dir)
	for _, sel := range []Selection{
		{},
		{Hunks: map[string][]int{"a.txt": {}}},
		{Files: map[string]bool{"other.txt": true}},
		{Hunks: map[string][]int{"other.txt": {0}}},
		{Hunks: map[string][]int{"a.txt": {3}}},
		{Hunks: map[string][]int{"a.txt": {1, 1}}},
	} {
		if _, err := Apply(root, s, sel); !errors.Is(err, engine.ErrInvalidRequest) {
			t.Errorf("Apply(%+v): error %v, want ErrInvalidRequest", sel, err)
		}
	}
	if d := diffSnapshots(takeSnapshot(t, dir), before); d != "" {
		t.Errorf("refused applies wrote:\n%s", d)
	}
}

func TestApplyConflict(t *testing.T) {
	tests := []struct {
		name   string
		change func(dir string)
		path   string
	}{
		{"the first file changed", func(dir string) { writeFile(t, dir, "src/a.go", "package a // edited\n") }, "src/a.go"},
		{"the second file changed", func(dir string) { writeFile(t, dir, "src/b.go", "package b // edited\n") }, "src/b.go"},
		{"the second file was deleted", func(dir string) { os.Remove(filepath.Join(dir, "src/b.go")) }, "src/b.go"},
		{"a file to create appeared", func(dir string) { writeFile(t, dir, "c.go", "package c\n") }, "c.go"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, dir := newWorkspace(t, map[string]string{"src/a.go": "package a\n", "src/b.go": "package b\n"})
			s := mustPropose(t,
				modify("src/a.go", "package a\n", "package a\n\nfunc A() {}\n"),
				modify("src/b.go", "package b\n", "package b\n\nfunc B() {}\n"),
				Edit{Path: "c.go", New: []byte("package c\n\nfunc C() {}\n")},
			)
			tt.change(dir)
			before := takeSnapshot(t, dir)
			_, err := Apply(root, s, Selection{All: true})
			var ce *ConflictError
			if !errors.As(err, &ce) || !errors.Is(err, ErrConflict) {
				t.Fatalf("error %v, want a *ConflictError", err)
			}
			if ce.Path != tt.path {
				t.Errorf("conflict names %s, want %s", ce.Path, tt.path)
			}
			if !strings.Contains(err.Error(), tt.path+" changed since the patch was proposed (") || !strings.Contains(err.Error(), "ask for a new patch") {
				t.Errorf("message %q", err)
			}
			if d := diffSnapshots(takeSnapshot(t, dir), before); d != "" {
				t.Errorf("a conflicting apply wrote:\n%s", d)
			}
		})
	}

	t.Run("conflict message", func(t *testing.T) {
		e := &ConflictError{Path: "src/a.go", Want: "sha256:11", Got: "sha256:22"}
		if got, want := e.Error(), "src/a.go changed since the patch was proposed (sha256:22 now, sha256:11 then); ask for a new patch"; got != want {
			t.Errorf("%q, want %q", got, want)
		}
		e = &ConflictError{Path: "b", Want: "sha256:11", Undo: true}
		if got, want := e.Error(), "b changed since the patch was applied (absent now, sha256:11 then); undo with force to overwrite it"; got != want {
			t.Errorf("%q, want %q", got, want)
		}
	})
}

// failWrite makes the write of the file p fail by replacing its directory
// with a file just before it, and returns a function restoring the hook.
func failWrite(t *testing.T, dir, p string) {
	t.Helper()
	testHookBeforeWrite = func(path string) {
		if path != p {
			return
		}
		d := filepath.Join(dir, filepath.Dir(filepath.FromSlash(p)))
		if err := os.RemoveAll(d); err != nil {
			t.Error(err)
		}
		if err := os.WriteFile(d, []byte("in the way\n"), 0o644); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { testHookBeforeWrite = nil })
}

func TestApplyIsAtomic(t *testing.T) {
	tests := []struct {
		name     string
		files    map[string]string
		edits    []Edit
		failAt   string
		restored []string
	}{
		{
			name:  "second of two modifies fails",
			files: map[string]string{"a.txt": threeBase, "d/b.txt": "b\n"},
			edits: []Edit{modify("a.txt", threeBase, threeNew), modify("d/b.txt", "b\n", "B\n")},
			// d is replaced by a file, so the write of d/b.txt fails.
			failAt: "d/b.txt", restored: []string{"a.txt"},
		},
		{
			name:  "a delete, a create in new directories, then a failure",
			files: map[string]string{"gone.txt": "keep me\n", "d/b.txt": "b\n"},
			edits: []Edit{
				{Path: "gone.txt", Base: []byte("keep me\n"), BaseExists: true, Delete: true},
				{Path: "x/y/new.txt", New: []byte("new\n")},
				modify("d/b.txt", "b\n", "B\n"),
			},
			failAt: "d/b.txt", restored: []string{"gone.txt", "x/y/new.txt"},
		},
		{
			name:   "the first write fails",
			files:  map[string]string{"d/b.txt": "b\n", "a.txt": "a\n"},
			edits:  []Edit{modify("d/b.txt", "b\n", "B\n"), modify("a.txt", "a\n", "A\n")},
			failAt: "d/b.txt",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, dir := newWorkspace(t, tt.files)
			if err := os.Chmod(filepath.Join(dir, filepath.FromSlash(tt.edits[0].Path)), 0o751); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			s := mustPropose(t, tt.edits...)
			before := takeSnapshot(t, dir)
			failWrite(t, dir, tt.failAt)
			_, err := Apply(root, s, Selection{All: true})
			if err == nil {
				t.Fatal("Apply succeeded")
			}
			if !errors.Is(err, syscall.ENOTDIR) {
				t.Errorf("error %v does not keep its cause", err)
			}
			testHookBeforeWrite = nil
			// Everything but the sabotaged directory is as before.
			after := takeSnapshot(t, dir)
			failDir := filepath.ToSlash(filepath.Dir(tt.failAt))
			for p := range before {
				if p == failDir || strings.HasPrefix(p, failDir+"/") {
					delete(before, p)
				}
			}
			delete(after, failDir)
			if d := diffSnapshots(after, before); d != "" {
				t.Errorf("after a failed apply:\n%s", d)
			}
			msg := err.Error()
			if !strings.Contains(msg, "write "+tt.failAt) {
				t.Errorf("error %q does not name the failed file", msg)
			}
			for _, p := range tt.restored {
				if !strings.Contains(msg, p) || !strings.Contains(msg, "restored") {
					t.Errorf("error %q does not say %s was restored", msg, p)
				}
			}
			if len(tt.restored) == 0 && !strings.Contains(msg, "no file had been changed") {
				t.Errorf("error %q", msg)
			}
		})
	}
}

func TestUndo(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)

	files := map[string]string{"a.sh": threeBase, "gone.txt": "precious\nbytes", "keep/x.txt": "x\n"}
	edits := []Edit{
		modify("a.sh", threeBase, threeNew),
		{Path: "gone.txt", Base: []byte("precious\nbytes"), BaseExists: true, Delete: true},
		{Path: "n1/n2/new.txt", New: []byte("new\n")},
		{Path: "keep/y.txt", New: []byte("y\n")},
	}
	setup := func(t *testing.T) (*Applied, string, snapshot, func() error) {
		root, dir := newWorkspace(t, files)
		if err := os.Chmod(filepath.Join(dir, "a.sh"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, "gone.txt"), 0o640); err != nil {
			t.Fatal(err)
		}
		before := takeSnapshot(t, dir)
		a, err := Apply(root, mustPropose(t, edits...), Selection{All: true})
		if err != nil {
			t.Fatal(err)
		}
		return a, dir, before, func() error { return Undo(root, a, false) }
	}

	t.Run("apply keeps modes and creates directories", func(t *testing.T) {
		a, dir, _, _ := setup(t)
		for p, want := range map[string]os.FileMode{"a.sh": 0o755, "n1/n2/new.txt": 0o644, "n1": os.ModeDir | 0o755} {
			fi, err := os.Stat(filepath.Join(dir, p))
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode() != want {
				t.Errorf("%s has mode %v, want %v", p, fi.Mode(), want)
			}
		}
		if !reflect.DeepEqual(a.Dirs, []string{"n1", "n1/n2"}) {
			t.Errorf("Dirs = %v", a.Dirs)
		}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".plexus-") {
				t.Errorf("temporary file %s left behind", e.Name())
			}
		}
	})

	t.Run("undo restores bytes, modes and existence", func(t *testing.T) {
		_, dir, before, undo := setup(t)
		if err := undo(); err != nil {
			t.Fatal(err)
		}
		if d := diffSnapshots(takeSnapshot(t, dir), before); d != "" {
			t.Errorf("after undo:\n%s", d)
		}
	})

	t.Run("undo keeps a created directory that is no longer empty", func(t *testing.T) {
		_, dir, before, undo := setup(t)
		writeFile(t, dir, "n1/mine.txt", "mine\n")
		if err := undo(); err != nil {
			t.Fatal(err)
		}
		before["n1"] = "dir " + (os.ModeDir | 0o755).String()
		before["n1/mine.txt"] = `-rw-r--r-- "mine\n"`
		if d := diffSnapshots(takeSnapshot(t, dir), before); d != "" {
			t.Errorf("after undo:\n%s", d)
		}
	})

	t.Run("undo after a later change is refused unless forced", func(t *testing.T) {
		a, dir, before, undo := setup(t)
		writeFile(t, dir, "a.sh", "edited by the user\n")
		os.Remove(filepath.Join(dir, "keep/y.txt"))
		changed := takeSnapshot(t, dir)
		err := undo()
		var ce *ConflictError
		if !errors.As(err, &ce) || !ce.Undo || ce.Path != "a.sh" {
			t.Fatalf("error %v, want a conflict on a.sh", err)
		}
		if !strings.Contains(err.Error(), "keep/y.txt changed since the patch was applied (absent now,") {
			t.Errorf("error %q does not report keep/y.txt", err)
		}
		if d := diffSnapshots(takeSnapshot(t, dir), changed); d != "" {
			t.Errorf("a refused undo wrote:\n%s", d)
		}
		root, err := openRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		if err := Undo(root, a, true); err != nil {
			t.Fatal(err)
		}
		if d := diffSnapshots(takeSnapshot(t, dir), before); d != "" {
			t.Errorf("after a forced undo:\n%s", d)
		}
	})

	t.Run("undo from JSON", func(t *testing.T) {
		a, dir, before, _ := setup(t)
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		var back Applied
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		root, err := openRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		if err := Undo(root, &back, false); err != nil {
			t.Fatal(err)
		}
		if d := diffSnapshots(takeSnapshot(t, dir), before); d != "" {
			t.Errorf("after undo:\n%s", d)
		}
	})

	t.Run("a failing undo puts the applied state back", func(t *testing.T) {
		a, dir, _, _ := setup(t)
		applied := takeSnapshot(t, dir)
		root, err := openRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		failWrite(t, dir, "keep/y.txt") // Undo's fourth file: keep/ becomes a file
		err = Undo(root, a, false)
		if err == nil || !strings.Contains(err.Error(), "restored a.sh, gone.txt, n1/n2/new.txt") {
			t.Fatalf("error %v", err)
		}
		testHookBeforeWrite = nil
		after := takeSnapshot(t, dir)
		for _, p := range []string{"keep", "keep/x.txt", "keep/y.txt"} {
			delete(applied, p)
			delete(after, p)
		}
		if d := diffSnapshots(after, applied); d != "" {
			t.Errorf("after a failed undo:\n%s", d)
		}
	})
}

func TestPathEscapes(t *testing.T) {
	outside := t.TempDir()
	writeFile(t, outside, "secret.txt", "secret\n")
	tests := []struct {
		name  string
		path  string
		setup func(dir string)
	}{
		{"dot dot", "../x.txt", nil},
		{"dot dot inside", "sub/../../x.txt", nil},
		{"absolute outside", filepath.Join(outside, "secret.txt"), nil},
		{"through a symlinked directory", "link/secret.txt", func(dir string) {
			if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
				t.Fatal(err)
			}
		}},
		{"through a symlinked file", "file.txt", func(dir string) {
			if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(dir, "file.txt")); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, dir := newWorkspace(t, map[string]string{"ok.txt": "ok\n"})
			if tt.setup != nil {
				tt.setup(dir)
			}
			before, outBefore := takeSnapshot(t, dir), takeSnapshot(t, outside)

			// Propose refuses what it can see; a stored set edited to
			// name the path is refused by Apply.
			_, perr := Propose([]Edit{modify(tt.path, "secret\n", "pwned\n")}, "", nil)
			s := mustPropose(t, modify("ok.txt", "ok\n", "OK\n"), modify("placeholder", "secret\n", "pwned\n"))
			s.Files[1].Path = tt.path
			_, aerr := Apply(root, s, Selection{All: true})
			if !errors.Is(aerr, engine.ErrPermissionDenied) {
				t.Errorf("Apply: error %v, want ErrPermissionDenied", aerr)
			}
			if perr != nil && !errors.Is(perr, engine.ErrPermissionDenied) {
				t.Errorf("Propose: error %v, want ErrPermissionDenied", perr)
			}
			diff := "--- a/" + tt.path + "\n+++ b/" + tt.path + "\n@@ -1 +1 @@\n-secret\n+pwned\n"
			if strings.HasPrefix(tt.path, "/") {
				diff = "--- " + tt.path + "\n+++ " + tt.path + "\n@@ -1 +1 @@\n-secret\n+pwned\n"
			}
			if _, err := ParseUnified(root, diff); !errors.Is(err, engine.ErrPermissionDenied) {
				t.Errorf("ParseUnified: error %v, want ErrPermissionDenied", err)
			}
			if d := diffSnapshots(takeSnapshot(t, dir), before); d != "" {
				t.Errorf("the workspace changed:\n%s", d)
			}
			if d := diffSnapshots(takeSnapshot(t, outside), outBefore); d != "" {
				t.Errorf("outside changed:\n%s", d)
			}
		})
	}
}

func TestApplyThroughInnerSymlink(t *testing.T) {
	root, dir := newWorkspace(t, map[string]string{"real/f.txt": "a\n"})
	if err := os.Symlink("real", filepath.Join(dir, "alias")); err != nil {
		t.Fatal(err)
	}
	a, err := Apply(root, mustPropose(t, modify("alias/f.txt", "a\n", "b\n")), Selection{All: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, dir, "real/f.txt"); got != "b\n" {
		t.Errorf("real/f.txt = %q", got)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "alias")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink is gone: %v", err)
	}
	if err := Undo(root, a, false); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, dir, "real/f.txt"); got != "a\n" {
		t.Errorf("after undo real/f.txt = %q", got)
	}
	// Two names of one file in one set are refused.
	s := mustPropose(t, modify("alias/f.txt", "a\n", "b\n"), modify("real/f.txt", "a\n", "c\n"))
	if _, err := Apply(root, s, Selection{All: true}); !errors.Is(err, engine.ErrInvalidRequest) || !strings.Contains(err.Error(), "same file") {
		t.Errorf("error %v", err)
	}
}

func TestApplyRefusesNonFiles(t *testing.T) {
	root, dir := newWorkspace(t, map[string]string{"d/": ""})
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"d", "fifo"} {
		s := mustPropose(t, Edit{Path: p, New: []byte("x\n")})
		if _, err := Apply(root, s, Selection{All: true}); !errors.Is(err, engine.ErrInvalidRequest) {
			t.Errorf("%s: error %v", p, err)
		}
	}
}

// TestApplyIsAtomicReadOnlyDir makes the second write fail the plain way,
// with a read-only directory; root ignores that, so it needs another user.
func TestApplyIsAtomicReadOnlyDir(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root can write into read-only directories; TestApplyIsAtomic covers this with a directory replaced by a file")
	}
	root, dir := newWorkspace(t, map[string]string{"a.txt": threeBase, "ro/b.txt": "b\n"})
	s := mustPropose(t, modify("a.txt", threeBase, threeNew), modify("ro/b.txt", "b\n", "B\n"))
	if err := os.Chmod(filepath.Join(dir, "ro"), 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(dir, "ro"), 0o755) })
	before := takeSnapshot(t, dir)
	_, err := Apply(root, s, Selection{All: true})
	if err == nil || !errors.Is(err, os.ErrPermission) || !strings.Contains(err.Error(), "restored a.txt") {
		t.Fatalf("error %v", err)
	}
	if d := diffSnapshots(takeSnapshot(t, dir), before); d != "" {
		t.Errorf("after a failed apply:\n%s", d)
	}
}

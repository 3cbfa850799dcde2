package workspace

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/internal/testtree"
)

func openRoot(t testing.TB, dir string) *Root {
	t.Helper()
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// resolveFixture is a workspace next to a directory outside it, with
// symlinks of every kind.
type resolveFixture struct {
	base, ws, outside string
}

func newResolveFixture(t *testing.T) resolveFixture {
	base := t.TempDir()
	f := resolveFixture{base: base, ws: filepath.Join(base, "ws"), outside: filepath.Join(base, "outside")}
	testtree.Write(t, f.ws, map[string]string{"a/b.txt": "b", "file.txt": "f", "sub/f.txt": "s"})
	testtree.Write(t, f.outside, map[string]string{"secret.txt": "secret"})
	testtree.Write(t, f.ws+"-evil", map[string]string{"x": "x"}) // shares the workspace's name as a prefix
	testtree.Symlink(t, "a", filepath.Join(f.ws, "link_in"))
	testtree.Symlink(t, filepath.Join(f.ws, "a", "b.txt"), filepath.Join(f.ws, "link_abs_in"))
	testtree.Symlink(t, f.outside, filepath.Join(f.ws, "link_out"))
	testtree.Symlink(t, "../outside", filepath.Join(f.ws, "link_out_rel"))
	testtree.Symlink(t, filepath.Join(f.outside, "not-yet"), filepath.Join(f.ws, "dangling_out"))
	testtree.Symlink(t, "../../outside/not-yet", filepath.Join(f.ws, "a", "dangling_out_rel"))
	testtree.Symlink(t, "missing/target.txt", filepath.Join(f.ws, "dangling_in"))
	testtree.Symlink(t, "link_in/../file.txt", filepath.Join(f.ws, "dotdot_in")) // link_in is a/, so this is a/../file.txt
	testtree.Symlink(t, "loop2", filepath.Join(f.ws, "loop1"))
	testtree.Symlink(t, "loop1", filepath.Join(f.ws, "loop2"))
	testtree.Symlink(t, "ws", filepath.Join(base, "wslink")) // the workspace opened through a symlink
	return f
}

func TestResolve(t *testing.T) {
	f := newResolveFixture(t)
	r := openRoot(t, filepath.Join(f.base, "wslink"))
	if got, want := r.Dir(), f.ws; got != want {
		t.Fatalf("Dir() = %q, want %q", got, want)
	}

	tests := []struct {
		name     string
		path     string
		lexical  string // want from Resolve
		real     string // want from Real
		escape   string // want an *EscapeError whose Reason contains this
		errIs    error  // want an error matching this
		errMatch string // and whose text contains this
	}{
		{name: "empty is the root", path: "", lexical: ".", real: "."},
		{name: "dot", path: ".", lexical: ".", real: "."},
		{name: "file", path: "a/b.txt", lexical: "a/b.txt", real: "a/b.txt"},
		{name: "dotdot that stays inside", path: "a/../a/./b.txt", lexical: "a/b.txt", real: "a/b.txt"},
		{name: "trailing slash", path: "a/", lexical: "a", real: "a"},
		{name: "dotdot climbing out", path: "../x", escape: "climbs out of"},
		{name: "dotdot alone", path: "..", escape: "climbs out of"},
		{name: "dotdot climbing out after a dir", path: "a/../../ws/a/b.txt", escape: "climbs out of"},
		{name: "absolute outside", path: "/etc/passwd", escape: "is outside"},
		{name: "absolute sibling sharing the prefix", path: f.ws + "-evil/x", escape: "is outside"},
		{name: "absolute dotdot out", path: f.ws + "/../outside/secret.txt", escape: "is outside"},
		{name: "absolute inside", path: filepath.Join(f.ws, "a", "b.txt"), lexical: "a/b.txt", real: "a/b.txt"},
		{name: "absolute root", path: f.ws, lexical: ".", real: "."},
		{name: "absolute through the opened symlink", path: filepath.Join(f.base, "wslink", "a", "b.txt"), lexical: "a/b.txt", real: "a/b.txt"},
		{name: "symlink escaping", path: "link_out", escape: "through the symlink link_out"},
		{name: "file behind escaping symlink", path: "link_out/secret.txt", escape: "out of"},
		{name: "new file behind escaping symlink", path: "link_out/new.txt", escape: "out of"},
		{name: "relative symlink escaping", path: "link_out_rel/secret.txt", escape: "out of"},
		{name: "dangling symlink to outside", path: "dangling_out", escape: "out of"},
		{name: "dangling relative symlink to outside", path: "a/dangling_out_rel", escape: "out of"},
		{name: "symlink inside", path: "link_in/b.txt", lexical: "link_in/b.txt", real: "a/b.txt"},
		{name: "absolute symlink inside", path: "link_abs_in", lexical: "link_abs_in", real: "a/b.txt"},
		{name: "dotdot inside a symlink target", path: "dotdot_in", lexical: "dotdot_in", real: "file.txt"},
		{name: "dangling symlink inside", path: "dangling_in", lexical: "dangling_in", real: "missing/target.txt"},
		{name: "new file in existing dir", path: "a/new.txt", lexical: "a/new.txt", real: "a/new.txt"},
		{name: "new file in new dirs", path: "a/x/y/z.txt", lexical: "a/x/y/z.txt", real: "a/x/y/z.txt"},
		{name: "new file behind symlink inside", path: "link_in/new.txt", lexical: "link_in/new.txt", real: "a/new.txt"},
		{name: "file used as a directory", path: "file.txt/x", errIs: fs.ErrNotExist, errMatch: "file.txt is a file, not a directory"},
		{name: "NUL byte", path: "a/b\x00.txt", errIs: engine.ErrInvalidRequest, errMatch: "NUL byte"},
		{name: "symlink loop", path: "loop1", errIs: syscall.ELOOP},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lexical, errL := r.Resolve(tt.path)
			real, errR := r.Real(tt.path)
			switch {
			case tt.escape != "":
				for _, err := range []error{errL, errR} {
					var esc *EscapeError
					if !errors.As(err, &esc) {
						t.Fatalf("err = %v, want *EscapeError", err)
					}
					if !strings.Contains(esc.Reason, tt.escape) {
						t.Errorf("Reason = %q, want it to contain %q", esc.Reason, tt.escape)
					}
					if !errors.Is(err, engine.ErrPermissionDenied) {
						t.Errorf("errors.Is(%v, ErrPermissionDenied) = false", err)
					}
					if esc.Path != tt.path || esc.Root != f.ws {
						t.Errorf("Path, Root = %q, %q; want %q, %q", esc.Path, esc.Root, tt.path, f.ws)
					}
				}
			case tt.errIs != nil:
				for _, err := range []error{errL, errR} {
					if !errors.Is(err, tt.errIs) {
						t.Fatalf("err = %v, want one matching %v", err, tt.errIs)
					}
					if !strings.Contains(err.Error(), tt.errMatch) {
						t.Errorf("err = %q, want it to contain %q", err, tt.errMatch)
					}
					if tt.errIs == fs.ErrNotExist && !errors.Is(err, syscall.ENOTDIR) {
						t.Errorf("err = %v, want it to match syscall.ENOTDIR too", err)
					}
				}
			default:
				if errL != nil || errR != nil {
					t.Fatalf("Resolve: %v; Real: %v", errL, errR)
				}
				if got, want := filepath.ToSlash(lexical), tt.lexical; got != want {
					t.Errorf("Resolve = %q, want %q", got, want)
				}
				if got, want := filepath.ToSlash(real), tt.real; got != want {
					t.Errorf("Real = %q, want %q", got, want)
				}
			}
		})
	}
}

func TestEscapeErrorMessage(t *testing.T) {
	f := newResolveFixture(t)
	r := openRoot(t, f.ws)
	_, err := r.Resolve("../x")
	want := `path "../x" climbs out of the workspace ` + f.ws + `; only paths inside the workspace are allowed`
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
}

// TestFSErrorSwappedSymlink replaces a directory with a symlink to the
// outside between Resolve and the open: os.Root refuses, and FSError
// reports it as an escape.
func TestFSErrorSwappedSymlink(t *testing.T) {
	f := newResolveFixture(t)
	r := openRoot(t, f.ws)
	rel, err := r.Resolve("sub/f.txt")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(f.ws, "sub")); err != nil {
		t.Fatal(err)
	}
	testtree.Symlink(t, f.outside, filepath.Join(f.ws, "sub"))
	testtree.Write(t, f.outside, map[string]string{"f.txt": "outside"})

	_, err = r.FS().Open(rel)
	if err == nil {
		t.Fatal("os.Root opened a file through a symlink to outside")
	}
	err = r.FSError("sub/f.txt", err)
	var esc *EscapeError
	if !errors.As(err, &esc) || !errors.Is(err, engine.ErrPermissionDenied) {
		t.Fatalf("FSError = %v, want *EscapeError", err)
	}

	// Unrelated errors and nil pass through.
	_, err = r.FS().Open("no-such-file")
	if got := r.FSError("no-such-file", err); got != err || !errors.Is(got, fs.ErrNotExist) {
		t.Errorf("FSError(not exist) = %v, want it unchanged", got)
	}
	if got := r.FSError("x", nil); got != nil {
		t.Errorf("FSError(nil) = %v", got)
	}
}

// TestRealAvoidsAbsoluteSymlink shows why Real exists: os.Root refuses an
// absolute symlink even when it points inside, while the Real path works.
func TestRealAvoidsAbsoluteSymlink(t *testing.T) {
	f := newResolveFixture(t)
	r := openRoot(t, f.ws)
	if _, err := r.FS().ReadFile("link_abs_in"); err == nil {
		t.Skip("this platform's os.Root follows absolute symlinks")
	}
	real, err := r.Real("link_abs_in")
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.FS().ReadFile(real)
	if err != nil || string(got) != "b" {
		t.Errorf("ReadFile(%q) = %q, %v; want %q", real, got, err, "b")
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open(missing) = %v, want fs.ErrNotExist", err)
	}
	testtree.Write(t, dir, map[string]string{"f": ""})
	if _, err := Open(filepath.Join(dir, "f")); err == nil {
		t.Error("Open(a file) succeeded")
	}
}

// FuzzResolve checks that whatever path Resolve and Real accept is a
// clean relative path inside the workspace, and that the real path, where
// it exists, really is inside.
func FuzzResolve(f *testing.F) {
	base := f.TempDir()
	ws, outside := filepath.Join(base, "ws"), filepath.Join(base, "outside")
	testtree.Write(f, ws, map[string]string{"a/b.txt": "b", "file.txt": "f"})
	testtree.Write(f, outside, map[string]string{"secret.txt": "s"})
	testtree.Symlink(f, "a", filepath.Join(ws, "link_in"))
	testtree.Symlink(f, outside, filepath.Join(ws, "link_out"))
	testtree.Symlink(f, "../outside", filepath.Join(ws, "a", "up"))
	testtree.Symlink(f, "../../ws/a", filepath.Join(ws, "a", "back_in"))
	testtree.Symlink(f, "loop", filepath.Join(ws, "loop"))
	r, err := Open(ws)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { r.Close() })
	for _, s := range []string{"", ".", "a/b.txt", "../x", "/etc/passwd", ws + "/a", "link_in/b.txt", "link_out/secret.txt",
		"a/up/secret.txt", "a/back_in/b.txt", "loop", "file.txt/x", "a/../../ws", "a\x00", "//a//b/", "link_in/../file.txt"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		lexical, errL := r.Resolve(p)
		real, errR := r.Real(p)
		if (errL == nil) != (errR == nil) {
			t.Fatalf("Resolve(%q) err %v, Real err %v", p, errL, errR)
		}
		if errL != nil {
			return
		}
		for _, rel := range []string{lexical, real} {
			if rel != "." && !filepath.IsLocal(rel) {
				t.Fatalf("Resolve/Real(%q) = %q, not a local path", p, rel)
			}
		}
		if ev, err := filepath.EvalSymlinks(filepath.Join(r.Dir(), real)); err == nil {
			if _, ok := within(r.Dir(), ev); !ok {
				t.Fatalf("Real(%q) = %q leads to %s, outside", p, real, ev)
			}
		}
	})
}

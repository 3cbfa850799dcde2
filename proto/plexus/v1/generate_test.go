package plexusv1_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
)

// TestGeneratedCodeIsCurrent regenerates the Go code from the .proto files
// with the pinned buf and protoc plugins (proto/tools.mod) into a temporary
// directory and fails when the committed files differ, so a .proto change
// cannot land without its generated code. It also runs buf lint. Fix a
// failure with `go tool -modfile=proto/tools.mod buf generate` from the
// repository root.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("builds buf; skipped in -short mode")
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	buf := func(args ...string) {
		t.Helper()
		cmd := exec.Command("go", append([]string{"tool", "-modfile=proto/tools.mod", "buf"}, args...)...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("buf %v: %v\n%s", args, err, out)
		}
	}
	buf("lint")
	tmp := t.TempDir()
	buf("generate", "--output", tmp)

	fresh, err := filepath.Glob(filepath.Join(tmp, "proto", "plexus", "v1", "*.pb.go"))
	if err != nil || len(fresh) == 0 {
		t.Fatalf("buf generated nothing (%v)", err)
	}
	committed, err := filepath.Glob("*.pb.go")
	if err != nil {
		t.Fatal(err)
	}
	names := func(paths []string) []string {
		var out []string
		for _, p := range paths {
			out = append(out, filepath.Base(p))
		}
		sort.Strings(out)
		return out
	}
	if got, want := names(committed), names(fresh); !equal(got, want) {
		t.Fatalf("committed generated files %v, buf generates %v", got, want)
	}
	for _, f := range fresh {
		want, _ := os.ReadFile(f)
		got, err := os.ReadFile(filepath.Base(f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run `go tool -modfile=proto/tools.mod buf generate` from the repository root", filepath.Base(f))
		}
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

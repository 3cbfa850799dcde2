package plexusv1_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "after regenerating with buf and finding the committed code current, rewrite generated.sum")

// checkGeneratedEnv, set to 1 (.ci/run sets it), makes
// TestGeneratedCodeIsCurrent build buf and regenerate the code; without it
// the test compares checksums only.
const checkGeneratedEnv = "PLEXUS_CHECK_GENERATED"

// sumFile records the SHA-256 of the code generator's inputs (the .proto
// files, buf's configuration, the pinned generator versions) and of its
// output (the *.pb.go files), one "HEX  PATH" line each, as sha256sum
// prints them. The full check writes it (with -update) only after buf
// regenerated exactly the committed code, so a matching sum file means
// the code was generated from these inputs.
const sumFile = "generated.sum"

// TestGeneratedCodeIsCurrent fails when the committed generated code may
// not match the .proto files, so a .proto change cannot land without its
// generated code.
//
// Always, cheaply: the SHA-256 of every input and output file must match
// generated.sum. With PLEXUS_CHECK_GENERATED=1 (CI) or -update, it also
// runs buf lint and regenerates the Go code with the pinned buf and protoc
// plugins (proto/tools.mod) into a temporary directory, and fails when the
// committed files differ; building buf takes minutes the first time (then
// it is in the Go build cache). With -update and current code it rewrites
// generated.sum. After editing a .proto file, from the repository root:
//
//	go tool -modfile=proto/tools.mod buf generate
//	go test ./proto/plexus/v1 -run TestGeneratedCodeIsCurrent -update
func TestGeneratedCodeIsCurrent(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	full := os.Getenv(checkGeneratedEnv) == "1" || *update
	if full {
		regenerate(t, root)
		if t.Failed() {
			return
		}
	}
	got, err := sums(root)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(sumFile, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", sumFile)
		return
	}
	want, err := os.ReadFile(sumFile)
	if err != nil {
		t.Fatalf("%v: record it with `go test ./proto/plexus/v1 -run TestGeneratedCodeIsCurrent -update` (after `go tool -modfile=proto/tools.mod buf generate`)", err)
	}
	if changed := diffSums(string(want), got); len(changed) > 0 {
		t.Fatalf("changed since the Go code was generated and %s written: %s\n"+
			"From the repository root, regenerate with `go tool -modfile=proto/tools.mod buf generate`, then check and record it with "+
			"`go test ./proto/plexus/v1 -run TestGeneratedCodeIsCurrent -update`", sumFile, strings.Join(changed, ", "))
	}
	if !full {
		t.Logf("compared checksums with %s only; %s=1 also regenerates the code with buf (minutes the first time)", sumFile, checkGeneratedEnv)
	}
}

// regenerate runs buf lint and buf generate into a temporary directory and
// compares the result with the committed *.pb.go files.
func regenerate(t *testing.T, root string) {
	t.Helper()
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
	names := func(paths []string) string {
		var out []string
		for _, p := range paths {
			out = append(out, filepath.Base(p))
		}
		sort.Strings(out)
		return strings.Join(out, " ")
	}
	if got, want := names(committed), names(fresh); got != want {
		t.Fatalf("committed generated files [%s], buf generates [%s]", got, want)
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

// sums returns the contents of generated.sum for the files as they are:
// the generator's inputs and outputs, sorted by path (slash-separated,
// relative to the repository root).
func sums(root string) (string, error) {
	var paths []string
	for _, pattern := range []string{"proto/plexus/v1/*.proto", "proto/plexus/v1/*.pb.go"} {
		m, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(pattern)))
		if err != nil {
			return "", err
		}
		for _, p := range m {
			rel, _ := filepath.Rel(root, p)
			paths = append(paths, filepath.ToSlash(rel))
		}
	}
	paths = append(paths, "buf.yaml", "buf.gen.yaml", "proto/tools.mod", "proto/tools.sum")
	sort.Strings(paths)
	var b strings.Builder
	for _, p := range paths {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p)))
		if err != nil {
			return "", err
		}
		h := sha256.Sum256(data)
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(h[:]), p)
	}
	return b.String(), nil
}

// diffSums names the paths whose sums differ between two sum files, or
// that only one of them lists.
func diffSums(want, got string) []string {
	parse := func(s string) map[string]string {
		m := map[string]string{}
		for _, line := range strings.Split(s, "\n") {
			if sum, path, ok := strings.Cut(line, "  "); ok {
				m[path] = sum
			}
		}
		return m
	}
	w, g := parse(want), parse(got)
	var out []string
	for p, s := range g {
		if w[p] != s {
			out = append(out, p)
		}
	}
	for p := range w {
		if _, ok := g[p]; !ok {
			out = append(out, p+" (gone)")
		}
	}
	sort.Strings(out)
	return out
}

package faultsuite_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/plexus-agent/plexus/internal/faultsuite"
)

// bin is the plexus binary under test, built once by TestMain.
var bin string

func TestMain(m *testing.M) {
	if bin = os.Getenv("PLEXUS_FAULT_BIN"); bin != "" {
		// Another build (an older one, to see what the suite catches).
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "plexus-faultsuite")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "plexus")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/plexus").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build plexus: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func options(t *testing.T) faultsuite.Options {
	if testing.Short() {
		t.Skip("the fault-injection suite kills and restarts plexus servers for a minute or two; -short skips it")
	}
	o, err := faultsuite.OptionsFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestFaultsHTTP(t *testing.T) { faultsuite.RunHTTP(t, bin, options(t)) }

func TestFaultsTask(t *testing.T) { faultsuite.RunTask(t, bin, options(t)) }

func TestFaultsUnix(t *testing.T) { faultsuite.RunUnix(t, bin, options(t)) }

func TestFaultsNDJSON(t *testing.T) { faultsuite.RunStdio(t, bin, "ndjson", options(t)) }

func TestFaultsLSPStdio(t *testing.T) { faultsuite.RunStdio(t, bin, "lsp-stdio", options(t)) }

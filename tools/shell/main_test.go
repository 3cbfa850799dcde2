package shell

import (
	"os"
	"slices"
	"testing"
)

// TestMain lets the test binary stand in for the plexus binary: run as
// `shell.test plugin sandbox-exec ...` it is the sandbox launcher (as
// Options.Launcher defaults to os.Executable() with those arguments), and
// run as `shell.test netprobe ...` it is the network probe the sandbox
// tests run inside the sandbox.
func TestMain(m *testing.M) {
	if n := len(launcherCommand); len(os.Args) > n && slices.Equal(os.Args[1:1+n], launcherCommand) {
		os.Exit(SandboxMain(os.Args[1+n:]))
	}
	if len(os.Args) > 1 && os.Args[1] == netProbeArg {
		os.Exit(netProbe(os.Args[2:]))
	}
	os.Exit(m.Run())
}

//go:build !linux

package shell

import (
	"fmt"
	"os"
	"runtime"
)

// landlockABI reports that Landlock is Linux-only.
func landlockABI() (int, string) {
	return 0, fmt.Sprintf("Landlock is Linux-only and this is %s", runtime.GOOS)
}

// findBwrap reports that bubblewrap is Linux-only.
func findBwrap(string) (string, string) {
	return "", fmt.Sprintf("bubblewrap is Linux-only and this is %s", runtime.GOOS)
}

// seccompAvailable reports that seccomp is Linux-only.
func seccompAvailable() (bool, string) {
	return false, fmt.Sprintf("seccomp is Linux-only and this is %s", runtime.GOOS)
}

// SandboxMain is the sandbox launcher on Linux (see the Linux
// documentation). Elsewhere it prints that it cannot confine anything and
// returns 126 without running the program.
func SandboxMain(args []string) int {
	fmt.Fprintf(os.Stderr, "plexus plugin sandbox-exec: the Landlock sandbox is Linux-only and this is %s\n", runtime.GOOS)
	return 126
}

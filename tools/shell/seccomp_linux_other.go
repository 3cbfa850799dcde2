//go:build linux && !amd64 && !arm64

package shell

// seccompArches reports that the network filter does not know this
// architecture's system call numbers; Landlock's network rules are then
// all that restricts the network.
func seccompArches() (seccompTable, bool) { return seccompTable{}, false }

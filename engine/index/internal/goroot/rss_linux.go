package goroot

import (
	"os"
	"syscall"
)

// MaxRSS returns the peak resident set size of a finished process, in
// bytes, and whether the platform reports it.
func MaxRSS(ps *os.ProcessState) (int64, bool) {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0, false
	}
	return ru.Maxrss << 10, true // Linux reports kilobytes
}

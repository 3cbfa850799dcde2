//go:build !linux

package goroot

import "os"

// MaxRSS returns the peak resident set size of a finished process, in
// bytes, and whether the platform reports it; here it does not.
func MaxRSS(ps *os.ProcessState) (int64, bool) { return 0, false }

//go:build darwin || freebsd || netbsd || openbsd

package plugins

import "syscall"

func statTimes(st *syscall.Stat_t) (mtimeNs, ctimeNs int64) {
	return st.Mtimespec.Nano(), st.Ctimespec.Nano()
}

package plugins

import "syscall"

func statTimes(st *syscall.Stat_t) (mtimeNs, ctimeNs int64) {
	return st.Mtim.Nano(), st.Ctim.Nano()
}

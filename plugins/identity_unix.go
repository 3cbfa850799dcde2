//go:build linux || darwin || freebsd || netbsd || openbsd

package plugins

import (
	"os"
	"syscall"
)

// identityOf returns f's FileIdentity; ok is false where the platform's
// stat does not give one (then every launch hashes).
func identityOf(f *os.File) (id FileIdentity, ok bool, err error) {
	fi, err := f.Stat()
	if err != nil {
		return id, false, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return id, false, nil
	}
	mtime, ctime := statTimes(st)
	return FileIdentity{Dev: uint64(st.Dev), Ino: uint64(st.Ino), Size: st.Size, MtimeNs: mtime, CtimeNs: ctime}, true, nil
}

// ownedBySelf reports whether fi's owner is this process's user.
func ownedBySelf(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid()
}

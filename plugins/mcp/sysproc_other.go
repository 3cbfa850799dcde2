//go:build !linux

package mcp

import "syscall"

// serverSysProcAttr starts a stdio server in its own process group (see
// the Linux version; there is no parent-death signal here).
func serverSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// killGroup sends SIGKILL to process group pgid; 0 does nothing.
func killGroup(pgid int) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

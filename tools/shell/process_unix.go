//go:build unix && !linux

package shell

import (
	"errors"
	"syscall"
)

// sysProcAttr puts the shell in a process group of its own, so the whole
// group can be signalled. Outside Linux there is no parent-death signal: a
// plugin that dies leaves the command running.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// groupAlive reports whether any process of group pgid still exists.
// Zombies count, so a group whose members wait to be reaped looks alive
// until the wait for it times out.
func groupAlive(pgid int) bool {
	return !errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}

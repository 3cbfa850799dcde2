//go:build !linux

package contain

import (
	"errors"
	"syscall"
)

// sysProcAttr starts the process in a new session, so the terminal's
// Ctrl-C reaches only the engine; there is no parent-death signal here.
func sysProcAttr(Mode) *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }

func probe() (Mode, error) {
	return Session, errors.New("PID namespaces exist only on Linux")
}

// kill kills pid's process group (its session's first group): without
// /proc, the processes that left it cannot be found.
func kill(pid int, _ Mode) int {
	if pid > 0 {
		syscall.Kill(-pid, syscall.SIGKILL)
		syscall.Kill(pid, syscall.SIGKILL)
	}
	return 0
}

func reapSession(int) int { return 0 }

package mcp

import "syscall"

// serverSysProcAttr starts a stdio server as the leader of a new process
// group, so that killGroup also reaches what it started (npx starts the
// real server as a grandchild), and so that the terminal's Ctrl-C reaches
// only the engine. Pdeathsig kills the server if the engine dies without
// closing it.
func serverSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup sends SIGKILL to process group pgid (a stdio server's pid);
// 0 does nothing.
func killGroup(pgid int) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

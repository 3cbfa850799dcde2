package shell

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
)

// sysProcAttr puts the command in a process group of its own (so the
// whole group can be signalled) and has the kernel SIGKILL it when the
// plugin process dies. It stays in the plugin's session: the plugin host
// starts plugins as session leaders without a controlling terminal and,
// after a plugin crash, kills what is left in its session. Pdeathsig fires
// when the thread that started the command exits; the Go runtime does not
// end threads of goroutines that are not locked to one, so in practice
// that is when the process dies. Pdeathsig survives the sandbox launcher's
// exec of the shell; processes the shell starts do not inherit it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// groupAlive reports whether any process of group pgid is still running.
// Zombies do not count: they run nothing and hold no pipes, and their
// reaper (often PID 1, which is slow to reap in many containers) is not us.
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	live, err := liveGroupMember(pgid)
	if err != nil {
		return true // no /proc: trust kill(2)
	}
	return live
}

// liveGroupMember scans /proc for a process of group pgid that is not a
// zombie.
func liveGroupMember(pgid int) (bool, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return false, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return false, err
	}
	for _, name := range names {
		if name == "" || name[0] < '0' || name[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		state, pgrp, ok := parseStat(b)
		if ok && pgrp == pgid && state != 'Z' && state != 'X' {
			return true, nil
		}
	}
	return false, nil
}

// parseStat returns the state and process group of a /proc/PID/stat line:
// "PID (COMM) STATE PPID PGRP ...", where COMM may contain spaces and
// parentheses.
func parseStat(b []byte) (state byte, pgrp int, ok bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return 0, 0, false
	}
	pgrp, err := strconv.Atoi(string(f[2]))
	if err != nil {
		return 0, 0, false
	}
	return f[0][0], pgrp, true
}

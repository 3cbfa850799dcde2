package plugins

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// pluginSysProcAttr starts a plugin as the leader of a new session: it and
// every process it starts share a session id (its pid), which lets reap
// find them all, and the terminal's Ctrl-C reaches only the engine, which
// then shuts plugins down in order. Pdeathsig kills the plugin if the
// engine dies without shutting it down.
func pluginSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
}

// reap kills every process left in session sid (a plugin's pid) after the
// plugin itself has exited: processes a crashed plugin started and could
// not stop. It retries briefly because a dying process may still fork.
func reap(sid int) (killed int) {
	if sid <= 0 {
		return 0
	}
	for attempt := 0; attempt < 5; attempt++ {
		pids := sessionMembers(sid)
		if len(pids) == 0 {
			return killed
		}
		for _, pid := range pids {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed++
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return killed
}

// sessionMembers lists live processes (zombies excluded) whose session id
// is sid, from /proc.
func sessionMembers(sid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		state, session, err := procStat(pid)
		if err != nil || session != sid || state == 'Z' || state == 'X' {
			continue
		}
		out = append(out, pid)
	}
	return out
}

// procStat reads the state and session id of pid from /proc/PID/stat
// (proc(5): "pid (comm) state ppid pgrp session ...").
func procStat(pid int) (state byte, session int, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	fields := bytes.Fields(b[i+1:])
	if len(fields) < 4 {
		return 0, 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	session, err = strconv.Atoi(string(fields[3]))
	return fields[0][0], session, err
}

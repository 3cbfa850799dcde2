package contain

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

func sysProcAttr(mode Mode) *syscall.SysProcAttr {
	switch mode {
	case PIDNamespace:
		return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Cloneflags: syscall.CLONE_NEWPID}
	case UserPIDNamespace:
		uid, gid := os.Getuid(), os.Getgid()
		return &syscall.SysProcAttr{
			Setpgid: true, Pdeathsig: syscall.SIGKILL,
			Cloneflags:  syscall.CLONE_NEWPID | syscall.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}},
		}
	}
	// A session of its own: the descendants that stay in it are found by
	// Kill, and the autogroup scheduler's per-session group (which costs
	// a new process several milliseconds on a busy machine) is paid only
	// in this mode.
	return &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
}

// probe tries the namespace modes, strongest first, by starting "/" with
// each: the clone (and the uid/gid maps) must succeed and the exec then
// fails with EACCES, "/" being a directory, so nothing runs.
func probe() (Mode, error) {
	var last error
	for _, mode := range []Mode{PIDNamespace, UserPIDNamespace} {
		attr := sysProcAttr(mode)
		attr.Pdeathsig = 0
		pid, err := syscall.ForkExec("/", []string{"/"}, &syscall.ProcAttr{Sys: attr})
		if err == nil { // cannot happen; do not leave it behind
			syscall.Kill(pid, syscall.SIGKILL)
			var ws syscall.WaitStatus
			syscall.Wait4(pid, &ws, 0, nil)
			return mode, nil
		}
		if errors.Is(err, syscall.EACCES) {
			return mode, nil
		}
		last = fmt.Errorf("%s: %w", mode, err)
	}
	return Session, last
}

func kill(pid int, mode Mode) int {
	if pid <= 0 {
		return 0
	}
	if mode != Session {
		syscall.Kill(pid, syscall.SIGKILL)
		return 0
	}
	syscall.Kill(pid, syscall.SIGKILL)
	return reapSession(pid)
}

// reapSession kills every process left in session sid. It retries briefly
// because a dying process may still fork.
func reapSession(sid int) (killed int) {
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
// is sid, from /proc; never the caller.
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

package contain

import (
	"os/exec"
	"sync"
)

// Mode is how a started process and its descendants are contained; see
// the package documentation.
type Mode int

// Modes, weakest first.
const (
	// Session: a new session; Kill finds descendants by session id.
	Session Mode = iota
	// PIDNamespace: init of a new PID namespace (privileged engine).
	PIDNamespace
	// UserPIDNamespace: init of a new PID namespace inside a new user
	// namespace mapping only the engine's uid and gid.
	UserPIDNamespace
)

// String names the mode as logs and `plexus plugins` show it.
func (m Mode) String() string {
	switch m {
	case PIDNamespace:
		return "pid namespace"
	case UserPIDNamespace:
		return "pid namespace in a user namespace"
	}
	return "session"
}

// SurvivesSIGKILL reports whether, in this mode, every descendant ends
// even when the engine is killed with SIGKILL.
func (m Mode) SurvivesSIGKILL() bool { return m != Session }

var (
	availableOnce sync.Once
	available     Mode
	probeErr      error
)

// Available returns the strongest mode this process can use. It is
// probed on first use (a fork that creates the namespaces and fails its
// exec on purpose, about a millisecond) and cached.
func Available() Mode {
	availableOnce.Do(func() { available, probeErr = probe() })
	return available
}

// Why explains, after Available, why no namespace mode is available (the
// error of the last probe); nil when one is.
func Why() error {
	Available()
	return probeErr
}

// Apply sets cmd.SysProcAttr (replacing any) so that cmd starts contained
// in mode. Set Cmd.Dir, Env and the pipes as usual.
func Apply(cmd *exec.Cmd, mode Mode) { cmd.SysProcAttr = sysProcAttr(mode) }

// Kill sends SIGKILL to pid, a process started with Apply(mode), and to
// every process it left: in a namespace mode the kernel does that as the
// namespace's init dies; in Session mode the processes left in its
// session are killed (again, briefly, while a dying one may still fork).
// It returns how many processes besides pid were killed by this call.
func Kill(pid int, mode Mode) int { return kill(pid, mode) }

// Reap kills what is left of a Session-mode process's session after the
// process itself has exited, and returns how many it killed; it does
// nothing for a namespace mode (the kernel already has) or pid <= 0.
func Reap(pid int, mode Mode) int {
	if mode != Session {
		return 0
	}
	return reapSession(pid)
}

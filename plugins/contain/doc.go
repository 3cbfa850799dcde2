// Package contain starts a process so that it and every process it starts
// end together: when the process exits, when its parent (the engine) calls
// Kill, and, where the operating system allows it, when the engine itself
// is killed with SIGKILL. The plugin host uses it for plugin processes and
// MCP stdio servers; any other part of Plexus that starts a long-lived
// process can use it the same way:
//
//	mode := contain.Available()
//	cmd := exec.Command(path)
//	contain.Apply(cmd, mode)
//	err := cmd.Start()
//	...
//	contain.Kill(cmd.Process.Pid, mode) // it and everything it started
//
// The mechanism, by Mode (Available picks the strongest that works, probed
// once per process):
//
//   - PIDNamespace, UserPIDNamespace (Linux): the process is the first
//     process (init) of a new PID namespace, created with CLONE_NEWPID, and
//     gets the parent-death signal SIGKILL. Every process it starts is in
//     that namespace and cannot leave it; processes that call setsid or
//     daemonise by forking twice are reparented to it, not to the host's
//     init. When it exits or is killed, the kernel kills every other
//     process of the namespace (pid_namespaces(7)); when the engine dies,
//     even by SIGKILL, the parent-death signal kills it, and so the whole
//     namespace. No helper process is needed and nothing has to run when
//     the engine is gone, which is why this is used rather than a child
//     subreaper (a subreaper must itself outlive the engine to kill what it
//     reaped, and dies with it under the same parent-death signal) or a
//     cgroup (nothing kills a cgroup once its owner is dead, and an
//     unprivileged user rarely owns one to create). Creating a PID
//     namespace needs CAP_SYS_ADMIN: a privileged engine (root, as in CI
//     and containers) uses PIDNamespace; an unprivileged one creates a user
//     namespace first (UserPIDNamespace), which maps only the engine's own
//     uid and gid, where unprivileged user namespaces are allowed. The
//     process group is a new one (setpgid), so the terminal's Ctrl-C
//     reaches only the engine.
//   - Session (everywhere else: no namespaces allowed, as in Docker's
//     default seccomp profile or with kernel.unprivileged_userns_clone=0,
//     or not Linux): the process leads a new session (setsid) and gets the
//     parent-death signal where the system has one. Kill then kills every
//     process left in that session, found in /proc. Processes that leave
//     the session (setsid, daemons) escape, and when the engine is
//     SIGKILLed only the process itself dies.
//
// What a contained process sees differently (namespace modes): getpid()
// is 1 and its children's pids are counted in its namespace, while /proc
// is still the host's (no mount namespace is made: that needs code to run
// between fork and exec), so tools that mix the two views (ps, pgrep,
// pkill, pid files checked in /proc) see the host's numbers. As its
// namespace's init, it receives only the signals it installed a handler
// for (SIGKILL from the engine always works), and orphaned processes are
// reparented to it, so a process that never waits for them leaves zombies
// until it exits. In a user namespace, files owned by other users show
// as owned by the overflow id (nobody) and set-user-ID programs (sudo)
// do not raise privileges; permission checks are unchanged.
//
// Not contained in any mode: processes that another service starts on a
// contained process's behalf (systemd-run, a Docker container, an ssh
// session), which are not its descendants.
package contain

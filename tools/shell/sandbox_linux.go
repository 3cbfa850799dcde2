package shell

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// landlockABI returns the kernel's Landlock ABI version, or 0 and why
// there is none.
func landlockABI() (int, string) {
	v, err := llsys.LandlockGetABIVersion()
	switch {
	case errors.Is(err, syscall.ENOSYS):
		return 0, "the kernel has no Landlock support (Linux 5.13 or later built with CONFIG_SECURITY_LANDLOCK has)"
	case errors.Is(err, syscall.EOPNOTSUPP):
		return 0, "Landlock is disabled in this kernel (add landlock to its lsm= boot parameter)"
	case err != nil:
		return 0, fmt.Sprintf("the kernel's Landlock ABI version cannot be read: %v", err)
	case v < 1:
		return 0, fmt.Sprintf("the kernel reports Landlock ABI version %d", v)
	}
	return v, ""
}

// bwrapProbeTimeout bounds the trial run of bubblewrap.
const bwrapProbeTimeout = 10 * time.Second

// findBwrap returns the path of a bubblewrap that can create the
// namespaces run_command uses, or "" and why not. name is a path or a
// name looked up in PATH ("bwrap" when empty). The trial runs bwrap
// --version inside the same kind of sandbox.
func findBwrap(name string) (string, string) {
	if name == "" {
		name = "bwrap"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Sprintf("bubblewrap is not installed (%v)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), bwrapProbeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "--die-with-parent", "--unshare-pid", "--unshare-net", "--cap-drop", "ALL",
		"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--", path, "--version")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return "", fmt.Sprintf("bubblewrap (%s) cannot create its sandbox here: %s", path, msg)
	}
	return path, ""
}

// seccompAvailable reports whether this process can install the network
// seccomp filter, or why not.
func seccompAvailable() (bool, string) {
	if _, ok := seccompArches(); !ok {
		return false, fmt.Sprintf("the network seccomp filter does not support %s", runtime.GOARCH)
	}
	action := uint32(unix.SECCOMP_RET_ERRNO)
	if err := seccompCall(unix.SECCOMP_GET_ACTION_AVAIL, 0, unsafe.Pointer(&action)); err != nil {
		return false, fmt.Sprintf("seccomp filters are unavailable (%v)", err)
	}
	return true, ""
}

// launcherName prefixes the launcher's messages.
const launcherName = "plexus plugin sandbox-exec"

const launcherUsage = `usage: plexus plugin sandbox-exec --workspace DIR --tmp DIR [--write DIR]... [--allow-network] [--status-fd N] -- PROGRAM [ARG]...

Confines itself with Landlock (and, unless --allow-network, a seccomp filter
that refuses network sockets), then executes PROGRAM in its place. PROGRAM
may read everywhere but write only below the workspace, the temporary
directory and the --write directories, and to /dev/null, /dev/zero and
/dev/full. Started by the shell plugin, not by hand.
`

// launcherConfig is the parsed command line of SandboxMain.
type launcherConfig struct {
	workspace    string
	tmp          string
	writable     []string
	allowNetwork bool
	statusFD     int // -1: report to stderr
	argv         []string
}

// stringsFlag is a repeatable string flag.
type stringsFlag []string

func (s *stringsFlag) String() string { return strings.Join(*s, ",") }

func (s *stringsFlag) Set(v string) error {
	*s = append(*s, v)
	return nil
}

// parseLauncherArgs parses the arguments of SandboxMain. On an error the
// config holds what was parsed before it, --status-fd in particular.
func parseLauncherArgs(args []string) (launcherConfig, error) {
	c := launcherConfig{statusFD: -1}
	fs := flag.NewFlagSet("sandbox-exec", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.workspace, "workspace", "", "the workspace directory (writable)")
	fs.StringVar(&c.tmp, "tmp", "", "the command's temporary directory (writable)")
	fs.Var((*stringsFlag)(&c.writable), "write", "another writable directory, ignored when missing (repeatable)")
	fs.BoolVar(&c.allowNetwork, "allow-network", false, "do not restrict network access")
	fs.IntVar(&c.statusFD, "status-fd", -1, "file descriptor to report a failure to start on, instead of stderr")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.argv = fs.Args()
	switch {
	case c.workspace == "" || c.tmp == "":
		return c, errors.New("--workspace and --tmp are required")
	case !filepath.IsAbs(c.workspace) || !filepath.IsAbs(c.tmp):
		return c, errors.New("--workspace and --tmp must be absolute paths")
	case len(c.argv) == 0:
		return c, errors.New("no program to run after --")
	}
	for _, d := range c.writable {
		if !filepath.IsAbs(d) {
			return c, fmt.Errorf("--write %s: not an absolute path", d)
		}
	}
	return c, nil
}

// SandboxMain is the sandbox launcher, run as
//
//	plexus plugin sandbox-exec --workspace DIR --tmp DIR [--write DIR]... [--allow-network] [--status-fd N] -- PROGRAM [ARG]...
//
// (args are the arguments after sandbox-exec). It confines its own
// process, then executes PROGRAM (looked up in PATH) in its place, with the
// same process ID, environment and file descriptors, so the confinement
// holds for PROGRAM and everything it starts:
//
//   - Landlock: reading and executing is allowed everywhere; writing,
//     creating (but not device nodes), removing and renaming only below
//     the --workspace, --tmp and --write directories (missing --write
//     directories are skipped), plus writing to /dev/null, /dev/zero and
//     /dev/full. Unless --allow-network, TCP connect and bind are refused
//     (ABI 4). From ABI 6, signals to processes outside the sandbox and
//     connections to abstract Unix sockets they created are refused.
//   - Capabilities (when run as root): the bounding, inheritable and
//     ambient sets keep only keptCapabilities, so PROGRAM, though root,
//     cannot load kernel modules, create device nodes or reconfigure the
//     network.
//   - Unless --allow-network, a seccomp filter: socket(2) fails with EACCES
//     for every family but Unix and netlink (so UDP, Multipath TCP, which
//     Landlock does not see, and raw sockets too), and io_uring, which
//     could create sockets past the filter, is unavailable (ENOSYS).
//     Without seccomp support the launcher goes on with Landlock's TCP
//     rules alone.
//
// SandboxMain returns only when it fails, with the exit status to use: 2
// for bad arguments, 126 when the sandbox cannot be set up or PROGRAM
// cannot be executed, 127 when PROGRAM is not found. The message goes to
// file descriptor N when --status-fd is given (it is closed on a
// successful exec, so the starter reads end of file), else to stderr.
// It never runs PROGRAM unconfined: a kernel without Landlock is a
// failure.
func SandboxMain(args []string) int {
	// Before ABI 8 Landlock and seccomp confine the calling thread (the
	// libraries sync them to the others); exec from the same one.
	runtime.LockOSThread()
	c, err := parseLauncherArgs(args)
	fail := func(code int, format string, a ...any) int {
		msg := fmt.Sprintf(format, a...)
		if c.statusFD >= 0 {
			f := os.NewFile(uintptr(c.statusFD), "status")
			if _, err := io.WriteString(f, msg); err == nil {
				return code
			}
		}
		fmt.Fprintf(os.Stderr, "%s: %s\n", launcherName, msg)
		return code
	}
	if c.statusFD >= 0 {
		syscall.CloseOnExec(c.statusFD)
	}
	if err != nil {
		if c.statusFD >= 0 {
			return fail(2, "bad arguments: %v", err)
		}
		fmt.Fprintf(os.Stderr, "%s: %v\n\n%s", launcherName, err, launcherUsage)
		return 2
	}
	path, err := exec.LookPath(c.argv[0])
	if err != nil {
		return fail(127, "cannot run %s: %v", c.argv[0], err)
	}
	if err := restrictSelf(c); err != nil {
		return fail(126, "cannot set up the sandbox: %v", err)
	}
	err = syscall.Exec(path, c.argv, os.Environ())
	return fail(126, "cannot execute %s in the sandbox: %v", path, err)
}

// writableAccess is what a command may do below the writable directories:
// everything go-landlock's RWDirs grants except creating device nodes, which
// root could use to reach a disk from inside the workspace.
const writableAccess = landlock.AccessFSSet(llsys.AccessFSExecute | llsys.AccessFSReadFile | llsys.AccessFSReadDir |
	llsys.AccessFSWriteFile | llsys.AccessFSTruncate | llsys.AccessFSRemoveDir | llsys.AccessFSRemoveFile |
	llsys.AccessFSMakeDir | llsys.AccessFSMakeReg | llsys.AccessFSMakeSock | llsys.AccessFSMakeFifo | llsys.AccessFSMakeSym)

// restrictSelf applies the Landlock rules of c to this process, limits
// its capabilities (see dropCapabilities) and, unless the network is
// allowed, installs the network seccomp filter.
func restrictSelf(c launcherConfig) error {
	abi, why := landlockABI()
	if abi == 0 {
		return errors.New(why)
	}
	// Every access right go-landlock knows; BestEffort keeps those of
	// the running kernel.
	cfg := landlock.V11
	if c.allowNetwork {
		cfg.HandledAccessNet = 0
	}
	access := writableAccess
	if abi >= 2 {
		// Moving and linking files between directories. ABI 1 cannot
		// grant it, and asking for it there would make best-effort
		// mode give up on Landlock altogether.
		access |= llsys.AccessFSRefer
	}
	rules := []landlock.Rule{
		landlock.RODirs("/"),
		landlock.PathAccess(access, c.workspace, c.tmp),
		landlock.RWFiles(writableDevices...).IgnoreIfMissing(),
	}
	if len(c.writable) > 0 {
		rules = append(rules, landlock.PathAccess(access, c.writable...).IgnoreIfMissing())
	}
	if err := cfg.BestEffort().Restrict(rules...); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	if err := dropCapabilities(); err != nil {
		return err
	}
	if c.allowNetwork {
		return nil
	}
	if ok, _ := seccompAvailable(); !ok {
		// Landlock's network rules (ABI 4) are all there is; the
		// plugin's description and warning say what is missing.
		return nil
	}
	if err := installNetworkFilter(); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	return nil
}

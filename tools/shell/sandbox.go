package shell

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// SandboxMode selects how run_command confines a command; see
// Options.Sandbox.
type SandboxMode string

const (
	// SandboxAuto (the zero value) uses the best sandbox the system has:
	// Landlock when the kernel supports it (with a seccomp filter for the
	// network), else bubblewrap when it is installed and works, else none,
	// with a warning streamed before every command. Bubblewrap is also
	// preferred when Landlock is there but neither its network rules (ABI
	// 4) nor seccomp are, so that the network is still cut off.
	SandboxAuto SandboxMode = ""
	// SandboxLandlock requires Landlock; calls fail when the kernel lacks
	// it.
	SandboxLandlock SandboxMode = "landlock"
	// SandboxBubblewrap requires bubblewrap (bwrap); calls fail when it is
	// not installed or cannot create its namespaces.
	SandboxBubblewrap SandboxMode = "bubblewrap"
	// SandboxNone runs commands unconfined; every call streams a warning
	// saying so.
	SandboxNone SandboxMode = "none"
)

// launcherCommand is the argv, after the plexus binary, that runs
// SandboxMain.
var launcherCommand = []string{"plugin", "sandbox-exec"}

// writableDevices are the device files a sandboxed command may open for
// writing: the sinks that scripts redirect to. /dev/tty is not among them:
// the plugin host starts plugins without a controlling terminal, and when
// a plugin is started some other way, commands should not write to its
// terminal.
var writableDevices = []string{"/dev/null", "/dev/zero", "/dev/full"}

// sandboxKind names the mechanism of a sandboxPlan.
type sandboxKind string

const (
	kindLandlock   sandboxKind = "landlock"
	kindBubblewrap sandboxKind = "bubblewrap"
	kindNone       sandboxKind = "none"
)

// sandboxProbe is what the system offers for sandboxing. Each Why field
// says, for people, why the matching feature is missing.
type sandboxProbe struct {
	landlockABI int // 0: no Landlock
	landlockWhy string
	seccomp     bool // seccomp filters can be installed
	seccompWhy  string
	launcher    []string // argv that starts SandboxMain; nil: launcherWhy
	launcherWhy string
}

// sandboxPlan is how every command of a Tools is started, decided once by
// chooseSandbox.
type sandboxPlan struct {
	kind sandboxKind
	// desc is Result.Sandbox.
	desc string
	// warning, when not empty, is streamed before every command: the
	// protections that are missing.
	warning string
	// err, when not empty, fails every call: Options demand a sandbox the
	// system does not have.
	err string

	network  bool     // commands may use the network
	writable []string // Options.WritableDirs
	launcher []string // kindLandlock: the argv that starts SandboxMain
	abi      int      // kindLandlock: the kernel's Landlock ABI
	seccomp  bool     // kindLandlock: the network is cut off by seccomp too
	bwrap    string   // kindBubblewrap: path of the bwrap binary
}

// chooseSandbox decides the sandbox for o (with defaults applied) on a
// system that offers p. findBwrap is called only when bubblewrap is
// considered; it returns the path of a working bwrap, or "" and why not.
func chooseSandbox(o Options, p sandboxProbe, findBwrap func() (string, string)) sandboxPlan {
	plan := sandboxPlan{network: o.AllowNetwork}
	for _, d := range o.WritableDirs {
		if !filepath.IsAbs(d) {
			plan.err = fmt.Sprintf("the options' writable directory %q is not an absolute path", d)
			return plan
		}
		plan.writable = append(plan.writable, filepath.Clean(d))
	}
	landlockWhy := p.landlockWhy
	if p.landlockABI > 0 && p.launcher == nil {
		landlockWhy = p.launcherWhy
	}
	landlockOK := landlockWhy == "" && p.landlockABI > 0
	// networkOK: Landlock alone can keep the command off the network.
	networkOK := o.AllowNetwork || p.seccomp || p.landlockABI >= 4
	switch o.Sandbox {
	case SandboxNone:
		return plan.none("disabled by options")
	case SandboxLandlock:
		if !landlockOK {
			plan.err = "the options require the Landlock sandbox, but " + landlockWhy
			return plan
		}
		return plan.landlock(p)
	case SandboxBubblewrap:
		bwrap, why := findBwrap()
		if bwrap == "" {
			plan.err = "the options require the bubblewrap sandbox, but " + why
			return plan
		}
		return plan.bubblewrap(bwrap)
	case SandboxAuto:
		if landlockOK && networkOK {
			return plan.landlock(p)
		}
		bwrap, bwrapWhy := findBwrap()
		switch {
		case bwrap != "":
			return plan.bubblewrap(bwrap)
		case landlockOK:
			plan = plan.landlock(p)
			plan.warning += "; bubblewrap, which would cut off the network, is unavailable: " + bwrapWhy
			return plan
		}
		return plan.none(landlockWhy + ", and " + bwrapWhy)
	}
	plan.err = fmt.Sprintf("unknown sandbox mode %q in the options; use %q, %q, %q or %q (auto)",
		o.Sandbox, SandboxLandlock, SandboxBubblewrap, SandboxNone, SandboxAuto)
	return plan
}

// landlock completes plan for the Landlock launcher, with the description
// and warnings that the kernel's ABI and seccomp call for.
func (plan sandboxPlan) landlock(p sandboxProbe) sandboxPlan {
	plan.kind, plan.launcher, plan.abi = kindLandlock, p.launcher, p.landlockABI
	plan.seccomp = !plan.network && p.seccomp
	var warnings []string
	what := "filesystem"
	if p.landlockABI < 3 {
		what = "filesystem (except truncation)"
		warnings = append(warnings, fmt.Sprintf("files outside the workspace can still be truncated: Landlock ABI %d cannot restrict that (ABI 3, Linux 6.2, can)", p.landlockABI))
	}
	switch {
	case plan.network:
		plan.desc = fmt.Sprintf("landlock abi %d: %s; network allowed", p.landlockABI, what)
	case plan.seccomp:
		plan.desc = fmt.Sprintf("landlock abi %d: %s and network", p.landlockABI, what)
	case p.landlockABI >= 4:
		plan.desc = fmt.Sprintf("landlock abi %d: %s and TCP", p.landlockABI, what)
		warnings = append(warnings, "only TCP connections and listening are blocked; UDP, Multipath TCP and raw sockets are not, because "+p.seccompWhy)
	default:
		plan.desc = fmt.Sprintf("landlock abi %d: %s only", p.landlockABI, what)
		warnings = append(warnings, fmt.Sprintf("the command can use the network: Landlock ABI %d has no network rules (ABI 4, Linux 6.7, has), and %s", p.landlockABI, p.seccompWhy))
	}
	if len(warnings) > 0 {
		plan.warning = fmt.Sprintf("warning: the sandbox is incomplete (%s): %s", plan.desc, strings.Join(warnings, "; "))
	}
	return plan
}

// bubblewrap completes plan for bwrap at path.
func (plan sandboxPlan) bubblewrap(path string) sandboxPlan {
	plan.kind, plan.bwrap, plan.desc = kindBubblewrap, path, "bubblewrap"
	if plan.network {
		plan.desc += "; network allowed"
	}
	return plan
}

// none completes plan for running commands unconfined because of why.
func (plan sandboxPlan) none(why string) sandboxPlan {
	plan.kind, plan.desc = kindNone, "none: "+why
	plan.warning = "warning: run_command is not sandboxed (" + why + "): the command can write wherever the user running Plexus can, and use the network"
	return plan
}

// argv is the command line that runs shell -c command in dir under the
// plan, for the workspace root and the private temporary directory tmp.
// The Landlock launcher reports a failure to start on file descriptor 3
// (the first of exec.Cmd.ExtraFiles).
func (plan sandboxPlan) argv(root, dir, tmp, shell, command string) []string {
	switch plan.kind {
	case kindLandlock:
		// --status-fd first, so that the launcher can report even a
		// mistake in the arguments after it.
		argv := slices.Clone(plan.launcher)
		argv = append(argv, "--status-fd", "3", "--workspace", root, "--tmp", tmp)
		for _, d := range plan.writable {
			argv = append(argv, "--write", d)
		}
		if plan.network {
			argv = append(argv, "--allow-network")
		}
		return append(argv, "--", shell, "-c", command)
	case kindBubblewrap:
		// --unshare-pid hides the processes outside (and their
		// /proc/PID/environ) from the command; --cap-drop ALL keeps a
		// command run as root from remounting / writable. No
		// --new-session: the command must stay in the process group
		// that run_command stops.
		argv := []string{plan.bwrap, "--die-with-parent", "--unshare-pid"}
		if !plan.network {
			argv = append(argv, "--unshare-net")
		}
		argv = append(argv, "--cap-drop", "ALL",
			"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
			"--bind", root, root, "--bind", tmp, tmp)
		for _, d := range plan.writable {
			argv = append(argv, "--bind-try", d, d)
		}
		return append(argv, "--chdir", dir, "--", shell, "-c", command)
	}
	return []string{shell, "-c", command}
}

// defaultLauncher is the argv that starts SandboxMain in this binary:
// os.Executable() plugin sandbox-exec, or nil and why not.
func defaultLauncher() ([]string, string) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Sprintf("the plexus binary cannot be found to re-execute it as the sandbox launcher: %v", err)
	}
	return append([]string{exe}, launcherCommand...), ""
}

// makeTempDir creates the private temporary directory of one command, mode
// 0700, in parent (os.TempDir() when empty), with symlinks resolved so
// that sandbox rules and the command see the same path.
func makeTempDir(parent string) (string, error) {
	dir, err := os.MkdirTemp(parent, "plexus-run-")
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		os.Remove(dir)
		return "", err
	}
	return real, nil
}

// removeTree removes dir and everything in it, also when the command left
// directories without write permission (as Go's module cache does).
func removeTree(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(path, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

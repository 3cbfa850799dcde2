package policy

import (
	"path"
	"slices"
	"strings"

	"github.com/plexus-agent/plexus/engine"
)

// Shorter names for the levels.
const (
	low      = engine.RiskLow
	medium   = engine.RiskMedium
	high     = engine.RiskHigh
	critical = engine.RiskCritical
)

// maxScriptDepth bounds how deep sh -c, eval and here-documents fed to a
// shell are assessed.
const maxScriptDepth = 4

// partInfo is what assessing one part found out about it.
type partInfo struct {
	fetch bool // it downloads (curl, wget, …)
	// interp: it runs code it is given (a shell, python, eval, source);
	// stdinCode: that code comes from its standard input.
	interp    bool
	stdinCode bool
	// feeds is text it writes to its standard output that is known now
	// (echo's arguments, a here-document's body).
	feeds []string
}

// assessLine assesses each part of a command line and the way the parts
// are connected: downloaded code piped or substituted into an interpreter
// is critical, and code fed to a shell through a pipe or a here-document
// is assessed as a command line of its own.
func assessLine(l *cmdLine, depth int) findings {
	var f findings
	if l.err != nil {
		f.add(medium, "the shell parser rejects the command (%s), so it is assessed by its raw words", describeSyntaxError(l.err))
	}
	if len(l.parts) == 0 {
		f.add(low, "the command is empty")
		return f
	}
	infos := make([]partInfo, len(l.parts))
	for i := range l.parts {
		a := &assessor{depth: depth, disp: displayTokens(l.parts[i].toks, 60), out: &f, info: &infos[i]}
		a.part(&l.parts[i])
	}
	// below[i]: a part inside a substitution of part i downloads. A part
	// comes after the part holding it, so one backward pass does.
	below := make([]bool, len(l.parts))
	for j := len(l.parts) - 1; j >= 0; j-- {
		if p := l.parts[j].parent; p >= 0 && (infos[j].fetch || below[j]) {
			below[p] = true
		}
	}
	// Per pipeline: the last part so far, and the last one that
	// downloads (itself or inside it).
	last := map[int]int{}
	fetcher := map[int]int{}
	for i := range l.parts {
		pipe := l.parts[i].pipe
		prev, hasPrev := last[pipe]
		if infos[i].interp {
			disp := displayTokens(l.parts[i].toks, 60)
			if below[i] {
				f.add(critical, "`%s` runs code downloaded by `%s`", disp, displayTokens(l.parts[firstFetchBelow(l, infos, i)].toks, 60))
			}
			if infos[i].stdinCode {
				if j, ok := fetcher[pipe]; ok {
					f.add(critical, "`%s` runs code downloaded by `%s`", disp, displayTokens(l.parts[j].toks, 60))
				}
				if hasPrev {
					for _, s := range infos[prev].feeds {
						f = append(f, assessScript(s, depth)...)
					}
				}
			}
		}
		last[pipe] = i
		if infos[i].fetch || below[i] {
			fetcher[pipe] = i
		}
	}
	return f
}

// firstFetchBelow returns the first part inside part i's substitutions
// that downloads (below[i] says there is one). The parts inside part i
// directly follow it.
func firstFetchBelow(l *cmdLine, infos []partInfo, i int) int {
	for j := i + 1; j < len(l.parts); j++ {
		if infos[j].fetch {
			for k := l.parts[j].parent; k >= 0; k = l.parts[k].parent {
				if k == i {
					return j
				}
			}
		}
	}
	return i
}

// assessScript assesses text a shell will run.
func assessScript(s string, depth int) findings {
	if depth+1 >= maxScriptDepth {
		var f findings
		f.add(high, "runs shell code nested too deeply to assess")
		return f
	}
	return assessLine(parseLine(s), depth+1)
}

// assessor assesses one part.
type assessor struct {
	depth int
	disp  string // the part, for reasons
	out   *findings
	info  *partInfo
	stdin []string // here-document bodies and here-strings of the part
}

func (a *assessor) add(level engine.RiskLevel, format string, args ...any) {
	a.out.add(level, "`"+a.disp+"` "+format, args...)
}

// part assesses one part: its redirections, then its program.
func (a *assessor) part(p *part) {
	if p.arith {
		a.add(low, "only computes a number")
		return
	}
	for _, r := range p.redirs {
		switch r.class {
		case opRedirOut:
			if quietTarget(r.target) {
				continue
			}
			switch scopeOf(r.target) {
			case scopeDevice:
				a.add(critical, "writes to the device %s", r.target)
			case scopeOutside:
				a.add(high, "writes %s, outside the workspace", shown(r.target))
			case scopeDynamic:
				a.add(medium, "writes to %s, a file named at run time", shown(r.target))
			default:
				a.add(medium, "writes %s", shown(r.target))
			}
		case opHeredoc:
			a.stdin = append(a.stdin, r.target)
		case opRedirIn:
			if r.op == "<<<" || strings.HasSuffix(r.op, "<<<") {
				a.stdin = append(a.stdin, r.target)
			}
		}
	}
	a.info.feeds = append(a.info.feeds, a.stdin...)
	words := p.words
	for len(words) > 0 && isAssignment(words[0]) {
		words = words[1:]
	}
	if len(words) == 0 {
		if len(p.redirs) == 0 {
			a.add(low, "only sets shell variables")
		} else {
			a.add(low, "only opens or redirects files")
		}
		return
	}
	a.command(words)
}

// isAssignment reports whether w is NAME=value.
func isAssignment(w string) bool {
	eq := strings.IndexByte(w, '=')
	return eq > 0 && envName.MatchString(w[:eq])
}

// shown renders a word for a reason.
func shown(w string) string {
	return truncate(strings.ReplaceAll(w, string(subMark), "$(…)"), 60)
}

// Scope of a path named in a command.
type scope uint8

const (
	scopeWorkspace scope = iota // relative, not climbing out
	scopeDynamic                // named at run time ($VAR, $(…))
	scopeOutside                // absolute, ~, $HOME, ..
	scopeDevice                 // /dev/… other than null, stdout, stderr, tty
)

// scopeOf says where a path named in a command lies. Absolute paths count
// as outside: the policy does not know where the workspace is.
func scopeOf(t string) scope {
	switch {
	case strings.HasPrefix(t, "/dev/") && !quietTarget(t):
		return scopeDevice
	case strings.ContainsRune(t, subMark):
		return scopeDynamic
	case strings.HasPrefix(t, "~"), strings.HasPrefix(t, "$HOME"), strings.HasPrefix(t, "${HOME}"), path.IsAbs(t):
		return scopeOutside
	}
	if c := path.Clean(t); c == ".." || strings.HasPrefix(c, "../") {
		return scopeOutside
	}
	if strings.Contains(t, "$") {
		return scopeDynamic
	}
	return scopeWorkspace
}

// wildSegment reports whether a path segment is only wildcards and dots
// ("*", ".*", "*.*", "**").
func wildSegment(s string) bool {
	if s == "" || s == "." || s == ".." {
		return false
	}
	return strings.Trim(s, "*?.") == "" && strings.ContainsAny(s, "*?")
}

// broad reports whether deleting (or changing) t recursively would reach
// far beyond one project directory, and says what t is.
func broad(t string) (bool, string) {
	if strings.ContainsRune(t, subMark) {
		return false, ""
	}
	if strings.HasPrefix(t, "$") {
		name, rest := splitVar(t[1:])
		if name == "HOME" {
			t = "~" + rest
		} else {
			switch rest {
			case "", "/", "/*", "/.":
				return true, "a variable that may be empty, leaving " + orRoot(rest)
			}
			return false, ""
		}
	}
	if strings.HasPrefix(t, "~") {
		rest := t[1:]
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			rest = rest[i:]
		} else {
			rest = ""
		}
		segs := segments(rest)
		if len(segs) <= 1 || allWild(segs[1:]) {
			return true, "the home directory or a folder directly in it"
		}
		return false, ""
	}
	if path.IsAbs(t) {
		segs := segments(t)
		switch {
		case len(segs) == 0 || allWild(segs):
			return true, "the root directory"
		case len(segs) == 1 || allWild(segs[1:]):
			return true, "a top-level system directory"
		case (segs[0] == "home" || segs[0] == "Users") && (len(segs) == 2 || allWild(segs[2:])):
			return true, "a home directory"
		}
		return false, ""
	}
	segs := strings.Split(path.Clean(t), "/")
	ups := 0
	for ups < len(segs) && segs[ups] == ".." {
		ups++
	}
	rest := segs[ups:]
	if len(rest) == 1 && rest[0] == "." {
		rest = nil
	}
	switch {
	case ups == 0 && allWild(rest):
		return true, "the whole current directory"
	case ups > 0 && (len(rest) <= 1 || allWild(rest[1:])):
		return true, "a directory outside the workspace"
	}
	return false, ""
}

// splitVar splits "NAME/rest" or "{NAME}/rest" (after the $).
func splitVar(s string) (name, rest string) {
	if strings.HasPrefix(s, "{") {
		if i := strings.IndexByte(s, '}'); i > 0 {
			return s[1:i], s[i+1:]
		}
		return s[1:], ""
	}
	i := 0
	for i < len(s) && (s[i] == '_' || s[i] >= 'A' && s[i] <= 'Z' || s[i] >= 'a' && s[i] <= 'z' || i > 0 && s[i] >= '0' && s[i] <= '9') {
		i++
	}
	return s[:i], s[i:]
}

func orRoot(rest string) string {
	if rest == "" {
		return "the current directory"
	}
	return "/"
}

// segments splits an absolute or relative path into its non-empty,
// non-"." segments.
func segments(p string) []string {
	var out []string
	for s := range strings.SplitSeq(p, "/") {
		if s != "" && s != "." {
			out = append(out, s)
		}
	}
	return out
}

func allWild(segs []string) bool {
	for _, s := range segs {
		if !wildSegment(s) {
			return false
		}
	}
	return true
}

// isGitDir reports whether t names a .git directory.
func isGitDir(t string) bool {
	c := path.Clean(t)
	return c == ".git" || strings.HasSuffix(c, "/.git")
}

// flagSet is a command's arguments sorted into flags and operands.
type flagSet struct {
	short map[byte]bool   // letters of -abc clusters
	long  map[string]bool // names of --name and --name=value
	pos   []string        // operands, everything after -- included
	dash  bool            // -- was present
}

// parseFlags sorts args. Values of flags that take one are counted as
// operands: good enough for the questions asked here.
func parseFlags(args []string) flagSet {
	f := flagSet{short: map[byte]bool{}, long: map[string]bool{}}
	for i, a := range args {
		switch {
		case a == "--":
			f.dash = true
			f.pos = append(f.pos, args[i+1:]...)
			return f
		case strings.HasPrefix(a, "--"):
			name, _, _ := strings.Cut(a[2:], "=")
			f.long[name] = true
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				f.short[a[j]] = true
			}
		default:
			f.pos = append(f.pos, a)
		}
	}
	return f
}

// firstOperand returns the first argument that is not a flag, and the ones
// after it.
func firstOperand(args []string) (string, []string) {
	for i, a := range args {
		if a == "--" {
			if i+1 < len(args) {
				return args[i+1], args[i+2:]
			}
			return "", nil
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			return a, args[i+1:]
		}
	}
	return "", nil
}

// set makes a lookup table.
func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

var (
	// readOnlyPrograms only read files or print things.
	readOnlyPrograms = set("ls", "cat", "head", "tail", "less", "more", "grep", "egrep", "fgrep", "rg", "ag", "ack",
		"wc", "uniq", "cut", "tr", "diff", "cmp", "comm", "file", "stat", "du", "df", "pwd", "echo", "printf",
		"true", "false", ":", "test", "[", "[[", "which", "whereis", "type", "date", "whoami", "id", "uname",
		"hostname", "printenv", "basename", "dirname", "realpath", "readlink", "tree", "jq", "yq", "xxd",
		"hexdump", "od", "md5sum", "sha1sum", "sha256sum", "sha512sum", "shasum", "cksum", "b2sum", "nl",
		"column", "fold", "rev", "tac", "seq", "sleep", "expr", "ps", "pgrep", "free", "uptime", "nproc",
		"getconf", "arch", "locale", "tput", "clear", "man", "info", "lsof", "top", "htop", "fd", "fdfind",
		"strings", "numfmt", "paste", "join", "look", "zcat", "zgrep", "bzcat", "xzcat", "tldr", "cloc", "tokei",
		"sort", "awk", "gawk", "mawk", "nawk", "sed", "gofmt", "goimports", "vim", "vi", "nvim", "nano", "emacs", "code")
	// shellBuiltins change only the shell's own state.
	shellBuiltins = set("cd", "pushd", "popd", "export", "unset", "set", "alias", "unalias", "shopt", "declare",
		"typeset", "local", "readonly", "read", "wait", "jobs", "history", "hash", "trap", "exit", "return",
		"shift", "getopts", "umask", "ulimit", "break", "continue", "let", "fg", "bg", "disown")
	shells       = set("sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "busybox")
	interpreters = set("python", "python2", "python3", "pypy", "pypy3", "node", "nodejs", "ruby", "perl",
		"php", "lua", "Rscript", "tsx", "ts-node", "osascript")
	fetchers = set("curl", "wget", "http", "https", "httpie", "aria2c", "axel", "fetch", "lftp", "xh")
	network  = set("ssh", "scp", "sftp", "ftp", "telnet", "nc", "ncat", "netcat", "socat", "ping", "ping6",
		"dig", "nslookup", "host", "traceroute", "tracepath", "mtr", "nmap", "whois", "mosh", "sshpass")
	systemPackageManagers = set("apt", "apt-get", "aptitude", "yum", "dnf", "pacman", "apk", "brew", "port",
		"zypper", "snap", "flatpak", "choco", "winget", "scoop", "nix-env", "emerge", "pkg", "dpkg", "rpm")
	toolchainManagers = set("rustup", "nvm", "fnm", "volta", "asdf", "sdk", "pyenv", "rbenv", "goenv", "mise")
	infra             = set("docker", "podman", "nerdctl", "buildah", "skopeo", "kubectl", "helm", "kind", "minikube",
		"k3d", "k9s", "terraform", "tofu", "terragrunt", "pulumi", "aws", "gcloud", "gsutil", "az", "gh", "glab",
		"heroku", "fly", "flyctl", "vercel", "netlify", "firebase", "wrangler", "ansible", "ansible-playbook",
		"vagrant", "packer", "serverless", "sls", "doctl", "eksctl", "docker-compose")
	systemAdmin = set("systemctl", "service", "launchctl", "shutdown", "reboot", "halt", "poweroff", "init",
		"telinit", "crontab", "at", "mount", "umount", "modprobe", "insmod", "rmmod", "sysctl", "iptables",
		"ip6tables", "nft", "ufw", "firewall-cmd", "useradd", "userdel", "usermod", "groupadd", "groupdel",
		"passwd", "chpasswd", "visudo", "hostnamectl", "timedatectl", "swapon", "swapoff", "setenforce",
		"pkill", "killall", "chattr", "ldconfig", "update-alternatives")
	diskWipers = set("mke2fs", "mkswap", "fdisk", "sfdisk", "gdisk", "cfdisk", "parted", "wipefs",
		"blkdiscard", "shred", "diskutil", "format")
	fileChangers = set("cp", "ln", "install", "mkdir", "touch", "truncate", "patch", "split", "csplit", "tar",
		"unzip", "zip", "gzip", "gunzip", "bzip2", "bunzip2", "xz", "unxz", "7z", "zstd", "rename")
	buildTools = set("make", "gmake", "cmake", "ninja", "bazel", "bazelisk", "meson", "mvn", "mvnw", "gradle",
		"gradlew", "ant", "sbt", "dotnet", "swift", "swiftc", "rustc", "gcc", "g++", "cc", "c++", "clang",
		"clang++", "javac", "java", "kotlinc", "scalac", "tsc", "esbuild", "webpack", "vite", "rollup", "parcel",
		"jest", "vitest", "mocha", "ava", "pytest", "py.test", "tox", "nox", "behave", "rspec", "rake",
		"phpunit", "task", "just", "black", "ruff", "flake8", "pylint", "mypy", "pyright", "isort", "rustfmt",
		"golangci-lint", "staticcheck", "revive", "shellcheck", "hadolint", "eslint", "prettier", "stylelint",
		"biome", "buf", "protoc", "sqlc", "mockgen", "gotestsum", "air", "nodemon", "cargo-nextest", "xcodebuild")
	// wrappers run the command that follows their own options; the
	// value says how many words each option with a separate value takes.
	wrappers = map[string]map[string]bool{
		"nohup": {}, "time": {"-f": true, "-o": true}, "builtin": {}, "exec": {"-a": true},
		"nice": {"-n": true}, "ionice": {"-c": true, "-n": true, "-t": false}, "stdbuf": {"-i": true, "-o": true, "-e": true},
		"unbuffer": {}, "caffeinate": {}, "chronic": {}, "setsid": {}, "strace": {"-o": true, "-e": true, "-p": true},
		"ltrace": {"-o": true}, "torsocks": {}, "proxychains": {}, "proxychains4": {}, "catchsegv": {},
		"flock": {}, "chrt": {}, "taskset": {},
	}
)

// command assesses one command's words (assignments removed; at least
// one).
func (a *assessor) command(words []string) {
	w0 := words[0]
	args := words[1:]
	if strings.ContainsRune(w0, subMark) || strings.HasPrefix(w0, "$") {
		a.add(medium, "runs a program named at run time (%s)", shown(w0))
		return
	}
	name := path.Base(w0)
	if len(args) == 1 && (args[0] == "--version" || args[0] == "--help") {
		a.add(low, "prints %s's version or help", name)
		return
	}
	switch {
	case name == "sudo" || name == "doas" || name == "pkexec" || name == "run0":
		a.sudo(name, args)
	case name == "su":
		a.add(high, "switches to another user (su)")
		for i, x := range args {
			if (x == "-c" || x == "--command") && i+1 < len(args) {
				a.script(args[i+1])
			}
		}
	case name == "env":
		a.env(args)
	case name == "command":
		if f := parseFlags(args); f.short['v'] || f.short['V'] {
			a.add(low, "looks a command up")
			return
		}
		a.wrapped(args, nil)
	case name == "timeout":
		a.timeout(args)
	case name == "xargs":
		a.xargs(args)
	case name == "watch":
		a.watch(args)
	case wrappers[name] != nil:
		a.wrapped(args, wrappers[name])
	case shells[name]:
		a.shell(name, args)
	case name == "eval":
		a.info.interp = true
		a.script(strings.Join(args, " "))
		a.add(medium, "evaluates its arguments as shell code")
	case name == "source" || name == ".":
		a.info.interp = true
		a.add(medium, "runs %s in the current shell", shownFirst(args))
	case interpreters[name] || strings.HasPrefix(name, "python3."):
		a.interpreter(name, args)
	case fetchers[name]:
		a.info.fetch = true
		a.add(high, "uses the network (%s): downloads or sends data", name)
	case network[name]:
		a.add(high, "uses the network (%s)", name)
	case name == "rsync":
		a.rsync(args)
	case name == "git":
		a.git(args)
	case name == "go":
		a.golang(args)
	case name == "npm" || name == "pnpm" || name == "yarn" || name == "bun":
		a.nodePackages(name, args)
	case name == "npx" || name == "pnpx" || name == "bunx":
		a.add(high, "downloads and runs a package (%s)", name)
	case name == "deno":
		a.deno(args)
	case name == "pip" || name == "pip3" || name == "pipx":
		a.pip(name, args)
	case name == "uv" || name == "poetry" || name == "pipenv" || name == "pdm" || name == "hatch" ||
		name == "conda" || name == "mamba" || name == "micromamba" || name == "bundle" || name == "bundler" ||
		name == "gem" || name == "composer":
		a.projectPackages(name, args)
	case name == "cargo":
		a.cargo(args)
	case toolchainManagers[name]:
		if sub, _ := firstOperand(args); sub == "list" || sub == "show" || sub == "which" || sub == "current" || sub == "ls" {
			a.add(low, "lists installed toolchains")
			return
		}
		a.add(high, "installs or switches toolchains (%s), usually over the network", name)
	case systemPackageManagers[name]:
		a.systemPackages(name, args)
	case infra[name]:
		a.infra(name, args)
	case name == "kill":
		if len(args) > 1 && args[len(args)-1] == "-1" {
			a.add(critical, "kills every process it may signal")
			return
		}
		a.add(high, "stops processes")
	case systemAdmin[name]:
		a.systemAdmin(name, args)
	case strings.HasPrefix(name, "mkfs") || diskWipers[name]:
		a.add(critical, "formats, partitions or wipes disks or files beyond recovery (%s)", name)
	case name == "dd":
		a.dd(args)
	case name == "rm":
		a.rm(args)
	case name == "rmdir":
		a.add(medium, "removes empty directories")
	case name == "unlink":
		a.add(high, "deletes %s", shownFirst(args))
	case name == "chmod" || name == "chown" || name == "chgrp":
		a.perm(name, args)
	case name == "find":
		a.find(args)
	case name == "mv":
		a.operands("moves or renames files", parseFlags(args).pos)
	case fileChangers[name]:
		if name == "tar" && len(args) > 0 && !strings.HasPrefix(args[0], "--") && strings.ContainsRune(strings.TrimPrefix(args[0], "-"), 't') {
			a.add(low, "lists an archive")
			return
		}
		a.operands("creates or changes files ("+name+")", parseFlags(args).pos)
	case name == "tee":
		a.operands("writes its input to files", parseFlags(args).pos)
	case readOnlyPrograms[name]:
		if name == "echo" || name == "printf" {
			// What they print is known now: a shell it is piped into
			// runs it.
			a.info.feeds = append(a.info.feeds, strings.Join(args, " "))
		}
		a.readOnly(name, args)
	case shellBuiltins[name]:
		a.add(low, "changes only the shell's own state")
	case name == "open" || name == "xdg-open":
		a.add(medium, "opens a file or address in another application")
	case buildTools[name]:
		a.build(name, args)
	case strings.Contains(w0, "/"):
		a.add(medium, "runs %s, a program or script the policy does not know", shown(w0))
	default:
		a.add(medium, "runs %s, a program the policy does not know: it may change files", shown(name))
	}
}

// shownFirst names the first operand of args for a reason.
func shownFirst(args []string) string {
	op, _ := firstOperand(args)
	if op == "" {
		return "a script"
	}
	return shown(op)
}

// script assesses shell code the part runs.
func (a *assessor) script(s string) {
	*a.out = append(*a.out, assessScript(s, a.depth)...)
}

// sudo assesses sudo and its kin, then the command it runs.
func (a *assessor) sudo(name string, args []string) {
	withValue := set("-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T", "--user", "--group", "--prompt", "--chdir")
	i := 0
	shell := false
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		x := args[i]
		i++
		if x == "--" {
			break
		}
		switch {
		case withValue[x]:
			i++
		case x == "-i" || x == "-s" || x == "--login" || x == "--shell":
			shell = true
		}
	}
	if i >= len(args) {
		if shell {
			a.add(high, "opens a root shell (%s)", name)
		} else {
			a.add(high, "uses root privileges (%s)", name)
		}
		return
	}
	a.add(high, "runs as root (%s)", name)
	a.command(args[i:])
}

// env assesses env and the command it runs.
func (a *assessor) env(args []string) {
	i := 0
	for i < len(args) {
		x := args[i]
		switch {
		case x == "-u" || x == "--unset" || x == "-C" || x == "--chdir":
			i += 2
			continue
		case x == "-S" || x == "--split-string":
			if i+1 < len(args) {
				a.script(args[i+1])
			}
			return
		case x == "--":
			i++
		case strings.HasPrefix(x, "-") || isAssignment(x):
			i++
			continue
		}
		break
	}
	if i >= len(args) {
		a.add(low, "prints the environment")
		return
	}
	a.command(args[i:])
}

// wrapped assesses a wrapper's command after its options; withValue names
// the options that take a separate value.
func (a *assessor) wrapped(args []string, withValue map[string]bool) {
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		if args[i] == "--" {
			i++
			break
		}
		if withValue[args[i]] {
			i++
		}
		i++
	}
	if i >= len(args) {
		a.add(low, "runs no command")
		return
	}
	a.command(args[i:])
}

// timeout assesses timeout [options] DURATION command.
func (a *assessor) timeout(args []string) {
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		if args[i] == "-s" || args[i] == "-k" || args[i] == "--signal" || args[i] == "--kill-after" {
			i++
		}
		i++
	}
	if i+1 >= len(args) {
		a.add(low, "runs no command")
		return
	}
	a.command(args[i+1:])
}

// xargs assesses the command xargs runs with its input as arguments.
func (a *assessor) xargs(args []string) {
	withValue := set("-n", "-L", "-P", "-s", "-d", "-E", "-I", "-a", "--max-args", "--max-procs", "--delimiter", "--arg-file")
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		if withValue[args[i]] {
			i++
		}
		i++
	}
	if i >= len(args) {
		a.add(low, "echoes its input")
		return
	}
	a.command(args[i:])
}

// watch assesses the command watch repeats (its words form a shell
// command).
func (a *assessor) watch(args []string) {
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		if args[i] == "-n" || args[i] == "--interval" {
			i++
		}
		i++
	}
	if i < len(args) {
		a.script(strings.Join(args[i:], " "))
	}
	a.add(low, "repeats a command")
}

// shell assesses sh and its kin: -c code is assessed; code from standard
// input is marked for assessLine.
func (a *assessor) shell(name string, args []string) {
	a.info.interp = true
	if name == "busybox" {
		if len(args) == 0 {
			a.add(low, "lists busybox applets")
			return
		}
		a.command(args)
		return
	}
	for i, x := range args {
		if x == "--" {
			break
		}
		if len(x) > 1 && x[0] == '-' && x[1] != '-' && strings.ContainsRune(x, 'c') {
			if i+1 < len(args) {
				a.script(args[i+1])
			}
			a.add(medium, "runs shell code (%s -c)", name)
			return
		}
	}
	op, _ := firstOperand(args)
	if op == "" || op == "-" || parseFlags(args).short['s'] {
		a.info.stdinCode = true
		for _, s := range a.stdin {
			a.script(s)
		}
		a.add(medium, "runs shell code from its input (%s)", name)
		return
	}
	a.add(medium, "runs the script %s", shown(op))
}

// interpreter assesses python, node and the like.
func (a *assessor) interpreter(name string, args []string) {
	a.info.interp = true
	inline := set("-c", "-e", "-E", "-r", "--eval", "-p", "--print")
	for i, x := range args {
		if x == "-m" && strings.HasPrefix(name, "python") && i+1 < len(args) {
			a.pythonModule(args[i+1], args[i+2:])
			return
		}
		if inline[x] {
			a.add(medium, "runs inline %s code", name)
			return
		}
		if name == "perl" && strings.HasPrefix(x, "-i") {
			a.add(medium, "edits files in place (perl -i)")
			return
		}
	}
	op, _ := firstOperand(args)
	switch {
	case op == "" || op == "-":
		a.info.stdinCode = true
		a.add(medium, "runs %s code from its input", name)
	case strings.HasPrefix(op, "http://") || strings.HasPrefix(op, "https://"):
		a.info.fetch = true
		a.add(critical, "runs code straight from the network (%s)", shown(op))
	default:
		a.add(medium, "runs the %s program %s", name, shown(op))
	}
}

// pythonModule assesses python -m MODULE.
func (a *assessor) pythonModule(mod string, args []string) {
	switch mod {
	case "pip":
		a.pip("pip", args)
	case "http.server", "SimpleHTTPServer", "smtpd":
		a.add(high, "starts a network server (python -m %s)", mod)
	case "venv", "virtualenv":
		a.add(medium, "creates a virtual environment")
	case "pytest", "unittest", "doctest", "tox", "nox":
		a.add(medium, "runs tests (python -m %s), which run project code", mod)
	default:
		a.add(medium, "runs the Python module %s", shown(mod))
	}
}

// rsync assesses rsync: remote copies use the network; --delete deletes.
func (a *assessor) rsync(args []string) {
	f := parseFlags(args)
	for name := range f.long {
		if strings.HasPrefix(name, "delete") || name == "remove-source-files" {
			a.add(high, "deletes files (rsync --%s)", name)
		}
	}
	for _, p := range f.pos {
		if strings.Contains(p, ":") || strings.HasPrefix(p, "rsync://") {
			a.add(high, "copies files over the network (rsync)")
			return
		}
	}
	a.operands("copies files (rsync)", f.pos)
}

// operands adds a medium finding for a command that changes the files it
// names, high for files outside the workspace, critical for devices.
func (a *assessor) operands(what string, ops []string) {
	for _, o := range ops {
		switch scopeOf(o) {
		case scopeDevice:
			a.add(critical, "%s, including the device %s", what, o)
			return
		case scopeOutside:
			a.add(high, "%s, including %s outside the workspace", what, shown(o))
			return
		}
	}
	a.add(medium, "%s", what)
}

// readOnly assesses programs that read, with the flags that make some of
// them write.
func (a *assessor) readOnly(name string, args []string) {
	f := parseFlags(args)
	switch name {
	case "sed":
		if f.short['i'] || f.long["in-place"] {
			a.add(medium, "edits files in place (sed -i)")
			return
		}
	case "sort":
		if f.short['o'] || f.long["output"] {
			a.add(medium, "writes its output to a file (sort -o)")
			return
		}
	case "awk", "gawk", "mawk", "nawk":
		for _, x := range args {
			if strings.Contains(x, "system(") || strings.Contains(x, "print >") || strings.Contains(x, "printf >") ||
				strings.Contains(x, "| \"") || strings.Contains(x, "|\"") || x == "inplace" {
				a.add(medium, "runs an awk program that may run commands or write files")
				return
			}
		}
	case "gofmt", "goimports":
		if f.short['w'] {
			a.add(medium, "rewrites Go files (%s -w)", name)
			return
		}
	case "date":
		if f.short['s'] || f.long["set"] {
			a.add(high, "sets the system clock")
			return
		}
	case "hostname":
		if len(f.pos) > 0 {
			a.add(high, "renames the machine")
			return
		}
	}
	a.add(low, "only reads or prints (%s)", name)
}

// build assesses build, test, lint and format tools.
func (a *assessor) build(name string, args []string) {
	if name == "make" || name == "gmake" {
		if f := parseFlags(args); f.short['n'] || f.short['q'] || f.long["dry-run"] || f.long["just-print"] {
			a.add(low, "prints what make would do")
			return
		}
	}
	a.add(medium, "builds, tests or checks code (%s), which runs project code and writes build output", name)
}

// git assesses a git command by its subcommand.
func (a *assessor) git(args []string) {
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		switch args[i] {
		case "-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path", "--config-env":
			i++
		}
		i++
	}
	if i >= len(args) {
		a.add(low, "prints git's help")
		return
	}
	sub, rest := args[i], args[i+1:]
	f := parseFlags(rest)
	switch sub {
	case "status", "log", "diff", "show", "blame", "annotate", "ls-files", "ls-tree", "rev-parse", "rev-list",
		"describe", "shortlog", "grep", "cat-file", "show-ref", "for-each-ref", "name-rev", "merge-base",
		"whatchanged", "version", "help", "check-ignore", "check-attr", "count-objects", "var", "verify-commit",
		"verify-tag", "show-branch", "range-diff", "difftool", "cherry":
		a.add(low, "only reads the repository (git %s)", sub)
	case "reflog":
		if op, _ := firstOperand(rest); op == "expire" || op == "delete" {
			a.add(high, "discards reflog entries, the record that lets lost commits be recovered")
			return
		}
		a.add(low, "only reads the repository (git reflog)")
	case "branch":
		switch {
		case f.short['D'] || f.long["delete"] && f.long["force"] || f.short['d'] && f.short['f']:
			a.add(high, "deletes a branch even if its commits are not merged (git branch -D)")
		case f.short['d'] || f.long["delete"] || f.short['m'] || f.short['M'] || f.short['c'] || f.short['C'] ||
			f.long["move"] || f.long["copy"] || len(f.pos) > 0 && !f.long["list"] && !f.short['l'] && !f.long["contains"] && !f.long["merged"]:
			a.add(medium, "changes branches (git branch)")
		default:
			a.add(low, "lists branches")
		}
	case "tag":
		if f.short['d'] || f.long["delete"] || len(f.pos) > 0 && !f.short['l'] && !f.long["list"] {
			a.add(medium, "changes tags (git tag)")
			return
		}
		a.add(low, "lists tags")
	case "remote":
		op, _ := firstOperand(rest)
		switch op {
		case "", "show", "get-url":
			a.add(low, "lists remotes")
		case "update", "prune":
			a.add(high, "uses the network (git remote %s)", op)
		default:
			a.add(medium, "changes the repository's remotes (git remote %s)", op)
		}
	case "config":
		switch {
		case f.long["global"] || f.long["system"]:
			if f.long["get"] || f.long["get-all"] || f.long["list"] || f.short['l'] || len(f.pos) == 1 && !f.long["unset"] {
				a.add(low, "reads git configuration")
				return
			}
			a.add(high, "changes git configuration outside the repository (git config --global)")
		case f.long["get"] || f.long["get-all"] || f.long["get-regexp"] || f.long["list"] || f.short['l'] || len(f.pos) <= 1 && !f.long["unset"] && !f.long["unset-all"]:
			a.add(low, "reads git configuration")
		default:
			a.add(medium, "changes the repository's git configuration")
		}
	case "stash":
		op, _ := firstOperand(rest)
		switch op {
		case "list", "show":
			a.add(low, "lists stashed changes")
		case "drop", "clear":
			a.add(high, "discards stashed changes for good (git stash %s)", op)
		default:
			a.add(medium, "stashes or restores uncommitted changes (git stash)")
		}
	case "worktree":
		op, _ := firstOperand(rest)
		switch op {
		case "list":
			a.add(low, "lists worktrees")
		case "remove":
			a.add(high, "removes a worktree and its uncommitted changes")
		default:
			a.add(medium, "changes worktrees (git worktree %s)", op)
		}
	case "checkout":
		if f.dash || f.short['f'] || f.long["force"] || slices.Contains(f.pos, ".") || slices.Contains(f.pos, ":/") {
			a.add(high, "discards uncommitted changes to files (git checkout)")
			return
		}
		a.add(medium, "switches branches or restores files (git checkout)")
	case "restore":
		if (f.short['S'] || f.long["staged"]) && !f.short['W'] && !f.long["worktree"] {
			a.add(medium, "unstages changes (git restore --staged)")
			return
		}
		a.add(high, "discards uncommitted changes to files (git restore)")
	case "reset":
		switch {
		case f.long["hard"]:
			a.add(critical, "discards all uncommitted changes for good (git reset --hard)")
		default:
			a.add(medium, "moves the branch or unstages changes (git reset)")
		}
	case "clean":
		switch {
		case f.short['n'] || f.long["dry-run"]:
			a.add(low, "lists what git clean would delete")
		case (f.short['f'] || f.long["force"]) && (f.short['d'] || f.short['x'] || f.short['X']):
			a.add(critical, "deletes untracked files and directories for good (git clean -fd/-fx), ignored files too with -x")
		case f.short['f'] || f.long["force"]:
			a.add(high, "deletes untracked files for good (git clean -f)")
		default:
			a.add(low, "does nothing without -f (git clean)")
		}
	case "push":
		forced := f.short['f'] || f.long["force"] || f.long["mirror"] || f.long["force-if-includes"] && !f.long["force-with-lease"]
		for _, p := range f.pos {
			if strings.HasPrefix(p, "+") {
				forced = true
			}
		}
		switch {
		case forced:
			a.add(critical, "overwrites history on the remote (git push --force)")
		case f.short['d'] || f.long["delete"] || slices.ContainsFunc(f.pos, func(p string) bool { return strings.HasPrefix(p, ":") }):
			a.add(high, "deletes branches or tags on the remote (git push --delete)")
		case f.long["force-with-lease"]:
			a.add(high, "may overwrite history on the remote (git push --force-with-lease)")
		default:
			a.add(high, "sends commits over the network (git push)")
		}
	case "fetch", "pull", "clone", "ls-remote", "submodule", "send-email", "request-pull", "lfs", "archive", "svn":
		a.add(high, "uses the network (git %s)", sub)
	case "gc", "prune", "filter-branch", "filter-repo", "replace", "update-ref", "repack":
		a.add(high, "rewrites or discards repository data (git %s)", sub)
	case "rm":
		a.add(medium, "removes files from the work tree and the index (git rm); they stay in history")
	case "rebase":
		a.add(medium, "rewrites local history (git rebase)")
	default:
		a.add(medium, "changes the repository (git %s)", sub)
	}
}

// golang assesses the go command.
func (a *assessor) golang(args []string) {
	sub, rest := firstOperand(args)
	switch sub {
	case "", "version", "list", "doc", "help":
		a.add(low, "only prints information (go %s)", sub)
	case "env":
		if f := parseFlags(rest); f.short['w'] || f.short['u'] {
			a.add(medium, "changes Go's settings (go env -w)")
			return
		}
		a.add(low, "prints Go's settings")
	case "get", "install":
		a.add(high, "downloads and installs Go modules over the network (go %s)", sub)
	case "mod":
		op, _ := firstOperand(rest)
		switch op {
		case "download", "tidy":
			a.add(high, "may download modules over the network and rewrites go.mod/go.sum (go mod %s)", op)
		case "graph", "why", "verify":
			a.add(low, "only reads module information (go mod %s)", op)
		default:
			a.add(medium, "changes module files (go mod %s)", op)
		}
	case "vet":
		a.add(medium, "builds and checks Go code (go vet)")
	case "test":
		a.add(medium, "builds and runs tests (go test), which run project code")
	case "run":
		a.add(medium, "builds and runs a Go program (go run)")
	case "generate":
		a.add(medium, "runs the generators the code names (go generate)")
	default:
		a.add(medium, "builds or changes Go code (go %s)", sub)
	}
}

// nodePackages assesses npm, pnpm, yarn and bun.
func (a *assessor) nodePackages(name string, args []string) {
	sub, _ := firstOperand(args)
	switch sub {
	case "":
		if name == "yarn" {
			a.add(high, "installs dependencies over the network (yarn)")
			return
		}
		a.add(low, "prints %s's help", name)
	case "install", "i", "ci", "add", "remove", "rm", "uninstall", "un", "update", "up", "upgrade", "publish",
		"link", "unlink", "dedupe", "rebuild", "audit", "import", "patch-commit":
		a.add(high, "installs, removes or publishes packages over the network (%s %s); install scripts run", name, sub)
	case "exec", "x", "dlx", "create", "init":
		a.add(high, "downloads and runs a package (%s %s)", name, sub)
	case "view", "info", "show", "outdated", "search", "whoami", "login", "logout", "adduser", "owner", "access", "deprecate", "dist-tag", "token":
		a.add(high, "uses the package registry over the network (%s %s)", name, sub)
	case "ls", "list", "ll", "la", "help", "why", "explain", "root", "bin", "prefix", "config", "get":
		a.add(low, "only prints information (%s %s)", name, sub)
	case "version":
		a.add(medium, "changes the package version (%s version)", name)
	default:
		a.add(medium, "runs a package script (%s %s): scripts run arbitrary commands", name, sub)
	}
}

// deno assesses deno.
func (a *assessor) deno(args []string) {
	sub, rest := firstOperand(args)
	switch sub {
	case "install", "add", "upgrade", "remove", "outdated":
		a.add(high, "installs packages over the network (deno %s)", sub)
	case "run", "eval", "repl", "serve":
		op, _ := firstOperand(rest)
		if strings.HasPrefix(op, "http://") || strings.HasPrefix(op, "https://") {
			a.info.fetch = true
			a.add(critical, "runs code straight from the network (%s)", shown(op))
			return
		}
		a.info.interp = true
		a.add(medium, "runs a program (deno %s)", sub)
	case "info", "doc", "help", "types", "check", "lint", "":
		a.add(low, "only reads or checks code (deno %s)", sub)
	default:
		a.add(medium, "builds, tests or formats code (deno %s)", sub)
	}
}

// pip assesses pip and pipx.
func (a *assessor) pip(name string, args []string) {
	sub, _ := firstOperand(args)
	switch sub {
	case "list", "show", "freeze", "check", "help", "inspect", "":
		a.add(low, "only prints information (%s %s)", name, sub)
	case "install", "uninstall", "download", "wheel", "upgrade", "reinstall", "inject", "run", "ensurepath":
		a.add(high, "installs or removes packages over the network (%s %s); setup code runs", name, sub)
	default:
		a.add(medium, "changes the Python environment (%s %s)", name, sub)
	}
}

// projectPackages assesses uv, poetry, pipenv, conda, bundler, gem,
// composer and the like.
func (a *assessor) projectPackages(name string, args []string) {
	sub, rest := firstOperand(args)
	if name == "uv" && sub == "pip" {
		a.pip("uv pip", rest)
		return
	}
	switch sub {
	case "run", "exec":
		if op, more := firstOperand(rest); op != "" {
			a.command(append([]string{op}, more...))
		}
		a.add(medium, "runs a command in the project environment (%s %s)", name, sub)
	case "install", "add", "remove", "update", "upgrade", "lock", "sync", "create", "require", "uninstall",
		"create-project", "push", "yank", "publish", "tool", "self", "python", "i":
		a.add(high, "installs, removes or publishes packages over the network (%s %s)", name, sub)
	case "show", "list", "info", "env", "help", "outdated", "search", "check", "":
		a.add(low, "only prints information (%s %s)", name, sub)
	default:
		a.add(medium, "changes or builds the project (%s %s)", name, sub)
	}
}

// cargo assesses cargo.
func (a *assessor) cargo(args []string) {
	sub, _ := firstOperand(args)
	switch sub {
	case "install", "add", "remove", "update", "publish", "fetch", "login", "search", "yank", "owner", "uninstall", "vendor":
		a.add(high, "installs or publishes crates over the network (cargo %s)", sub)
	case "tree", "metadata", "version", "help", "locate-project", "verify-project", "pkgid", "read-manifest", "":
		a.add(low, "only prints information (cargo %s)", sub)
	default:
		a.add(medium, "builds, tests or runs Rust code (cargo %s), which runs build scripts", sub)
	}
}

// systemPackages assesses system package managers.
func (a *assessor) systemPackages(name string, args []string) {
	f := parseFlags(args)
	sub, _ := firstOperand(args)
	switch {
	case name == "dpkg" && (f.short['l'] || f.short['L'] || f.short['s'] || f.long["list"] || f.long["status"]),
		name == "rpm" && f.short['q'],
		sub == "list" || sub == "search" || sub == "show" || sub == "info" || sub == "policy" || sub == "":
		a.add(low, "only prints package information (%s)", name)
	default:
		a.add(high, "installs, removes or updates system packages (%s)", name)
	}
}

// infra assesses container, cluster and cloud tools.
func (a *assessor) infra(name string, args []string) {
	sub, _ := firstOperand(args)
	switch {
	case sub == "version" || sub == "help":
		a.add(low, "prints %s's version or help", name)
	case (name == "terraform" || name == "tofu" || name == "terragrunt" || name == "pulumi") && sub == "destroy":
		a.add(critical, "destroys infrastructure (%s destroy)", name)
	case (name == "terraform" || name == "tofu") && slices.Contains(args, "-auto-approve"):
		a.add(critical, "changes infrastructure without confirmation (%s -auto-approve)", name)
	default:
		a.add(high, "controls containers, clusters or cloud resources (%s)", name)
	}
}

// systemAdmin assesses commands that change the machine.
func (a *assessor) systemAdmin(name string, args []string) {
	sub, _ := firstOperand(args)
	f := parseFlags(args)
	switch {
	case name == "systemctl" && (sub == "status" || sub == "list-units" || sub == "is-active" || sub == "is-enabled" || sub == "show" || sub == "cat"),
		name == "crontab" && f.short['l'],
		name == "sysctl" && !f.short['w'] && !strings.Contains(strings.Join(args, " "), "="):
		a.add(low, "only prints system information (%s)", name)
	default:
		a.add(high, "changes the system or other processes (%s)", name)
	}
}

// dd assesses dd by its output file.
func (a *assessor) dd(args []string) {
	for _, x := range args {
		if out, ok := strings.CutPrefix(x, "of="); ok {
			switch scopeOf(out) {
			case scopeDevice:
				a.add(critical, "overwrites the device %s", out)
			case scopeOutside:
				a.add(high, "writes raw data to %s, outside the workspace", shown(out))
			default:
				a.add(high, "writes raw data to %s", shown(out))
			}
			return
		}
	}
	a.add(medium, "copies raw data (dd)")
}

// rm assesses rm by its flags and operands.
func (a *assessor) rm(args []string) {
	f := parseFlags(args)
	recursive := f.short['r'] || f.short['R'] || f.long["recursive"]
	if f.long["no-preserve-root"] {
		a.add(critical, "turns off rm's protection of / (--no-preserve-root)")
	}
	if len(f.pos) == 0 {
		a.add(high, "deletes the files named on its input")
		return
	}
	var plain []string
	for _, t := range f.pos {
		if ok, why := broad(t); ok {
			if recursive {
				a.add(critical, "deletes %s and everything in it (%s)", shown(t), why)
			} else {
				a.add(high, "deletes files in %s (%s)", shown(t), why)
			}
			continue
		}
		switch {
		case isGitDir(t):
			a.add(critical, "deletes %s, the repository's history", shown(t))
		case scopeOf(t) == scopeOutside:
			a.add(high, "deletes %s, outside the workspace", shown(t))
		case scopeOf(t) == scopeDynamic:
			a.add(high, "deletes %s, a path named at run time", shown(t))
		default:
			plain = append(plain, shown(t))
		}
	}
	if len(plain) > 0 {
		what := strings.Join(plain, " ")
		if len(plain) > 3 {
			what = strings.Join(plain[:3], " ") + " …"
		}
		switch {
		case recursive && len(plain) == 1:
			a.add(high, "deletes %s and everything in it, beyond the engine's undo", what)
		case recursive:
			a.add(high, "deletes %s and everything in them, beyond the engine's undo", what)
		default:
			a.add(high, "deletes %s, beyond the engine's undo", what)
		}
	}
}

// worldWritable reports whether a chmod mode grants write to everyone.
func worldWritable(mode string) bool {
	if mode != "" && strings.Trim(mode, "01234567") == "" {
		last := mode[len(mode)-1]
		return last == '2' || last == '3' || last == '6' || last == '7'
	}
	for clause := range strings.SplitSeq(mode, ",") {
		i := strings.IndexAny(clause, "+=")
		if i < 0 {
			continue
		}
		who := clause[:i]
		if (who == "" || strings.ContainsAny(who, "ao")) && strings.Contains(clause[i+1:], "w") {
			return true
		}
	}
	return false
}

// perm assesses chmod, chown and chgrp.
func (a *assessor) perm(name string, args []string) {
	f := parseFlags(args)
	recursive := f.short['R'] || f.long["recursive"]
	if len(f.pos) == 0 {
		a.add(medium, "changes file permissions (%s)", name)
		return
	}
	spec, targets := f.pos[0], f.pos[1:]
	if name == "chmod" && !recursive && len(args) > 0 && strings.HasPrefix(args[0], "-") && strings.ContainsAny(args[0], "rwxXst") && !strings.Contains(args[0], "R") {
		// chmod -w file: the mode looks like a flag.
		spec, targets = args[0], f.pos
	}
	for _, t := range targets {
		if ok, why := broad(t); ok && recursive {
			a.add(critical, "changes permissions or ownership of everything in %s (%s)", shown(t), why)
			return
		}
	}
	if name == "chmod" && worldWritable(spec) {
		if recursive {
			a.add(critical, "makes whole trees writable by everyone (chmod -R %s)", spec)
		} else {
			a.add(high, "makes files writable by everyone (chmod %s)", spec)
		}
		return
	}
	if name != "chmod" {
		a.add(high, "changes file ownership (%s)", name)
		return
	}
	a.operands("changes file permissions (chmod)", targets)
}

// find assesses find by its actions: -delete, -exec and the like.
func (a *assessor) find(args []string) {
	i := 0
	for i < len(args) && !strings.HasPrefix(args[i], "-") && args[i] != "(" && args[i] != "!" {
		i++
	}
	starts, expr := args[:i], args[i:]
	filtered := false
	deletes := false
	acted := false
	for j := 0; j < len(expr); j++ {
		switch expr[j] {
		case "-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex", "-iregex", "-newer",
			"-mtime", "-mmin", "-size", "-user", "-group", "-perm", "-empty", "-inum", "-samefile", "-links":
			filtered = true
		case "-delete":
			deletes = true
		case "-exec", "-execdir", "-ok", "-okdir":
			k := j + 1
			for k < len(expr) && expr[k] != ";" && expr[k] != "+" {
				k++
			}
			if k > j+1 {
				a.command(expr[j+1 : k])
			}
			acted = true
			j = k
		case "-fprint", "-fprint0", "-fprintf", "-fls":
			a.add(medium, "writes its list to a file (find %s)", expr[j])
			acted = true
		}
	}
	if deletes {
		broadStart := len(starts) == 0
		for _, s := range starts {
			if ok, _ := broad(s); ok || scopeOf(s) == scopeOutside {
				broadStart = true
			}
		}
		if broadStart && !filtered {
			a.add(critical, "deletes everything it finds under %s", strings.Join(append([]string{}, orDot(starts)...), " "))
		} else {
			a.add(high, "deletes the files it finds (find -delete)")
		}
		return
	}
	if !acted {
		a.add(low, "only lists files (find)")
	}
}

func orDot(starts []string) []string {
	if len(starts) == 0 {
		return []string{"."}
	}
	return starts
}

package plugins

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/gofrs/flock"

	"github.com/plexus-agent/plexus/engine"
)

// InstallOptions say what Install installs and where.
type InstallOptions struct {
	// Source is an executable file (copied), a directory holding a main
	// package (built with `go build`), a Go package path in the current
	// module or its dependencies (`go build`), or a package path with a
	// version, pkg@v1.2.3 or pkg@latest (`go install`).
	Source string
	// Name is the installed file name, plexus-tool-NAME or
	// plexus-model-NAME; default the source's file or package name, which
	// must then have that form.
	Name string
	// Dir is the plugin directory; created (0755) if missing.
	Dir string
	// Stderr receives the go command's output as it runs; nil keeps it for
	// the error.
	Stderr io.Writer
	// Builtins are the plugins the host has built in (Options.Builtins).
	// The host always uses a built-in over a third-party plugin of the
	// same kind and name, so installing under such a name is refused.
	Builtins []Ref
	// Env, StartTimeout and Logger are as in Options, for the one launch
	// that checks the plugin.
	Env          []string
	StartTimeout time.Duration
	Logger       *slog.Logger
}

// Installed is what Install did.
type Installed struct {
	Entry    LockEntry
	Path     string // the installed binary
	LockFile string
	// Tools are a tool plugin's tools, as it described them.
	Tools []engine.ToolSpec
	// Replaced is true when an earlier installation was replaced.
	Replaced bool
}

// Install copies or builds a plugin into opts.Dir, launches it once
// through the real handshake to check it is a Plexus plugin of the kind its
// name says (a tool plugin lists its tools), then moves it into place
// atomically (mode 0755) and records it in the directory's lock file,
// replacing an earlier entry. Errors: an invalid name, the name of a
// built-in plugin (ErrShadowed), no go command for a
// source that needs building, a failed build (the go command's output is
// in the error unless it went to opts.Stderr), ErrNotPlugin, and I/O
// errors. Nothing is left behind when it fails.
func Install(ctx context.Context, opts InstallOptions) (*Installed, error) {
	if opts.Source == "" {
		return nil, errors.New("install: no source given")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 20 * time.Second
	}
	src, err := classifySource(opts.Source)
	if err != nil {
		return nil, err
	}
	file := opts.Name
	if file == "" {
		file = src.name
	}
	ref, ok := parseBinaryName(file)
	if !ok {
		if opts.Name != "" {
			return nil, fmt.Errorf("--name %q: want plexus-tool-NAME or plexus-model-NAME, NAME of lower-case letters, digits, '-' and '_'", opts.Name)
		}
		return nil, fmt.Errorf("cannot tell the plugin's kind and name from %q: name it plexus-tool-NAME or plexus-model-NAME, or pass --name plexus-tool-NAME", src.name)
	}
	if slices.Contains(opts.Builtins, ref) {
		return nil, fmt.Errorf("%w: %q is the name of a built-in %s plugin, which plexus always uses instead of a plugin installed under that name, so %s would never run; "+
			"install it under another name with --name %s (for example %s)",
			ErrShadowed, ref.Name, ref.Kind, BinaryName(ref), BinaryName(Ref{Kind: ref.Kind, Name: "NAME"}), BinaryName(Ref{Kind: ref.Kind, Name: "my-" + ref.Name}))
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create the plugin directory: %w", err)
	}
	if _, err := ReadLock(dir); err != nil { // a broken lock file fails before the build
		return nil, err
	}
	stage, err := os.MkdirTemp(dir, ".install-")
	if err != nil {
		return nil, fmt.Errorf("install: %w", err)
	}
	keepStage := false
	defer func() {
		if !keepStage {
			os.RemoveAll(stage)
		}
	}()
	staged := filepath.Join(stage, BinaryName(ref))
	if err := src.fetch(ctx, staged, opts.Stderr); err != nil {
		return nil, err
	}
	if err := os.Chmod(staged, 0o755); err != nil {
		return nil, err
	}
	sum, err := FileSHA256(staged)
	if err != nil {
		return nil, err
	}
	entry := LockEntry{
		Kind: ref.Kind, Name: ref.Name, File: BinaryName(ref), SHA256: sum, Source: src.record,
		InstalledAt: time.Now().UTC().Truncate(time.Second),
	}
	entry.Version, entry.Revision = binaryVersion(staged)
	proto, tools, err := probe(ctx, opts, ref, staged, entry)
	if err != nil {
		return nil, err
	}
	entry.ProtocolVersions = []int{proto}

	// From here on another install or remove in the directory waits, and
	// the lock file is read afresh, so no entry is lost.
	unlock, err := lockDir(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	lock, err := ReadLock(dir)
	if err != nil {
		return nil, err
	}
	_, replaced := lock.Entry(ref)
	if err := lock.Put(entry); err != nil {
		return nil, err
	}
	// The binary it replaces stays reachable (a hard link in the stage
	// directory) until the new entry is written, and is put back if that
	// fails; the replacement itself is one rename, so the plugin's path
	// never goes missing.
	dest := filepath.Join(dir, entry.File)
	previous := filepath.Join(stage, "previous")
	hadPrevious := false
	switch err := os.Link(dest, previous); {
	case err == nil:
		hadPrevious = true
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("install: keep the installed %s aside: %w", dest, err)
	}
	if err := os.Rename(staged, dest); err != nil {
		return nil, fmt.Errorf("install: %w", err)
	}
	if err := lock.Write(); err != nil {
		var restoreErr error
		if hadPrevious {
			restoreErr = os.Rename(previous, dest)
		} else {
			restoreErr = os.Remove(dest)
		}
		if restoreErr != nil {
			keepStage = true // the previous binary is still in it
			return nil, fmt.Errorf("install: record %s in the lock file: %w; and putting the previous install back failed too (%v): it is at %s", dest, err, restoreErr, previous)
		}
		return nil, fmt.Errorf("install: record %s in the lock file (the previous install, if any, is back in place): %w", dest, err)
	}
	if err := syncDir(dir); err != nil {
		opts.Logger.Warn("the plugin is installed and recorded, but syncing its directory failed; a crash now could lose the change", "dir", dir, "error", err)
	}
	return &Installed{Entry: entry, Path: dest, LockFile: lock.Path(), Tools: tools, Replaced: replaced}, nil
}

// dirLockFile is the file installs and removals in a plugin directory
// hold an exclusive flock on while they change the directory.
const dirLockFile = ".plexus-plugins.lock.lk"

// lockDir takes the plugin directory's install lock, waiting for another
// install or removal to finish (until ctx ends). It returns the unlock.
func lockDir(ctx context.Context, dir string) (func(), error) {
	fl := flock.New(filepath.Join(dir, dirLockFile))
	ok, err := fl.TryLockContext(ctx, 50*time.Millisecond)
	if err != nil || !ok {
		return nil, fmt.Errorf("wait for another install in %s: %w", dir, errors.Join(err, ctx.Err()))
	}
	return func() { fl.Unlock() }, nil
}

// probe launches the staged binary once as a plugin of ref's kind, through
// the checksum check, the environment allow-list and a private socket
// directory as the host would, and returns the negotiated protocol version
// and a tool plugin's tools. A model plugin gets no settings.
func probe(ctx context.Context, opts InstallOptions, ref Ref, path string, entry LockEntry) (int, []engine.ToolSpec, error) {
	sockDir, err := privateDir("")
	if err != nil {
		return 0, nil, err
	}
	defer os.RemoveAll(sockDir)
	popts := &Options{Logger: opts.Logger, StartTimeout: opts.StartTimeout, Env: opts.Env, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond}
	p := newProcess(Info{Ref: ref, Path: path, Lock: &entry}, popts, opts.Logger, sockDir, newVerifier("", opts.Logger))
	p.probe = true
	defer p.close()
	if _, _, err := p.get(ctx); err != nil {
		switch {
		case ctx.Err() != nil:
			return 0, nil, fmt.Errorf("install of %s interrupted while checking the plugin: %w", opts.Source, ctx.Err())
		case errors.Is(err, ErrNotPlugin):
			return 0, nil, fmt.Errorf("%s is not a %s plugin: %w", opts.Source, ref.Kind, err)
		}
		return 0, nil, fmt.Errorf("%s failed when launched once to check it as a %s plugin, so nothing was installed: %w", opts.Source, ref.Kind, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.proto, p.specs, nil
}

// binaryVersion reads the main module version and VCS revision from a Go
// binary's build information; "" for what it does not carry.
func binaryVersion(path string) (version, revision string) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return "", ""
	}
	version = bi.Main.Version
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if revision != "" && modified {
		revision += "+dirty"
	}
	return version, revision
}

// source is a classified install source.
type source struct {
	name   string // default binary name
	record string // what the lock file records as the source
	fetch  func(ctx context.Context, dst string, stderr io.Writer) error
}

// majorSuffix is a module major version path element, v2 and up.
var majorSuffix = regexp.MustCompile(`^v[2-9][0-9]*$`)

// packageName is the binary name go install gives a package path.
func packageName(pkg string) string {
	base := path.Base(pkg)
	if majorSuffix.MatchString(base) {
		base = path.Base(path.Dir(pkg))
	}
	return base
}

func classifySource(s string) (*source, error) {
	fi, statErr := os.Stat(s)
	switch {
	case statErr == nil && fi.Mode().IsRegular():
		abs, err := filepath.Abs(s)
		if err != nil {
			return nil, err
		}
		return &source{name: filepath.Base(abs), record: abs, fetch: func(_ context.Context, dst string, _ io.Writer) error {
			return copyFile(abs, dst)
		}}, nil
	case statErr == nil && fi.IsDir():
		abs, err := filepath.Abs(s)
		if err != nil {
			return nil, err
		}
		return &source{name: filepath.Base(abs), record: abs, fetch: func(ctx context.Context, dst string, stderr io.Writer) error {
			return goCommand(ctx, abs, nil, stderr, "build", "-o", dst, ".")
		}}, nil
	case statErr == nil:
		return nil, fmt.Errorf("%s is neither an executable file nor a directory", s)
	case strings.HasPrefix(s, ".") || filepath.IsAbs(s):
		return nil, fmt.Errorf("install %s: %w", s, statErr)
	}
	pkg, ver, versioned := strings.Cut(s, "@")
	if pkg == "" || versioned && ver == "" {
		return nil, fmt.Errorf("%q is not a file, a directory or a Go package path (pkg or pkg@version)", s)
	}
	if !versioned {
		return &source{name: packageName(pkg), record: s, fetch: func(ctx context.Context, dst string, stderr io.Writer) error {
			return goCommand(ctx, "", nil, stderr, "build", "-o", dst, pkg)
		}}, nil
	}
	return &source{name: packageName(pkg), record: s, fetch: func(ctx context.Context, dst string, stderr io.Writer) error {
		gobin := filepath.Join(filepath.Dir(dst), "gobin")
		if err := os.Mkdir(gobin, 0o700); err != nil {
			return err
		}
		if err := goCommand(ctx, "", []string{"GOBIN=" + gobin}, stderr, "install", s); err != nil {
			var ge *goError
			if errors.As(err, &ge) && strings.Contains(strings.Join(strings.Fields(ge.output), " "), "contains one or more replace directives") {
				return replaceErr(ctx, pkg, ver, err)
			}
			return err
		}
		built := filepath.Join(gobin, packageName(pkg))
		if _, err := os.Stat(built); err != nil {
			return fmt.Errorf("go install %s did not produce %s: %w", s, filepath.Base(built), err)
		}
		return os.Rename(built, dst)
	}}, nil
}

// goCommand runs the go command in dir with env added, its output going
// to stderr (and, when stderr is nil, into the error). A failure is a
// *goError, which keeps the output either way.
func goCommand(ctx context.Context, dir string, env []string, stderr io.Writer, args ...string) error {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("building a plugin from source needs the Go toolchain, and go is not on PATH (install Go from https://go.dev/dl, or build the binary yourself and install the file): %w", err)
	}
	cmd := exec.CommandContext(ctx, gobin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if stderr != nil {
		w := io.MultiWriter(&out, stderr)
		cmd.Stdout, cmd.Stderr = w, w
	}
	if err := cmd.Run(); err != nil {
		msg := fmt.Sprintf("go %s failed: %v", strings.Join(args, " "), err)
		if stderr == nil && out.Len() > 0 {
			msg += "\n" + strings.TrimRight(out.String(), "\n")
		}
		return &goError{msg: msg, output: out.String()}
	}
	return nil
}

// goError is a failed go command and what it printed.
type goError struct {
	msg    string
	output string
}

func (e *goError) Error() string { return e.msg }

// replaceErr explains why `go install pkg@ver` refused the module: its
// go.mod has replace directives, which the go command honours only in the
// module's own checkout. It names them when the module's go.mod can be
// read (go mod download of the longest prefix of pkg that is a module).
func replaceErr(ctx context.Context, pkg, ver string, cause error) error {
	module, replaces := moduleReplaces(ctx, pkg, ver)
	what := "its go.mod"
	if module != "" {
		what = fmt.Sprintf("the go.mod of module %s@%s", module, ver)
	}
	if len(replaces) > 0 {
		what += " (" + strings.Join(replaces, "; ") + ")"
	}
	return fmt.Errorf("%s@%s cannot be installed by version: %s has replace directives, and `go install PKG@VERSION` refuses such modules because a "+
		"replacement applies only in the module's own checkout. A plugin that replaces the Plexus SDK with a local checkout is the usual case "+
		"(github.com/plexus-agent/plexus has no published version yet). Clone the plugin's repository, with any directory a replace names, "+
		"and run `plexus plugins install ./DIR` in it; or have its author require only published versions. %w", pkg, ver, what, cause)
}

// moduleReplaces finds the module providing pkg at ver and lists its
// replace directives as "OLD => NEW"; "" and none when it cannot tell.
func moduleReplaces(ctx context.Context, pkg, ver string) (string, []string) {
	for mod := pkg; mod != "." && mod != "/" && mod != ""; mod = path.Dir(mod) {
		var dl struct{ GoMod string }
		out, err := exec.CommandContext(ctx, "go", "mod", "download", "-json", mod+"@"+ver).Output()
		if err != nil || json.Unmarshal(out, &dl) != nil || dl.GoMod == "" {
			continue
		}
		var gm struct {
			Replace []struct {
				Old, New struct{ Path, Version string }
			}
		}
		out, err = exec.CommandContext(ctx, "go", "mod", "edit", "-json", dl.GoMod).Output()
		if err != nil || json.Unmarshal(out, &gm) != nil {
			return mod, nil
		}
		var rs []string
		for _, r := range gm.Replace {
			old, new := r.Old.Path, r.New.Path
			if r.Old.Version != "" {
				old += "@" + r.Old.Version
			}
			if r.New.Version != "" {
				new += "@" + r.New.Version
			}
			rs = append(rs, "replace "+old+" => "+new)
		}
		return mod, rs
	}
	return "", nil
}

// copyFile copies src to a new file dst.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o700)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// VerifyState is the outcome of verifying one plugin binary.
type VerifyState string

// Verify states.
const (
	VerifyOK        VerifyState = "ok"         // the file's SHA-256 is the recorded one
	VerifyModified  VerifyState = "modified"   // it differs (Err is a *ChecksumError)
	VerifyMissing   VerifyState = "missing"    // recorded, but the file is gone
	VerifyUnlocked  VerifyState = "not-locked" // a plugin binary the lock file does not list
	VerifyLockError VerifyState = "lock-error" // the lock file cannot be read
)

// VerifyResult is one plugin binary (or lock file) checked by Verify.
type VerifyResult struct {
	Ref      Ref
	Path     string
	LockFile string
	Entry    *LockEntry
	State    VerifyState
	Err      error // why, for every state but VerifyOK
}

// Verify checks every lock entry of every directory in dirs (the file is
// present and its SHA-256 matches) and reports plugin binaries present in
// a directory but not in its lock file. Missing directories are skipped.
// Results come per directory, lock entries first, in name order.
func Verify(dirs []string) []VerifyResult {
	var out []VerifyResult
	for _, dir := range dirs {
		abs, err := filepath.Abs(dir)
		if err != nil {
			continue
		}
		files, err := os.ReadDir(abs)
		if err != nil {
			continue
		}
		lockFile := filepath.Join(abs, LockFileName)
		lock, err := ReadLock(abs)
		if err != nil {
			out = append(out, VerifyResult{Path: lockFile, LockFile: lockFile, State: VerifyLockError, Err: err})
			continue
		}
		for _, e := range lock.Entries() {
			r := VerifyResult{Ref: e.Ref(), Path: filepath.Join(abs, e.File), LockFile: lockFile, Entry: &e, State: VerifyOK}
			got, err := FileSHA256(r.Path)
			switch {
			case errors.Is(err, os.ErrNotExist):
				r.State, r.Err = VerifyMissing, fmt.Errorf("%s is recorded in %s but the file is gone; install it again or remove its entry", r.Path, lockFile)
			case err != nil:
				r.State, r.Err = VerifyModified, &ChecksumError{Ref: r.Ref, Path: r.Path, LockFile: lockFile, Want: e.SHA256}
			case got != e.SHA256:
				r.State, r.Err = VerifyModified, &ChecksumError{Ref: r.Ref, Path: r.Path, LockFile: lockFile, Want: e.SHA256, Got: got}
			}
			out = append(out, r)
		}
		for _, f := range files {
			ref, ok := parseBinaryName(f.Name())
			if !ok {
				continue
			}
			if _, locked := lock.Entry(ref); !locked {
				p := filepath.Join(abs, f.Name())
				out = append(out, VerifyResult{Ref: ref, Path: p, LockFile: lockFile, State: VerifyUnlocked, Err: &notLockedError{path: p, lockFile: lockFile}})
			}
		}
	}
	return out
}

// Uninstall removes the plugin ref from dir: its binary and its lock
// entry. It fails with an error matching os.ErrNotExist when neither
// exists.
func Uninstall(dir string, ref Ref) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if _, err := os.Stat(abs); err != nil {
		return fmt.Errorf("no %s plugin %q: %w", ref.Kind, ref.Name, err)
	}
	unlock, err := lockDir(context.Background(), abs)
	if err != nil {
		return err
	}
	defer unlock()
	lock, err := ReadLock(abs)
	if err != nil {
		return err
	}
	had := lock.Remove(ref)
	err = os.Remove(filepath.Join(abs, BinaryName(ref)))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err != nil && !had {
		return fmt.Errorf("no %s plugin %q in %s: %w", ref.Kind, ref.Name, abs, os.ErrNotExist)
	}
	if had {
		return lock.Write()
	}
	return nil
}

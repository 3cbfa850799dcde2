package plugins

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

// Ref names a plugin: its kind ("tool" or "model") and name ("fs",
// "ollama").
type Ref struct {
	Kind string
	Name string
}

// Info describes a discovered plugin and how it is launched.
type Info struct {
	Ref
	// Path is the executable; Args its arguments (built-ins re-execute
	// the plexus binary as `plexus plugin serve KIND NAME`).
	Path string
	Args []string
	// Builtin is true for plugins compiled into the plexus binary. They
	// are not checksummed: they are the host's own binary, which the user
	// already chose to run, re-executed.
	Builtin bool
	// Lock is the lock file entry a third-party plugin is verified
	// against before every launch; nil for built-ins and debug attaches.
	Lock *LockEntry
	// LockFile is the lock file of a third-party plugin's directory.
	LockFile string
	// LockErr, when set, is why the host refuses to launch the plugin:
	// it is not in the lock file (ErrNotLocked), or the lock file cannot
	// be read.
	LockErr error
	// Attach is set for a plugin the host attaches to in debug mode
	// (PLEXUS_REATTACH_PLUGINS) instead of launching it.
	Attach *ReattachConfig
}

// Options configure a Manager. Zero values mean defaults.
type Options struct {
	// Executable is the plexus binary that serves built-in plugins;
	// default os.Executable().
	Executable string
	// Builtins are the plugins compiled into Executable.
	Builtins []Ref
	// Dirs are searched, in order, for third-party plugin binaries named
	// plexus-tool-NAME and plexus-model-NAME. A missing directory is
	// skipped.
	Dirs []string
	// Settings are passed to model plugins through Configure, by provider
	// name.
	Settings map[string]map[string]string
	// Timeouts are the deadlines of one call of a tool plugin's tools, by
	// plugin name (engine.ToolSpec.Timeout); a plugin not listed gets the
	// engine's Options.ToolTimeout.
	Timeouts map[string]time.Duration
	// Logger receives host and plugin logs; nil discards them.
	Logger *slog.Logger
	// StartTimeout bounds a plugin's start, handshake and first
	// Describe/Configure (default 20 s).
	StartTimeout time.Duration
	// MinBackoff and MaxBackoff bound the delay before restarting a plugin
	// after consecutive crashes (defaults 100 ms and 10 s; the delay
	// doubles per consecutive failure).
	MinBackoff, MaxBackoff time.Duration
	// HealthyAfter is how long a plugin must run for its crash count to
	// reset (default 30 s).
	HealthyAfter time.Duration
	// Env names host environment variables every plugin inherits on top
	// of DefaultEnv (a trailing "*" allows a prefix). PluginEnv does the
	// same for one plugin ("*" alone passes the whole environment).
	Env       []string
	PluginEnv map[Ref][]string
	// Reattach names plugins running in debug mode (see ReattachFromEnv)
	// that the host attaches to instead of launching them; a ref that was
	// not discovered is added.
	Reattach map[Ref]ReattachConfig
	// RuntimeDir is where the Manager creates its private (0700) socket
	// directory, removed by Close; default $XDG_RUNTIME_DIR, else
	// os.TempDir().
	RuntimeDir string
	// VerifiedCache is a file (created mode 0600) where the Manager
	// records which binary identities it verified against their lock
	// files, so that later processes skip hashing them; "" keeps the
	// records in memory, for this Manager only. See the package
	// documentation, "Installation and verification".
	VerifiedCache string

	// invokePerCall: tool calls use Invoke, never Calls (benchmarks).
	invokePerCall bool
}

// pluginName is what NAME may be in plexus-tool-NAME.
var pluginName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// Manager discovers, launches and supervises plugin processes. Plugins
// start on first use. Safe for concurrent use; Close stops everything.
type Manager struct {
	opts      Options
	log       *slog.Logger
	procs     []*process // built-ins first, then by directory order and name
	socketDir string
	verifier  *verifier

	toolset *Toolset
	once    sync.Once
}

// NewManager discovers plugins; it starts none. Discovery problems (an
// unreadable directory, a name clash) are logged, not fatal.
func NewManager(opts Options) (*Manager, error) {
	if opts.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find the plexus executable for built-in plugins: %w", err)
		}
		opts.Executable = exe
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 20 * time.Second
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 100 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 10 * time.Second
	}
	if opts.HealthyAfter <= 0 {
		opts.HealthyAfter = 30 * time.Second
	}
	socketDir, err := privateDir(opts.RuntimeDir)
	if err != nil {
		return nil, err
	}
	m := &Manager{opts: opts, log: opts.Logger, socketDir: socketDir, verifier: newVerifier(opts.VerifiedCache, opts.Logger)}
	var infos []Info
	seen := map[Ref]string{}
	add := func(info Info) {
		if prev, ok := seen[info.Ref]; ok {
			m.log.Warn("plugin shadowed: the first one found is used", "kind", info.Kind, "name", info.Name, "used", prev, "ignored", info.Path)
			return
		}
		seen[info.Ref] = info.Path
		infos = append(infos, info)
	}
	for _, b := range opts.Builtins {
		add(Info{Ref: b, Path: opts.Executable, Args: []string{"plugin", "serve", b.Kind, b.Name}, Builtin: true})
	}
	for _, info := range discover(opts.Dirs, m.log) {
		add(info)
	}
	for _, ref := range sortedRefs(opts.Reattach) {
		rc := opts.Reattach[ref]
		info := Info{Ref: ref, Path: fmt.Sprintf("debug attach: pid %d, %s", rc.Pid, rc.Addr.Address), Attach: &rc}
		if i := slices.IndexFunc(infos, func(in Info) bool { return in.Ref == ref }); i >= 0 {
			info.Builtin = infos[i].Builtin
			infos[i] = info
		} else {
			infos = append(infos, info)
		}
	}
	for _, info := range infos {
		m.procs = append(m.procs, newProcess(info, &m.opts, m.log, socketDir, m.verifier))
	}
	m.toolset = &Toolset{m: m}
	return m, nil
}

// privateDir creates the directory plugin sockets go in: mode 0700, under
// base, else $XDG_RUNTIME_DIR, else os.TempDir().
func privateDir(base string) (string, error) {
	var bases []string
	if base != "" {
		bases = []string{base}
	} else {
		if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
			bases = append(bases, d)
		}
		bases = append(bases, os.TempDir())
	}
	var err error
	for _, b := range bases {
		var dir string
		if dir, err = os.MkdirTemp(b, "plexus-plugins-"); err == nil {
			return dir, os.Chmod(dir, 0o700)
		}
	}
	return "", fmt.Errorf("create the private plugin socket directory: %w", err)
}

func sortedRefs[V any](m map[Ref]V) []Ref {
	refs := make([]Ref, 0, len(m))
	for r := range m {
		refs = append(refs, r)
	}
	slices.SortFunc(refs, func(a, b Ref) int {
		if a.Kind != b.Kind {
			return strings.Compare(a.Kind, b.Kind)
		}
		return strings.Compare(a.Name, b.Name)
	})
	return refs
}

// SocketDir is the private directory (mode 0700) the plugins' Unix
// sockets are created in; Close removes it.
func (m *Manager) SocketDir() string { return m.socketDir }

// discover lists plexus-tool-* and plexus-model-* executables in dirs,
// each with its entry in its directory's lock file (or why it has none).
func discover(dirs []string, log *slog.Logger) []Info {
	var out []Info
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				log.Warn("cannot read plugin directory", "dir", dir, "error", err)
			}
			continue
		}
		absDir, _ := filepath.Abs(dir)
		lock, lockErr := ReadLock(absDir)
		sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
		for _, e := range entries {
			ref, ok := parseBinaryName(e.Name())
			if !ok {
				continue
			}
			path := filepath.Join(dir, e.Name())
			fi, err := os.Stat(path)
			if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
				log.Warn("plugin file is not an executable regular file; skipped", "path", path)
				continue
			}
			abs, _ := filepath.Abs(path)
			info := Info{Ref: ref, Path: abs, LockFile: filepath.Join(absDir, LockFileName), LockErr: lockErr}
			if lockErr == nil {
				if e, ok := lock.Entry(ref); ok {
					info.Lock = &e
				} else {
					info.LockErr = &notLockedError{path: abs, lockFile: lock.Path()}
				}
			}
			out = append(out, info)
		}
	}
	return out
}

// parseBinaryName parses plexus-tool-NAME / plexus-model-NAME.
func parseBinaryName(file string) (Ref, bool) {
	for _, kind := range []string{KindTool, KindModel} {
		prefix := "plexus-" + kind + "-"
		if len(file) > len(prefix) && file[:len(prefix)] == prefix {
			name := file[len(prefix):]
			if pluginName.MatchString(name) {
				return Ref{Kind: kind, Name: name}, true
			}
		}
	}
	return Ref{}, false
}

// Plugins lists every discovered plugin, built-ins first.
func (m *Manager) Plugins() []Info {
	out := make([]Info, len(m.procs))
	for i, p := range m.procs {
		out[i] = p.info
	}
	return out
}

func (m *Manager) byKind(kind string) []*process {
	var out []*process
	for _, p := range m.procs {
		if p.info.Kind == kind {
			out = append(out, p)
		}
	}
	return out
}

// Toolset is the engine.Toolset over all tool plugins.
func (m *Manager) Toolset() *Toolset { return m.toolset }

// Models returns one engine.Model per model plugin, by provider name.
func (m *Manager) Models() map[string]engine.Model {
	out := map[string]engine.Model{}
	for _, p := range m.byKind(KindModel) {
		out[p.info.Name] = &Model{p: p}
	}
	return out
}

// Close stops every plugin process and anything they left running, and
// waits for them to exit. Calls made afterwards fail.
func (m *Manager) Close() error {
	var wg sync.WaitGroup
	for _, p := range m.procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.close()
		}()
	}
	wg.Wait()
	if err := os.RemoveAll(m.socketDir); err != nil {
		return fmt.Errorf("remove the plugin socket directory: %w", err)
	}
	return nil
}

// call runs fn against the live process and turns a crash during it into
// an error wrapping engine.ErrPluginCrashed.
func (p *process) call(ctx context.Context, op string, fn func(raw any) error) error {
	raw, gen, err := p.get(ctx)
	if err != nil {
		return err
	}
	err = fn(raw)
	if err == nil || ctx.Err() != nil {
		return err
	}
	if what, ok := p.crashed(gen, err); ok {
		return &crashError{kind: p.info.Kind, name: p.info.Name, op: op, what: what, cause: err, debug: p.info.Attach != nil}
	}
	return err
}

// crashError is a call that failed because its plugin process died.
type crashError struct {
	kind, name, op, what string
	cause                error
	debug                bool // a debug attach: not restarted
}

func (e *crashError) Error() string {
	if e.debug {
		return fmt.Sprintf("%s plugin %q (attached for debugging) %s during %s; plexus does not relaunch it: start it again with %s (%v)",
			e.kind, e.name, e.what, e.op, DebugFlag, e.cause)
	}
	return fmt.Sprintf("%s plugin %q %s during %s; it is being restarted, so the next call can succeed (%v)",
		e.kind, e.name, e.what, e.op, e.cause)
}

func (e *crashError) Is(target error) bool { return target == engine.ErrPluginCrashed }
func (e *crashError) Unwrap() error        { return e.cause }

// PluginStatus is a plugin and what it offered when started.
type PluginStatus struct {
	Info
	// Tools are a tool plugin's tools.
	Tools []engine.ToolSpec
	// Pid of the running process.
	Pid int
	// Err is why the plugin could not start.
	Err error
}

// Describe starts every plugin (concurrently) and reports, for each, its
// tools or why it failed to start.
func (m *Manager) Describe(ctx context.Context) []PluginStatus {
	out := make([]PluginStatus, len(m.procs))
	var wg sync.WaitGroup
	for i, p := range m.procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i].Info = p.info
			if _, _, err := p.get(ctx); err != nil {
				out[i].Err = err
				return
			}
			p.mu.Lock()
			out[i].Tools, out[i].Pid = p.specs, p.pid
			p.mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

package plugins

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/go-plugin/runner"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/plugins/contain"
)

// errClosed is returned by calls made after Manager.Close.
var errClosed = errors.New("plugin manager is closed")

// process supervises one plugin: it starts the process on first use,
// detects a crash during a call, restarts the process in the background
// with exponential backoff, and stops it on close.
type process struct {
	info      Info
	opts      *Options
	log       *slog.Logger
	socketDir string    // the private directory the plugin's socket goes in
	probe     bool      // started by Install: a model gets no settings
	verifier  *verifier // checks third-party binaries against the lock file

	mu       sync.Mutex
	client   *plugin.Client
	rpc      plugin.ClientProtocol
	raw      any // *toolClient or *modelClient of the live process
	pid      int
	runner   *pluginRunner // of the live process, or of a start in progress
	proto    int           // negotiated protocol version of the live process
	gen      uint64        // increments with every successful start
	started  time.Time
	specs    []engine.ToolSpec // tool plugins: Describe of the live process
	starting chan struct{}     // non-nil while a start is pending; closed when it ends
	lastErr  error             // error of the last failed start
	failures int               // consecutive crashes and failed starts
	restarts int
	closed   bool
	quit     chan struct{} // closed by close: ends a backoff wait at once
	gone     error         // a debug attach whose process exited: not restarted
}

func newProcess(info Info, opts *Options, log *slog.Logger, socketDir string, v *verifier) *process {
	return &process{info: info, opts: opts, log: log.With("plugin", info.Name, "kind", info.Kind), socketDir: socketDir, verifier: v, quit: make(chan struct{})}
}

// get returns the live process's client, starting (or waiting for a
// restart of) the process as needed. A failed start is returned to the
// caller that waited for it; the next call tries again after the backoff.
func (p *process) get(ctx context.Context) (any, uint64, error) {
	waited := false
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, 0, errClosed
		}
		if p.gone != nil {
			err := p.gone
			p.mu.Unlock()
			return nil, 0, err
		}
		if p.client != nil && !p.client.Exited() {
			raw, gen := p.raw, p.gen
			p.mu.Unlock()
			return raw, gen, nil
		}
		if p.client != nil { // died while idle
			p.deadLocked(p.gen, "exited while idle")
			p.mu.Unlock()
			continue
		}
		if waited && p.starting == nil && p.lastErr != nil {
			err := p.lastErr
			p.mu.Unlock()
			return nil, 0, err
		}
		if p.starting == nil {
			p.startLocked(p.backoffLocked())
		}
		ch := p.starting
		p.mu.Unlock()
		select {
		case <-ch:
			waited = true
		case <-ctx.Done():
			return nil, 0, fmt.Errorf("waiting for %s plugin %q to start: %w", p.info.Kind, p.info.Name, ctx.Err())
		}
	}
}

// backoffLocked is the delay before the next start: none for a healthy
// plugin, then MinBackoff doubling per consecutive failure up to
// MaxBackoff.
func (p *process) backoffLocked() time.Duration {
	if p.failures == 0 {
		return 0
	}
	d := p.opts.MinBackoff << (p.failures - 1)
	if d > p.opts.MaxBackoff || d <= 0 {
		d = p.opts.MaxBackoff
	}
	return d
}

// startLocked launches a start attempt after delay in the background. The
// delay ends early when the process is closed, and launch then does
// nothing, so close never waits out a backoff.
func (p *process) startLocked(delay time.Duration) {
	ch := make(chan struct{})
	p.starting = ch
	go func() {
		defer close(ch)
		if delay > 0 {
			t := time.NewTimer(delay)
			defer t.Stop()
			select {
			case <-t.C:
			case <-p.quit:
			}
		}
		p.launch()
	}()
}

// launch starts the plugin process, dispenses its client, configures a
// model plugin and describes a tool plugin. It records the outcome.
func (p *process) launch() {
	p.mu.Lock()
	if p.closed {
		p.starting = nil
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()

	begin := time.Now()
	client, run, err := p.newClient()
	var rpc plugin.ClientProtocol
	var raw any
	var specs []engine.ToolSpec
	var pid int
	if err == nil {
		rpc, raw, specs, pid, err = p.setup(client, run)
	}
	if err != nil {
		if client != nil {
			p.stop(client, rpc, pid)
		}
		err = &startError{p.startErr(err, run)}
		p.mu.Lock()
		closed := p.closed
		p.mu.Unlock()
		if !closed {
			p.log.Warn("plugin failed to start", "error", err)
		}
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	p.starting = nil
	if err != nil {
		p.runner = nil
		p.lastErr = err
		p.failures++
		return
	}
	if p.closed {
		p.runner = nil
		p.stop(client, rpc, pid)
		return
	}
	p.client, p.rpc, p.raw, p.pid, p.specs = client, rpc, raw, pid, specs
	p.proto = client.NegotiatedVersion()
	p.gen++
	p.started = time.Now()
	p.lastErr = nil
	p.log.Debug("plugin started", "pid", pid, "generation", p.gen, "took", time.Since(begin))
}

// newClient configures go-plugin for one start: a debug attach
// (Info.Attach), or a launch through a pluginRunner with the allow-listed
// environment, the private socket directory, the containment mode and,
// for a third-party plugin, the check against its lock file entry. A
// plugin the host refuses (Info.LockErr) gets no client.
func (p *process) newClient() (*plugin.Client, *pluginRunner, error) {
	cfg := &plugin.ClientConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: pluginSets(nil, nil),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           newPluginLogger(p.opts.Logger, p.info.Name),
		StartTimeout:     p.opts.StartTimeout,
	}
	if rc := p.info.Attach; rc != nil {
		gp, err := rc.goPlugin()
		if err != nil {
			return nil, nil, err
		}
		cfg.Reattach = gp
		// A reattach skips the version negotiation that picks the plugin
		// set, so it is given here.
		cfg.Plugins = cfg.VersionedPlugins[rc.ProtocolVersion]
		p.log.Warn("attaching to a plugin in debug mode: it is not launched, not checked against the lock file, and left running", "pid", rc.Pid, "addr", rc.Addr.Address)
		return plugin.NewClient(cfg), nil, nil
	}
	if p.info.LockErr != nil {
		return nil, nil, p.info.LockErr
	}
	var check func(*os.File) error
	if e, lockFile := p.info.Lock, p.info.LockFile; e != nil {
		check = func(f *os.File) error { return p.verifier.verify(f, p.info.Path, e.SHA256, lockFile, p.info.Ref) }
	}
	run := newPluginRunner(p.info.Path, p.info.Args, pluginEnv(p.opts, p.info.Ref), p.containment(), check, cfg.Logger)
	// go-plugin gives the runner a command carrying only the handshake
	// variables and the socket directory (SkipHostEnv): they join the
	// allow-listed environment. The directory is created by go-plugin in
	// the Manager's private one, which also holds the host's side of the
	// broker.
	cfg.SkipHostEnv = true
	cfg.UnixSocketConfig = &plugin.UnixSocketConfig{TempDir: p.socketDir}
	cfg.RunnerFunc = func(_ hclog.Logger, cmd *exec.Cmd, _ string) (runner.Runner, error) {
		// The plugin's socket goes in the private directory itself, not
		// in go-plugin's subdirectory of it, which would lengthen its path
		// towards the 108 bytes a Unix socket address may have (the last
		// value of a variable is the one the plugin gets).
		run.env = append(append(run.env, cmd.Env...), envUnixSocketDir+"="+p.socketDir)
		return run, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed { // close has run: it will not kill this runner
		return nil, nil, errClosed
	}
	p.runner = run
	return plugin.NewClient(cfg), run, nil
}

// containment is how the plugin's process is contained: third-party
// plugins in the strongest mode available; built-in plugins in a session,
// since the only one that starts processes, the shell tool, contains its
// commands itself and reads their process groups from /proc, which a PID
// namespace would number differently.
func (p *process) containment() contain.Mode {
	if p.info.Builtin {
		return contain.Session
	}
	return contain.Available()
}

// LaunchCommand returns the command that starts the plugin binary at path
// as the Manager starts a third-party plugin: contained as strongly as
// this system allows (package contain), with only the host environment
// variables that DefaultEnv or extraEnv allow (see FilterEnv), and told to
// create its socket in socketDir. Give it to go-plugin with SkipHostEnv
// set. For harnesses such as plugintest.
func LaunchCommand(path string, args []string, socketDir string, extraEnv []string) *exec.Cmd {
	cmd := exec.Command(path, args...)
	contain.Apply(cmd, contain.Available())
	// The variable go-plugin's server reads for its socket directory.
	cmd.Env = append(FilterEnv(os.Environ(), extraEnv), envUnixSocketDir+"="+socketDir)
	return cmd
}

// Reap kills every process left behind by a plugin started with
// LaunchCommand (pid is the plugin's) once the plugin has exited, and
// returns how many it killed; the kernel has already done it when the
// plugin ran in a PID namespace.
func Reap(pid int) int { return contain.Reap(pid, contain.Available()) }

// envUnixSocketDir is go-plugin's plugin.EnvUnixSocketDir.
const envUnixSocketDir = "PLUGIN_UNIX_SOCKET_DIR"

// startErr explains a failed start; a debug attach says how to restart
// the plugin.
func (p *process) startErr(err error, run *pluginRunner) error {
	if rc := p.info.Attach; rc != nil {
		return fmt.Errorf("attach to %s plugin %q in debug mode (pid %d, %s %s): %w; is it still running? start it again with %s and set %s to the line it prints",
			p.info.Kind, p.info.Name, rc.Pid, rc.Addr.Network, rc.Addr.Address, err, DebugFlag, EnvReattach)
	}
	return fmt.Errorf("start %s plugin %q (%s): %w", p.info.Kind, p.info.Name, p.info.Path, err)
}

// stop ends one generation: it kills a launched process and everything it
// left behind; a debug attach only closes the connection and leaves the
// debugged process running.
func (p *process) stop(client *plugin.Client, rpc plugin.ClientProtocol, pid int) {
	if p.info.Attach != nil {
		if g, ok := rpc.(*plugin.GRPCClient); ok {
			g.Conn.Close() // not rpc.Close: that would shut the plugin down
		}
		return
	}
	client.Kill()
	contain.Reap(pid, p.containment())
}

func (p *process) setup(client *plugin.Client, run *pluginRunner) (rpc plugin.ClientProtocol, raw any, specs []engine.ToolSpec, pid int, err error) {
	rpc, err = client.Client()
	switch {
	case run != nil:
		pid = run.Pid()
	case client.ReattachConfig() != nil:
		pid = client.ReattachConfig().Pid
	}
	if err != nil {
		if run != nil && !errors.Is(err, ErrChecksumMismatch) && !errors.Is(err, ErrChecksumUnverified) {
			err = handshakeErr(err, run)
		}
		return nil, nil, nil, pid, err
	}
	if client.NegotiatedVersion() != ProtocolVersion {
		return rpc, nil, nil, pid, fmt.Errorf("speaks plugin protocol %d; this plexus speaks %d", client.NegotiatedVersion(), ProtocolVersion)
	}
	raw, err = rpc.Dispense(p.info.Kind)
	if err != nil {
		return rpc, nil, nil, pid, fmt.Errorf("the plugin does not serve kind %q: %w", p.info.Kind, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.opts.StartTimeout)
	defer cancel()
	switch c := raw.(type) {
	case *modelClient:
		if err := c.Configure(ctx, p.settings()); err != nil {
			return rpc, nil, nil, pid, kindErr(KindModel, "configure", err)
		}
	case *toolClient:
		specs, err = c.Tools(ctx)
		if err != nil {
			return rpc, nil, nil, pid, kindErr(KindTool, "describe", err)
		}
		// A first stream for calls, ready for the first call; none for a
		// plugin that does not serve Calls.
		c.calls.unsupported = p.opts.invokePerCall
		cs, err := c.calls.get(ctx)
		if err != nil {
			return rpc, nil, nil, pid, fmt.Errorf("open a calls stream: %w", err)
		}
		if cs != nil {
			c.calls.put(cs)
		}
	}
	return rpc, raw, specs, pid, nil
}

// handshakeErr explains a failed handshake from go-plugin's error (v1.8.0
// words) and what the plugin printed on stderr, which it waits for
// briefly: the likely cause first, then the plugin's own words. A process
// that is no Plexus plugin (another handshake, output on stdout, another
// protocol version, no executable for this machine) gives ErrNotPlugin; a
// plugin that exited or hung before its handshake may have failed at
// startup.
func handshakeErr(err error, run *pluginRunner) error {
	select {
	case <-run.stderrEOF:
	case <-time.After(time.Second):
	}
	printed := run.stderrTail.Indented()
	msg := err.Error()
	notPlugin := true
	var cause string
	switch {
	case strings.Contains(printed, "This binary is a plugin"):
		cause = "it is a go-plugin plugin built with another handshake (magic cookie) than Plexus's, so it refused to start: " +
			"it was built for another program, or with a changed HandshakeConfig; a Plexus plugin serves with plugins.ServeTool or plugins.ServeModel " +
			"from github.com/plexus-agent/plexus/plugins, which set the cookie " + Handshake.MagicCookieKey
	case strings.Contains(msg, "exec format error"):
		cause = fmt.Sprintf("it is not an executable for this machine (%s/%s): build it for this system, or install it from its source so that plexus builds it", runtime.GOOS, runtime.GOARCH)
	case strings.Contains(msg, "Incompatible API version") || strings.Contains(msg, "Incompatible core API version"):
		cause = fmt.Sprintf("it speaks another plugin protocol version than this plexus (%d): rebuild it against this version of the SDK", ProtocolVersion)
	case strings.Contains(msg, "Unrecognized remote plugin message: ") && !strings.Contains(msg, "Unrecognized remote plugin message: \n"):
		line, _, _ := strings.Cut(strings.TrimPrefix(msg[strings.Index(msg, "Unrecognized remote plugin message: "):], "Unrecognized remote plugin message: "), "\n")
		cause = fmt.Sprintf("it printed %q on stdout instead of the plugin handshake: stdout belongs to the plugin protocol (log to stderr with plugins.Logger), or it is no plugin at all", truncateRunes(line, 120))
	default:
		notPlugin = false
		cause = "it exited or stopped answering before the plugin handshake: it may have failed at startup, for example for lack of an environment variable, which must be passed with $" + envPluginEnvName
	}
	if printed != "" {
		cause += "; it printed on stderr:\n" + printed
	} else {
		cause += " (it printed nothing on stderr)"
	}
	if notPlugin {
		return fmt.Errorf("%w: %s (%w)", ErrNotPlugin, cause, err)
	}
	return fmt.Errorf("%s (%w)", cause, err)
}

// envPluginEnvName is the variable cmd/plexus reads for the extra
// environment variables every plugin inherits.
const envPluginEnvName = "PLEXUS_PLUGIN_ENV"

// truncateRunes cuts s to at most n runes, marking the cut.
func truncateRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// settings are what Configure sends a model plugin: none when probing at
// install.
func (p *process) settings() map[string]string {
	if p.probe {
		return nil
	}
	return p.opts.Settings[p.info.Name]
}

// kindErr reports a failed first call; Unimplemented means the process
// serves the other kind.
func kindErr(kind, op string, err error) error {
	if status.Code(err) == codes.Unimplemented {
		return fmt.Errorf("%w: it does not serve the %s service (is it a plugin of another kind?): %s", ErrNotPlugin, kind, status.Convert(err).Message())
	}
	return fmt.Errorf("%s: %s", op, status.Convert(err).Message())
}

// crashed handles a call error that may mean the process died: it checks
// whether the process is gone or no longer answers, and if so marks it dead
// (scheduling a restart) and returns a description of what happened.
func (p *process) crashed(gen uint64, err error) (string, bool) {
	code := status.Code(err)
	if code != codes.Unavailable && code != codes.Canceled && code != codes.Internal && code != codes.Unknown {
		return "", false
	}
	p.mu.Lock()
	client := p.client
	same := p.gen == gen && client != nil
	p.mu.Unlock()
	if !same {
		return "exited", true // already replaced
	}
	if rpc, cerr := client.Client(); cerr == nil && rpc.Ping() == nil {
		return "", false // alive and answering: the error is the plugin's own
	}
	// go-plugin notices the exit shortly after the connection drops.
	what := "stopped answering"
	for i := 0; i < 25; i++ {
		if client.Exited() {
			what = "exited"
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.mu.Lock()
	p.deadLocked(gen, what)
	p.mu.Unlock()
	return what, true
}

// deadLocked retires generation gen: kills what is left of it, kills
// processes it left behind, and schedules a restart after the backoff.
func (p *process) deadLocked(gen uint64, why string) {
	if p.gen != gen || p.client == nil {
		return
	}
	client, rpc, pid := p.client, p.rpc, p.pid
	p.client, p.rpc, p.raw, p.pid = nil, nil, nil, 0
	if rc := p.info.Attach; rc != nil {
		p.gone = &startError{fmt.Errorf("%w: %s plugin %q, attached for debugging (pid %d), %s; plexus does not relaunch a debugged plugin: "+
			"start it again under the debugger with %s, set %s to the line it prints, and run plexus again",
			ErrDebugPluginGone, p.info.Kind, p.info.Name, rc.Pid, why, DebugFlag, EnvReattach)}
		p.log.Warn("debugged plugin has gone away; not relaunching it", "pid", rc.Pid, "why", why)
		go p.stop(client, rpc, pid)
		return
	}
	if time.Since(p.started) > p.opts.HealthyAfter {
		p.failures = 0
	}
	p.failures++
	p.restarts++
	p.log.Warn("plugin process died; restarting", "why", why, "pid", pid, "restarts", p.restarts, "backoff", p.backoffLocked())
	mode := p.containment()
	go func() {
		client.Kill()
		if n := contain.Reap(pid, mode); n > 0 {
			p.log.Warn("killed processes the plugin left behind", "count", n)
		}
	}()
	if !p.closed && p.starting == nil {
		p.startLocked(p.backoffLocked())
	}
}

// close stops the process and everything it started. A restart that is
// waiting out its backoff is dropped at once; a start in progress is
// waited for (it ends within StartTimeout) and its process stopped.
func (p *process) close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.quit)
	}
	ch := p.starting
	run := p.runner
	p.mu.Unlock()
	if ch != nil {
		if run != nil {
			// A start in progress is not waited out (a plugin that never
			// completes its handshake would hold Close for StartTimeout):
			// killing it ends go-plugin's wait at once.
			run.Kill(context.Background())
		}
		<-ch
	}
	p.mu.Lock()
	client, rpc, pid := p.client, p.rpc, p.pid
	p.client, p.rpc, p.raw, p.runner = nil, nil, nil, nil
	p.mu.Unlock()
	if client != nil {
		p.stop(client, rpc, pid)
	}
}

// Pid is the live process's pid, or 0.
func (p *process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.client == nil || p.client.Exited() {
		return 0
	}
	return p.pid
}

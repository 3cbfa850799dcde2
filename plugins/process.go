package plugins

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plexus-agent/plexus/engine"
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
	socketDir string // the private directory the plugin's socket goes in
	probe     bool   // started by Install: a model gets no settings

	mu       sync.Mutex
	client   *plugin.Client
	rpc      plugin.ClientProtocol
	raw      any // *toolClient or *modelClient of the live process
	pid      int
	proto    int    // negotiated protocol version of the live process
	gen      uint64 // increments with every successful start
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

func newProcess(info Info, opts *Options, log *slog.Logger, socketDir string) *process {
	return &process{info: info, opts: opts, log: log.With("plugin", info.Name, "kind", info.Kind), socketDir: socketDir, quit: make(chan struct{})}
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
	client, err := p.newClient()
	var rpc plugin.ClientProtocol
	var raw any
	var specs []engine.ToolSpec
	var pid int
	if err == nil {
		rpc, raw, specs, pid, err = p.setup(client)
	}
	if err != nil {
		if client != nil {
			p.stop(client, rpc, pid)
		}
		err = &startError{p.startErr(err)}
		p.log.Warn("plugin failed to start", "error", err)
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	p.starting = nil
	if err != nil {
		p.lastErr = err
		p.failures++
		return
	}
	if p.closed {
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
// (Info.Attach), or a launch with the allow-listed environment, the
// private socket directory and, for a third-party plugin, the lock file's
// SHA-256 (SecureConfig). A plugin the host refuses (Info.LockErr) gets no
// client.
func (p *process) newClient() (*plugin.Client, error) {
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
			return nil, err
		}
		cfg.Reattach = gp
		// A reattach skips the version negotiation that picks the plugin
		// set, so it is given here.
		cfg.Plugins = cfg.VersionedPlugins[rc.ProtocolVersion]
		p.log.Warn("attaching to a plugin in debug mode: it is not launched, not checked against the lock file, and left running", "pid", rc.Pid, "addr", rc.Addr.Address)
		return plugin.NewClient(cfg), nil
	}
	if p.info.LockErr != nil {
		return nil, p.info.LockErr
	}
	cfg.Cmd = launchCommand(p.info.Path, p.info.Args, pluginEnv(p.opts, p.info.Ref), p.socketDir)
	cfg.SkipHostEnv = true
	if e := p.info.Lock; e != nil {
		sum, err := hex.DecodeString(e.SHA256)
		if err != nil {
			return nil, err
		}
		cfg.SecureConfig = &plugin.SecureConfig{Checksum: sum, Hash: sha256.New()}
	}
	return plugin.NewClient(cfg), nil
}

// LaunchCommand returns the command that starts the plugin binary at path
// as the Manager does: in a process group of its own, with only the host
// environment variables that DefaultEnv or extraEnv allow (see FilterEnv),
// and told to create its socket in socketDir. Give it to go-plugin with
// SkipHostEnv set. For harnesses such as plugintest.
func LaunchCommand(path string, args []string, socketDir string, extraEnv []string) *exec.Cmd {
	return launchCommand(path, args, FilterEnv(os.Environ(), extraEnv), socketDir)
}

// Reap kills every process left in the session of a plugin started with
// LaunchCommand (pid is the plugin's) once the plugin has exited, and
// returns how many it killed; a no-op where /proc is not available.
func Reap(pid int) int { return reap(pid) }

func launchCommand(path string, args, env []string, socketDir string) *exec.Cmd {
	cmd := exec.Command(path, args...)
	cmd.SysProcAttr = pluginSysProcAttr()
	// go-plugin v1.8.0 passes UnixSocketConfig.TempDir to the plugin only
	// with a RunnerFunc, so the plugin is told its socket directory here
	// (the variable go-plugin's server reads).
	cmd.Env = append(env, envUnixSocketDir+"="+socketDir)
	return cmd
}

// envUnixSocketDir is go-plugin's plugin.EnvUnixSocketDir.
const envUnixSocketDir = "PLUGIN_UNIX_SOCKET_DIR"

// startErr explains a failed start: a checksum mismatch becomes a
// *ChecksumError; a debug attach says how to restart the plugin.
func (p *process) startErr(err error) error {
	if errors.Is(err, plugin.ErrChecksumsDoNotMatch) && p.info.Lock != nil {
		got, _ := FileSHA256(p.info.Path)
		err = &ChecksumError{Ref: p.info.Ref, Path: p.info.Path, LockFile: p.info.LockFile, Want: p.info.Lock.SHA256, Got: got}
	}
	// go-plugin (v1.8.0) reports a binary it cannot read for SecureConfig
	// only in words.
	if p.info.Lock != nil && strings.HasPrefix(err.Error(), "error verifying checksum") {
		err = fmt.Errorf("%w: %v", ErrChecksumUnverified, err)
	}
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
	reap(pid)
}

func (p *process) setup(client *plugin.Client) (rpc plugin.ClientProtocol, raw any, specs []engine.ToolSpec, pid int, err error) {
	rpc, err = client.Client()
	if rc := client.ReattachConfig(); rc != nil {
		pid = rc.Pid
	}
	if err != nil {
		if p.info.Attach == nil && !errors.Is(err, plugin.ErrChecksumsDoNotMatch) && !strings.HasPrefix(err.Error(), "error verifying checksum") {
			err = handshakeErr(err)
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
	}
	return rpc, raw, specs, pid, nil
}

// notPluginSigns are go-plugin's (v1.8.0) words for a process that is no
// Plexus plugin at all: it printed something else than the handshake
// line, speaks another handshake, or is no executable for this machine.
// A process that printed nothing before exiting is not counted: it may be
// a plugin that failed at startup.
var notPluginSigns = []string{"Unrecognized remote plugin message", "Incompatible API version", "Incompatible core API version", "exec format error"}

// handshakeErr explains a failed handshake: ErrNotPlugin when the process
// is no Plexus plugin; otherwise (it exited or timed out first) a plugin
// that may have failed at startup.
func handshakeErr(err error) error {
	// An empty "message" is a process that exited having printed nothing:
	// perhaps a plugin that failed at startup.
	if strings.Contains(err.Error(), "Unrecognized remote plugin message: \n") {
		return fmt.Errorf("it exited before the plugin handshake; it may have failed at startup (see its log), for example for a variable it needs that must be passed with $PLEXUS_PLUGIN_ENV: %w", err)
	}
	for _, sign := range notPluginSigns {
		if strings.Contains(err.Error(), sign) {
			return fmt.Errorf("%w: it did not complete the Plexus plugin handshake: %w", ErrNotPlugin, err)
		}
	}
	return fmt.Errorf("it did not complete the plugin handshake; it may have failed at startup (see its log), for example for a variable it needs that must be passed with $PLEXUS_PLUGIN_ENV: %w", err)
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
	go func() {
		client.Kill()
		if n := reap(pid); n > 0 {
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
	p.mu.Unlock()
	if ch != nil {
		<-ch
	}
	p.mu.Lock()
	client, rpc, pid := p.client, p.rpc, p.pid
	p.client, p.rpc, p.raw = nil, nil, nil
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

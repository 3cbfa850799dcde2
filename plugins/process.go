package plugins

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
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
	info Info
	opts *Options
	log  *slog.Logger

	mu       sync.Mutex
	client   *plugin.Client
	raw      any // *toolClient or *modelClient of the live process
	pid      int
	gen      uint64 // increments with every successful start
	started  time.Time
	specs    []engine.ToolSpec // tool plugins: Describe of the live process
	starting chan struct{}     // non-nil while a start is pending; closed when it ends
	lastErr  error             // error of the last failed start
	failures int               // consecutive crashes and failed starts
	restarts int
	closed   bool
}

func newProcess(info Info, opts *Options, log *slog.Logger) *process {
	return &process{info: info, opts: opts, log: log.With("plugin", info.Name, "kind", info.Kind)}
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
		if p.client != nil && !p.client.Exited() {
			raw, gen := p.raw, p.gen
			p.mu.Unlock()
			return raw, gen, nil
		}
		if p.client != nil { // died while idle
			p.deadLocked(p.gen, "exited while idle")
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

// startLocked launches a start attempt after delay in the background.
func (p *process) startLocked(delay time.Duration) {
	ch := make(chan struct{})
	p.starting = ch
	go func() {
		if delay > 0 {
			time.Sleep(delay)
		}
		p.launch()
		close(ch)
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
	cmd := exec.Command(p.info.Path, p.info.Args...)
	cmd.SysProcAttr = pluginSysProcAttr()
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: pluginSets(nil, nil),
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           newPluginLogger(p.opts.Logger, p.info.Name),
		StartTimeout:     p.opts.StartTimeout,
	})
	raw, specs, pid, err := p.setup(client)
	if err != nil {
		client.Kill()
		reap(pid)
		err = &startError{fmt.Errorf("start %s plugin %q (%s): %w", p.info.Kind, p.info.Name, p.info.Path, err)}
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
		client.Kill()
		reap(pid)
		return
	}
	p.client, p.raw, p.pid, p.specs = client, raw, pid, specs
	p.gen++
	p.started = time.Now()
	p.lastErr = nil
	p.log.Debug("plugin started", "pid", pid, "generation", p.gen, "took", time.Since(begin))
}

func (p *process) setup(client *plugin.Client) (raw any, specs []engine.ToolSpec, pid int, err error) {
	rpc, err := client.Client()
	if rc := client.ReattachConfig(); rc != nil {
		pid = rc.Pid
	}
	if err != nil {
		return nil, nil, pid, err
	}
	if client.NegotiatedVersion() != ProtocolVersion {
		return nil, nil, pid, fmt.Errorf("speaks plugin protocol %d; this plexus speaks %d", client.NegotiatedVersion(), ProtocolVersion)
	}
	raw, err = rpc.Dispense(p.info.Kind)
	if err != nil {
		return nil, nil, pid, fmt.Errorf("the plugin does not serve kind %q: %w", p.info.Kind, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.opts.StartTimeout)
	defer cancel()
	switch c := raw.(type) {
	case *modelClient:
		if err := c.Configure(ctx, p.opts.Settings[p.info.Name]); err != nil {
			return nil, nil, pid, fmt.Errorf("configure: %s", status.Convert(err).Message())
		}
	case *toolClient:
		specs, err = c.Tools(ctx)
		if err != nil {
			return nil, nil, pid, fmt.Errorf("describe: %s", status.Convert(err).Message())
		}
	}
	return raw, specs, pid, nil
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
	client, pid := p.client, p.pid
	p.client, p.raw, p.pid = nil, nil, 0
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

// close stops the process and everything it started; it waits for a start
// in progress to finish first.
func (p *process) close() {
	p.mu.Lock()
	p.closed = true
	ch := p.starting
	p.mu.Unlock()
	if ch != nil {
		<-ch
	}
	p.mu.Lock()
	client, pid := p.client, p.pid
	p.client, p.raw = nil, nil
	p.mu.Unlock()
	if client != nil {
		client.Kill()
		reap(pid)
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

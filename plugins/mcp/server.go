package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/plugins"
	"github.com/plexus-agent/plexus/plugins/contain"
	"github.com/plexus-agent/plexus/plugins/internal/tail"
)

// errClosed is returned by calls made after Toolset.Close.
var errClosed = errors.New("the MCP toolset is closed")

// server supervises one configured MCP server: it connects on first use,
// notices when the connection is lost, reconnects on the next call after
// a backoff, and disconnects on close.
type server struct {
	name   string
	cfg    ServerConfig
	opts   *Options
	log    *slog.Logger
	client *mcp.Client
	stderr *tail.Writer // stdio servers: their stderr, logged, last lines kept

	tokens atomic.Uint64

	mu       sync.Mutex
	sess     *mcp.ClientSession
	done     chan struct{} // closed when sess's connection ends
	pid      int           // stdio: the server's pid (it leads its containment)
	gen      uint64        // increments with every connection
	started  time.Time
	tools    []*mcp.Tool // the live connection's tools
	stale    bool        // the server said its tool list changed
	starting chan struct{}
	lastErr  error     // why the last connection attempt failed
	downAt   time.Time // when the last connection was lost or attempt failed
	failures int       // consecutive losses and failed attempts
	closed   bool
	quit     chan struct{}          // closed by close: ends a backoff wait at once
	progress map[string]*updateSink // by progress token
	cleanup  sync.WaitGroup         // retiring connections
}

func newServer(name string, cfg ServerConfig, opts *Options) *server {
	s := &server{name: name, cfg: cfg, opts: opts, log: opts.Logger.With("mcp_server", name), progress: map[string]*updateSink{}, quit: make(chan struct{})}
	if cfg.Command != "" {
		log := s.log
		s.stderr = tail.New(20, func(line string) { log.Info("mcp server stderr", "line", line) })
	}
	s.client = mcp.NewClient(&mcp.Implementation{Name: "plexus", Version: opts.ClientVersion}, &mcp.ClientOptions{
		// No roots, sampling or elicitation: a server gets what its
		// configuration gives it (server-filesystem its directory
		// arguments).
		Capabilities:                &mcp.ClientCapabilities{},
		ProgressNotificationHandler: s.onProgress,
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			s.mu.Lock()
			s.stale = true
			s.mu.Unlock()
		},
		Logger: s.log,
	})
	return s
}

// conn is one live connection.
type conn struct {
	sess *mcp.ClientSession
	gen  uint64
	done chan struct{}
}

// get returns the live connection, connecting (or waiting for a
// connection in progress) as needed. After a failed attempt, calls get
// its error at once until the backoff has passed; after a lost
// connection, the next call waits out the backoff and reconnects.
func (s *server) get(ctx context.Context) (conn, error) {
	waited := false
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return conn{}, errClosed
		}
		if s.sess != nil {
			select {
			case <-s.done:
				s.lostLocked(s.gen, "exited while idle")
			default:
				c := conn{s.sess, s.gen, s.done}
				s.mu.Unlock()
				return c, nil
			}
		}
		if s.starting == nil {
			if waited && s.lastErr != nil {
				err := s.lastErr
				s.mu.Unlock()
				return conn{}, err
			}
			var delay time.Duration
			if s.failures > 0 {
				delay = time.Until(s.downAt.Add(s.backoffLocked()))
				if delay > 0 && s.lastErr != nil {
					err := s.lastErr
					s.mu.Unlock()
					return conn{}, fmt.Errorf("%w (next attempt in %s)", err, delay.Round(time.Millisecond))
				}
			}
			if delay > 0 {
				s.log.Debug("reconnecting after the backoff", "backoff", delay.Round(time.Millisecond))
			}
			s.startLocked(delay)
		}
		ch := s.starting
		s.mu.Unlock()
		select {
		case <-ch:
			waited = true
		case <-ctx.Done():
			return conn{}, fmt.Errorf("waiting for MCP server %q to start: %w", s.name, ctx.Err())
		}
	}
}

// backoffLocked is the delay after a loss or failed attempt: none before
// the first, then MinBackoff doubled per consecutive failure, at most
// MaxBackoff.
func (s *server) backoffLocked() time.Duration {
	if s.failures == 0 {
		return 0
	}
	return min(s.opts.MaxBackoff, s.opts.MinBackoff<<min(s.failures-1, 20))
}

func (s *server) startLocked(delay time.Duration) {
	ch := make(chan struct{})
	s.starting = ch
	go func() {
		defer close(ch)
		if delay > 0 {
			t := time.NewTimer(delay)
			defer t.Stop()
			select {
			case <-t.C:
			case <-s.quit: // closed: connect gives up at once
			}
		}
		s.connect()
	}()
}

// connect makes one connection attempt and records its outcome.
func (s *server) connect() {
	begin := time.Now()
	var sess *mcp.ClientSession
	var pid int
	var tools []*mcp.Tool
	err := errClosed
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if !closed {
		sess, pid, tools, err = s.dial()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.starting = nil
	if err == nil && s.closed {
		err = errClosed
		s.retire(sess, pid)
	}
	if err != nil {
		s.lastErr, s.downAt = err, time.Now()
		s.failures++
		if !errors.Is(err, errClosed) {
			s.log.Warn("MCP server failed to start", "error", err)
		}
		return
	}
	s.gen++
	s.sess, s.pid, s.tools, s.stale = sess, pid, tools, false
	s.done = make(chan struct{})
	s.started, s.lastErr = time.Now(), nil
	gen, done := s.gen, s.done
	go func() {
		sess.Wait()
		close(done)
		s.mu.Lock()
		s.lostLocked(gen, "closed the connection")
		s.mu.Unlock()
	}()
	s.log.Debug("MCP server connected", "pid", pid, "generation", gen, "tools", len(tools), "took", time.Since(begin))
}

// dial connects and lists the server's tools, within StartTimeout.
func (s *server) dial() (sess *mcp.ClientSession, pid int, tools []*mcp.Tool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.StartTimeout)
	defer cancel()
	var transport mcp.Transport
	var cmd *exec.Cmd
	if s.cfg.URL != "" {
		transport = &mcp.StreamableClientTransport{
			Endpoint:   s.cfg.URL,
			HTTPClient: &http.Client{Transport: headerTransport{s.expandAll(s.cfg.Headers)}},
			MaxRetries: -1, // a lost connection is the supervisor's to handle
		}
	} else {
		path, err := exec.LookPath(s.cfg.Command)
		if err != nil {
			return nil, 0, nil, s.startErr(fmt.Errorf("command %q not found: %w (install it, or fix \"command\" in mcpServers.%s)", s.cfg.Command, errors.Unwrap(err), s.name))
		}
		cmd = exec.Command(path, s.cfg.Args...)
		cmd.Env = plugins.FilterEnv(os.Environ(), s.opts.Env)
		for k, v := range s.expandAll(s.cfg.Env) {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Dir = s.cfg.Cwd
		cmd.Stderr = s.stderr
		contain.Apply(cmd, contain.Available())
		// Wait stops copying stderr this long after the server exits,
		// even when a child still holds the pipe.
		cmd.WaitDelay = time.Second
		transport = &mcp.CommandTransport{Command: cmd, TerminateDuration: s.opts.TerminateTimeout}
		s.stderr.Reset()
	}
	sess, err = s.client.Connect(ctx, transport, nil)
	if cmd != nil && cmd.Process != nil {
		pid = cmd.Process.Pid
	}
	if err != nil {
		contain.Kill(pid, contain.Available())
		return nil, 0, nil, s.startErr(s.explain(err))
	}
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			s.retire(sess, pid)
			return nil, 0, nil, s.startErr(fmt.Errorf("list tools: %w", s.explain(err)))
		}
		tools = append(tools, t)
	}
	return sess, pid, tools, nil
}

func (s *server) startErr(err error) error {
	return fmt.Errorf("start MCP server %q (%s %s): %w", s.name, s.cfg.Transport(), s.cfg.Target(), err)
}

// explain adds what the server printed on stderr before it failed, or a
// hint for a refused HTTP connection.
func (s *server) explain(err error) error {
	if s.stderr != nil {
		if tail := s.stderr.Indented(); tail != "" {
			return fmt.Errorf("%w; the server exited or stopped answering, and its stderr ended with:\n%s", err, tail)
		}
		return fmt.Errorf("%w (the server exited or stopped answering, and printed nothing on stderr)", err)
	}
	if strings.Contains(err.Error(), "connection refused") {
		return fmt.Errorf("%w (is the server running and listening at %s?)", err, s.cfg.URL)
	}
	return err
}

// lostLocked retires connection gen: it closes what is left of it, kills
// the server's process group and counts a failure for the backoff.
func (s *server) lostLocked(gen uint64, why string) {
	if s.gen != gen || s.sess == nil {
		return
	}
	sess, pid := s.sess, s.pid
	s.sess, s.pid, s.tools = nil, 0, nil
	if time.Since(s.started) > s.opts.HealthyAfter {
		s.failures = 0
	}
	s.failures++
	s.downAt = time.Now()
	s.lastErr = nil
	if !s.closed {
		s.log.Warn("MCP server connection lost; it reconnects on the next call", "why", why, "pid", pid, "backoff", s.backoffLocked())
	}
	s.retire(sess, pid)
}

// retire closes sess and kills what is left of the stdio server pid and
// every process it started (package contain) in the background;
// close waits for it.
func (s *server) retire(sess *mcp.ClientSession, pid int) {
	s.cleanup.Add(1)
	go func() {
		defer s.cleanup.Done()
		sess.Close()
		contain.Kill(pid, contain.Available())
	}()
}

// close disconnects (a stdio server gets its stdin closed, then SIGTERM
// and SIGKILL after TerminateTimeout each), kills what is left of the
// server's process group and waits for all of it.
func (s *server) close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.quit)
	}
	ch := s.starting
	s.mu.Unlock()
	if ch != nil {
		<-ch
	}
	s.mu.Lock()
	if s.sess != nil {
		s.lostLocked(s.gen, "closed")
	}
	s.mu.Unlock()
	s.cleanup.Wait()
}

// listTools returns the server's tools, connecting if needed and listing
// them again after the server announced a change.
func (s *server) listTools(ctx context.Context) ([]*mcp.Tool, error) {
	c, err := s.get(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	tools, stale := s.tools, s.stale
	s.mu.Unlock()
	if !stale {
		return tools, nil
	}
	var fresh []*mcp.Tool
	for t, err := range c.sess.Tools(ctx, nil) {
		if err != nil {
			return tools, fmt.Errorf("list tools of MCP server %q again after it announced a change: %w", s.name, err)
		}
		fresh = append(fresh, t)
	}
	s.mu.Lock()
	if s.gen == c.gen {
		s.tools, s.stale = fresh, false
	}
	s.mu.Unlock()
	return fresh, nil
}

// call runs tool with args (a JSON object) within the server's call
// timeout, forwarding progress notifications to onUpdate.
func (s *server) call(ctx context.Context, tool string, args json.RawMessage, onUpdate func(engine.ToolUpdate)) (engine.ToolResult, error) {
	c, err := s.get(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return engine.ToolResult{}, ctx.Err()
		}
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeFailed, "%v", err)
	}
	timeout := s.callTimeout()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	params := &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}}
	if len(args) > 0 && string(args) != "null" {
		params.Arguments = args
	}
	token := fmt.Sprintf("plexus-%d", s.tokens.Add(1))
	params.SetProgressToken(token)
	sink := &updateSink{fn: onUpdate}
	s.mu.Lock()
	s.progress[token] = sink
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.progress, token)
		s.mu.Unlock()
		sink.stop()
	}()

	res, err := c.sess.CallTool(cctx, params)
	switch {
	case err == nil && res.IsError:
		return engine.ToolResult{}, &engine.ToolError{Code: engine.ToolCodeFailed, Message: errorText(res)}
	case err == nil:
		return toolResult(res)
	case ctx.Err() != nil:
		return engine.ToolResult{}, ctx.Err()
	case errors.Is(cctx.Err(), context.DeadlineExceeded):
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeTimeout,
			"MCP tool %q of server %q did not finish within %s; the request was cancelled (raise \"timeout\" in mcpServers.%s if it needs longer)", tool, s.name, timeout, s.name)
	}
	var werr *jsonrpc.Error
	if errors.As(err, &werr) {
		code := engine.ToolCodeFailed
		if werr.Code == jsonrpc.CodeInvalidParams {
			code = engine.ToolCodeInvalidInput
		}
		return engine.ToolResult{}, &engine.ToolError{Code: code, Message: fmt.Sprintf("MCP server %q: %s", s.name, werr.Message)}
	}
	if what, ok := s.crashed(c, err); ok {
		return engine.ToolResult{}, &engine.ToolError{Code: engine.ToolCodePluginCrashed,
			Message: fmt.Sprintf("MCP server %q %s during %s; the next call reconnects (%v)", s.name, what, tool, s.explainCrash(err))}
	}
	return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeFailed, "MCP server %q: %v", s.name, err)
}

// crashed reports whether a call error means connection c is gone; if so
// it retires c so that the next call reconnects.
func (s *server) crashed(c conn, err error) (string, bool) {
	what := ""
	select {
	case <-c.done:
		what = "exited"
	case <-time.After(500 * time.Millisecond):
		// The transport may notice the end only after the failed call.
		if errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, mcp.ErrSessionMissing) || errors.Is(err, io.EOF) {
			what = "lost the connection"
		}
	}
	if what == "" {
		return "", false
	}
	if s.cfg.URL != "" {
		what = "lost the session"
	}
	s.mu.Lock()
	s.lostLocked(c.gen, what)
	s.mu.Unlock()
	return what, true
}

func (s *server) explainCrash(err error) error {
	if s.stderr != nil {
		if tail := s.stderr.Indented(); tail != "" {
			return fmt.Errorf("%w; its stderr ended with:\n%s", err, tail)
		}
	}
	return err
}

// onProgress forwards a progress notification to the call that sent its
// token.
func (s *server) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	p := req.Params
	token, _ := p.ProgressToken.(string)
	s.mu.Lock()
	sink := s.progress[token]
	s.mu.Unlock()
	if sink == nil {
		return
	}
	u := engine.ToolProgress{Message: p.Message}
	if p.Total > 0 {
		pct := min(100, max(0, 100*p.Progress/p.Total))
		u.Percentage = &pct
	}
	if u.Message == "" {
		if p.Total > 0 {
			u.Message = fmt.Sprintf("%g of %g", p.Progress, p.Total)
		} else {
			u.Message = fmt.Sprintf("%g", p.Progress)
		}
	}
	sink.send(engine.ToolUpdate{Progress: &u})
}

// updateSink serialises one call's updates and drops those that arrive
// after the call returned.
type updateSink struct {
	mu      sync.Mutex
	stopped bool
	fn      func(engine.ToolUpdate)
}

func (u *updateSink) send(x engine.ToolUpdate) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.stopped {
		u.fn(x)
	}
}

func (u *updateSink) stop() {
	u.mu.Lock()
	u.stopped = true
	u.mu.Unlock()
}

// headerTransport adds configured headers to every request.
type headerTransport struct{ headers map[string]string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range h.headers {
			r.Header.Set(k, v)
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// envRef is a reference to a variable of the engine's environment in an
// "env" or "headers" value, as VS Code's mcp.json writes it.
var envRef = regexp.MustCompile(`\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandAll returns m with every ${env:NAME} in its values replaced by
// the variable's value in the engine's environment; an unset variable
// becomes "" and is logged.
func (s *server) expandAll(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = envRef.ReplaceAllStringFunc(v, func(ref string) string {
			name := envRef.FindStringSubmatch(ref)[1]
			val, ok := os.LookupEnv(name)
			if !ok {
				s.log.Warn("an MCP server's configuration names a variable that is not set; it is given as empty", "key", k, "variable", name)
			}
			return val
		})
	}
	return out
}

// callTimeout is the deadline of one tool call: the server's "timeout",
// else Options.CallTimeout. Its tools' specs carry it, so the engine's
// deadline is the same.
func (s *server) callTimeout() time.Duration {
	if s.cfg.Timeout > 0 {
		return s.cfg.Timeout
	}
	return s.opts.CallTimeout
}

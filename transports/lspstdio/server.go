package lspstdio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/creachadair/jrpc2"

	"github.com/plexus-agent/plexus/engine"
)

// Defaults for Options fields left zero.
const (
	DefaultHostToolTimeout = 2 * time.Minute
	DefaultApprovalTimeout = 10 * time.Minute
	DefaultMaxQueuedTasks  = 8
	DefaultShutdownGrace   = 10 * time.Second
)

// Options configure a Server. Engine is required; the zero value of every
// other field means its default.
type Options struct {
	// Engine runs the tasks.
	Engine *engine.Engine
	// Workspace is where tasks run when initialize gives no workspaceRoot
	// (null, "" or left out). Without it such an initialize fails.
	Workspace *engine.Workspace
	// ApproveAll approves every call that needs approval without asking
	// the host.
	ApproveAll bool
	// Logger receives the transport's logs (malformed input, failed
	// writes, tasks, and at debug level jrpc2's log of every message);
	// nil discards them. Logs never go to the output.
	Logger *slog.Logger
	// MaxMessageBytes caps the body of one incoming message (default
	// DefaultMaxMessageBytes); a larger one is skipped and answered with
	// -32600.
	MaxMessageBytes int
	// HostToolTimeout is how long a host tool call waits for the host's
	// answer (default DefaultHostToolTimeout); initialConfig's
	// hostToolTimeoutMs overrides it.
	HostToolTimeout time.Duration
	// ApprovalTimeout is how long an approval waits for the host's answer
	// (default DefaultApprovalTimeout); initialConfig's approvalTimeoutMs
	// overrides it.
	ApprovalTimeout time.Duration
	// MaxQueuedTasks caps the executeTask requests waiting behind the
	// running one (default DefaultMaxQueuedTasks); one more is refused with
	// -32001.
	MaxQueuedTasks int
	// ShutdownGrace bounds how long Serve waits for cancelled tasks to end
	// when it stops (default DefaultShutdownGrace).
	ShutdownGrace time.Duration

	// callbackLinger is how long a $/requestToolExecution stays pending
	// in jrpc2 after its call ended (default callbackLinger); tests
	// shorten it.
	callbackLinger time.Duration
}

// callbackLinger is the default of Options.callbackLinger.
const callbackLinger = 10 * time.Second

// Server serves the engine over stdio with LSP framing. Safe for
// concurrent use; each Serve call is one client with its own session.
type Server struct {
	opts Options
	log  *slog.Logger
}

// New returns a Server. Serve reports missing required options.
func New(opts Options) *Server {
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if opts.HostToolTimeout <= 0 {
		opts.HostToolTimeout = DefaultHostToolTimeout
	}
	if opts.ApprovalTimeout <= 0 {
		opts.ApprovalTimeout = DefaultApprovalTimeout
	}
	if opts.MaxQueuedTasks <= 0 {
		opts.MaxQueuedTasks = DefaultMaxQueuedTasks
	}
	if opts.ShutdownGrace <= 0 {
		opts.ShutdownGrace = DefaultShutdownGrace
	}
	if opts.callbackLinger <= 0 {
		opts.callbackLinger = callbackLinger
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{opts: opts, log: log}
}

// Serve reads framed JSON-RPC messages from r and writes framed messages
// to w until the client sends shutdown (or exit), r ends, ctx ends or a
// write to w fails. It then refuses new tasks, cancels the running and
// queued ones, waits up to Options.ShutdownGrace for their results to be
// written, forgets the session and returns.
//
// Serve returns nil after shutdown, the end of r or ctx; a *FramingError
// (wrapped) when r broke the framing; the read or write error otherwise.
// Serve writes nothing but framed messages to w (each with one Write
// call), nothing after it returns, and does not close r or w. If the
// client stops reading, a write blocks; Serve then returns after its
// grace periods, leaving that write blocked. When Serve returns before r
// ends, a read of r may still be blocked in a goroutine: if r has a
// SetReadDeadline method (a pipe from os.Pipe, os.Stdin on a pipe), Serve
// sets a deadline in the past to end it; otherwise it ends when r
// returns.
func (s *Server) Serve(ctx context.Context, r io.Reader, w io.Writer) error {
	switch {
	case s.opts.Engine == nil:
		return errors.New("lspstdio: Options.Engine is nil")
	case r == nil || w == nil:
		return errors.New("lspstdio: Serve needs a reader and a writer")
	}
	c := newConn(s)
	defer c.cancel(errStopped)
	c.ch = newChannel(r, w, int64(s.opts.MaxMessageBytes), s.log, c.drainMethod, c.writeFailed)
	var released sync.Once
	release := func() { released.Do(c.ch.release) }
	defer release()
	var logf jrpc2.Logger
	if s.log.Enabled(ctx, slog.LevelDebug) {
		logf = func(text string) { s.log.Debug("jrpc2: " + text) }
	}
	c.srv = jrpc2.NewServer(c, &jrpc2.ServerOptions{
		AllowPush:      true, // $/requestToolExecution and the notifications
		DisableBuiltin: true, // no rpc.serverInfo: rpc.* is "method not found"
		// Handlers run concurrently: the running task, the queued ones
		// waiting for it, and toolResponse answering it.
		Concurrency: s.opts.MaxQueuedTasks + 32,
		Logger:      logf,
	})
	c.srv.Start(c.ch)
	stopped := make(chan struct{})
	go func() {
		c.srv.Wait()
		close(stopped)
	}()

	var why string
	select {
	case <-ctx.Done():
		why = "the server is stopping"
	case <-c.shutdownReq:
		why = "the client sent shutdown"
	case <-c.ch.ended:
		why = "the input ended"
	case <-c.writeErrCh:
		why = "writing to the client failed"
	}
	s.log.Debug("stopping", "why", why)

	// Stop in order: refuse new tasks and cancel the running and queued
	// ones; end the input, after which Recv hands jrpc2 the drain
	// notification, whose handler runs once every message read before it
	// has been assigned; wait for the tasks, then for every request in
	// flight, to be answered (the server still runs, so their
	// notifications go out too); only then let jrpc2 stop.
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	c.cancel(errShuttingDown)
	c.ch.Close()
	if d, ok := r.(interface{ SetReadDeadline(time.Time) error }); ok {
		_ = d.SetReadDeadline(time.Now())
	}
	grace := time.NewTimer(s.opts.ShutdownGrace)
	defer grace.Stop()
	waitFor := func(what string, done <-chan struct{}) {
		select {
		case <-done:
		case <-grace.C:
			s.log.Warn("still waiting after the shutdown grace; going on", "for", what, "grace", s.opts.ShutdownGrace)
			grace.Reset(0)
		}
	}
	waitFor("the messages already read", c.drained)
	waitFor("the tasks", c.tasks.zero())
	close(c.stopDone)
	waitFor("the requests in flight", c.inflight.zero())
	release()
	// After the read loop has its end (see lspChannel.Recv); in a
	// goroutine, as a write blocked on a client that stopped reading holds
	// jrpc2's lock.
	go c.srv.Stop()
	waitFor("the handlers", stopped)
	c.ch.seal()
	c.forgetSession()

	if err := c.writeErr(); err != nil {
		return fmt.Errorf("lspstdio: write: %w", err)
	}
	select {
	case <-c.ch.ended:
		if err := c.ch.inputErr(); err != nil {
			return fmt.Errorf("lspstdio: read: %w", err)
		}
	default:
	}
	return nil
}

// counter counts things in flight; unlike a sync.WaitGroup it may be
// added to while it is waited for.
type counter struct {
	mu      sync.Mutex
	n       int
	waiters []chan struct{}
}

func (c *counter) add(d int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += d
	if c.n == 0 {
		for _, w := range c.waiters {
			close(w)
		}
		c.waiters = nil
	}
}

// zero returns a channel closed when the count is zero.
func (c *counter) zero() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan struct{})
	if c.n == 0 {
		close(ch)
	} else {
		c.waiters = append(c.waiters, ch)
	}
	return ch
}

var (
	errStopped           = errors.New("lspstdio: Serve returned")
	errShuttingDown      = errors.New("the backend is shutting down")
	errCancelledByClient = errors.New("cancelled by the client")
)

// conn is the state of one Serve call.
type conn struct {
	s   *Server
	log *slog.Logger
	srv *jrpc2.Server
	ch  *lspChannel

	// ctx ends when Serve stops: tasks are cancelled and host calls stop
	// waiting.
	ctx    context.Context
	cancel context.CancelCauseFunc

	shutdownOnce sync.Once
	shutdownReq  chan struct{} // closed by shutdown or exit
	stopDone     chan struct{} // closed when Serve has waited for the tasks

	// drainMethod is the method of the notification Recv hands jrpc2 when
	// the input has ended; drained is closed when it is handled.
	drainMethod string
	drainOnce   sync.Once
	drained     chan struct{}
	// inflight counts the requests (not notifications) assigned a handler
	// and not yet answered.
	inflight counter

	werrOnce   sync.Once
	werr       atomic.Pointer[error]
	writeErrCh chan struct{}

	// tasks counts executeTask requests assigned and not yet released.
	tasks counter
	// initMu serializes initialize.
	initMu sync.Mutex

	mu      sync.Mutex
	session *engine.Session // nil until initialize succeeded
	initErr error           // why the last initialize failed
	cfg     config
	closing bool
	queue   []*ticket       // executeTask requests in arrival order; the first runs
	taskIDs map[string]bool // taskIds running or queued
	// byReq holds the executeTask requests running or queued, by request
	// id as jrpc2 spells it.
	byReq    map[string]*ticket
	pending  map[string]*pendingCall
	finished *recentSet // toolCallIds no longer pending
}

func newConn(s *Server) *conn {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &conn{
		s: s, log: s.log, ctx: ctx, cancel: cancel,
		shutdownReq: make(chan struct{}), stopDone: make(chan struct{}), writeErrCh: make(chan struct{}),
		drainMethod: "plexus.drained." + newCallID(), drained: make(chan struct{}),
		taskIDs: map[string]bool{}, byReq: map[string]*ticket{}, pending: map[string]*pendingCall{}, finished: newRecentSet(256),
	}
}

// Assign implements jrpc2.Assigner. jrpc2 calls it in arrival order,
// before any handler of the message runs, which is what orders the task
// queue. It counts the requests in flight: from here until jrpc2 cancels
// their context, which it does when it writes the response.
func (c *conn) Assign(ctx context.Context, method string) jrpc2.Handler {
	h := c.handler(ctx, method)
	if req := jrpc2.InboundRequest(ctx); h != nil && req != nil && !req.IsNotification() {
		c.inflight.add(1)
		context.AfterFunc(ctx, func() { c.inflight.add(-1) })
	}
	return h
}

func (c *conn) handler(ctx context.Context, method string) jrpc2.Handler {
	switch method {
	case c.drainMethod:
		return func(context.Context, *jrpc2.Request) (any, error) {
			c.drainOnce.Do(func() { close(c.drained) })
			return nil, nil
		}
	case methodInitialize:
		return c.initialize
	case methodExecuteTask:
		return c.assignTask(ctx)
	case methodUpdateConfig:
		return c.updateConfiguration
	case methodToolResponse:
		return c.toolResponse
	case methodShutdown, methodExit:
		return c.shutdown
	case methodCancelRequest:
		return c.cancelRequest
	}
	return nil
}

// Names implements jrpc2.Namer.
func (c *conn) Names() []string {
	return []string{methodInitialize, methodExecuteTask, methodUpdateConfig, methodToolResponse, methodShutdown, methodExit, methodCancelRequest}
}

// writeFailed records the first write error and stops Serve.
func (c *conn) writeFailed(err error) {
	c.werrOnce.Do(func() {
		c.log.Error("write to the client failed; stopping", "err", err)
		c.werr.Store(&err)
		close(c.writeErrCh)
	})
}

func (c *conn) writeErr() error {
	if p := c.werr.Load(); p != nil {
		return *p
	}
	return nil
}

// requestShutdown makes Serve stop.
func (c *conn) requestShutdown() {
	c.shutdownOnce.Do(func() { close(c.shutdownReq) })
}

// forgetSession drops the connection's session from the engine's memory
// (a stored session stays stored).
func (c *conn) forgetSession() {
	c.mu.Lock()
	sess := c.session
	c.mu.Unlock()
	if sess == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.s.opts.ShutdownGrace)
	defer cancel()
	if err := c.s.opts.Engine.CloseSession(ctx, sess.ID()); err != nil && !errors.Is(err, engine.ErrNotFound) {
		c.log.Warn("close the session", "session", sess.ID(), "err", err)
	}
}

// notify sends a notification; failures after the connection closed are
// expected and only logged.
func (c *conn) notify(method string, params any) {
	if err := c.srv.Notify(context.Background(), method, params); err != nil {
		c.log.Debug("notification not sent", "method", method, "err", err)
	}
}

// logToClient sends $/logMessage and logs the same text.
func (c *conn) logToClient(typ, msg string) {
	switch typ {
	case logError:
		c.log.Error(msg)
	case logWarn:
		c.log.Warn(msg)
	default:
		c.log.Info(msg)
	}
	c.notify(methodLogMessage, logMessage{Type: typ, Message: msg})
}

// fail answers a failed request: the error as the response, or for a
// notification (which has no response) as $/logMessage of type error.
func (c *conn) fail(req *jrpc2.Request, err *jrpc2.Error) (any, error) {
	if req.IsNotification() {
		c.logToClient(logError, fmt.Sprintf("%s failed (%d): %s", req.Method(), err.Code, err.Message))
	} else {
		c.log.Warn("request failed", "method", req.Method(), "code", err.Code, "err", err.Message)
	}
	return nil, err
}

// initialize handles initialize (a notification in the contract, also
// accepted as a request).
func (c *conn) initialize(_ context.Context, req *jrpc2.Request) (any, error) {
	c.initMu.Lock()
	defer c.initMu.Unlock()
	c.mu.Lock()
	initialized := c.session != nil
	c.mu.Unlock()
	if initialized {
		return c.fail(req, jrpc2.Errorf(CodeInitError, "the backend is already initialized; send updateConfiguration to change its settings"))
	}
	res, jerr := c.doInitialize(req)
	if jerr != nil {
		c.mu.Lock()
		c.initErr = errors.New(jerr.Message)
		c.mu.Unlock()
		return c.fail(req, jerr)
	}
	return res, nil
}

func (c *conn) doInitialize(req *jrpc2.Request) (*initializeResult, *jrpc2.Error) {
	var p initializeParams
	if err := unmarshalParams(req, &p); err != nil {
		return nil, err
	}
	eng := c.s.opts.Engine
	ws := c.s.opts.Workspace
	if p.WorkspaceRoot != nil && *p.WorkspaceRoot != "" {
		root, err := fromURI(*p.WorkspaceRoot)
		if err == nil {
			ws, err = eng.OpenWorkspace(root)
		}
		if err != nil {
			return nil, jrpc2.Errorf(CodeInitError, "workspaceRoot %q cannot be opened: %v", snippet(*p.WorkspaceRoot, 200), err)
		}
	}
	if ws == nil {
		return nil, jrpc2.Errorf(CodeInitError, "initialize gave no workspaceRoot and the server has no default workspace")
	}
	if k := jsonKind(p.Environment); k != 0 && k != '{' && k != 'n' {
		return nil, jrpc2.Errorf(jrpc2.InvalidParams, "initialize: environment must be an object")
	}
	cfg, err := applyConfig(c.defaultConfig(), c.defaultConfig(), p.InitialConfig, eng)
	if err != nil {
		return nil, jrpc2.Errorf(CodeInitError, "initialConfig: %v", err)
	}
	sess, err := eng.NewSession(ws, "")
	if err != nil {
		return nil, jrpc2.Errorf(CodeInitError, "start a session: %v", err)
	}
	c.mu.Lock()
	c.session, c.cfg, c.initErr = sess, cfg, nil
	c.mu.Unlock()
	if len(p.Environment) > 0 {
		c.log.Debug("initialize environment", "environment", string(p.Environment))
	}
	model := c.modelOf(cfg)
	c.logToClient(logInfo, fmt.Sprintf("Plexus is ready: workspace %s, model %s, host tools: %s",
		ws.Root, orNone(model), orNone(strings.Join(toolNames(cfg.hostTools), ", "))))
	c.checkModel(cfg.model)
	return &initializeResult{
		ServerInfo:    serverInfo{Name: "plexus", Protocol: "jsonrpc-stdio-lsp-framing"},
		WorkspaceRoot: ws.Root, Model: model, HostTools: toolNames(cfg.hostTools),
	}, nil
}

// modelOf is the model tasks use under cfg, as PROVIDER:MODEL ("" when
// none is chosen).
func (c *conn) modelOf(cfg config) string {
	ref := cfg.model
	if ref.IsZero() {
		ref = c.s.opts.Engine.CurrentModel()
	}
	if ref.IsZero() {
		return ""
	}
	return ref.String()
}

// updateConfiguration handles updateConfiguration (a notification in the
// contract, also accepted as a request; its result is null).
func (c *conn) updateConfiguration(_ context.Context, req *jrpc2.Request) (any, error) {
	var p updateConfigParams
	if err := unmarshalParams(req, &p); err != nil {
		return c.fail(req, err)
	}
	if jsonKind(p.UpdatedConfig) != '{' {
		return c.fail(req, jrpc2.Errorf(CodeConfigError, "updatedConfig must be an object"))
	}
	c.mu.Lock()
	if c.session == nil {
		c.mu.Unlock()
		return c.fail(req, jrpc2.Errorf(CodeInitError, "the backend is not initialized: send initialize first"))
	}
	cfg, err := applyConfig(c.cfg, c.defaultConfig(), p.UpdatedConfig, c.s.opts.Engine)
	if err == nil {
		c.cfg = cfg
	}
	c.mu.Unlock()
	if err != nil {
		return c.fail(req, jrpc2.Errorf(CodeConfigError, "updatedConfig: %v", err))
	}
	c.logToClient(logInfo, fmt.Sprintf("Configuration updated: model %s, host tools: %s",
		orNone(c.modelOf(cfg)), orNone(strings.Join(toolNames(cfg.hostTools), ", "))))
	c.checkModel(cfg.model)
	return nil, nil
}

// checkModel asks the model's provider, in the background (a provider
// call must not hold up the connection), whether it lists the model and
// whether it can chat and call tools (engine.CheckModel), and warns the
// host with $/logMessage when not. A provider that cannot be asked is not
// reported here: a task will say.
func (c *conn) checkModel(ref engine.ModelRef) {
	if ref.IsZero() {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), modelCheckTimeout)
		defer cancel()
		if _, err := c.s.opts.Engine.CheckModel(ctx, ref, engine.ForChat); errors.Is(err, engine.ErrModelNotFound) || errors.Is(err, engine.ErrUnsupported) {
			c.logToClient(logWarn, fmt.Sprintf("Tasks with model %s will fail: %v", ref, err))
		}
	}()
}

// shutdown handles shutdown and exit. As a request it is answered (null)
// once the tasks have been cancelled and have ended.
func (c *conn) shutdown(ctx context.Context, req *jrpc2.Request) (any, error) {
	c.log.Info("shutdown requested", "method", req.Method())
	c.requestShutdown()
	if req.IsNotification() {
		return nil, nil // notification handlers must not block jrpc2
	}
	select {
	case <-c.stopDone:
	case <-ctx.Done():
	}
	return nil, nil
}

// cancelRequest handles $/cancelRequest {id}: the executeTask request
// with that id, running or queued, is cancelled (even when its handler has
// not started yet); other ids are ignored (the other methods answer at
// once). The task's own context is cancelled, not jrpc2's request context,
// so that its place in the queue is kept until its result is written.
func (c *conn) cancelRequest(_ context.Context, req *jrpc2.Request) (any, error) {
	var p cancelParams
	if err := unmarshalParams(req, &p); err != nil || !validID(p.ID) {
		return nil, jrpc2.Errorf(jrpc2.InvalidParams, "$/cancelRequest needs {id: number | string}")
	}
	c.log.Debug("cancel requested", "id", string(p.ID))
	var cancel context.CancelCauseFunc
	c.mu.Lock()
	if t := c.byReq[string(p.ID)]; t != nil {
		t.cancelled = true
		cancel = t.cancel
	}
	c.mu.Unlock()
	if cancel != nil {
		cancel(errCancelledByClient)
	}
	return nil, nil
}

// unmarshalParams decodes req's params into v; absent params leave v as
// it is. The error is -32602. The params are decoded where jrpc2 holds
// them, without a copy.
func unmarshalParams(req *jrpc2.Request, v any) *jrpc2.Error {
	if !req.HasParams() {
		return nil
	}
	p := paramsInto{v: v, method: req.Method()}
	if err := req.UnmarshalParams(&p); err != nil {
		return jrpc2.Errorf(jrpc2.InvalidParams, "%s: invalid params: %v", req.Method(), err)
	}
	return p.err
}

// paramsInto decodes params into v, which must be an object; err is the
// -32602 error when it cannot.
type paramsInto struct {
	v      any
	method string
	err    *jrpc2.Error
}

func (p *paramsInto) UnmarshalJSON(data []byte) error {
	if jsonKind(data) != '{' {
		p.err = jrpc2.Errorf(jrpc2.InvalidParams, "%s: params must be an object", p.method)
	} else if err := json.Unmarshal(data, p.v); err != nil {
		p.err = jrpc2.Errorf(jrpc2.InvalidParams, "%s: invalid params: %v", p.method, jsonErrText(err))
	}
	return nil
}

// jsonErrText shortens encoding/json's messages ("json: cannot unmarshal
// number into Go struct field executeTaskParams.taskId of type string").
func jsonErrText(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Sprintf("%s must be a %s, not a %s", te.Field, jsonType(te.Type.String()), te.Value)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

func jsonType(goType string) string {
	switch {
	case goType == "string", goType == "*string":
		return "string"
	case strings.HasPrefix(goType, "[]"):
		return "array"
	case goType == "bool":
		return "boolean"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "float"):
		return "number"
	}
	return "object"
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// recentSet remembers the last n strings added.
type recentSet struct {
	ring []string
	next int
	set  map[string]bool
}

func newRecentSet(n int) *recentSet {
	return &recentSet{ring: make([]string, n), set: make(map[string]bool, n)}
}

func (r *recentSet) add(s string) {
	if old := r.ring[r.next]; old != "" {
		delete(r.set, old)
	}
	r.ring[r.next] = s
	r.set[s] = true
	r.next = (r.next + 1) % len(r.ring)
}

func (r *recentSet) has(s string) bool { return r.set[s] }

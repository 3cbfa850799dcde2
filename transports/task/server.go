package task

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/receipts"
	"github.com/plexus-agent/plexus/engine/workspace"
)

// Paths and defaults.
const (
	// ProcessPath is the task endpoint (POST).
	ProcessPath = "/api/task/process"
	// HealthPath is the readiness endpoint (GET, HEAD).
	HealthPath = "/health"
	// DefaultAddr is the address `plexus serve --transport task` listens
	// on: loopback only, the contract's port.
	DefaultAddr = "127.0.0.1:8080"
	// DefaultConcurrency is the number of tasks processed at once.
	DefaultConcurrency = 2
	// DefaultMaxQueue is the number of tasks that may wait for a worker.
	DefaultMaxQueue = 1024
	// DefaultMaxBodyBytes is the largest request body accepted: 1 MiB.
	DefaultMaxBodyBytes = 1 << 20
)

const (
	// bodyReadTimeout bounds reading a request body.
	bodyReadTimeout = 30 * time.Second
	// readyTimeout bounds one call of Options.Ready.
	readyTimeout = 5 * time.Second
	// flushTimeout bounds sending the answers of tasks Shutdown cancelled.
	flushTimeout = time.Second
	// maxPathInMessage caps how much of an unknown path a 404 repeats.
	maxPathInMessage = 200
)

// Causes of a task context's end other than the client leaving.
var (
	errShutdown    = errors.New("the server is shutting down")
	errTaskTimeout = errors.New("the task timed out")
)

// Options configure a Server. Engine, Workspace and ZURoot are required;
// every other zero value means its default.
type Options struct {
	// Engine runs the tasks' turns, with its current model.
	Engine *engine.Engine
	// Workspace is where turns run; task.data.file_path is relative to
	// its root and must stay inside it.
	Workspace *engine.Workspace
	// ZURoot is the receipt root (the ZU_ROOT environment variable):
	// receipts go to {ZURoot}/ide/receipts/{repoId}/{yyyy}/{mm}/receipts.jsonl,
	// signed with the key in {ZURoot}/ide/keys/receipts.key. A relative
	// path is made absolute against the working directory.
	ZURoot string
	// Concurrency is the number of tasks processed at once (default
	// DefaultConcurrency); the others wait in a priority queue.
	Concurrency int
	// MaxQueue is how many tasks may wait (default DefaultMaxQueue); a
	// task arriving at a full queue gets 503 SERVICE_UNAVAILABLE.
	MaxQueue int
	// MaxBodyBytes caps a request body (default DefaultMaxBodyBytes);
	// larger bodies get 413.
	MaxBodyBytes int64
	// AllowOrigins lists the values of the Origin header accepted on the
	// task endpoint, for a client that runs in a web view. A request with
	// any other Origin (which browsers add to every cross-site POST) is
	// refused with 403, so a web page cannot make the engine work.
	AllowOrigins []string
	// Ready reports whether the engine can take tasks (for example that
	// the model provider answers); an error makes the task endpoint and
	// /health answer 503 SERVICE_UNAVAILABLE with the error's text as
	// details.reason. It is called once per request, with a 5 s deadline.
	// Nil means always ready.
	Ready func(ctx context.Context) error
	// Logger receives one line per processed task and every failure; nil
	// discards.
	Logger *slog.Logger
}

// Server is the HTTP task front-end: an http.Handler for the endpoints of
// the package documentation, with the workers that process tasks and the
// open receipt logs. New starts the workers; Shutdown or Close stops them.
// A Server is safe for concurrent use.
type Server struct {
	opts    Options
	log     *slog.Logger
	root    *workspace.Root
	logs    *receiptLogs
	queue   *queue
	workers sync.WaitGroup

	mu       sync.Mutex
	closing  bool // no new requests
	forced   bool // running tasks were cancelled
	inflight sync.WaitGroup
	tasks    map[*job]context.CancelCauseFunc // accepted tasks, to cancel them on shutdown
	servers  []*http.Server

	closeOnce sync.Once
	closeErr  error

	// now is the clock deadlines are checked against; tests set it.
	now func() time.Time
}

var _ http.Handler = (*Server)(nil)

// New returns a Server for opts, with its workers started. It opens the
// workspace root and loads (or creates) the receipt signing key. Errors:
// a missing Engine, Workspace or ZURoot, an unreadable workspace, and the
// errors of receipts.LoadOrCreateKey (for example a key file others can
// read).
func New(opts Options) (*Server, error) {
	if opts.Engine == nil || opts.Workspace == nil {
		return nil, errors.New("task server: Options.Engine and Options.Workspace are required")
	}
	if opts.ZURoot == "" {
		return nil, errors.New("task server: Options.ZURoot (ZU_ROOT) is required: receipts are stored under it")
	}
	zu, err := filepath.Abs(opts.ZURoot)
	if err != nil {
		return nil, fmt.Errorf("task server: %w", err)
	}
	opts.ZURoot = zu
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.MaxQueue <= 0 {
		opts.MaxQueue = DefaultMaxQueue
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	root, err := workspace.Open(opts.Workspace.Root)
	if err != nil {
		return nil, fmt.Errorf("task server: %w", err)
	}
	logs, err := openReceiptLogs(zu, logger)
	if err != nil {
		root.Close()
		return nil, fmt.Errorf("task server: %w", err)
	}
	s := &Server{
		opts: opts, log: logger, root: root, logs: logs,
		queue: newQueue(opts.MaxQueue), tasks: map[*job]context.CancelCauseFunc{}, now: time.Now,
	}
	for range opts.Concurrency {
		s.workers.Add(1)
		go s.worker()
	}
	return s, nil
}

// ListenAndServe listens on addr (DefaultAddr when empty) and calls Serve.
func (s *Server) ListenAndServe(addr string) error {
	if addr == "" {
		addr = DefaultAddr
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("task server: %w", err)
	}
	return s.Serve(ln)
}

// Serve accepts HTTP/1.1 connections on ln and serves them until Shutdown
// or Close, then returns nil; other errors are those of http.Server.Serve.
// It closes ln.
func (s *Server) Serve(ln net.Listener) error {
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.servers = append(s.servers, hs)
	s.mu.Unlock()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Shutdown stops accepting requests (new ones on open connections get 503
// SERVICE_UNAVAILABLE), lets accepted tasks run until they end or ctx
// ends, then cancels those still queued or running (their clients get 503
// and their receipts record the cancellation), and finally stops the
// workers and closes the receipt logs and the workspace. It returns
// ctx.Err() when it had to cancel tasks, and errors from closing the logs.
// Calling it again (or Close) is safe.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	servers := slices.Clone(s.servers)
	s.mu.Unlock()

	var err error
	for _, hs := range servers {
		hs.Shutdown(ctx) // stops listening; waits for active connections until ctx ends
	}
	idle := make(chan struct{})
	go func() {
		s.inflight.Wait()
		close(idle)
	}()
	select {
	case <-idle:
	case <-ctx.Done():
		select {
		case <-idle: // nothing left to cancel
		default:
			err = ctx.Err()
			s.cancelAll()
			// Cancelled turns end at once (their receipts are bounded by
			// receiptTimeout); give their answers flushTimeout to reach
			// the clients, then close the connections, which also ends
			// the handlers still reading a slow request body.
			flush, cancel := context.WithTimeout(context.Background(), flushTimeout)
			select {
			case <-idle:
			case <-flush.Done():
			}
			for _, hs := range servers {
				hs.Shutdown(flush)
				hs.Close()
			}
			cancel()
			<-idle
		}
	}
	s.closeOnce.Do(func() {
		s.queue.close()
		s.workers.Wait()
		s.closeErr = errors.Join(s.logs.close(), s.root.Close())
	})
	return errors.Join(err, s.closeErr)
}

// cancelAll cancels every accepted task, queued ones first: the queue is
// closed before any cancellation, so that a worker freed by a cancelled
// turn cannot start a queued task.
func (s *Server) cancelAll() {
	s.queue.close()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forced = true
	for _, cancel := range s.tasks {
		cancel(errShutdown)
	}
}

// Close is Shutdown without the grace period: accepted tasks are cancelled
// at once. It returns errors from closing the receipt logs.
func (s *Server) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := s.Shutdown(ctx)
	if errors.Is(err, context.Canceled) {
		return s.closeErr
	}
	return err
}

// ServeHTTP routes a request: POST ProcessPath, GET or HEAD HealthPath;
// other methods on those paths get 405 with an Allow header, other paths
// 404. Every response is JSON (Content-Type application/json).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case ProcessPath:
		if r.Method != http.MethodPost {
			methodNotAllowed(w, r, "POST")
			return
		}
		s.handleProcess(w, r)
	case HealthPath:
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			methodNotAllowed(w, r, "GET, HEAD")
			return
		}
		s.handleHealth(w, r)
	default:
		p := r.URL.Path
		if len(p) > maxPathInMessage {
			p = p[:maxPathInMessage] + "..."
		}
		writeError(w, fieldError(http.StatusNotFound, CodeInvalidRequest,
			fmt.Sprintf("No endpoint at %q: tasks are posted to %s", p, ProcessPath), "",
			fmt.Sprintf("Unknown path; the endpoints are POST %s and GET %s", ProcessPath, HealthPath)))
	}
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	writeError(w, fieldError(http.StatusMethodNotAllowed, CodeInvalidRequest,
		fmt.Sprintf("Method %s is not allowed on %s: use %s", r.Method, r.URL.Path, allow), "",
		"Allowed methods: "+allow))
}

// handleHealth answers {"status":"ok"}, or 503 while shutting down or not
// ready.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		writeError(w, unavailable(upperFirst(errShutdown.Error())))
		return
	}
	if e := s.ready(r.Context()); e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// ready calls Options.Ready.
func (s *Server) ready(ctx context.Context) *Error {
	if s.opts.Ready == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if err := s.opts.Ready(ctx); err != nil {
		return unavailable(err.Error())
	}
	return nil
}

// enter registers a request with the in-flight ones; false once Shutdown
// has begun.
func (s *Server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.inflight.Add(1)
	return true
}

// handleProcess is POST ProcessPath: read, decode and check the request,
// check readiness, queue the task, wait for its outcome, record the
// receipt and answer.
func (s *Server) handleProcess(w http.ResponseWriter, r *http.Request) {
	if !s.enter() {
		writeError(w, unavailable(upperFirst(errShutdown.Error())))
		return
	}
	defer s.inflight.Done()
	if o := r.Header.Get("Origin"); o != "" && !slices.Contains(s.opts.AllowOrigins, o) {
		writeError(w, fieldError(http.StatusForbidden, CodeInvalidRequest, "Requests from web pages are not accepted", "",
			fmt.Sprintf("Origin %q is not among the allowed origins", o)))
		return
	}
	body, e := s.readBody(w, r)
	if e != nil {
		writeError(w, e)
		return
	}
	d, e := decodeRequest(body)
	if e != nil {
		writeError(w, e)
		return
	}
	in, e := buildInput(d, s.root)
	if e != nil {
		writeError(w, e)
		return
	}
	if e := s.ready(r.Context()); e != nil {
		writeError(w, e)
		return
	}
	log, err := s.logs.get(d.RepoID)
	if err != nil {
		s.log.Error("task: open receipt log", "repo", d.RepoID, "err", err)
		writeError(w, receiptError(d, err))
		return
	}
	s.answer(w, r.Context(), log, d, in)
}

// readBody reads the request body, up to Options.MaxBodyBytes and within
// bodyReadTimeout.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *Error) {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(bodyReadTimeout)) // unsupported writers just skip it
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	rc.SetReadDeadline(time.Time{})
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, fieldError(http.StatusRequestEntityTooLarge, CodeInvalidRequest, "Request body too large", "",
			fmt.Sprintf("The request body is larger than %d bytes", tooBig.Limit))
	case err != nil:
		return nil, fieldError(http.StatusBadRequest, CodeInvalidRequest, "Failed to read the request body", "",
			upperFirst(err.Error()))
	}
	return body, nil
}

// answer queues the task, waits for its outcome (or its deadline, or the
// client leaving, or shutdown), appends its receipt and writes the
// response.
func (s *Server) answer(w http.ResponseWriter, rctx context.Context, log *receipts.Log, d *decoded, in engine.TurnInput) {
	ctx, cancel := context.WithCancelCause(rctx)
	defer cancel(nil)
	ctx, cancelTimeout := context.WithTimeoutCause(ctx, d.timeout, errTaskTimeout)
	defer cancelTimeout()
	j := &job{ctx: ctx, task: d, in: in, index: -1, done: make(chan outcome, 1)}

	s.mu.Lock()
	if s.forced {
		s.mu.Unlock()
		writeError(w, unavailable(upperFirst(errShutdown.Error())))
		return
	}
	s.tasks[j] = cancel
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.tasks, j)
		s.mu.Unlock()
	}()

	if err := s.queue.push(j); err != nil {
		writeError(w, unavailable(upperFirst(err.Error())))
		return
	}
	var out outcome
	select {
	case out = <-j.done:
	case <-ctx.Done():
		if s.queue.remove(j) {
			out = outcome{err: context.Cause(ctx)}
		} else {
			out = <-j.done // a worker has it; the cancelled turn ends at once
		}
	}

	t := d.Task
	if out.result != nil {
		path, err := s.appendReceipt(rctx, log, d, out, "", out.result)
		if err != nil {
			s.log.Error("task: receipt", "task", t.ID, "repo", d.RepoID, "err", err)
			writeError(w, receiptError(d, err))
			return
		}
		s.log.Info("task processed", "task", t.ID, "type", t.Type, "repo", d.RepoID,
			"ms", out.result.ProcessingTime, "attempts", out.attempts, "receipt", path)
		writeJSON(w, http.StatusOK, Response{Result: out.result, ReceiptPath: path})
		return
	}

	var e *Error
	var reason string
	switch cause := context.Cause(ctx); {
	case out.panicked:
		reason = out.err.Error()
		e = &Error{Status: http.StatusInternalServerError, Code: CodeUnknown, Message: msgProcessing,
			Details: map[string]any{"taskId": t.ID, "reason": reason}}
	case ctx.Err() != nil && errors.Is(cause, errTaskTimeout) || ctx.Err() == nil && s.pastDeadline(ctx):
		// The clock decides too: the failure may be the model plugin's
		// copy of the deadline, back before this process's timer ran.
		reason = fmt.Sprintf("timed out after %v ms", d.timeoutMs())
		e = &Error{Status: http.StatusGatewayTimeout, Code: CodeTimeout, Message: msgTimeout,
			Details: map[string]any{"taskId": t.ID, "timeoutMs": d.timeoutMs()}}
	case ctx.Err() != nil && errors.Is(cause, errShutdown):
		reason = "cancelled: " + errShutdown.Error()
		e = unavailable("The server is shutting down; the task was cancelled")
	case ctx.Err() != nil:
		reason = "cancelled: the client closed the connection"
		e = unavailable("The request was cancelled")
	default:
		reason = out.err.Error()
		e = &Error{Status: http.StatusInternalServerError, Code: CodeTaskProcessing, Message: msgProcessing,
			Details: map[string]any{"taskId": t.ID, "reason": reason}}
	}
	data := failureData{TaskID: t.ID, Error: reason, Attempts: out.attempts}
	if _, err := s.appendReceipt(rctx, log, d, out, reason, data); err != nil {
		s.log.Error("task: receipt of a failed task", "task", t.ID, "repo", d.RepoID, "err", err)
	}
	s.log.Warn("task failed", "task", t.ID, "type", t.Type, "repo", d.RepoID, "code", e.Code,
		"attempts", out.attempts, "reason", reason)
	writeError(w, e)
}

// pastDeadline reports whether the task's deadline has passed by the
// clock (see engine.PastDeadline).
func (s *Server) pastDeadline(ctx context.Context) bool {
	return engine.PastDeadline(ctx, s.now())
}

// receiptError is a 500 RECEIPT_GENERATION_ERROR.
func receiptError(d *decoded, err error) *Error {
	return &Error{Status: http.StatusInternalServerError, Code: CodeReceiptGeneration, Message: msgReceipt,
		Details: map[string]any{"taskId": d.Task.ID, "reason": err.Error()}}
}

package httpws

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

// Defaults of Options fields left zero.
const (
	// DefaultAddr is the contract's desktop-host port on loopback.
	DefaultAddr = "127.0.0.1:3199"
	// DefaultMaxMessageBytes caps one WebSocket message from a client and
	// one REST request body (1 MiB).
	DefaultMaxMessageBytes = 1 << 20
	// DefaultSendQueue is how many server messages may wait for one slow
	// WebSocket client before it is disconnected (it can reconnect with
	// ?since= and lose nothing).
	DefaultSendQueue = 4096
	// DefaultShutdownGrace is how long Shutdown lets running turns finish
	// before cancelling them.
	DefaultShutdownGrace = 10 * time.Second
	// DefaultOrphanTimeout is how long a turn runs on with no client
	// connected to its session.
	DefaultOrphanTimeout = 10 * time.Minute
	// DefaultMaxQueueBytes bounds the bytes waiting for one client (64
	// MiB): token messages repeat their turn's text, so a count alone
	// does not bound memory.
	DefaultMaxQueueBytes = 64 << 20
	// DefaultMaxConnections caps the open WebSocket connections.
	DefaultMaxConnections = 256
	// DefaultWriteTimeout bounds one WebSocket message write.
	DefaultWriteTimeout = 30 * time.Second
)

// Indexer is the workspace index as the index endpoints and
// client.file_changes use it (cmd/plexus adapts engine/index). The values
// it returns are marshalled to JSON as they are.
type Indexer interface {
	// Build indexes the workspace at root: every file when rebuild, else
	// the changed ones. It may take minutes; ctx cancels it.
	Build(ctx context.Context, root string, rebuild bool) (any, error)
	// ApplyChanges updates the index for the changed files only.
	ApplyChanges(ctx context.Context, root string, changes []FileChange) (any, error)
	// Status reports the index of root (including a running build's
	// progress).
	Status(ctx context.Context, root string) (any, error)
}

// FileChange is one file watcher event (client.file_changes and POST
// .../index/incremental).
type FileChange struct {
	// Type is "created", "modified" or "deleted".
	Type string `json:"type"`
	// Path is workspace-relative.
	Path        string `json:"file_path"`
	ContentHash string `json:"content_hash,omitempty"`
}

// Options configure a Server. Engine and Token are required.
type Options struct {
	Engine *engine.Engine
	// Token is the bearer token every request must carry.
	Token string
	// Indexer serves the index endpoints; nil makes them answer 501.
	Indexer Indexer
	// Version is reported by /v1/health and server.hello.
	Version string
	// MaxMessageBytes caps client WebSocket messages and request bodies
	// (default DefaultMaxMessageBytes).
	MaxMessageBytes int64
	// SendQueue is the per-connection queue of server messages (default
	// DefaultSendQueue); MaxQueueBytes bounds its bytes (default
	// DefaultMaxQueueBytes). A client behind either is disconnected with
	// 1013.
	SendQueue     int
	MaxQueueBytes int64
	// WriteTimeout bounds the write of one WebSocket message (default
	// DefaultWriteTimeout); a client that accepts nothing for that long
	// is disconnected (the socket closes mid-message).
	WriteTimeout time.Duration
	// MaxConnections caps the open WebSocket connections; more are
	// refused with 503 (default DefaultMaxConnections).
	MaxConnections int
	// ShutdownGrace bounds how long Shutdown waits for running turns
	// before cancelling them (default DefaultShutdownGrace).
	ShutdownGrace time.Duration
	// OrphanTimeout cancels a running turn when no client has been
	// connected to its session for this long (default
	// DefaultOrphanTimeout): an approval or a command result nobody can
	// send must not hold the session for ever.
	OrphanTimeout time.Duration
	// Logger receives one line per request and connection; nil discards.
	Logger *slog.Logger
}

// Server is the HTTP + WebSocket front-end. Create it with New, serve it
// with Serve or Handler, stop it with Shutdown. Safe for concurrent use.
type Server struct {
	opts    Options
	eng     *engine.Engine
	token   string
	log     *slog.Logger
	started time.Time
	handler http.Handler
	http    *http.Server

	// base is the parent context of every turn; cancelling it cancels
	// them all.
	base       context.Context
	cancelBase context.CancelCauseFunc

	mu       sync.Mutex
	hubs     map[string]*hub // by session id
	indexing map[string]*indexJob
	closing  bool
	nconns   int             // open WebSocket connections
	deleted  map[string]bool // sessions deleted through this server
	turns    sync.WaitGroup  // running turns
	conns    sync.WaitGroup  // open WebSocket connections
	jobs     sync.WaitGroup  // index builds
	// stopping is closed when Shutdown has ended the turns: every stream
	// then flushes and closes with 1001.
	stopping chan struct{}
	stopOnce sync.Once
}

// New returns a Server. Errors: a missing Engine or Token.
func New(opts Options) (*Server, error) {
	if opts.Engine == nil {
		return nil, errors.New("httpws: Options.Engine is required")
	}
	if opts.Token == "" {
		return nil, errors.New("httpws: Options.Token is required")
	}
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if opts.SendQueue <= 0 {
		opts.SendQueue = DefaultSendQueue
	}
	if opts.ShutdownGrace <= 0 {
		opts.ShutdownGrace = DefaultShutdownGrace
	}
	if opts.OrphanTimeout <= 0 {
		opts.OrphanTimeout = DefaultOrphanTimeout
	}
	if opts.MaxQueueBytes <= 0 {
		opts.MaxQueueBytes = DefaultMaxQueueBytes
	}
	if opts.MaxConnections <= 0 {
		opts.MaxConnections = DefaultMaxConnections
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	base, cancel := context.WithCancelCause(context.Background())
	s := &Server{
		opts: opts, eng: opts.Engine, token: opts.Token, log: log, started: time.Now(),
		base: base, cancelBase: cancel, hubs: map[string]*hub{}, indexing: map[string]*indexJob{},
		stopping: make(chan struct{}), deleted: map[string]bool{},
	}
	s.handler = s.logRequests(s.requireToken(s.routes()))
	s.http = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		// Idle keep-alive connections (authenticated or not) are closed.
		IdleTimeout: 2 * time.Minute,
		ErrorLog:    slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BaseContext: func(net.Listener) context.Context { return context.Background() },
	}
	return s, nil
}

// Handler is the server's HTTP handler (routes, authentication, logging),
// for tests and for embedding.
func (s *Server) Handler() http.Handler { return s.handler }

// Serve accepts connections on ln until Shutdown; it returns nil after a
// Shutdown. To serve TLS, pass a listener from tls.NewListener.
func (s *Server) Serve(ln net.Listener) error {
	err := s.http.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// errShutdown is the cause of turns cancelled by Shutdown.
var errShutdown = errors.New("the server is shutting down")

// Shutdown stops the server: it stops accepting connections and
// messages, lets running turns finish for up to Options.ShutdownGrace (or
// until ctx ends), cancels the ones still running (they end with status
// cancelled, their events stored), then closes every WebSocket with
// status 1001 (going away). It returns ctx's error when ctx ended before
// the connections closed.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	// Stop accepting; hijacked WebSocket connections are not waited for.
	herr := make(chan error, 1)
	go func() { herr <- s.http.Shutdown(ctx) }()

	done := make(chan struct{})
	go func() { s.turns.Wait(); close(done) }()
	grace := time.NewTimer(s.opts.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
	case <-ctx.Done():
	}
	s.cancelBase(errShutdown)
	select {
	case <-done:
	case <-ctx.Done():
	}
	// Every stream, greeted or not, writes what is queued (the cancelled
	// turns' last events) and closes with 1001.
	s.stopOnce.Do(func() { close(s.stopping) })
	jdone := make(chan struct{})
	go func() { s.jobs.Wait(); close(jdone) }()
	select {
	case <-jdone:
	case <-ctx.Done():
		return ctx.Err()
	}
	cdone := make(chan struct{})
	go func() { s.conns.Wait(); close(cdone) }()
	select {
	case <-cdone:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := <-herr; err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("http shutdown: %w", err)
	}
	return nil
}

// Close cancels everything at once (Shutdown with no grace).
func (s *Server) Close() error {
	s.cancelBase(errShutdown)
	s.stopOnce.Do(func() { close(s.stopping) })
	return s.http.Close()
}

// allHubs returns the hubs, taken under the server's lock, for callers
// that then lock each hub (never under the server's lock).
func (s *Server) allHubs() []*hub {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*hub, 0, len(s.hubs))
	for _, h := range s.hubs {
		out = append(out, h)
	}
	return out
}

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController (and the WebSocket upgrade) reach
// the connection.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// logRequests logs each request with slog: method, path (never the query
// or headers, which may hold secrets), status and duration.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		s.log.Info("request", "method", r.Method, "path", r.URL.Path, "status", status,
			"duration_ms", time.Since(start).Milliseconds(), "remote", r.RemoteAddr)
	})
}

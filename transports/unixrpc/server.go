package unixrpc

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

// Defaults of Options. The limits are the contract's.
const (
	DefaultMaxMessageBytes      = 10 << 20 // 10 MiB
	DefaultRequestsPerSecond    = 100
	DefaultMaxConcurrentQueries = 3
	DefaultApprovalTimeout      = 5 * time.Minute
	DefaultQueryTimeout         = 30 * time.Minute
	DefaultMaxQueueBytes        = 64 << 20
	DefaultWriteTimeout         = time.Minute
)

// modelsTTL is how long initialize reuses the model list; modelsTimeout
// bounds one provider's listing.
const (
	modelsTTL = 30 * time.Second
	// modelsPartialTTL is modelsTTL for a list that left a provider out.
	modelsPartialTTL = 5 * time.Second
	modelsTimeout    = 2 * time.Second
)

// errServerClosed is the cause of the queries Close cancels.
var errServerClosed = errors.New("the server was closed")

// Options configure a Server. Engine and Workspace are required; the zero
// value of every other field means its default.
type Options struct {
	// Engine runs the queries.
	Engine *engine.Engine
	// Workspace is where every connection's sessions work.
	Workspace *engine.Workspace
	// Logger receives connection and error logs; nil discards them.
	Logger *slog.Logger
	// Version is server_info.version (default: the module version of the
	// running binary, or "dev").
	Version string
	// SessionDir is where session.save writes when given no path, and what
	// a relative path is relative to (default $PLEXUS_DATA_DIR/sessions,
	// else $XDG_DATA_HOME/plexus/sessions, else
	// ~/.local/share/plexus/sessions). It is created (0700) on first use.
	SessionDir string
	// SessionRoots are the directories, besides SessionDir, that
	// session.save and session.load may use (default: the user's home
	// directory). Other paths are refused with -32005.
	SessionRoots []string
	// MaxMessageBytes caps one incoming line (default
	// DefaultMaxMessageBytes, the contract's 10 MB).
	MaxMessageBytes int
	// RequestsPerSecond is the rate limit per connection (default
	// DefaultRequestsPerSecond, the contract's 100).
	RequestsPerSecond int
	// MaxConcurrentQueries caps the queries of one connection accepted and
	// not yet complete (default DefaultMaxConcurrentQueries, the
	// contract's 3).
	MaxConcurrentQueries int
	// ApprovalTimeout is how long a tool.request_approval waits for its
	// tool.approve before the call is denied (default
	// DefaultApprovalTimeout); it is the notification's timeout.
	ApprovalTimeout time.Duration
	// QueryTimeout bounds one query's turn (default DefaultQueryTimeout);
	// a query that runs out ends with status timeout.
	QueryTimeout time.Duration
	// MaxQueueBytes bounds the notifications waiting for a slow client
	// (default DefaultMaxQueueBytes); a client further behind is
	// disconnected.
	MaxQueueBytes int
	// WriteTimeout bounds one write to a client (default
	// DefaultWriteTimeout); a client that accepts nothing for that long is
	// disconnected.
	WriteTimeout time.Duration
	// AnyWorkspace lets search.text and search.symbols name another
	// workspace by its absolute root (workspace_root), as the per-user
	// search server of plexus search does; otherwise they search
	// Workspace only.
	AnyWorkspace bool
}

// Server serves the engine to JSON-RPC clients on Unix sockets. Each
// connection has its own sessions, queries and approvals. Safe for
// concurrent use.
type Server struct {
	opts    Options
	log     *slog.Logger
	version string

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	closing   bool
	connWG    sync.WaitGroup

	// listMu admits one model listing at a time; modelsMu guards its
	// result.
	listMu        sync.Mutex
	modelsMu      sync.Mutex
	models        []modelEntry
	modelsAt      time.Time
	modelsPartial bool
	refreshing    bool // a background refresh runs
}

// New returns a Server. Errors: a missing Engine or Workspace.
func New(opts Options) (*Server, error) {
	switch {
	case opts.Engine == nil:
		return nil, errors.New("unixrpc: Options.Engine is nil")
	case opts.Workspace == nil:
		return nil, errors.New("unixrpc: Options.Workspace is nil")
	}
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if opts.RequestsPerSecond <= 0 {
		opts.RequestsPerSecond = DefaultRequestsPerSecond
	}
	if opts.MaxConcurrentQueries <= 0 {
		opts.MaxConcurrentQueries = DefaultMaxConcurrentQueries
	}
	if opts.ApprovalTimeout <= 0 {
		opts.ApprovalTimeout = DefaultApprovalTimeout
	}
	if opts.QueryTimeout <= 0 {
		opts.QueryTimeout = DefaultQueryTimeout
	}
	if opts.MaxQueueBytes <= 0 {
		opts.MaxQueueBytes = DefaultMaxQueueBytes
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.SessionDir == "" {
		opts.SessionDir = defaultSessionDir()
	}
	opts.SessionDir = filepath.Clean(opts.SessionDir)
	if opts.SessionRoots == nil {
		if home, err := os.UserHomeDir(); err == nil {
			opts.SessionRoots = []string{home}
		}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	version := opts.Version
	if version == "" {
		version = "dev"
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			version = strings.TrimPrefix(bi.Main.Version, "v")
		}
	}
	return &Server{opts: opts, log: log, version: version, listeners: map[net.Listener]struct{}{}, conns: map[*conn]struct{}{}}, nil
}

// defaultSessionDir is where session files go by default.
func defaultSessionDir() string {
	if d := os.Getenv("PLEXUS_DATA_DIR"); d != "" {
		return filepath.Join(d, "sessions")
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "plexus", "sessions")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "plexus", "sessions")
	}
	return filepath.Join(os.TempDir(), "plexus-sessions")
}

// Serve accepts connections on ln (from Listen) and serves each until it
// closes. It returns nil after Shutdown or Close (at once when called
// after them), else the listener's error. Serve closes ln when it
// returns; closing a listener from Listen removes its socket file.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
		ln.Close()
	}()
	go s.refreshModels() // warm the list for the first initialize
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Out of file descriptors and the like: wait and go on.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.log.Warn("accept failed; retrying", "error", err, "in", delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			nc.Close()
			return nil
		}
		c := newConn(s, nc)
		s.conns[c] = struct{}{}
		s.connWG.Add(1)
		s.mu.Unlock()
		go c.serve()
	}
}

// Shutdown stops accepting connections (removing the socket file), then
// ends every connection cleanly: its running and waiting queries are
// cancelled and end with stream.complete status cancelled, what is queued
// for the client is written, and the connection is closed. When ctx ends
// first the remaining connections are closed at once and ctx's error is
// returned.
func (s *Server) Shutdown(ctx context.Context) error {
	conns := s.stop()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() { c.shutdown(ctx) })
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		s.connWG.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		for _, c := range conns {
			c.kill(errServerClosed)
		}
		<-done
		return ctx.Err()
	}
}

// Close stops accepting connections and closes every connection at once;
// running queries are cancelled. It waits for the connections' goroutines.
func (s *Server) Close() error {
	for _, c := range s.stop() {
		c.kill(errServerClosed)
	}
	s.connWG.Wait()
	return nil
}

// stop marks the server closing, closes its listeners and returns its
// connections.
func (s *Server) stop() []*conn {
	s.mu.Lock()
	s.closing = true
	lns := make([]net.Listener, 0, len(s.listeners))
	for ln := range s.listeners {
		lns = append(lns, ln)
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, ln := range lns {
		ln.Close()
	}
	return conns
}

func (s *Server) dropConn(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.connWG.Done()
}

// modelEntries is initialize's models: every model of every loaded
// provider as PROVIDER:MODEL; a provider that does not answer within
// modelsTimeout is left out, as is one that is not configured
// (engine.ErrNotConfigured, which does not make the list partial), and the
// current model is always listed.
//
// The handshake must stay fast (the contract asks for under 50 ms) even
// when a provider is down, so the list is served from a cache: the first
// listing starts when Serve starts; an initialize waits for a listing only
// when none has finished yet (at most modelsTimeout, the providers being
// asked at once); a list older than modelsTTL (modelsPartialTTL when a
// provider was left out) is served as it is while a new listing runs in
// the background. Listings do not end with a client's ctx.
func (s *Server) modelEntries(ctx context.Context) []modelEntry {
	s.modelsMu.Lock()
	models, at, partial := s.models, s.modelsAt, s.modelsPartial
	s.modelsMu.Unlock()
	if models == nil {
		return s.refreshModels()
	}
	ttl := modelsTTL
	if partial {
		ttl = modelsPartialTTL
	}
	if time.Since(at) > ttl {
		s.modelsMu.Lock()
		start := !s.refreshing
		s.refreshing = true
		s.modelsMu.Unlock()
		if start { // one background refresh at a time
			go func() {
				s.refreshModels()
				s.modelsMu.Lock()
				s.refreshing = false
				s.modelsMu.Unlock()
			}()
		}
	}
	return slices.Clone(models)
}

// refreshModels lists the models (one listing at a time; a caller that
// finds one running waits for it and returns its result).
func (s *Server) refreshModels() []modelEntry {
	s.listMu.Lock()
	defer s.listMu.Unlock()
	s.modelsMu.Lock()
	fresh := s.models != nil && time.Since(s.modelsAt) < time.Second
	models := s.models
	s.modelsMu.Unlock()
	if fresh { // another caller just listed
		return slices.Clone(models)
	}
	e := s.opts.Engine
	cur := e.CurrentModel()
	providers := e.Providers()
	lists := make([][]engine.ModelInfo, len(providers))
	failed := make([]bool, len(providers))
	// The providers are asked at once, and the listing waits at most
	// modelsTimeout even for a provider that ignores its context (it is
	// then left out; its goroutine ends when the provider returns).
	type answer struct {
		i     int
		infos []engine.ModelInfo
		err   error
	}
	answers := make(chan answer, len(providers))
	for i, p := range providers {
		go func() {
			lctx, cancel := context.WithTimeout(context.Background(), modelsTimeout)
			defer cancel()
			infos, err := e.ListModels(lctx, p)
			answers <- answer{i, infos, err}
		}()
	}
	timer := time.NewTimer(modelsTimeout + 100*time.Millisecond)
	defer timer.Stop()
	got := make([]bool, len(providers))
collect:
	for range providers {
		select {
		case a := <-answers:
			got[a.i] = true
			if errors.Is(a.err, engine.ErrNotConfigured) {
				// Skipped, not failed: asking again will not help.
				s.log.Debug("list models: not configured", "provider", providers[a.i], "error", a.err)
				continue
			}
			if a.err != nil {
				s.log.Warn("list models", "provider", providers[a.i], "error", a.err)
				failed[a.i] = true
				continue
			}
			lists[a.i] = a.infos
		case <-timer.C:
			break collect
		}
	}
	for i := range providers {
		if !got[i] {
			s.log.Warn("list models", "provider", providers[i], "error", "no answer within "+modelsTimeout.String())
			failed[i] = true
		}
	}
	out := []modelEntry{}
	for i, p := range providers {
		for _, info := range lists[i] {
			ref := engine.ModelRef{Provider: p, Name: info.Name}
			out = append(out, modelEntry{Name: ref.String(), Type: modelType(info), Loaded: info.Loaded, Current: ref == cur})
		}
	}
	if !cur.IsZero() && !slices.ContainsFunc(out, func(m modelEntry) bool { return m.Current }) {
		out = append(out, modelEntry{Name: cur.String(), Type: modelType(engine.ModelInfo{Name: cur.Name}), Current: true})
	}
	s.modelsMu.Lock()
	s.models, s.modelsAt, s.modelsPartial = out, time.Now(), slices.Contains(failed, true)
	s.modelsMu.Unlock()
	return slices.Clone(out)
}

// modelType is "embedding" for a model that only embeds, "code" for one
// whose name says it is for code, else "chat".
func modelType(m engine.ModelInfo) string {
	if m.HasCapability("embedding") && !m.HasCapability("completion") {
		return "embedding"
	}
	n := strings.ToLower(m.Name)
	for _, k := range []string{"code", "coder", "starcoder", "devstral", "codestral"} {
		if strings.Contains(n, k) {
			return "code"
		}
	}
	return "chat"
}

package acp

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/plexus-agent/plexus/engine"
)

// ProtocolVersion is the ACP major version this front-end speaks.
const ProtocolVersion = 1

// Toolset is a session's own tool source (the MCP servers the client
// names in session/new or session/load): an engine.Toolset that is
// closed with the session.
type Toolset interface {
	engine.Toolset
	Close() error
}

// MCPServer is one MCP server of session/new or session/load, as the
// client gave it: a stdio server (Command, Args, Env) or an HTTP one
// (URL, Headers).
type MCPServer struct {
	Name    string
	Command string
	Args    []string
	Env     map[string]string
	URL     string
	Headers map[string]string
}

// Options configure a Server. The zero value of every field but Engine
// means its default.
type Options struct {
	// Engine runs the turns. With a session store (engine.Options.Sessions)
	// sessions outlive the process: loadSession is advertised and
	// session/load replays them.
	Engine *engine.Engine
	// MCP starts the MCP servers a client names for a session (plugins/mcp
	// in the CLI); its error, naming the bad server, answers session/new
	// with -32602. Nil refuses sessions that name MCP servers.
	MCP func(ctx context.Context, servers []MCPServer) (Toolset, error)
	// Patches keeps the undo record of changes the client writes through
	// fs/write_text_file (engine.Patcher keeps its own for changes it
	// writes), so `plexus undo` restores them; nil keeps none.
	Patches engine.PatchStore
	// ApproveAll approves every action that needs approval without asking
	// (serve --approve-all).
	ApproveAll bool
	// Version is the agent version in initialize's agentInfo.
	Version string
	// MaxMessageBytes caps one input line (default DefaultMaxMessageBytes).
	MaxMessageBytes int
	// TerminalOutputBytes is the outputByteLimit of terminal/create
	// (default 1 MiB).
	TerminalOutputBytes int
	// Logger receives logs; nil discards them. Nothing is logged to the
	// output.
	Logger *slog.Logger
}

// Server serves ACP connections. It is safe for concurrent use; each Serve
// call is one connection.
type Server struct {
	opts Options
	log  *slog.Logger
	// persistent is true when the engine stores sessions.
	persistent bool

	mu      sync.Mutex
	windows map[engine.ModelRef]int64 // context lengths, 0 when unknown
}

// New returns a Server.
func New(opts Options) *Server {
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if opts.TerminalOutputBytes <= 0 {
		opts.TerminalOutputBytes = 1 << 20
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{opts: opts, log: log, windows: map[engine.ModelRef]int64{}}
	// An engine without a session store answers ErrUnsupported; one with
	// a store, ErrNotFound for a session that does not exist.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err := opts.Engine.Events(ctx, "ses_probe_nonexistent", 0, 1)
	cancel()
	s.persistent = !errors.Is(err, engine.ErrUnsupported)
	return s
}

// Serve speaks ACP on in and out (the agent's stdin and stdout) until the
// input ends or ctx ends. Only ACP messages are written to out, one per
// line. When it returns, the connection's running prompts have been
// cancelled and answered and its MCP servers stopped. It returns nil when
// the client closed the input, ctx's error when ctx ended first, or the
// input's read error.
func (s *Server) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	lw := &lineWriter{w: out}
	pr, pw := io.Pipe()
	c := newConn(s, lw)
	c.conn = sdk.NewAgentSideConnection(c, lw, pr)
	c.conn.SetLogger(s.log.With("component", "acp-sdk"))

	guardErr := make(chan error, 1)
	go func() { guardErr <- guard(in, pw, lw, s.opts.MaxMessageBytes) }()

	var err error
	select {
	case <-c.conn.Done():
		err = <-guardErr
	case <-ctx.Done():
		err = ctx.Err()
		pw.CloseWithError(err)
	}
	c.shutdown()
	return err
}

// contextWindow is the context length the provider reports for ref, 0
// when it does not say; asked once per model and remembered.
func (s *Server) contextWindow(ctx context.Context, ref engine.ModelRef) int64 {
	s.mu.Lock()
	w, ok := s.windows[ref]
	s.mu.Unlock()
	if ok {
		return w
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	infos, err := s.opts.Engine.ListModels(ctx, ref.Provider)
	if err != nil {
		return 0 // not remembered: the provider may answer next time
	}
	for _, i := range infos {
		if i.Name == ref.Name {
			w = i.ContextLength
		}
	}
	s.mu.Lock()
	s.windows[ref] = w
	s.mu.Unlock()
	return w
}

// responseSessionID is the sessionId of a response line's result, "" when
// it has none.
func responseSessionID(line []byte) string {
	var m struct {
		Result struct {
			SessionID string `json:"sessionId"`
		} `json:"result"`
	}
	if json.Unmarshal(line, &m) != nil {
		return ""
	}
	return m.Result.SessionID
}

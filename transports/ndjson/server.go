package ndjson

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

// DefaultMaxLineBytes is the default cap on one request line: 16 MiB.
const DefaultMaxLineBytes = 16 << 20

// Options configure a Server. Engine and Workspace are required; the zero
// value of every other field means its default.
type Options struct {
	// Engine runs the turns.
	Engine *engine.Engine
	// Workspace is where the sessions of all conversations work.
	Workspace *engine.Workspace
	// ApproveAll approves every tool call that needs approval. Without it
	// such calls are denied, because the protocol cannot ask the user.
	ApproveAll bool
	// Logger receives the transport's logs (malformed lines, write
	// errors, and at debug level every request and response); nil
	// discards them. Logs never go to the output.
	Logger *slog.Logger
	// MaxLineBytes caps one request line (default DefaultMaxLineBytes);
	// longer lines are logged and skipped.
	MaxLineBytes int
}

// Server serves the engine over the NDJSON stdio protocol. Its
// conversations (metadata.conversationId → engine session) last for the
// Server's lifetime and are shared by all its Serve calls. Safe for
// concurrent use.
type Server struct {
	opts Options
	log  *slog.Logger

	mu    sync.Mutex
	convs map[string]*conversation // by conversation id; "" is the default
}

// conversation is one conversation and its engine session.
type conversation struct {
	id      string
	session *engine.Session

	// Guarded by Server.mu:
	// tail is closed when the last request queued on the conversation
	// has ended; the next one waits for it.
	tail chan struct{}
	// pending counts accepted user_messages without their done or error.
	pending int
}

// New returns a Server. Serve reports missing required options.
func New(opts Options) *Server {
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = DefaultMaxLineBytes
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{opts: opts, log: log, convs: map[string]*conversation{}}
}

// Serve writes the ready line to w, then reads one JSON request per line
// from r and writes the responses to w, one JSON object per line, until r
// ends or ctx is cancelled.
//
// At the end of r Serve waits for every accepted request to write its last
// response, then returns nil (or the read error, when reading failed). When
// ctx is cancelled it stops reading, cancels the running and queued requests,
// waits for each to write its error response and returns nil. When a write to
// w fails it cancels everything the same way and returns that error. Serve
// does not close r or w. When it returns before r ends, a read of r may still
// be blocked in a goroutine: if r has a SetReadDeadline method, Serve sets a
// deadline in the past, which ends that read for a net.Conn or a pollable
// *os.File (a pipe from os.Pipe); otherwise the goroutine ends when the read
// returns, for example when the caller closes r or the process exits.
//
// Serve may be called more than once, also concurrently (each call is one
// client); the calls share the Server's conversations.
func (s *Server) Serve(ctx context.Context, r io.Reader, w io.Writer) error {
	switch {
	case s.opts.Engine == nil:
		return errors.New("ndjson: Options.Engine is nil")
	case s.opts.Workspace == nil:
		return errors.New("ndjson: Options.Workspace is nil")
	case r == nil || w == nil:
		return errors.New("ndjson: Serve needs a reader and a writer")
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	c := &conn{
		s:        s,
		inflight: map[string]bool{},
		out: &lineWriter{w: w, log: s.log, onFail: func(err error) {
			cancel(fmt.Errorf("write response: %w", err))
		}},
	}
	if err := c.out.send(newReady()); err != nil {
		return fmt.Errorf("ndjson: write ready: %w", err)
	}

	type item struct {
		line []byte
		n    int
		err  error
	}
	lines := make(chan item)
	stop := make(chan struct{})
	go func() {
		defer close(lines)
		lr := newLineReader(r, s.opts.MaxLineBytes)
		for {
			line, err := lr.next()
			select {
			case lines <- item{line: line, n: lr.n, err: err}:
			case <-stop:
				return
			}
			var tooLong *lineTooLongError
			if err != nil && !errors.As(err, &tooLong) {
				return
			}
		}
	}()

	var readErr error
read:
	for {
		select {
		case <-ctx.Done():
			break read
		case it, ok := <-lines:
			if !ok || ctx.Err() != nil {
				break read
			}
			var tooLong *lineTooLongError
			switch {
			case errors.As(it.err, &tooLong):
				s.log.Warn("request line too long; skipped", "line", tooLong.Line, "bytes", tooLong.Bytes, "max", tooLong.Max)
			case errors.Is(it.err, io.EOF):
				s.log.Debug("input ended; waiting for requests in flight")
				break read
			case it.err != nil:
				readErr = it.err
				s.log.Error("read requests; waiting for requests in flight", "err", it.err)
				break read
			default:
				c.handleLine(ctx, it.line, it.n)
			}
		}
	}
	close(stop)
	if ctx.Err() != nil {
		if d, ok := r.(interface{ SetReadDeadline(time.Time) error }); ok {
			_ = d.SetReadDeadline(time.Now())
		}
	}
	c.wg.Wait()
	if err := c.out.failed(); err != nil {
		return fmt.Errorf("ndjson: write response: %w", err)
	}
	if readErr != nil {
		return fmt.Errorf("ndjson: read requests: %w", readErr)
	}
	return nil
}

// conn is the state of one Serve call.
type conn struct {
	s   *Server
	out *lineWriter
	wg  sync.WaitGroup // requests running in goroutines

	mu       sync.Mutex
	inflight map[string]bool // ids of requests without their last response
}

// handleLine decodes and dispatches one input line (number n). Requests
// that can be answered at once are answered here; turns and clear_history
// go to a goroutine.
func (c *conn) handleLine(ctx context.Context, line []byte, n int) {
	log := c.s.log
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	req, err := decodeRequest(line)
	var malformed *malformedError
	var invalid *invalidError
	switch {
	case errors.As(err, &malformed):
		log.Warn("malformed JSON; line skipped", "line", n, "err", malformed.err, "text", snippet(line))
		return
	case errors.As(err, &invalid):
		log.Warn("invalid request", "line", n, "id", invalid.ID, "err", invalid.Msg)
		c.send(newError(invalid.ID, invalid.Msg))
		return
	}
	log.Debug("recv", "line", n, "id", req.ID, "kind", req.Kind, "conversation", req.ConversationID)

	c.mu.Lock()
	dup := c.inflight[req.ID]
	if !dup {
		c.inflight[req.ID] = true
	}
	c.mu.Unlock()
	if dup {
		msg := fmt.Sprintf("request id %q is already in use by a request that has not finished; use a new id for every request", req.ID)
		log.Warn("duplicate request id", "line", n, "id", req.ID)
		c.send(newError(req.ID, msg))
		return
	}

	switch req.Kind {
	case kindGetStatus:
		c.finish(req.ID, newStatus(req.ID, c.s.status(req.ConversationID)))
	case kindClearHistory:
		conv, prev, mine, _ := c.s.enqueue(req.ConversationID, false)
		if conv == nil {
			// The conversation has never had a turn: nothing to clear.
			c.finish(req.ID, newDone(req.ID))
			return
		}
		c.wg.Go(func() { c.clearHistory(ctx, req, conv, prev, mine) })
	case kindUserMessage:
		conv, prev, mine, err := c.s.enqueue(req.ConversationID, true)
		if err != nil {
			c.finish(req.ID, newError(req.ID, err.Error()))
			return
		}
		c.wg.Go(func() { c.runTurn(ctx, req, conv, prev, mine) })
	}
}

// runTurn runs one user_message once the conversation's earlier requests
// have ended, writing its events and then its done or error.
func (c *conn) runTurn(ctx context.Context, req request, conv *conversation, prev <-chan struct{}, mine chan<- struct{}) {
	defer close(mine)
	var terminal message
	defer func() {
		c.s.mu.Lock()
		conv.pending--
		c.s.mu.Unlock()
		c.finish(req.ID, terminal)
	}()
	select {
	case <-prev:
	case <-ctx.Done():
	}
	if ctx.Err() != nil {
		terminal = newError(req.ID, cancelledText)
		return
	}

	m := newTurnMapper(req.ID)
	in := engine.TurnInput{Message: req.Message, Attachments: req.Attachments}
	_, err := conv.session.Run(ctx, in, engine.TurnOptions{
		ApproveAll: c.s.opts.ApproveAll,
		OnEvent: func(ev engine.Event) {
			for _, msg := range m.wire(ev) {
				if isTerminal(msg) {
					// Written after Run returns, once the turn is in
					// the history.
					terminal = msg
					continue
				}
				c.send(msg)
			}
		},
	})
	switch {
	case err != nil && ctx.Err() != nil:
		terminal = newError(req.ID, cancelledText)
	case err != nil:
		c.s.log.Warn("turn did not start", "id", req.ID, "conversation", conv.id, "err", err)
		terminal = newError(req.ID, err.Error())
	case terminal == nil:
		c.s.log.Error("turn ended without a final event", "id", req.ID, "session", conv.session.ID())
		terminal = newError(req.ID, "internal error: the turn ended without a final event")
	}
}

// clearHistory clears the conversation's history once its earlier requests
// have ended, then writes done (or error when cancelled first).
func (c *conn) clearHistory(ctx context.Context, req request, conv *conversation, prev <-chan struct{}, mine chan<- struct{}) {
	defer close(mine)
	select {
	case <-prev:
	case <-ctx.Done():
	}
	if ctx.Err() != nil {
		c.finish(req.ID, newError(req.ID, cancelledText))
		return
	}
	if err := conv.session.ClearHistory(ctx); err != nil {
		text := err.Error()
		if ctx.Err() != nil {
			text = cancelledText
		}
		c.finish(req.ID, newError(req.ID, text))
		return
	}
	c.s.log.Debug("history cleared", "conversation", conv.id, "session", conv.session.ID())
	c.finish(req.ID, newDone(req.ID))
}

// send writes m and logs it at debug level.
func (c *conn) send(m message) {
	if c.out.send(m) == nil {
		typ, id := m.header()
		c.s.log.Debug("send", "type", typ, "id", id)
	}
}

// finish writes the last message of request id and frees the id.
func (c *conn) finish(id string, m message) {
	c.send(m)
	c.mu.Lock()
	delete(c.inflight, id)
	c.mu.Unlock()
}

// enqueue queues a request on conversation id and returns the conversation,
// the channel closed when the request may start and the channel the request
// closes when it ends. With create (for a user_message) a conversation seen
// for the first time gets a new session, and the request counts as pending;
// without it an unknown conversation gives a nil conversation.
func (s *Server) enqueue(id string, create bool) (conv *conversation, prev <-chan struct{}, mine chan struct{}, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	conv = s.convs[id]
	if conv == nil {
		if !create {
			return nil, nil, nil, nil
		}
		sess, err := s.opts.Engine.NewSession(s.opts.Workspace, "")
		if err != nil {
			s.log.Error("start session", "conversation", id, "err", err)
			return nil, nil, nil, fmt.Errorf("start a session for the conversation: %w", err)
		}
		done := make(chan struct{})
		close(done)
		conv = &conversation{id: id, session: sess, tail: done}
		s.convs[id] = conv
		s.log.Info("conversation started", "conversation", id, "session", sess.ID())
	}
	if create {
		conv.pending++
	}
	prev = conv.tail
	mine = make(chan struct{})
	conv.tail = mine
	return conv, prev, mine, nil
}

// status is the get_status answer for conversation id.
func (s *Server) status(id string) statusData {
	d := statusData{State: "idle", Uptime: time.Since(s.opts.Engine.Started()).Milliseconds()}
	s.mu.Lock()
	conv := s.convs[id]
	if conv != nil && conv.pending > 0 {
		d.State = "busy"
	}
	s.mu.Unlock()
	if conv != nil {
		d.ConversationLength = conv.session.Status().Messages
	}
	return d
}

// snippet is the start of a line for a log entry.
func snippet(line []byte) string {
	const max = 200
	if len(line) <= max {
		return string(line)
	}
	return string(line[:max]) + "…"
}

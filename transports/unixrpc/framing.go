package unixrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/creachadair/jrpc2"
	"github.com/creachadair/jrpc2/channel"
)

// errTooLarge ends a connection whose client sent a line longer than the
// message limit.
var errTooLarge = errors.New("message too large")

// lineLimiter passes reads through while no line is longer than max bytes
// (the newline not counted); the read that would exceed it returns the
// bytes up to the limit, and the next one errTooLarge. Memory stays
// bounded by what the framing buffers (max bytes).
type lineLimiter struct {
	r   io.Reader
	max int
	run int // bytes since the last newline
	err error
}

func (l *lineLimiter) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	n, err := l.r.Read(p)
	b := p[:n]
	off := 0
	for off < n {
		j := bytes.IndexByte(b[off:], '\n')
		if j < 0 {
			j = n - off
		}
		if l.run+j > l.max {
			cut := off + (l.max - l.run)
			l.err = errTooLarge
			if cut == 0 {
				return 0, errTooLarge
			}
			return cut, nil
		}
		if off+j == n { // no newline in the rest
			l.run += j
			break
		}
		l.run = 0
		off += j + 1
	}
	return n, err
}

// connWriter writes whole messages to the connection, one Write call at a
// time, with a deadline per write. A write that fails (its deadline
// passed, the peer is gone) may have written part of a message, so
// nothing more may follow it on the socket: the writer is then broken,
// every later write fails at once, and failed (set once, before use) is
// called to close the connection, so the client sees the connection
// end rather than a cut message glued to the next one.
type connWriter struct {
	mu      sync.Mutex
	c       net.Conn
	timeout time.Duration
	failed  func(error)
	broken  error
}

func (w *connWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.broken != nil {
		return 0, w.broken
	}
	if w.timeout > 0 {
		w.c.SetWriteDeadline(time.Now().Add(w.timeout))
	}
	n, err := w.c.Write(p)
	if err != nil {
		w.broken = err
		if w.failed != nil {
			w.failed(err)
		} else {
			w.c.Close()
		}
	}
	return n, err
}

// Close closes the connection without waiting for a write in progress
// (which then fails), so a stuck client cannot hold a shutdown.
func (w *connWriter) Close() error { return w.c.Close() }

// wire is the jrpc2 channel of one connection: channel.Line over the
// socket, with the line limit, the validation of every incoming line
// (answering what jrpc2 must not see itself, so that every error has the
// contract's code), the per-connection rate limit, and notice of the
// responses sent (see afterSent).
type wire struct {
	line   channel.Channel
	log    *slog.Logger
	max    int
	bucket bucket

	mu       sync.Mutex
	waiters  map[string]chan struct{} // by raw request id
	inflight map[string]struct{}      // raw ids of requests not yet answered
	closed   bool

	// now is the rate limit's clock (time.Now; tests stop it).
	now func() time.Time
	// arrived, when set (before the connection starts), is called by
	// Recv for each request it passes on, in the order the requests
	// arrived (jrpc2 then runs their handlers concurrently), with the
	// request's raw id (trimmed), method and params. A non-nil error
	// refuses the request: Recv answers it and skips it.
	arrived func(id, method string, params json.RawMessage) *jrpc2.Error
}

var _ channel.Channel = (*wire)(nil)

// newWire returns the channel of connection c. writeFailed is called
// (once) when a write fails; it must close c.
func newWire(c net.Conn, maxBytes int, perSecond int, writeTimeout time.Duration, log *slog.Logger, writeFailed func(error)) *wire {
	w := &connWriter{c: c, timeout: writeTimeout, failed: writeFailed}
	return &wire{
		line:     channel.Line(&lineLimiter{r: c, max: maxBytes}, w),
		log:      log,
		max:      maxBytes,
		bucket:   bucket{rate: float64(perSecond), burst: float64(perSecond)},
		waiters:  map[string]chan struct{}{},
		inflight: map[string]struct{}{},
		now:      time.Now,
	}
}

// responsePrefix starts every response jrpc2 encodes (a notification has
// no id after the version).
var responsePrefix = []byte(`{"jsonrpc":"2.0","id":`)

// Send writes one message and, when it is a response, forgets its id as
// in flight (before writing, so that a client that reuses the id as soon
// as it reads the response is not refused as a duplicate) and then
// signals the afterSent waiter of the request.
func (w *wire) Send(msg []byte) error {
	if !bytes.HasPrefix(msg, responsePrefix) {
		return w.line.Send(msg)
	}
	// The id is the value after the prefix: decode just that.
	var id json.RawMessage
	if json.NewDecoder(bytes.NewReader(msg[len(responsePrefix):])).Decode(&id) != nil {
		return w.line.Send(msg)
	}
	key := string(bytes.TrimSpace(id))
	w.mu.Lock()
	delete(w.inflight, key)
	w.mu.Unlock()
	err := w.line.Send(msg)
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch, ok := w.waiters[key]; ok {
		close(ch)
		delete(w.waiters, key)
	}
	return err
}

// afterSent returns a channel closed once the response to the request with
// raw id id has been written (or the connection has closed). Call it in
// the request's handler: the response is written after the handler
// returns.
func (w *wire) afterSent(id string) <-chan struct{} {
	ch := make(chan struct{})
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || id == "" {
		close(ch)
		return ch
	}
	if old, ok := w.waiters[id]; ok {
		close(old)
	}
	w.waiters[id] = ch
	return ch
}

// Close closes the connection and releases every afterSent waiter.
func (w *wire) Close() error {
	w.mu.Lock()
	w.closed = true
	for id, ch := range w.waiters {
		close(ch)
		delete(w.waiters, id)
	}
	w.mu.Unlock()
	return w.line.Close()
}

// Recv returns the next valid request or notification. Blank lines are
// skipped. Invalid lines are answered here (id null when no valid id can
// be read) and skipped; so are requests over the rate limit. A line over
// the size limit is answered with -32600 and ends the connection; so does
// a last line the connection ends inside (answered with -32700).
func (w *wire) Recv() ([]byte, error) {
	for {
		line, err := w.line.Recv()
		if errors.Is(err, errTooLarge) {
			w.log.Warn("message over the size limit; closing the connection", "limit", w.max)
			w.reply(nil, rpcError(CodeInvalidRequest, fmt.Sprintf("the message is longer than the %d-byte limit; the connection is closed", w.max),
				reasonData(reasonTooLarge, "limit", w.max)))
			return nil, err
		}
		if errors.Is(err, io.EOF) && len(bytes.TrimSpace(line)) > 0 {
			// channel.Line drops the last byte of an unterminated line,
			// and the message is cut anyway.
			w.reply(nil, rpcError(CodeParseError, "the connection ended inside a message (no newline after it)", nil))
			return nil, io.EOF
		}
		if err != nil {
			return nil, err
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if w.admit(line) {
			return line, nil
		}
	}
}

// admit validates one line as a JSON-RPC 2.0 request or notification and
// takes a token from the rate limit. It answers what it refuses. Recv
// calls it for each line in the order the lines arrived, so the rate
// limit (and the admission of queries, see arrived) follows arrival.
func (w *wire) admit(line []byte) bool {
	allowed, retry := w.bucket.take(w.now())
	if !json.Valid(line) {
		w.reply(nil, rpcError(CodeParseError, "the line is not valid JSON", nil))
		return false
	}
	switch first(line) {
	case '{':
	case '[':
		w.reply(nil, rpcError(CodeInvalidRequest, "batches are not supported; send one message per line", reasonData(reasonBatch)))
		return false
	default:
		w.reply(nil, rpcError(CodeInvalidRequest, "a message must be a JSON object", nil))
		return false
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		w.reply(nil, rpcError(CodeParseError, err.Error(), nil))
		return false
	}
	var id json.RawMessage
	if raw, ok := m["id"]; ok && !isNull(raw) {
		if c := first(raw); c != '"' && c != '-' && (c < '0' || c > '9') {
			w.reply(nil, rpcError(CodeInvalidRequest, "id must be a string, a number or null", nil))
			return false
		}
		id = raw
	}
	var version string
	if json.Unmarshal(m["jsonrpc"], &version) != nil || version != "2.0" {
		w.reply(id, rpcError(CodeInvalidRequest, `jsonrpc must be "2.0"`, nil))
		return false
	}
	rawMethod, ok := m["method"]
	if !ok {
		if _, isResult := m["result"]; isResult {
			w.reply(id, rpcError(CodeInvalidRequest, "this server sends no requests, so it takes no responses", nil))
		} else if _, isError := m["error"]; isError {
			w.reply(id, rpcError(CodeInvalidRequest, "this server sends no requests, so it takes no responses", nil))
		} else {
			w.reply(id, rpcError(CodeInvalidRequest, "method is missing", nil))
		}
		return false
	}
	var method string
	if json.Unmarshal(rawMethod, &method) != nil || method == "" {
		w.reply(id, rpcError(CodeInvalidRequest, "method must be a non-empty string", nil))
		return false
	}
	if p, ok := m["params"]; ok && !isNull(p) && first(p) != '{' && first(p) != '[' {
		w.reply(id, rpcError(CodeInvalidRequest, "params must be an object or an array", nil))
		return false
	}
	for k := range m {
		switch k {
		case "jsonrpc", "id", "method", "params":
		default:
			w.reply(id, rpcError(CodeInvalidRequest, fmt.Sprintf("unknown member %q in a request", k), nil))
			return false
		}
	}
	if !allowed {
		if id == nil {
			w.log.Warn("notification over the rate limit dropped", "method", method)
			return false
		}
		w.reply(id, rpcError(CodeAgentError, fmt.Sprintf("more than %g requests per second on this connection; retry in %d ms", w.bucket.rate, retry.Milliseconds()+1),
			reasonData(reasonRateLimited, "limit_per_second", w.bucket.rate, "retry_after_ms", retry.Milliseconds()+1)))
		return false
	}
	if id != nil {
		// jrpc2 would answer a duplicate itself, in its own words; the
		// id is in flight until its response is written (see Send).
		key := string(bytes.TrimSpace(id))
		w.mu.Lock()
		_, dup := w.inflight[key]
		if !dup {
			w.inflight[key] = struct{}{}
		}
		w.mu.Unlock()
		if dup {
			w.reply(id, rpcError(CodeInvalidRequest, fmt.Sprintf("a request with id %s is still in progress on this connection; use a new id", key),
				reasonData(reasonDuplicateID, "id", id)))
			return false
		}
		if w.arrived != nil {
			if e := w.arrived(key, method, m["params"]); e != nil {
				w.mu.Lock()
				delete(w.inflight, key)
				w.mu.Unlock()
				w.reply(id, e)
				return false
			}
		}
	}
	return true
}

// reply writes an error response for id (null when nil).
func (w *wire) reply(id json.RawMessage, e *jrpc2.Error) {
	if id == nil {
		id = json.RawMessage("null")
	}
	body, _ := json.Marshal(e)
	msg := make([]byte, 0, len(body)+len(id)+40)
	msg = append(msg, responsePrefix...)
	msg = append(msg, id...)
	msg = append(msg, `,"error":`...)
	msg = append(msg, body...)
	msg = append(msg, '}')
	if err := w.line.Send(msg); err != nil {
		w.log.Debug("write error response", "error", err)
	}
}

func first(b []byte) byte {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

func isNull(b json.RawMessage) bool { return string(bytes.TrimSpace(b)) == "null" }

// bucket is a token bucket: burst requests at once, refilled at rate per
// second. Only the connection's reading goroutine uses it.
type bucket struct {
	rate, burst float64
	tokens      float64
	last        time.Time
}

// take takes a token; without one it says how long until the next.
func (b *bucket) take(now time.Time) (bool, time.Duration) {
	if b.last.IsZero() {
		b.tokens = b.burst
	} else {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / b.rate * float64(time.Second))
}

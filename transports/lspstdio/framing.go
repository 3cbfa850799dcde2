package lspstdio

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/creachadair/jrpc2"
	"github.com/creachadair/jrpc2/channel"
)

// DefaultMaxMessageBytes is the default cap on the body of one incoming
// message: 32 MiB.
const DefaultMaxMessageBytes = 32 << 20

// maxHeaderBytes caps one header block (the lines before the blank line,
// and blank lines skipped before it).
const maxHeaderBytes = 8 << 10

// FramingError is input that breaks the LSP framing (a header line without
// a colon, a missing or invalid Content-Length, a header block over 8 KiB,
// the input ending inside a message). After one, the message boundaries
// are lost: Serve answers it with a -32700 error whose id is null, stops
// and returns the FramingError.
type FramingError struct {
	Msg string
}

func (e *FramingError) Error() string { return "malformed LSP framing: " + e.Msg }

// skippedError is a message that was read whole and skipped (too large,
// an unsupported charset); the framing is intact and reading goes on.
type skippedError struct {
	code jrpc2.Code
	msg  string
}

func (e *skippedError) Error() string { return e.msg }

// lspChannel is the jrpc2 channel of one Serve call: LSP base-protocol
// framing (Content-Length headers). Sending is jrpc2's channel.LSP. The
// receiving side is this package's own, for three reasons: jrpc2's
// allocates twice the declared Content-Length before reading (a hostile
// "Content-Length: 99999999999" would end the process), it cannot be
// interrupted (Serve must return after shutdown while stdin stays open),
// and it refuses a Content-Type other than its own. It also answers, in
// input order, the malformed messages that jrpc2 would misclassify.
type lspChannel struct {
	in  *io.PipeReader // fed from the Serve reader by a goroutine
	rd  *bufio.Reader
	max int64
	log *slog.Logger

	wmu    sync.Mutex // serializes writes: jrpc2's and Recv's own answers
	out    channel.Channel
	werr   error
	sealed atomic.Bool // set when Serve returns: nothing more is written
	// onWriteErr is called once, with the first write error.
	onWriteErr func(error)

	closed atomic.Bool // set by Close
	// drain is the notification Recv returns when the input has ended;
	// drainSent is set then (both used by the read loop only). released
	// lets Recv return the end.
	drain     []byte
	drainSent bool
	released  chan struct{}
	// calls are the server's own requests still awaiting their response
	// (see issuedCalls).
	calls   issuedCalls
	endOnce sync.Once
	// ended is closed when Recv has returned its last error; rerr is that
	// error (io.EOF at a clean end of input).
	ended chan struct{}
	rerr  error
}

// newChannel returns the channel reading r and writing w. A goroutine
// copies r into a pipe so that Close ends a blocked Recv; it returns when
// r ends or fails, or when a read returns after Close.
func newChannel(r io.Reader, w io.Writer, max int64, log *slog.Logger, drainMethod string, onWriteErr func(error)) *lspChannel {
	pr, pw := io.Pipe()
	go func() {
		_, err := io.Copy(pw, r)
		pw.CloseWithError(err) // nil: io.EOF for the reader
	}()
	return &lspChannel{
		in: pr, rd: bufio.NewReaderSize(pr, 64<<10), max: max, log: log,
		out:        channel.LSP(nil, nopCloser{w}),
		onWriteErr: onWriteErr,
		ended:      make(chan struct{}),
		released:   make(chan struct{}),
		drain:      []byte(`{"jsonrpc":"2.0","method":"` + drainMethod + `"}`),
		calls:      issuedCalls{byCall: map[string]*issuedCall{}, byID: map[string]*issuedCall{}},
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// Send writes one framed message with one Write call (jrpc2's LSP
// framing: Content-Type and Content-Length headers). After a failed write
// every Send fails with the same error.
func (c *lspChannel) Send(msg []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.werr != nil {
		return c.werr
	}
	if c.sealed.Load() {
		return errClosed
	}
	c.calls.sent(msg)
	if err := c.out.Send(msg); err != nil {
		c.werr = err
		if c.onWriteErr != nil {
			go c.onWriteErr(err)
		}
		return err
	}
	return nil
}

// Close ends the input: a blocked Recv returns the drain notification.
// It does not close the output, so that responses of handlers still
// running when jrpc2 stops are written (Serve returns after them).
func (c *lspChannel) Close() error {
	c.closed.Store(true)
	c.in.CloseWithError(errClosed)
	return nil
}

var errClosed = errors.New("lspstdio: channel closed")

// Recv returns the body of the next well-formed message. Messages it
// can answer itself (too large, an unsupported charset, valid JSON that is
// not a JSON-RPC message) are answered with an error whose id is the
// message's (null when it has none) and skipped. A FramingError is
// answered with -32700.
//
// When the input ends (its end, a FramingError, a read error, or Close)
// Recv returns the drain notification once (see Serve), then blocks until
// release and returns the error that ended the input, which stops jrpc2.
// So jrpc2 keeps serving the requests it has until Serve lets it stop;
// stopping earlier would answer the requests it has not started with
// jrpc2's own "request cancelled" (-32097).
func (c *lspChannel) Recv() ([]byte, error) {
	// jrpc2 calls Recv again only once it has handled the last message:
	// a response handed to it has reached its callback.
	c.calls.handled()
	if c.drainSent {
		<-c.released
		return nil, c.rerr
	}
	for {
		body, err := c.readMessage()
		var skipped *skippedError
		var framing *FramingError
		switch {
		case errors.As(err, &skipped):
			c.log.Warn("message skipped", "err", skipped.msg)
			c.reply(nil, skipped.code, skipped.msg)
			continue
		case errors.As(err, &framing):
			c.log.Warn("malformed input; closing the connection", "err", framing.Msg)
			c.reply(nil, jrpc2.ParseError, framing.Error()+"; closing the connection")
		case err != nil && c.closed.Load():
			err = errClosed
		}
		if err != nil {
			c.end(err)
			c.drainSent = true
			return c.drain, nil
		}
		switch v := classify(body, c.calls.take); v.action {
		case answer:
			c.log.Warn("invalid JSON-RPC message", "err", v.msg)
			c.reply(v.id, v.code, v.msg)
			continue
		case drop:
			c.log.Warn("response to no pending request of this server (unknown, already answered or given up); dropped", "id", snippet(string(v.id), 100))
			continue
		}
		return body, nil
	}
}

// seal makes every later Send fail without writing.
func (c *lspChannel) seal() { c.sealed.Store(true) }

// release lets Recv return the error that ended the input. Call it once.
func (c *lspChannel) release() { close(c.released) }

// issuedCalls tracks the server's own requests ($/requestToolExecution,
// sent with jrpc2's Callback) from before they are sent until their first
// response has reached jrpc2, so that Recv hands jrpc2 exactly one
// response per request. jrpc2 treats any other response as a request and
// answers it with an error under the response's id ("duplicate request
// ID", "empty method name"), which may be the id of one of the host's own
// requests; a server must never answer a response.
//
// A call is expected (by toolCallId) before Callback sends it; Send
// records the id jrpc2 gave it; Recv takes the first response with that
// id and drops the rest. forget gives a call up, after which its
// responses are dropped, and says whether its callback may be cancelled.
type issuedCalls struct {
	mu     sync.Mutex
	byCall map[string]*issuedCall // by toolCallId: expected or sent, not answered
	byID   map[string]*issuedCall // by jrpc2 id: sent, not answered
	// inFlight is the call whose response the last Recv handed jrpc2; it
	// is nil again once jrpc2 asks for the next message (it has then
	// delivered the response to the callback).
	inFlight *issuedCall
}

type issuedCall struct{ callID, id string }

// expect registers a request with toolCallId callID about to be sent.
func (s *issuedCalls) expect(callID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byCall[callID] = &issuedCall{callID: callID}
}

// pushPrefix starts every message jrpc2 writes that has an id; a request
// continues with its numeric id and ,"method":.
const pushPrefix = `{"jsonrpc":"2.0","id":`

// sent records the id of msg when it is one of the server's requests
// (jrpc2 writes {"jsonrpc":"2.0","id":N,"method":...}). A request whose
// call was not expected or was given up already is not recorded: its
// responses are dropped.
func (s *issuedCalls) sent(msg []byte) {
	if !bytes.HasPrefix(msg, []byte(pushPrefix)) {
		return
	}
	rest := msg[len(pushPrefix):]
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	if n == 0 || !bytes.HasPrefix(rest[n:], []byte(`,"method":`)) {
		return // a response
	}
	var req struct {
		Params struct {
			ToolCallID string `json:"toolCallId"`
		} `json:"params"`
	}
	json.Unmarshal(msg, &req)
	s.mu.Lock()
	defer s.mu.Unlock()
	if call := s.byCall[req.Params.ToolCallID]; call != nil && call.id == "" {
		call.id = string(rest[:n])
		s.byID[call.id] = call
	}
}

// take reports whether a response with id is the first one to a request
// of the server still pending, and marks it answered.
func (s *issuedCalls) take(id json.RawMessage) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	call := s.byID[string(id)]
	if call == nil {
		return false
	}
	delete(s.byID, call.id)
	delete(s.byCall, call.callID)
	s.inFlight = call
	return true
}

// handled notes that jrpc2 has handled the message the last Recv
// returned.
func (s *issuedCalls) handled() {
	s.mu.Lock()
	s.inFlight = nil
	s.mu.Unlock()
}

// forget gives up the call callID: a response to it that has not reached
// jrpc2 yet is dropped. It reports whether the call's Callback may be
// cancelled (jrpc2 then forgets the request): false only while its
// response is on its way to the callback, which then returns by itself.
func (s *issuedCalls) forget(callID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if call := s.byCall[callID]; call != nil {
		delete(s.byCall, callID)
		if call.id != "" {
			delete(s.byID, call.id)
		}
		return true
	}
	return s.inFlight == nil || s.inFlight.callID != callID
}

// end records the error that ended the input.
func (c *lspChannel) end(err error) {
	c.endOnce.Do(func() {
		c.rerr = err
		close(c.ended)
	})
}

// inputErr is the error that ended the input: nil for a clean end (or
// Close), else a *FramingError or the read error. Call it after ended is
// closed.
func (c *lspChannel) inputErr() error {
	if errors.Is(c.rerr, io.EOF) || errors.Is(c.rerr, errClosed) {
		return nil
	}
	return c.rerr
}

// reply writes an error response for id (null when nil).
func (c *lspChannel) reply(id json.RawMessage, code jrpc2.Code, msg string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		V  string          `json:"jsonrpc"`
		ID json.RawMessage `json:"id"`
		E  *jrpc2.Error    `json:"error"`
	}{"2.0", id, &jrpc2.Error{Code: code, Message: msg}})
	c.Send(b) // a failed write is handled by onWriteErr
}

// readMessage reads one header block and its body.
func (c *lspChannel) readMessage() ([]byte, error) {
	length := int64(-1)
	used, lines := 0, 0
	charset := ""
	for {
		line, err := c.readLine(maxHeaderBytes - used)
		switch {
		case err == io.EOF && lines == 0:
			return nil, io.EOF // a clean end, after blank lines or none
		case err == io.EOF:
			return nil, &FramingError{Msg: "the input ended inside a header block"}
		case err != nil:
			return nil, err
		}
		used += len(line)
		if strings.TrimRight(line, "\r\n") == "" {
			if lines == 0 {
				continue // blank lines between messages are skipped
			}
			break
		}
		line = strings.TrimRight(line, "\r\n")
		lines++
		name, value, ok := strings.Cut(line, ":")
		switch {
		case !ok:
			return nil, &FramingError{Msg: fmt.Sprintf("header line %q has no colon", snippet(line, 80))}
		case !isToken(name):
			return nil, &FramingError{Msg: fmt.Sprintf("header line %q does not start with a header name", snippet(line, 80))}
		}
		value = strings.TrimSpace(value)
		switch strings.ToLower(name) {
		case "content-length":
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil || n < 0 {
				return nil, &FramingError{Msg: fmt.Sprintf("Content-Length %q is not a byte count", snippet(value, 40))}
			}
			if length >= 0 && n != length {
				return nil, &FramingError{Msg: fmt.Sprintf("two Content-Length headers disagree (%d, %d)", length, n)}
			}
			length = n
		case "content-type":
			if _, params, err := mime.ParseMediaType(value); err == nil {
				charset = strings.ToLower(params["charset"])
			}
		}
	}
	if length < 0 {
		return nil, &FramingError{Msg: "a header block has no Content-Length"}
	}
	if length > c.max {
		if n, err := io.CopyN(io.Discard, c.rd, length); err != nil {
			return nil, c.truncated(n, length, err)
		}
		return nil, &skippedError{code: jrpc2.InvalidRequest,
			msg: fmt.Sprintf("a message of %d bytes exceeds the limit of %d bytes; it was skipped", length, c.max)}
	}
	body := make([]byte, length)
	if n, err := io.ReadFull(c.rd, body); err != nil {
		return nil, c.truncated(int64(n), length, err)
	}
	if charset != "" && charset != "utf-8" && charset != "utf8" {
		return nil, &skippedError{code: jrpc2.ParseError,
			msg: fmt.Sprintf("charset %q is not supported (only utf-8); the message was skipped", snippet(charset, 40))}
	}
	return body, nil
}

// isToken reports whether s is a header name (an RFC 9110 token).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
			return false
		}
	}
	return true
}

// truncated is the error of a body that could not be read whole.
func (c *lspChannel) truncated(got, length int64, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &FramingError{Msg: fmt.Sprintf("the input ended %d bytes into a message of %d bytes", got, length)}
	}
	return err
}

var errLineTooLong = &FramingError{Msg: fmt.Sprintf("a header block is longer than %d bytes", maxHeaderBytes)}

// readLine reads one line, with its line ending, of at most limit bytes.
// A partial line at the end of the input is io.EOF.
func (c *lspChannel) readLine(limit int) (string, error) {
	var buf []byte
	for {
		frag, err := c.rd.ReadSlice('\n')
		if len(buf)+len(frag) > limit {
			return "", errLineTooLong
		}
		buf = append(buf, frag...)
		switch {
		case err == nil:
			return string(buf), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(buf) > 0:
			return "", &FramingError{Msg: "the input ended inside a header line"}
		default:
			return "", err
		}
	}
}

// verdict is what Recv does with a message.
type verdict struct {
	action int // pass, answer or drop
	code   jrpc2.Code
	id     json.RawMessage
	msg    string
}

const (
	pass   = iota // to jrpc2
	answer        // with code and msg, for id (null when nil)
	drop          // silently
)

// classify decides what Recv does with a message. jrpc2 gets only
// well-formed requests, notifications and responses to its own requests;
// Recv answers everything else itself, with the message's id (null when
// it has no valid one). Text that is not JSON gets -32700, with the JSON
// syntax error. Valid JSON that is not a JSON-RPC message gets -32600: a
// scalar, a batch, a request or notification with a "jsonrpc" other than
// "2.0", an id that is not a string or number, a method that is not a
// non-empty string, params that are not an object or array, a result or
// error beside the method, or another member; an object that is neither a
// request (method) nor a response (result or error). Besides naming the
// problems better than jrpc2 does, this keeps invalid notifications out of
// jrpc2's queue, whose error responses jrpc2 v1.3.6 would write to a nil
// channel (a panic) when it stops with them queued. A response whose id
// is not one of the server's requests (ours reports those) is dropped: a
// server never answers a response.
func classify(body []byte, ours func(json.RawMessage) bool) verdict {
	if !json.Valid(body) {
		err := json.Unmarshal(body, new(struct{})) // the syntax error
		if err == nil {
			err = errors.New("invalid JSON")
		}
		return verdict{action: answer, code: jrpc2.ParseError, msg: "the message is not valid JSON: " + strings.TrimPrefix(err.Error(), "json: ")}
	}
	switch jsonKind(body) {
	case '[':
		return verdict{action: answer, code: jrpc2.InvalidRequest, msg: "batches are not supported: the LSP base protocol carries one message per frame"}
	case '{':
	default:
		return verdict{action: answer, code: jrpc2.InvalidRequest, msg: "a JSON-RPC message must be a JSON object"}
	}
	// One parse, which copies no object or array member (params, result,
	// error): only their kind is kept.
	var obj map[string]member
	if err := json.Unmarshal(body, &obj); err != nil {
		return verdict{action: answer, code: jrpc2.ParseError, msg: "the message is not valid JSON: " + strings.TrimPrefix(err.Error(), "json: ")}
	}
	var id json.RawMessage
	if raw := obj["id"].raw; validID(raw) {
		id = raw
	}
	bad := func(format string, args ...any) verdict {
		return verdict{action: answer, code: jrpc2.InvalidRequest, id: id, msg: fmt.Sprintf(format, args...)}
	}
	method, isRequest := obj["method"]
	_, hasResult := obj["result"]
	_, hasError := obj["error"]
	if !isRequest {
		if !hasResult && !hasError {
			return bad("a message needs a method (a request or notification) or a result or error (a response)")
		}
		if id == nil || !ours(id) {
			return verdict{action: drop, id: obj["id"].raw}
		}
		return verdict{}
	}
	var name string
	if json.Unmarshal(method.raw, &name) != nil || name == "" {
		return bad(`"method" must be a non-empty string`)
	}
	var version string
	if json.Unmarshal(obj["jsonrpc"].raw, &version) != nil || version != "2.0" {
		return bad(`"jsonrpc" must be "2.0"`)
	}
	if m, ok := obj["id"]; ok && id == nil && m.kind != 'n' {
		return bad(`"id" must be a string or a number`)
	}
	if k := obj["params"].kind; k != 0 && k != 'n' && k != '{' && k != '[' {
		return bad(`"params" must be an object or an array`)
	}
	for key := range obj {
		switch key {
		case "jsonrpc", "id", "method", "params":
		case "result", "error":
			return bad("a request cannot have %q", key)
		default:
			return bad("unknown member %q", snippet(key, 40))
		}
	}
	return verdict{}
}

// member is a member of a message as classify sees it: its kind, and
// its text unless it is an object or an array (which may be large and
// are not needed).
type member struct {
	kind byte
	raw  json.RawMessage
}

func (m *member) UnmarshalJSON(data []byte) error {
	m.kind = jsonKind(data)
	if m.kind != '{' && m.kind != '[' {
		m.raw = bytes.Clone(data)
	}
	return nil
}

// jsonKind is the first byte of a JSON value: '"', '{', '[', 'n', 't',
// 'f' or a digit or '-'; 0 when empty.
func jsonKind(v json.RawMessage) byte {
	v = bytes.TrimLeft(v, " \t\r\n")
	if len(v) == 0 {
		return 0
	}
	return v[0]
}

// validID reports whether v is a request id: a string or a number.
func validID(v json.RawMessage) bool {
	k := jsonKind(v)
	return k == '"' || k == '-' || (k >= '0' && k <= '9')
}

// snippet is the start of s for messages and logs.
func snippet(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}

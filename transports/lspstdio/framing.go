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
	// issued counts the server's own requests: jrpc2 numbers them 1, 2,
	// ... (see issuedID).
	issued  atomic.Int64
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
		switch v := classify(body, c.issuedID); v.action {
		case answer:
			c.log.Warn("invalid JSON-RPC message", "err", v.msg)
			c.reply(v.id, v.code, v.msg)
			continue
		case drop:
			c.log.Warn("response to no request of this server; dropped", "id", string(v.id))
			continue
		}
		return body, nil
	}
}

// seal makes every later Send fail without writing.
func (c *lspChannel) seal() { c.sealed.Store(true) }

// release lets Recv return the error that ended the input. Call it once.
func (c *lspChannel) release() { close(c.released) }

// issuedID reports whether id is the id of a request the server sent: a
// number jrpc2 gave to one of its first issued push calls.
func (c *lspChannel) issuedID(id json.RawMessage) bool {
	n, err := strconv.ParseInt(string(id), 10, 64)
	return err == nil && n >= 1 && n <= c.issued.Load()
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
		case err == io.EOF && used == 0:
			return nil, io.EOF
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
	var probe json.RawMessage
	if err := json.Unmarshal(body, &probe); err != nil {
		return verdict{action: answer, code: jrpc2.ParseError, msg: "the message is not valid JSON: " + strings.TrimPrefix(err.Error(), "json: ")}
	}
	b := []byte(probe)
	switch b[0] {
	case '[':
		return verdict{action: answer, code: jrpc2.InvalidRequest, msg: "batches are not supported: the LSP base protocol carries one message per frame"}
	case '{':
	default:
		return verdict{action: answer, code: jrpc2.InvalidRequest, msg: "a JSON-RPC message must be a JSON object"}
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return verdict{action: answer, code: jrpc2.ParseError, msg: "the message is not valid JSON: " + strings.TrimPrefix(err.Error(), "json: ")}
	}
	var id json.RawMessage
	if raw := obj["id"]; validID(raw) {
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
		if !ours(obj["id"]) {
			return verdict{action: drop, id: obj["id"]}
		}
		return verdict{}
	}
	var name string
	if json.Unmarshal(method, &name) != nil || name == "" {
		return bad(`"method" must be a non-empty string`)
	}
	var version string
	if json.Unmarshal(obj["jsonrpc"], &version) != nil || version != "2.0" {
		return bad(`"jsonrpc" must be "2.0"`)
	}
	if raw, ok := obj["id"]; ok && id == nil && jsonKind(raw) != 'n' {
		return bad(`"id" must be a string or a number`)
	}
	if k := jsonKind(obj["params"]); k != 0 && k != 'n' && k != '{' && k != '[' {
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

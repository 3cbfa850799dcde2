package httpws

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/plexus-agent/plexus/engine"
)

// outMsg is one server message queued for a connection. Messages made
// from an engine event carry its seq and their bytes; the others are
// built when written, with the seq of the last event the connection sent.
type outMsg struct {
	seq   uint64
	data  []byte
	build func(lastSeq uint64) any
}

// conn is one WebSocket client of a session.
type conn struct {
	ws *websocket.Conn
	h  *hub
	// out is made once client.hello arrived (ready is then closed); queued
	// counts the bytes waiting in it.
	out    chan outMsg
	ready  chan struct{}
	queued atomic.Int64
	caps   map[string]bool
	// work joins the connection's background jobs (index updates);
	// indexing admits one at a time.
	work     sync.WaitGroup
	indexing chan struct{}
	// gone is closed when the connection ends; kick closes it early.
	gone     chan struct{}
	kickOnce sync.Once
	kickCode websocket.StatusCode
	kickWhy  string
}

// kick ends the connection with code and reason (once).
func (c *conn) kick(code websocket.StatusCode, why string) {
	c.kickOnce.Do(func() {
		c.kickCode, c.kickWhy = code, why
		close(c.gone)
	})
}

// send queues a message without blocking; a full queue (by count or by
// bytes) disconnects the slow client (it can reconnect with ?since= and
// lose nothing).
func (c *conn) send(m outMsg) {
	n := int64(len(m.data))
	if c.queued.Add(n) > c.h.srv.opts.MaxQueueBytes {
		c.queued.Add(-n)
		c.kick(websocket.StatusTryAgainLater, "too slow to read the stream; reconnect with ?since=<last seq>")
		return
	}
	select {
	case c.out <- m:
	default:
		c.queued.Add(-n)
		c.kick(websocket.StatusTryAgainLater, "too slow to read the stream; reconnect with ?since=<last seq>")
	}
}

// sendNow queues a message that is not an event (hello, state, errors).
func (c *conn) sendNow(build func(lastSeq uint64) any) { c.send(outMsg{build: build}) }

func (c *conn) sendError(code, msg string, recoverable bool, details map[string]any) {
	c.sendNow(func(last uint64) any {
		return serverError{header: header{Type: typeServerError, Seq: last},
			Error: errorBody{Code: code, Message: msg, Recoverable: recoverable, Details: details}}
	})
}

// errorBeforeHello writes a server.error at once: until client.hello
// arrives no write loop runs.
func (c *conn) errorBeforeHello(ctx context.Context, code, msg string, details map[string]any) {
	c.write(ctx, serverError{header: header{Type: typeServerError},
		Error: errorBody{Code: code, Message: msg, Recoverable: true, Details: details}})
}

// handleStream serves WS /v1/sessions/{session_id}/stream[?since=N].
//
// The client speaks first (client.hello); the server answers server.hello,
// then, with ?since=N, every stored event after N in order, then
// session.state, then live events. Events are stored before they are
// delivered, and the connection subscribes before it reads the store, so
// nothing is missed or sent twice (live events at or below the last
// replayed seq are dropped).
func (s *Server) handleStream(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("session_id")
	var since uint64
	replay := false
	if v := r.URL.Query().Get("since"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, codeInvalidRequest, "since must be a non-negative integer: the last seq the client saw", map[string]any{"field": "since"})
			return
		}
		since, replay = n, true
	}
	if !headerHas(r.Header, "Upgrade", "websocket") {
		writeError(w, http.StatusBadRequest, codeInvalidRequest, "this endpoint is a WebSocket: connect with a WebSocket client (Upgrade: websocket)", nil)
		return
	}
	h, err := s.hub(id)
	if err != nil {
		writeEngineError(w, err)
		return
	}
	if last := h.sess.State().LastSeq; replay && since > last {
		writeError(w, http.StatusBadRequest, codeInvalidRequest,
			fmt.Sprintf("since %d is beyond the session's last event (%d); reconnect with since=%d or without since", since, last, last),
			map[string]any{"field": "since", "last_seq": last})
		return
	}
	s.mu.Lock()
	closing, full := s.closing, s.nconns >= s.opts.MaxConnections
	if !closing && !full {
		s.conns.Add(1)
		s.nconns++
	}
	s.mu.Unlock()
	if closing || full {
		msg := "the server is shutting down"
		if full {
			msg = fmt.Sprintf("the server has %d WebSocket connections, its limit; close one or try again later", s.opts.MaxConnections)
		}
		writeError(w, http.StatusServiceUnavailable, codeInternal, msg, nil)
		return
	}
	defer func() {
		s.mu.Lock()
		s.nconns--
		s.mu.Unlock()
		s.conns.Done()
	}()
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		// Browsers are not this server's clients, and the bearer token
		// (not a cookie) authenticates, so the Origin check adds nothing.
		InsecureSkipVerify: true,
	})
	if err != nil {
		s.log.Warn("websocket upgrade failed", "session", id, "error", err)
		return
	}
	ws.SetReadLimit(s.opts.MaxMessageBytes)
	c := &conn{ws: ws, h: h, ready: make(chan struct{}), gone: make(chan struct{}), caps: map[string]bool{}, indexing: make(chan struct{}, 1)}
	s.log.Info("stream opened", "session", id, "remote", r.RemoteAddr, "since", since)
	ctx, cancel := context.WithCancel(r.Context())

	hello := make(chan clientHello, 1)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		c.read(ctx, hello)
	}()
	// At the end the reader (which may be answering an approval) and the
	// background jobs are stopped and joined.
	defer func() {
		cancel()
		ws.CloseNow()
		<-readDone
		c.work.Wait()
	}()
	var first clientHello
	select {
	case first = <-hello:
	case <-c.gone:
		c.finish(ws)
		return
	case <-s.stopping:
		ws.Close(websocket.StatusGoingAway, "server shutting down")
		return
	case <-time.After(30 * time.Second):
		ws.Close(websocket.StatusPolicyViolation, "no client.hello within 30 s")
		return
	}
	for _, cp := range first.ClientInfo.Capabilities {
		c.caps[cp] = true
	}
	// The model as REST reports it, asked before subscribing so that
	// events do not pile up while the provider answers.
	model := s.describe(ctx, h.sess.Model())
	c.out = make(chan outMsg, s.opts.SendQueue)
	close(c.ready)
	// The client has seen every event up to start: since, or, without
	// it, the last event before it subscribed. Subscribing before reading
	// the store keeps what is emitted meanwhile waiting in c.out; the
	// store has every event up to it.
	start := since
	if !replay {
		start = h.sess.State().LastSeq
	}
	if !h.subscribe(c) {
		ws.Close(websocket.StatusNormalClosure, "session deleted")
		return
	}
	defer h.unsubscribe(c)
	if err := c.write(ctx, s.helloMessage(h, start, model)); err != nil {
		return
	}
	last, err := c.replay(ctx, start)
	if err != nil {
		c.kick(websocket.StatusInternalError, "replaying stored events failed: "+err.Error())
	}
	st := h.sess.State()
	if err := c.write(ctx, sessionState{header: header{Type: typeSessionState, Seq: last}, State: st}); err != nil {
		return
	}
	c.writeLoop(ctx, last)
	c.finish(ws)
}

// finish closes ws with the kick code, or normally.
func (c *conn) finish(ws *websocket.Conn) {
	select {
	case <-c.gone:
		code, why := c.kickCode, c.kickWhy
		if code == 0 {
			code = websocket.StatusNormalClosure
		}
		ws.Close(code, truncateReason(why))
	default:
		ws.Close(websocket.StatusNormalClosure, "")
	}
}

// truncateReason keeps a close reason within the 123 bytes a close frame
// allows.
func truncateReason(s string) string {
	if len(s) > 120 {
		return s[:120]
	}
	return s
}

// write sends one message now (before the write loop starts).
func (c *conn) write(ctx context.Context, v any) error {
	data, err := encode(v)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, c.h.srv.opts.WriteTimeout)
	defer cancel()
	return c.ws.Write(wctx, websocket.MessageText, data)
}

// replay sends the stored events after since and returns the last seq
// sent (since when none). The session must have a store; without one
// (an engine that keeps sessions in memory) nothing is replayed.
func (c *conn) replay(ctx context.Context, since uint64) (uint64, error) {
	m := newMapper()
	if err := c.seedTexts(ctx, m, since); err != nil {
		if errors.Is(err, engine.ErrUnsupported) { // no session store
			return since, nil
		}
		return since, err
	}
	last := since
	for {
		evs, err := c.h.srv.eng.Events(ctx, c.h.id, last, replayPage)
		if errors.Is(err, engine.ErrUnsupported) {
			return since, nil
		}
		if err != nil || len(evs) == 0 {
			return last, err
		}
		for _, ev := range evs {
			for _, msg := range m.messages(ev) {
				if err := c.write(ctx, msg); err != nil {
					return last, err
				}
			}
			last = ev.Seq
		}
	}
}

// replayPage is how many stored events one read of a replay takes.
const replayPage = 512

// seedTexts gives m the text of the assistant message that was streaming
// at since, so that the replayed token messages carry the whole
// cumulative_text. Turns of a session run one at a time, so that message's
// tokens are those of the last token's turn and step after the last final
// event at or before since (events of ended turns that come between, like
// a patch approval answered later, carry no tokens). It reads back from
// since in pages, so a reconnect costs the current turn's events, not the
// session's.
func (c *conn) seedTexts(ctx context.Context, m *mapper, since uint64) error {
	var pieces []string // newest first
	turn, step := "", 0
	for hi := since; hi > 0; {
		lo := uint64(0)
		if hi > replayPage {
			lo = hi - replayPage
		}
		evs, err := c.h.srv.eng.Events(ctx, c.h.id, lo, int(hi-lo))
		if err != nil {
			return err
		}
		top := hi
		for i := len(evs) - 1; i >= 0; i-- {
			if evs[i].Seq > top { // past a gap in the stored seqs
				continue
			}
			switch d := evs[i].Data.(type) {
			case *engine.FinalEvent:
				hi = 0
			case *engine.TokenEvent:
				if turn == "" {
					turn, step = evs[i].TurnID, d.Step
				}
				switch {
				case evs[i].TurnID == turn && d.Step == step:
					pieces = append(pieces, d.Text)
				case evs[i].TurnID == turn:
					hi = 0 // an earlier step's message
				}
			}
			if hi == 0 {
				break
			}
		}
		if hi != 0 {
			hi = lo
		}
	}
	if turn != "" {
		slices.Reverse(pieces)
		m.seed(turn, step, strings.Join(pieces, ""))
	}
	return nil
}

// writeLoop writes queued messages until the connection ends. Event
// messages at or below replayed (the last seq the replay sent) were sent
// already and are skipped; one event can make several messages with the
// same seq (patch.proposed per file), so the floor stays fixed. last, the
// seq other messages carry, follows what was written. When the server
// stops, what is queued is written and the socket closes with 1001.
func (c *conn) writeLoop(ctx context.Context, replayed uint64) {
	last := replayed
	write := func(m outMsg) bool {
		var data []byte
		switch {
		case m.build != nil:
			b, err := encode(m.build(last))
			if err != nil {
				return true
			}
			data = b
		case m.seq != 0 && m.seq <= replayed:
			c.queued.Add(-int64(len(m.data)))
			return true
		default:
			c.queued.Add(-int64(len(m.data)))
			data = m.data
			last = max(last, m.seq)
		}
		wctx, cancel := context.WithTimeout(ctx, c.h.srv.opts.WriteTimeout)
		err := c.ws.Write(wctx, websocket.MessageText, data)
		cancel()
		if err != nil {
			c.kick(websocket.StatusGoingAway, "")
			return false
		}
		return true
	}
	for {
		select {
		case <-c.gone:
			return
		case <-ctx.Done():
			return
		case <-c.h.srv.stopping:
			for {
				select {
				case m := <-c.out:
					if !write(m) {
						return
					}
				default:
					c.kick(websocket.StatusGoingAway, "server shutting down")
					return
				}
			}
		case m := <-c.out:
			if !write(m) {
				return
			}
		}
	}
}

// headerHas reports whether header name lists token (comma-separated,
// case-insensitive).
func headerHas(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// read reads client messages until the connection ends. The first one must
// be client.hello (sent on hello); the others are handled by the hub.
func (c *conn) read(ctx context.Context, hello chan<- clientHello) {
	defer c.kick(websocket.StatusNormalClosure, "")
	greeted := false
	for {
		typ, data, err := c.ws.Read(ctx)
		if err != nil {
			var ce websocket.CloseError
			if errors.As(err, &ce) || errors.Is(err, context.Canceled) {
				return
			}
			// Over the size limit the library has already closed with
			// 1009 (message too big).
			c.h.srv.log.Info("stream read ended", "session", c.h.id, "error", err)
			return
		}
		fail := func(msg string, details map[string]any) {
			if greeted {
				c.sendError(codeInvalidMessage, msg, true, details)
			} else {
				c.errorBeforeHello(ctx, codeInvalidMessage, msg, details)
			}
		}
		if typ != websocket.MessageText {
			fail("send JSON text messages, not binary ones", nil)
			continue
		}
		m, err := decodeClient(data)
		if err != nil {
			bad := err.(*badMessage)
			fail(bad.msg, bad.details)
			continue
		}
		if !greeted {
			h, ok := m.(*clientHello)
			if !ok {
				fail("send client.hello first", nil)
				continue
			}
			greeted = true
			hello <- *h
			select { // the queue exists from here on
			case <-c.ready:
			case <-c.gone:
				return
			}
			continue
		}
		c.h.handle(ctx, c, m)
	}
}

// helloMessage is server.hello.
// model is the session's model as GET /v1/models/current?session_id=
// reports it.
func (s *Server) helloMessage(h *hub, last uint64, model currentModel) serverHello {
	return serverHello{
		header:    header{Type: typeServerHello, Seq: last},
		SessionID: h.id,
		ServerInfo: serverInfo{
			Version: s.opts.Version,
			Model:   modelInfo{Provider: model.Provider, ModelName: model.ModelName, Capabilities: model.Capabilities},
			Capabilities: []string{"agentic_rag", "multi_file_edit", "resume", "patch_apply", "terminal_exec",
				"approval_scopes"},
		},
	}
}

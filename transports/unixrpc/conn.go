package unixrpc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/creachadair/jrpc2"

	"github.com/plexus-agent/plexus/engine"
)

// Limits of what a connection keeps for session.save.
const (
	maxSavedBlocks     = 2000
	maxSavedBlockBytes = 8 << 20
	maxEndedApprovals  = 1024
)

// Causes of a connection's and its queries' cancellation.
var (
	errConnClosed   = errors.New("the client disconnected")
	errShuttingDown = errors.New("the server is shutting down")
	errClientCancel = errors.New("cancelled by the client (agent.cancel)")
	errSlowClient   = errors.New("the client did not read its messages fast enough")
	errNotAnnounced = errors.New("the approval request was not announced to the client")
)

// conn is one client connection: a jrpc2 server over channel.Line, its
// sessions, queries and pending approvals.
type conn struct {
	srv *Server
	nc  net.Conn
	w   *wire
	rpc *jrpc2.Server
	out *outbox
	log *slog.Logger

	// ctx ends with the connection; queries derive from it.
	ctx    context.Context
	cancel context.CancelCauseFunc

	queryWG  sync.WaitGroup
	blockSeq atomic.Int64

	mu          sync.Mutex // guards the fields below
	initialized bool
	version     string
	caps        map[string]bool
	client      clientInfo
	tctx        termContext
	session     *engine.Session
	sessions    []string // ids of the sessions this connection started
	loading     bool     // a session.load is replacing the session
	queries     map[string]*query
	admitted    map[string]admission // by raw request id: agent.query requests admitted on arrival, not yet handled
	tail        chan struct{}        // closed when the last admitted query has ended
	approvals   map[string]*pendingApproval
	aliases     map[string]string // approval request id → execution id
	ended       map[string]string // execution id → how its approval ended
	endedOrder  []string
	blocks      []savedBlock
	blockBytes  int
	lastSuggest string
	closing     bool
}

// admission is an agent.query given a place on arrival: one of the
// connection's MaxConcurrentQueries, and its turn after the query admitted
// before it (prev is closed when that one has ended; mine when this one
// has, or its request was refused after all).
type admission struct {
	prev <-chan struct{}
	mine chan struct{}
}

// release gives up an admission whose request was refused: the next query
// still waits for the one before this.
func (a admission) release() {
	go func() {
		<-a.prev
		close(a.mine)
	}()
}

// query is one agent.query.
type query struct {
	id     string
	ctx    context.Context
	cancel context.CancelCauseFunc
	// cancelAck is closed once the response to the agent.cancel that
	// cancelled the query has been written; guarded by conn.mu.
	cancelAck <-chan struct{}
}

// pendingApproval is a tool.request_approval waiting for tool.approve. It
// stays registered until the engine's RequestApproval returns, which may
// be after the answer arrived.
type pendingApproval struct {
	ch        chan engine.ApprovalDecision // buffered: one answer
	requestID string
	answered  bool // guarded by conn.mu
}

func newConn(s *Server, nc net.Conn) *conn {
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan struct{})
	close(done)
	c := &conn{
		srv: s, nc: nc, log: s.log, ctx: ctx, cancel: cancel,
		queries: map[string]*query{}, admitted: map[string]admission{}, tail: done,
		approvals: map[string]*pendingApproval{}, aliases: map[string]string{}, ended: map[string]string{},
	}
	c.w = newWire(nc, s.opts.MaxMessageBytes, s.opts.RequestsPerSecond, s.opts.WriteTimeout, s.log, func(err error) {
		// A write failed, maybe halfway through a message: nothing more
		// can be sent on this connection, so it ends (responses and
		// notifications alike).
		if errors.Is(err, net.ErrClosed) {
			return // closed here already (shutdown, kill)
		}
		c.log.Warn("write to the client failed; disconnecting", "error", err)
		c.kill(errSlowClient)
	})
	c.w.arrived = c.arrived
	c.rpc = jrpc2.NewServer(c, &jrpc2.ServerOptions{AllowPush: true, DisableBuiltin: true, Concurrency: 16})
	c.out = newOutbox(s.opts.MaxQueueBytes, func(method string, params any) error {
		return c.rpc.Notify(context.Background(), method, params)
	})
	return c
}

// serve runs the connection until it closes, then cleans up.
func (c *conn) serve() {
	defer c.srv.dropConn(c)
	c.log.Debug("client connected")
	c.rpc.Start(c.w)
	st := c.rpc.WaitStatus()
	if st.Err != nil && !errors.Is(st.Err, errTooLarge) {
		c.log.Debug("connection ended", "error", st.Err)
	}
	c.cancel(errConnClosed)
	c.out.drop()
	c.mu.Lock()
	for id, a := range c.admitted { // never handled: hand their turns on
		a.release()
		delete(c.admitted, id)
	}
	c.mu.Unlock()
	c.queryWG.Wait()
	c.mu.Lock()
	ids, name := c.sessions, c.client.Name
	c.mu.Unlock()
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := c.srv.opts.Engine.CloseSession(ctx, id); err != nil && !errors.Is(err, engine.ErrNotFound) {
			c.log.Warn("close session", "session", id, "error", err)
		}
		cancel()
	}
	c.log.Debug("client disconnected", "client", name)
}

// shutdown ends the connection cleanly: queries are cancelled and report
// it, the queue is written, then the connection closes.
func (c *conn) shutdown(ctx context.Context) {
	c.mu.Lock()
	c.closing = true
	qs := make([]*query, 0, len(c.queries))
	for _, q := range c.queries {
		qs = append(qs, q)
	}
	c.mu.Unlock()
	for _, q := range qs {
		q.cancel(errShuttingDown)
	}
	done := make(chan struct{})
	go func() {
		c.queryWG.Wait()
		c.out.close()
		<-c.out.done
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
	c.nc.Close()
}

// kill closes the connection at once. The jrpc2 server then stops from
// its reading goroutine (its Stop must not race a read it is delivering).
func (c *conn) kill(cause error) {
	c.cancel(cause)
	c.nc.Close()
}

// Assign implements jrpc2.Assigner: every method goes to handle, which
// answers unknown ones with -32601 in the contract's words.
func (c *conn) Assign(context.Context, string) jrpc2.Handler { return c.handle }

func (c *conn) handle(ctx context.Context, req *jrpc2.Request) (any, error) {
	method := req.Method()
	var a admission
	admitted := false
	if method == methodQuery {
		c.mu.Lock()
		a, admitted = c.admitted[req.ID()]
		delete(c.admitted, req.ID())
		c.mu.Unlock()
	}
	if method != methodInitialize {
		c.mu.Lock()
		ok := c.initialized
		c.mu.Unlock()
		if !ok {
			if admitted {
				a.release()
			}
			return nil, rpcError(CodeInvalidRequest, "send initialize first (and wait for its result)", reasonData(reasonNotInitialized))
		}
	}
	switch method {
	case methodInitialize:
		return c.initialize(ctx, req)
	case methodQuery:
		return c.query(req, a, admitted)
	case methodCancel:
		return c.cancelQuery(req)
	case methodApprove:
		return c.approve(req)
	case methodContextUpdate:
		return c.contextUpdate(req)
	case methodSessionSave:
		return c.saveSession(req)
	case methodSessionLoad:
		return c.loadSession(ctx, req)
	case methodSearchText:
		return c.searchText(ctx, req)
	case methodSearchSymbols:
		return c.searchSymbols(ctx, req)
	}
	return nil, rpcError(CodeMethodNotFound, fmt.Sprintf("%q is not a method of this server", method), map[string]any{"method": method})
}

// decodeParams decodes a request's params object into v; errors are
// -32602 naming the member.
func decodeParams(req *jrpc2.Request, v any) error {
	if !req.HasParams() {
		return nil
	}
	var raw json.RawMessage
	req.UnmarshalParams(&raw)
	return decodeRawParams(raw, v)
}

// decodeRawParams is decodeParams on the params' JSON.
func decodeRawParams(raw json.RawMessage, v any) error {
	if first(raw) != '{' {
		return rpcError(CodeInvalidParams, "params must be an object", nil)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return rpcError(CodeInvalidParams, fmt.Sprintf("%s must be %s, not %s", te.Field, jsonType(te.Type), te.Value), map[string]any{"field": te.Field})
		}
		return rpcError(CodeInvalidParams, err.Error(), nil)
	}
	return nil
}

// jsonType names a Go type as a JSON type.
func jsonType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}

func (c *conn) initialize(ctx context.Context, req *jrpc2.Request) (any, error) {
	var p initializeParams
	if err := decodeParams(req, &p); err != nil {
		return nil, err
	}
	supported := map[string]any{"supported": "1.x", "server_version": ProtocolVersion}
	if p.ProtocolVersion == "" {
		return nil, rpcError(CodeInvalidParams, fmt.Sprintf("protocol_version is required (this server speaks %s)", ProtocolVersion),
			reasonData(reasonVersion, "supported", "1.x", "server_version", ProtocolVersion))
	}
	version, err := negotiate(p.ProtocolVersion)
	if err != nil {
		supported["reason"], supported["requested"] = reasonVersion, p.ProtocolVersion
		return nil, rpcError(CodeInvalidParams, err.Error(), supported)
	}
	c.mu.Lock()
	if c.initialized {
		c.mu.Unlock()
		return nil, rpcError(CodeInvalidRequest, "initialize was already received on this connection", reasonData(reasonInitialized))
	}
	c.initialized, c.version = true, version
	c.caps = map[string]bool{capStreaming: true, capBlocks: true, capToolApproval: true, capSessionPersist: true}
	if p.Capabilities != nil {
		c.caps = map[string]bool{}
		for _, k := range *p.Capabilities {
			c.caps[k] = true
		}
	}
	if p.ClientInfo != nil {
		c.client = *p.ClientInfo
	}
	if p.TerminalSize != nil {
		c.tctx.TerminalSize = p.TerminalSize
	}
	c.mu.Unlock()
	c.log.Debug("client initialized", "client", c.client.Name, "client_version", c.client.Version, "protocol", version)
	o := c.srv.opts
	return initializeResult{
		Status: "ready", ProtocolVersion: version,
		ServerInfo:   serverInfo{Name: "plexus", Version: c.srv.version},
		Capabilities: serverCapabilities,
		Models:       c.srv.modelEntries(ctx),
		Limits: limits{MaxMessageBytes: o.MaxMessageBytes, MaxRequestsPerSecond: o.RequestsPerSecond,
			MaxConcurrentQueries: o.MaxConcurrentQueries},
	}, nil
}

// sessionLocked returns the connection's session, starting it on first
// use. The caller holds c.mu.
func (c *conn) sessionLocked() (*engine.Session, error) {
	if c.session != nil {
		return c.session, nil
	}
	s, err := c.srv.opts.Engine.NewSession(c.srv.opts.Workspace, "")
	if err != nil {
		return nil, err
	}
	c.session = s
	c.sessions = append(c.sessions, s.ID())
	return s, nil
}

// arrived admits each agent.query request as it arrives, in arrival
// order (jrpc2 runs the handlers concurrently, in any order): while the
// connection has MaxConcurrentQueries queries admitted and not ended, a
// valid query is refused here, so of queries sent back to back the first
// ones are accepted and the later ones refused, and the accepted ones run
// in the order sent. A query with invalid params is left to its handler,
// which refuses it without taking a place.
func (c *conn) arrived(id, method string, params json.RawMessage) *jrpc2.Error {
	if method != methodQuery {
		return nil
	}
	if _, _, err := parseQuery(params); err != nil {
		return nil
	}
	limit := c.srv.opts.MaxConcurrentQueries
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.queries) + len(c.admitted); n >= limit {
		return rpcError(CodeAgentError, fmt.Sprintf("%d queries are already in progress on this connection (the limit); wait for a stream.complete or cancel one", n),
			reasonData(reasonTooManyQueries, "limit", limit))
	}
	a := admission{prev: c.tail, mine: make(chan struct{})}
	c.tail = a.mine
	c.admitted[id] = a
	return nil
}

// parseQuery decodes and checks agent.query's params (raw JSON, absent or
// null for none). Errors are -32602 naming the member.
func parseQuery(raw json.RawMessage) (queryParams, engine.ModelRef, error) {
	var p queryParams
	if len(raw) > 0 && !isNull(raw) {
		if err := decodeRawParams(raw, &p); err != nil {
			return p, engine.ModelRef{}, err
		}
	}
	if p.Message == nil || strings.TrimSpace(*p.Message) == "" {
		return p, engine.ModelRef{}, rpcError(CodeInvalidParams, "message is required and must not be empty", map[string]any{"field": "message"})
	}
	var model engine.ModelRef
	if p.Options != nil && p.Options.Model != "" {
		ref, err := engine.ParseModelRef(p.Options.Model)
		if err != nil {
			return p, engine.ModelRef{}, rpcError(CodeInvalidParams, err.Error(), map[string]any{"field": "options.model"})
		}
		model = ref
	}
	return p, model, nil
}

// query handles agent.query; a is its admission when it was admitted on
// arrival (see arrived).
func (c *conn) query(req *jrpc2.Request, a admission, admitted bool) (any, error) {
	var raw json.RawMessage
	if req.HasParams() {
		req.UnmarshalParams(&raw)
	}
	p, model, err := parseQuery(raw)
	if err != nil {
		if admitted {
			a.release()
		}
		return nil, err
	}
	o := c.srv.opts
	c.mu.Lock()
	var refuse error
	switch {
	case c.closing:
		refuse = rpcError(CodeAgentError, errShuttingDown.Error(), reasonData(reasonShuttingDown))
	case c.loading:
		refuse = rpcError(CodeAgentError, "a session.load is in progress; send the query after its result", reasonData(reasonBusy))
	case !admitted && len(c.queries)+len(c.admitted) >= o.MaxConcurrentQueries:
		// Not admitted on arrival (a notification): admitted now.
		refuse = rpcError(CodeAgentError, fmt.Sprintf("%d queries are already in progress on this connection (the limit); wait for a stream.complete or cancel one", len(c.queries)+len(c.admitted)),
			reasonData(reasonTooManyQueries, "limit", o.MaxConcurrentQueries))
	}
	var sess *engine.Session
	if refuse == nil {
		var err error
		if sess, err = c.sessionLocked(); err != nil {
			refuse = rpcError(CodeInternalError, "start a session: "+err.Error(), nil)
		}
	}
	if refuse != nil {
		c.mu.Unlock()
		if admitted {
			a.release()
		}
		return nil, refuse
	}
	if !admitted {
		a = admission{prev: c.tail, mine: make(chan struct{})}
		c.tail = a.mine
	}
	c.tctx.merge(p.Context)
	tc := c.tctx
	stream := c.caps[capStreaming] && (p.Options == nil || p.Options.Stream == nil || *p.Options.Stream)
	host := c.caps[capToolApproval]
	q := &query{id: newQueryID()}
	q.ctx, q.cancel = context.WithCancelCause(c.ctx)
	c.queries[q.id] = q
	prev, mine := a.prev, a.mine
	c.queryWG.Add(1)
	c.mu.Unlock()

	in := engine.TurnInput{Message: *p.Message + terminalSection(tc), Context: openFiles(tc, o.Workspace.Root), Model: model}
	sent := c.w.afterSent(req.ID())
	go c.run(q, sess, in, stream, host, prev, mine, sent)
	if p.Context != nil {
		c.suggest(tc)
	}
	return queryResult{QueryID: q.id, Status: "processing"}, nil
}

// run runs one query: after its processing response is out and the
// connection's earlier queries have ended, it runs the turn, streaming its
// events, and ends with stream.complete.
func (c *conn) run(q *query, sess *engine.Session, in engine.TurnInput, stream, withHost bool, prev <-chan struct{}, mine chan struct{}, sent <-chan struct{}) {
	defer c.queryWG.Done()
	defer func() {
		// A query cancelled while it waited still hands its turn on only
		// after the one before it, so queries run in the order accepted.
		<-prev
		close(mine)
	}()
	defer q.cancel(nil)
	o := c.srv.opts
	m := &mapper{queryID: q.id, stream: stream, approvalTimeout: int(o.ApprovalTimeout.Round(time.Second) / time.Second),
		nextBlock: func() string { return "block-" + strconv.FormatInt(c.blockSeq.Add(1), 10) }}
	select {
	case <-sent:
	case <-q.ctx.Done():
	}
	select {
	case <-prev:
	case <-q.ctx.Done():
	}
	var final []note
	if q.ctx.Err() == nil {
		ctx, cancel := context.WithTimeout(q.ctx, o.QueryTimeout)
		opts := engine.TurnOptions{OnEvent: func(ev engine.Event) {
			for _, n := range m.notes(ev) {
				if n.final {
					final = append(final, n)
					continue
				}
				c.send(n)
			}
		}}
		if withHost {
			opts.Host = &approvalHost{c: c}
		}
		_, err := sess.Run(ctx, in, opts)
		cancel()
		switch {
		case err != nil && q.ctx.Err() != nil:
			final = m.ended("cancelled", nil)
		case err != nil:
			c.log.Warn("query did not start", "query", q.id, "error", err)
			final = m.ended("error", err)
		}
	} else {
		final = m.ended("cancelled", nil)
	}
	c.mu.Lock()
	ack := q.cancelAck
	c.mu.Unlock()
	if ack != nil {
		// Example 3: the agent.cancel result comes before stream.complete.
		select {
		case <-ack:
		case <-c.ctx.Done():
		case <-time.After(5 * time.Second):
		}
	}
	c.mu.Lock()
	delete(c.queries, q.id)
	c.mu.Unlock()
	for _, n := range final {
		c.send(n)
	}
}

// send queues a notification. An approval is registered first, so that a
// tool.approve arriving at once finds it.
//
// A tool.request_approval over the message limit has its arguments and
// preview cut to fit (see fitApproval); one that still does not fit is not
// sent nor registered, so the engine's RequestApproval denies the call at
// once (errNotAnnounced) instead of waiting for an answer that cannot
// come.
func (c *conn) send(n note) {
	it := outItem{method: n.method, tok: n.tok}
	if n.tok != nil {
		it.size = len(n.tok.token) + 96
	} else {
		raw, err := json.Marshal(n.params)
		if err == nil && len(raw) > c.srv.opts.MaxMessageBytes && n.approval != nil {
			raw, err = fitApproval(n.params.(approvalParams), c.srv.opts.MaxMessageBytes)
		}
		if err != nil {
			c.log.Error("encode notification", "method", n.method, "error", err)
			return
		}
		if len(raw) > c.srv.opts.MaxMessageBytes {
			c.log.Warn("notification over the message limit dropped", "method", n.method, "bytes", len(raw))
			return
		}
		it.params, it.size = json.RawMessage(raw), len(raw)
		if n.method == methodBlock {
			c.keepBlock(n.params.(blockParams), len(raw))
		}
	}
	if r := n.approval; r != nil {
		key := executionID(*r)
		c.mu.Lock()
		c.approvals[key] = &pendingApproval{ch: make(chan engine.ApprovalDecision, 1), requestID: r.ID}
		if r.ID != key {
			c.aliases[r.ID] = key
		}
		c.mu.Unlock()
	}
	if !c.out.push(it) && c.out.overflowed() {
		c.log.Warn("client too slow; disconnecting", "queued_bytes_limit", c.srv.opts.MaxQueueBytes)
		c.kill(errSlowClient)
	}
}

// fitApproval encodes a tool.request_approval whose encoding is over
// max bytes with its bulky members cut: arguments become {"truncated":
// true, "bytes": N, "excerpt": the start of the arguments' JSON text},
// the preview's content is cut (preview.truncated true), and so is the
// tool's description. The result may still be over max (the caller then
// drops it).
func fitApproval(p approvalParams, max int) ([]byte, error) {
	base := p
	base.Arguments = json.RawMessage(`{"truncated":true}`)
	if p.Preview != nil {
		base.Preview = &preview{Type: p.Preview.Type, Truncated: true}
	}
	base.Tool.Description = ""
	raw, err := json.Marshal(base)
	if err != nil || len(raw) > max {
		return raw, err
	}
	// What is left, shared by the three (JSON escaping may grow text up
	// to 6 times; the loop below shrinks until it fits).
	room := (max - len(raw) - 256) / 3
	for room > 0 {
		q := base
		q.Tool.Description = cutUTF8(p.Tool.Description, room)
		args, _ := json.Marshal(map[string]any{"truncated": true, "bytes": len(p.Arguments), "excerpt": cutUTF8(string(p.Arguments), room)})
		q.Arguments = args
		if p.Preview != nil {
			q.Preview = &preview{Type: p.Preview.Type, Content: cutUTF8(p.Preview.Content, room), Truncated: len(p.Preview.Content) > room}
		}
		raw, err = json.Marshal(q)
		if err != nil || len(raw) <= max {
			return raw, err
		}
		room /= 2
	}
	return json.Marshal(base)
}

// cutUTF8 returns at most n bytes of s, not cutting a character.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// keepBlock remembers a block for session.save, within the limits.
func (c *conn) keepBlock(b blockParams, size int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.blocks = append(c.blocks, savedBlock(b))
	c.blockBytes += size
	for len(c.blocks) > 0 && (len(c.blocks) > maxSavedBlocks || c.blockBytes > maxSavedBlockBytes) {
		raw, _ := json.Marshal(c.blocks[0])
		c.blockBytes -= len(raw)
		c.blocks = c.blocks[1:]
	}
}

func (c *conn) cancelQuery(req *jrpc2.Request) (any, error) {
	var p cancelParams
	if err := decodeParams(req, &p); err != nil {
		return nil, err
	}
	if p.QueryID == "" {
		return nil, rpcError(CodeInvalidParams, "query_id is required", map[string]any{"field": "query_id"})
	}
	c.mu.Lock()
	q := c.queries[p.QueryID]
	if q != nil && q.cancelAck == nil {
		q.cancelAck = c.w.afterSent(req.ID())
	}
	c.mu.Unlock()
	if q == nil {
		return cancelResult{QueryID: p.QueryID, Reason: "no query with this id is in progress on this connection (it has completed, or never existed)"}, nil
	}
	q.cancel(errClientCancel)
	return cancelResult{Cancelled: true, QueryID: p.QueryID}, nil
}

func (c *conn) approve(req *jrpc2.Request) (any, error) {
	var p approveParams
	if err := decodeParams(req, &p); err != nil {
		return nil, err
	}
	switch {
	case p.ExecutionID == "":
		return nil, rpcError(CodeInvalidParams, "execution_id is required", map[string]any{"field": "execution_id"})
	case p.Approved == nil:
		return nil, rpcError(CodeInvalidParams, "approved is required (true or false)", map[string]any{"field": "approved"})
	}
	c.mu.Lock()
	key := p.ExecutionID
	if alias, ok := c.aliases[key]; ok {
		key = alias
	}
	pa, ok := c.approvals[key]
	if ok && pa.answered {
		ok = false
	}
	if !ok {
		how := c.ended[key]
		if pa != nil {
			how = "answered"
		}
		c.mu.Unlock()
		data := reasonData(reasonUnknownApproval, "execution_id", p.ExecutionID)
		switch how {
		case "cancelled":
			return nil, rpcError(CodeCancelled, fmt.Sprintf("the query of %s was cancelled before it was answered", p.ExecutionID), data)
		case "timeout":
			return nil, rpcError(CodeTimeout, fmt.Sprintf("approval %s timed out after %s and the call was denied", p.ExecutionID, c.srv.opts.ApprovalTimeout), data)
		case "answered":
			return nil, rpcError(CodeInvalidParams, fmt.Sprintf("approval %s was already answered", p.ExecutionID), reasonData(reasonAnswered, "execution_id", p.ExecutionID))
		}
		return nil, rpcError(CodeInvalidParams, fmt.Sprintf("no approval with execution_id %s is pending on this connection", p.ExecutionID), data)
	}
	pa.answered = true
	c.mu.Unlock()
	dec := engine.ApprovalDecision{Approved: *p.Approved, Reason: p.Reason, Actor: "user"}
	if p.Options != nil {
		dec.Remember, dec.ApplyToSimilar = p.Options.RememberChoice, p.Options.ApplyToSimilar
	}
	// The call goes on once this result is out, so its tool.progress
	// never comes before it.
	sent := c.w.afterSent(req.ID())
	go func() {
		<-sent
		pa.ch <- dec
	}()
	status := "rejected"
	if dec.Approved {
		status = "approved"
	}
	return approveResult{Status: status, ExecutionID: p.ExecutionID}, nil
}

// endApprovalLocked forgets a pending approval and remembers how it
// ended. The caller holds c.mu.
func (c *conn) endApprovalLocked(key string, pa *pendingApproval, how string) {
	if c.approvals[key] == pa {
		delete(c.approvals, key)
	}
	delete(c.aliases, pa.requestID)
	if _, seen := c.ended[key]; !seen {
		c.endedOrder = append(c.endedOrder, key)
	}
	c.ended[key] = how
	for len(c.endedOrder) > maxEndedApprovals {
		delete(c.ended, c.endedOrder[0])
		c.endedOrder = c.endedOrder[1:]
	}
}

func (c *conn) contextUpdate(req *jrpc2.Request) (any, error) {
	var p termContext
	if err := decodeParams(req, &p); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.tctx.merge(&p)
	tc := c.tctx
	c.mu.Unlock()
	c.suggest(tc)
	if req.IsNotification() {
		return nil, nil
	}
	return map[string]bool{"updated": true}, nil
}

// suggest sends suggestion.inline when the terminal context calls for a
// command suggestion not sent before.
func (c *conn) suggest(tc termContext) {
	out := ""
	if tc.RecentOutput != nil {
		out = *tc.RecentOutput
	}
	sg, ok := suggestCommand(tc.RecentCommands, out)
	if !ok {
		return
	}
	last := tc.RecentCommands[len(tc.RecentCommands)-1]
	key := fmt.Sprintf("%s\x00%d\x00%s", last.Command, last.Timestamp, sg.Suggestion)
	c.mu.Lock()
	dup := c.lastSuggest == key
	c.lastSuggest = key
	c.mu.Unlock()
	if !dup {
		c.send(note{method: methodSuggestion, params: sg})
	}
}

// approvalHost is the engine.Host of a connection's turns: it asks the
// client with tool.request_approval (sent from the event stream) and waits
// for tool.approve, up to Options.ApprovalTimeout.
type approvalHost struct{ c *conn }

var _ engine.Host = (*approvalHost)(nil)

func (h *approvalHost) RequestApproval(ctx context.Context, req engine.ApprovalRequest) (engine.ApprovalDecision, error) {
	c := h.c
	key := executionID(req)
	c.mu.Lock()
	pa := c.approvals[key]
	c.mu.Unlock()
	if pa == nil {
		return engine.ApprovalDecision{}, errNotAnnounced
	}
	timeout := c.srv.opts.ApprovalTimeout
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case dec := <-pa.ch:
		c.mu.Lock()
		c.endApprovalLocked(key, pa, "answered")
		c.mu.Unlock()
		return dec, nil
	case <-timer.C:
		c.mu.Lock()
		if pa.answered { // the answer is on its way
			c.endApprovalLocked(key, pa, "answered")
			c.mu.Unlock()
			return <-pa.ch, nil
		}
		c.endApprovalLocked(key, pa, "timeout")
		c.mu.Unlock()
		return engine.ApprovalDecision{Reason: fmt.Sprintf("nobody answered the approval request within %s", timeout), Actor: "timeout"}, nil
	case <-ctx.Done():
		c.mu.Lock()
		how := "cancelled"
		if pa.answered {
			how = "answered"
		}
		c.endApprovalLocked(key, pa, how)
		c.mu.Unlock()
		return engine.ApprovalDecision{}, context.Cause(ctx)
	}
}

// newQueryID returns "q-" and 12 random hex digits.
func newQueryID() string {
	var b [6]byte
	rand.Read(b[:])
	return "q-" + hex.EncodeToString(b[:])
}

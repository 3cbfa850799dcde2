package httpws

// Load test and benchmark of the WebSocket stream: many sessions, each
// with one client, each turn streaming thousands of one-token chunks from
// an in-process model with no delay.
//
//	go test -race -run TestLoad50Sessions ./transports/httpws
//	go test -run '^$' -bench BenchmarkStream50x2000 -benchtime=1x ./transports/httpws
//
// The benchmark reports, per assistant.token, the time from the model's
// onChunk call to the client reading the message (what the engine, the
// server and the socket add), and the same from onChunk to the engine's
// OnEvent with no server ("engine-only"), to compare.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/plexus-agent/plexus/engine"
)

const (
	loadSessions = 50
	loadTokens   = 2000
	loadToken    = "tok"
	// loadTimeout bounds one whole round (connect, turn, teardown), and
	// one write to a client: the test checks what the clients get, never
	// how fast, so only a hang may fail it, however loaded the machine.
	loadTimeout = 10 * time.Minute
)

// tokenModel is an engine.Model whose every Chat call streams n one-token
// text chunks, "<turn>.<i> " (both in base 36: 4 to 7 bytes, about an
// LLM token's size), with no delay and no tool call. turn numbers the
// model's calls from 1 (one call per turn: there are no tool calls), so
// every token text names its turn and its index; the model
// records when it called onChunk for each (nanoseconds since base, on the
// monotonic clock), for the readers of the stream to compare with.
type tokenModel struct {
	n    int
	base time.Time
	// interval, when set before the turns start, paces the tokens: the
	// model waits this long before each one, as a real model streams.
	interval time.Duration

	calls atomic.Int64
	turns sync.Map // turn number (int) -> *turnTimes
}

// turnTimes holds, by token index, when the model called onChunk with the
// token (ns since base). Atomic: the readers are the clients' goroutines,
// which learn of a token over the socket, an edge the race detector does
// not see.
type turnTimes struct {
	at []atomic.Int64
}

var _ engine.Model = (*tokenModel)(nil)

func newTokenModel(n int) *tokenModel { return &tokenModel{n: n, base: time.Now()} }

func (m *tokenModel) ListModels(context.Context) ([]engine.ModelInfo, error) {
	return []engine.ModelInfo{{Name: "m", Capabilities: []string{"completion"}}}, nil
}

func (m *tokenModel) Embed(context.Context, engine.EmbedRequest) (engine.EmbedResponse, error) {
	return engine.EmbedResponse{}, &engine.ModelError{Provider: "load", Kind: engine.ErrUnsupported, Message: "no embeddings"}
}

func (m *tokenModel) Chat(ctx context.Context, req engine.ChatRequest, onChunk func(engine.ChatChunk) error) error {
	turn := int(m.calls.Add(1))
	tt := &turnTimes{at: make([]atomic.Int64, m.n)}
	m.turns.Store(turn, tt)
	for i := 0; i < m.n; i++ {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if m.interval > 0 {
			time.Sleep(m.interval)
		}
		text := tokenText(turn, i)
		tt.at[i].Store(int64(time.Since(m.base)))
		if err := onChunk(engine.ChatChunk{Text: text}); err != nil {
			return err
		}
	}
	return onChunk(engine.ChatChunk{DoneReason: "stop"})
}

// times returns the onChunk times of turn's tokens.
func (m *tokenModel) times(turn int) *turnTimes {
	v, ok := m.turns.Load(turn)
	if !ok {
		return nil
	}
	return v.(*turnTimes)
}

// now is the time since base in ns, comparable with turnTimes.
func (m *tokenModel) now() int64 { return int64(time.Since(m.base)) }

func tokenText(turn, i int) string {
	return strconv.FormatInt(int64(turn), 36) + "." + strconv.FormatInt(int64(i), 36) + " "
}

// parseToken reads turn and index back from a token text.
func parseToken(s string) (turn, i int, ok bool) {
	s, found := strings.CutSuffix(s, " ")
	if !found {
		return 0, 0, false
	}
	a, b, found := strings.Cut(s, ".")
	if !found {
		return 0, 0, false
	}
	t, err1 := strconv.ParseInt(a, 36, 64)
	n, err2 := strconv.ParseInt(b, 36, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return int(t), int(n), true
}

// loadEngine is an engine with the token model and sessions in memory
// (no store), all in one workspace.
func loadEngine(tb testing.TB, tokens, sessions int) (*engine.Engine, *tokenModel, []*engine.Session) {
	tb.Helper()
	model := newTokenModel(tokens)
	e, err := engine.New(engine.Options{
		Models: map[string]engine.Model{"load": model},
		Model:  engine.ModelRef{Provider: "load", Name: "m"},
	})
	if err != nil {
		tb.Fatal(err)
	}
	ws, err := e.OpenWorkspace(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	out := make([]*engine.Session, sessions)
	for i := range out {
		if out[i], err = e.NewSession(ws, ""); err != nil {
			tb.Fatal(err)
		}
	}
	return e, model, out
}

// loadServer is a real Server on a loopback listener.
type loadServer struct {
	srv      *Server
	url      string // ws://127.0.0.1:port
	model    *tokenModel
	sessions []*engine.Session
	served   chan error
	once     sync.Once
}

func startLoadServer(tb testing.TB, tokens, sessions int) *loadServer {
	tb.Helper()
	e, model, ss := loadEngine(tb, tokens, sessions)
	srv, err := New(Options{Engine: e, Token: loadToken, WriteTimeout: loadTimeout})
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ls := &loadServer{srv: srv, url: "ws://" + ln.Addr().String(), model: model, sessions: ss, served: make(chan error, 1)}
	go func() { ls.served <- srv.Serve(ln) }()
	tb.Cleanup(func() {
		if err := ls.close(); err != nil {
			tb.Error(err)
		}
	})
	return ls
}

// close shuts the server down (once) and returns what Shutdown and Serve
// returned.
func (ls *loadServer) close() error {
	var err error
	ls.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if serr := ls.srv.Shutdown(ctx); serr != nil {
			err = fmt.Errorf("shutdown: %w", serr)
			return
		}
		select {
		case serr := <-ls.served:
			if serr != nil {
				err = fmt.Errorf("serve: %w", serr)
			}
		case <-ctx.Done():
			err = errors.New("serve did not return after shutdown")
		}
	})
	return err
}

// loadMsg is the part of a server message the load clients read.
type loadMsg struct {
	Type           string `json:"type"`
	Seq            uint64 `json:"seq"`
	TurnID         string `json:"turn_id"`
	Token          string `json:"token"`
	CumulativeText string `json:"cumulative_text"`
	Message        string `json:"message"`
	Metadata       struct {
		Success bool   `json:"success"`
		Status  string `json:"status"`
	} `json:"metadata"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// dialLoad connects a client to a session's stream and does the
// handshake: client.hello, then server.hello and session.state.
func dialLoad(ctx context.Context, url, session string) (*websocket.Conn, error) {
	c, _, err := websocket.Dial(ctx, url+"/v1/sessions/"+session+"/stream", &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + loadToken}},
	})
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", session, err)
	}
	// cumulative_text grows with the turn: past the library's 32 KiB
	// default for long turns.
	c.SetReadLimit(64 << 20)
	hello := `{"type":"client.hello","client_info":{"name":"load-test","version":"0.0.1","capabilities":[]}}`
	if err := c.Write(ctx, websocket.MessageText, []byte(hello)); err != nil {
		c.CloseNow()
		return nil, fmt.Errorf("%s: send client.hello: %w", session, err)
	}
	for _, want := range []string{typeServerHello, typeSessionState} {
		_, data, err := c.Read(ctx)
		if err != nil {
			c.CloseNow()
			return nil, fmt.Errorf("%s: read %s: %w", session, want, err)
		}
		var m loadMsg
		if err := json.Unmarshal(data, &m); err != nil || m.Type != want {
			c.CloseNow()
			return nil, fmt.Errorf("%s: got %.200s, want %s", session, data, want)
		}
	}
	return c, nil
}

// clientResult is what one client saw of its turn.
type clientResult struct {
	session string
	msgs    int   // server messages after client.user_message
	bytes   int64 // their payload bytes
	tokens  int   // assistant.token messages
	final   bool  // got assistant.message_final
	success bool  // its metadata.success
	lat     []int64
	// problems breaking the expectations (empty when all is well).
	problems []string
}

func (r *clientResult) problem(format string, args ...any) {
	if len(r.problems) < 10 {
		r.problems = append(r.problems, fmt.Sprintf(format, args...))
	}
}

// runLoadClient sends client.user_message and reads until
// assistant.message_final, checking the stream: tokens of one turn, in
// order, seqs strictly increasing, the last cumulative_text and the final
// message matching the tokens. With measure, it records each token's
// latency (ns from the model's onChunk to having read the message).
//
// The client must cost little next to the server: it reads into reused
// buffers and reads assistant.token messages laid out as the server writes
// them with quickToken, not decoding their cumulative_text (the n-th of a
// turn holds all n tokens); the last one is decoded in full when
// assistant.message_final arrives. Every other message is decoded in full.
func runLoadClient(ctx context.Context, c *websocket.Conn, session string, model *tokenModel, tokens int, measure bool) clientResult {
	r := clientResult{session: session}
	if measure {
		r.lat = make([]int64, 0, tokens)
	}
	defer c.Close(websocket.StatusNormalClosure, "")
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"client.user_message","message":"go"}`)); err != nil {
		r.problem("send client.user_message: %v", err)
		return r
	}
	var (
		lastSeq uint64
		turn    int
		turnID  string
		times   *turnTimes
		text    strings.Builder
		// cur is the message being read; lastTok the last token message.
		cur, lastTok = new(bytes.Buffer), new(bytes.Buffer)
	)
	text.Grow(tokens * 12)
	checkSeq := func(typ string, seq uint64, tid []byte) {
		if seq <= lastSeq {
			r.problem("%s seq %d after seq %d", typ, seq, lastSeq)
		}
		lastSeq = seq
		if turnID == "" {
			turnID = string(tid)
		} else if string(tid) != turnID {
			r.problem("%s of turn %s in turn %s", typ, tid, turnID)
		}
	}
	for {
		err := readMessage(ctx, c, cur)
		now := model.now()
		if err != nil {
			r.problem("connection ended before assistant.message_final (after %d tokens): %v (close status %v)", r.tokens, err, websocket.CloseStatus(err))
			return r
		}
		data := cur.Bytes()
		r.msgs++
		r.bytes += int64(len(data))
		var m loadMsg
		seq, tid, tok, quick := quickToken(data)
		if quick {
			m.Type = typeToken
		} else if err := json.Unmarshal(data, &m); err != nil {
			r.problem("bad message %.200s: %v", data, err)
			continue
		} else {
			seq, tid, tok = m.Seq, []byte(m.TurnID), []byte(m.Token)
		}
		if len(tid) > 0 {
			// Messages made from events carry the event's seq.
			checkSeq(m.Type, seq, tid)
		}
		switch m.Type {
		case typeToken:
			t, i, ok := parseToken(string(tok))
			switch {
			case !ok:
				r.problem("token %q is not the model's", tok)
			case r.tokens == 0:
				turn, times = t, model.times(t)
				if times == nil {
					r.problem("token %q of a turn the model did not run", tok)
				}
			}
			if ok && (t != turn || i != r.tokens) {
				r.problem("token %d is %q, want %q", r.tokens, tok, tokenText(turn, r.tokens))
			}
			if measure && ok && times != nil && t == turn && i < len(times.at) {
				r.lat = append(r.lat, now-times.at[i].Load())
			}
			r.tokens++
			text.Write(tok)
			cur, lastTok = lastTok, cur
		case typeMessageFinal:
			r.final, r.success = true, m.Metadata.Success
			if !m.Metadata.Success {
				r.problem("turn ended %s: %s", m.Metadata.Status, m.Message)
			}
			if m.Message != text.String() {
				r.problem("final message is %d bytes, want the %d bytes streamed", len(m.Message), text.Len())
			}
			var last loadMsg
			if err := json.Unmarshal(lastTok.Bytes(), &last); err != nil {
				r.problem("last assistant.token %.200s: %v", lastTok.Bytes(), err)
			} else if last.CumulativeText != text.String() {
				r.problem("last cumulative_text is %d bytes, want the concatenation of the tokens (%d bytes)", len(last.CumulativeText), text.Len())
			}
			if r.tokens != tokens {
				r.problem("got %d assistant.token messages, want %d", r.tokens, tokens)
			}
			return r
		case typeServerError:
			if m.Error != nil {
				r.problem("server.error %s: %s", m.Error.Code, m.Error.Message)
			} else {
				r.problem("server.error %.200s", data)
			}
		}
	}
}

// readMessage reads the next message into buf.
func readMessage(ctx context.Context, c *websocket.Conn, buf *bytes.Buffer) error {
	_, rd, err := c.Reader(ctx)
	if err != nil {
		return err
	}
	buf.Reset()
	_, err = buf.ReadFrom(rd)
	return err
}

// quickToken reads the seq, turn_id and token of an assistant.token
// message laid out as the server writes it (the fields of type token in
// order, no escapes in the token or turn id) without scanning its
// cumulative_text; ok is false for anything else.
func quickToken(data []byte) (seq uint64, turnID, tok []byte, ok bool) {
	rest, ok := bytes.CutPrefix(data, []byte(`{"type":"assistant.token","seq":`))
	if !ok {
		return 0, nil, nil, false
	}
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		seq = seq*10 + uint64(rest[n]-'0')
		n++
	}
	if n == 0 || n > 19 {
		return 0, nil, nil, false
	}
	str := func(prefix string) ([]byte, bool) {
		var ok bool
		if rest, ok = bytes.CutPrefix(rest, []byte(prefix)); !ok {
			return nil, false
		}
		end := bytes.IndexByte(rest, '"')
		if end < 0 || bytes.IndexByte(rest[:end], '\\') >= 0 {
			return nil, false
		}
		v := rest[:end]
		rest = rest[end+1:]
		return v, true
	}
	rest = rest[n:]
	if turnID, ok = str(`,"turn_id":"`); !ok {
		return 0, nil, nil, false
	}
	if tok, ok = str(`,"token":"`); !ok {
		return 0, nil, nil, false
	}
	if !bytes.HasPrefix(rest, []byte(`,"cumulative_text":"`)) || !bytes.HasSuffix(rest, []byte(`"}`)) {
		return 0, nil, nil, false
	}
	return seq, turnID, tok, true
}

// roundResult is one load round: every client's result and the time from
// the first client.user_message to the last assistant.message_final.
type roundResult struct {
	clients []clientResult
	elapsed time.Duration
}

// runServerRound connects one client to each of ls's sessions, then has
// them all send a message at once and read their turns to the end.
// Connecting is not timed; before timing starts, start (if non-nil) is
// called, and stop after.
func runServerRound(tb testing.TB, ls *loadServer, tokens int, measure bool, start, stop func()) roundResult {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), loadTimeout)
	defer cancel()
	conns := make([]*websocket.Conn, len(ls.sessions))
	for i, s := range ls.sessions {
		c, err := dialLoad(ctx, ls.url, s.ID())
		if err != nil {
			for _, c := range conns[:i] {
				c.CloseNow()
			}
			tb.Fatal(err)
		}
		conns[i] = c
	}
	res := roundResult{clients: make([]clientResult, len(conns))}
	var ready, done sync.WaitGroup
	gate := make(chan struct{})
	for i, c := range conns {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-gate
			res.clients[i] = runLoadClient(ctx, c, ls.sessions[i].ID(), ls.model, tokens, measure)
		}()
	}
	ready.Wait()
	if start != nil {
		start()
	}
	t0 := time.Now()
	close(gate)
	done.Wait()
	res.elapsed = time.Since(t0)
	if stop != nil {
		stop()
	}
	return res
}

// runEngineRound runs one turn in each session at once through
// Session.Run, recording each token's latency from the model's onChunk to
// OnEvent.
func runEngineRound(tb testing.TB, model *tokenModel, sessions []*engine.Session, tokens int) (lat []int64, events int, elapsed time.Duration) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), loadTimeout)
	defer cancel()
	lats := make([][]int64, len(sessions))
	counts := make([]int, len(sessions))
	errs := make([]error, len(sessions))
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i, s := range sessions {
		lats[i] = make([]int64, 0, tokens)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			var times *turnTimes
			turn := 0
			on := func(ev engine.Event) {
				now := model.now()
				counts[i]++
				d, ok := ev.Data.(*engine.TokenEvent)
				if !ok {
					return
				}
				t, k, ok := parseToken(d.Text)
				if !ok {
					return
				}
				if times == nil || t != turn {
					turn, times = t, model.times(t)
				}
				if times != nil && k < len(times.at) {
					lats[i] = append(lats[i], now-times.at[k].Load())
				}
			}
			res, err := s.Run(ctx, engine.TurnInput{Message: "go"}, engine.TurnOptions{OnEvent: on})
			if err == nil && res.Status != engine.TurnCompleted {
				err = fmt.Errorf("turn ended %s: %s", res.Status, res.Error)
			}
			errs[i] = err
		}()
	}
	t0 := time.Now()
	close(gate)
	wg.Wait()
	elapsed = time.Since(t0)
	for i, err := range errs {
		if err != nil {
			tb.Fatalf("session %s: %v", sessions[i].ID(), err)
		}
		if len(lats[i]) != tokens {
			tb.Fatalf("session %s: %d token events, want %d", sessions[i].ID(), len(lats[i]), tokens)
		}
		lat = append(lat, lats[i]...)
		events += counts[i]
	}
	return lat, events, elapsed
}

// percentile returns the p-th percentile (0..100) of sorted, in µs.
func percentile(sorted []int64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	k := int(p / 100 * float64(len(sorted)-1))
	return float64(sorted[k]) / 1e3
}

// BenchmarkStream50x2000 streams 2,000 tokens in each of 50 sessions at
// once. The unpaced runs produce every token as fast as the engine can,
// so they measure throughput (msgs/s) and their latencies are mostly the
// wait in the send queue; the paced runs stream a token every
// pacedInterval per session (25,000 tokens/s in all, faster than any
// model serves 50 users), so their latencies are what the server adds
// to each token. engine-only is the peer run: the same turns through
// Session.Run with OnEvent, no server, no socket.
func BenchmarkStream50x2000(b *testing.B) {
	for _, interval := range []time.Duration{0, pacedInterval} {
		suffix := ""
		if interval > 0 {
			suffix = "-paced"
		}
		b.Run("server"+suffix, func(b *testing.B) { benchServer(b, interval) })
		b.Run("engine-only"+suffix, func(b *testing.B) { benchEngine(b, interval) })
	}
}

// pacedInterval is the time between two tokens of a session in the paced
// runs.
const pacedInterval = 2 * time.Millisecond

func benchServer(b *testing.B, interval time.Duration) {
	var (
		lat   []int64
		msgs  int
		bytes int64
		total time.Duration
	)
	b.StopTimer()
	for range b.N {
		ls := startLoadServer(b, loadTokens, loadSessions)
		ls.model.interval = interval
		res := runServerRound(b, ls, loadTokens, true, b.StartTimer, b.StopTimer)
		for _, c := range res.clients {
			if len(c.problems) > 0 {
				b.Fatalf("session %s: %s", c.session, strings.Join(c.problems, "; "))
			}
			lat = append(lat, c.lat...)
			msgs += c.msgs
			bytes += c.bytes
		}
		total += res.elapsed
		if err := ls.close(); err != nil {
			b.Fatal(err)
		}
	}
	slices.Sort(lat)
	b.ReportMetric(percentile(lat, 50), "p50-us")
	b.ReportMetric(percentile(lat, 99), "p99-us")
	b.ReportMetric(float64(msgs)/total.Seconds(), "msgs/s")
	b.ReportMetric(float64(bytes)/1e6/total.Seconds(), "MB/s")
}

func benchEngine(b *testing.B, interval time.Duration) {
	var (
		lat    []int64
		events int
		total  time.Duration
	)
	b.StopTimer()
	for range b.N {
		_, model, sessions := loadEngine(b, loadTokens, loadSessions)
		model.interval = interval
		b.StartTimer()
		l, n, elapsed := runEngineRound(b, model, sessions, loadTokens)
		b.StopTimer()
		lat = append(lat, l...)
		events += n
		total += elapsed
	}
	slices.Sort(lat)
	b.ReportMetric(percentile(lat, 50), "p50-us")
	b.ReportMetric(percentile(lat, 99), "p99-us")
	b.ReportMetric(float64(events)/total.Seconds(), "msgs/s")
}

// TestLoad50Sessions runs 50 sessions at once, each turn streaming 2,000
// tokens to one WebSocket client, and checks what every client got (never
// how fast): all the tokens in order with increasing seqs, the right
// cumulative_text, a successful assistant.message_final, and no client
// disconnected before it.
func TestLoad50Sessions(t *testing.T) {
	if testing.Short() {
		t.Skip("load test: 50 sessions x 2,000 tokens")
	}
	ls := startLoadServer(t, loadTokens, loadSessions)
	res := runServerRound(t, ls, loadTokens, false, nil, nil)
	finals := 0
	for _, c := range res.clients {
		for _, p := range c.problems {
			t.Errorf("session %s: %s", c.session, p)
		}
		if c.final && c.success {
			finals++
		}
	}
	if finals != loadSessions {
		t.Errorf("%d of %d sessions got a successful assistant.message_final", finals, loadSessions)
	}
	t.Logf("%d sessions x %d tokens in %v", loadSessions, loadTokens, res.elapsed.Round(time.Millisecond))
	if err := ls.close(); err != nil {
		t.Error(err)
	}
}

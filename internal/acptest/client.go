// Package acptest is an Agent Client Protocol client for tests: it speaks
// JSON-RPC 2.0, one message per line, to an agent (the ACP front-end in
// process, or `plexus serve --transport acp` as a child process), answers
// the agent's requests with a handler, records every session/update, and
// validates every message the agent sends against the ACP v1 JSON Schema
// (internal/acpschema): a message that does not validate is recorded as a
// violation, which the test reports. Without the schema (its npm package is
// not installed) that check is skipped, unless PLEXUS_REQUIRE_NODE is set.
package acptest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"

	"github.com/plexus-agent/plexus/internal/acpschema"
)

// Message is one JSON-RPC message.
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

// RPCError is a JSON-RPC error object.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("%d %s %s", e.Code, e.Message, e.Data) }

// Handler answers one request of the agent (session/request_permission,
// fs/read_text_file, ...): a result, or an error.
type Handler func(method string, params json.RawMessage) (any, *RPCError)

// Update is one session/update notification.
type Update struct {
	SessionID string          `json:"sessionId"`
	Update    json.RawMessage `json:"update"`
}

// Kind is the update's sessionUpdate.
func (u Update) Kind() string {
	var k struct {
		SessionUpdate string `json:"sessionUpdate"`
	}
	json.Unmarshal(u.Update, &k)
	return k.SessionUpdate
}

// Client is a test ACP client. Safe for concurrent use.
type Client struct {
	w       io.Writer
	handler Handler
	wmu     sync.Mutex

	mu         sync.Mutex
	next       int
	pending    map[string]chan Message
	methods    map[string]string // id → method of our requests
	updates    []Update
	received   []Message
	nullErrors []RPCError
	violations []string
	changed    chan struct{} // closed and replaced on every message
	done       chan struct{}
	readErr    error
}

// NewClient starts reading the agent's output r; requests go to w.
func NewClient(r io.Reader, w io.Writer, handler Handler) *Client {
	c := &Client{w: w, handler: handler, pending: map[string]chan Message{}, methods: map[string]string{},
		changed: make(chan struct{}), done: make(chan struct{})}
	go c.read(r)
	return c
}

// responseDefs are the schema definitions of the results of our requests.
var responseDefs = map[string]string{
	"initialize": "InitializeResponse", "authenticate": "AuthenticateResponse",
	"session/new": "NewSessionResponse", "session/load": "LoadSessionResponse",
	"session/resume": "ResumeSessionResponse", "session/close": "CloseSessionResponse",
	"session/list": "ListSessionsResponse", "session/prompt": "PromptResponse",
	"session/set_mode": "SetSessionModeResponse", "session/set_config_option": "SetSessionConfigOptionResponse",
}

// requestDefs are the schema definitions of the agent's requests.
var requestDefs = map[string]string{
	"session/request_permission": "RequestPermissionRequest",
	"fs/read_text_file":          "ReadTextFileRequest", "fs/write_text_file": "WriteTextFileRequest",
	"terminal/create": "CreateTerminalRequest", "terminal/output": "TerminalOutputRequest",
	"terminal/release": "ReleaseTerminalRequest", "terminal/wait_for_exit": "WaitForTerminalExitRequest",
	"terminal/kill": "KillTerminalRequest",
}

func (c *Client) read(r io.Reader) {
	defer close(c.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		line := append([]byte(nil), sc.Bytes()...)
		var m Message
		if err := json.Unmarshal(line, &m); err != nil {
			c.violate("the agent wrote a line that is not JSON: %.200s", line)
			continue
		}
		c.check(m, line)
		switch {
		case m.Method != "" && len(m.ID) > 0:
			go c.answer(m)
		case m.Method == "session/update":
			var u Update
			json.Unmarshal(m.Params, &u)
			c.mu.Lock()
			c.updates = append(c.updates, u)
			c.mu.Unlock()
		case m.Method != "":
			c.violate("unexpected notification %s", m.Method)
		case string(m.ID) == "null" || len(m.ID) == 0:
			c.mu.Lock()
			if m.Error != nil {
				c.nullErrors = append(c.nullErrors, *m.Error)
			}
			c.mu.Unlock()
		default:
			c.mu.Lock()
			ch := c.pending[string(m.ID)]
			delete(c.pending, string(m.ID))
			c.mu.Unlock()
			switch {
			case ch == nil && m.Error != nil:
				// The answer to a line we wrote raw.
				c.mu.Lock()
				c.nullErrors = append(c.nullErrors, *m.Error)
				c.mu.Unlock()
			case ch == nil:
				c.violate("a response to no request of ours: %.200s", line)
			default:
				ch <- m
			}
		}
		c.mu.Lock()
		c.received = append(c.received, m)
		close(c.changed)
		c.changed = make(chan struct{})
		c.mu.Unlock()
	}
	c.mu.Lock()
	c.readErr = sc.Err()
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// check validates one message of the agent against the schema.
func (c *Client) check(m Message, line []byte) {
	if m.JSONRPC != "2.0" {
		c.violate("jsonrpc is %q: %.200s", m.JSONRPC, line)
	}
	var def string
	var data json.RawMessage
	switch {
	case m.Method == "session/update":
		def, data = "SessionNotification", m.Params
	case m.Method != "":
		def, data = requestDefs[m.Method], m.Params
		if def == "" {
			c.violate("the agent called %s, which ACP v1 does not define", m.Method)
			return
		}
	case m.Error != nil:
		def, data, _ = "Error", mustJSON(m.Error), 0
	default:
		c.mu.Lock()
		method := c.methods[string(m.ID)]
		c.mu.Unlock()
		def, data = responseDefs[method], m.Result
		if def == "" {
			return
		}
	}
	err := acpschema.Validate(def, data)
	if errors.Is(err, acpschema.ErrNoSchema) && os.Getenv("PLEXUS_REQUIRE_NODE") == "" {
		// Without the npm package that ships the schema, messages are
		// checked for framing and methods only (CI installs it).
		return
	}
	if err != nil {
		c.violate("%s does not validate: %v\n%.2000s", def, err, line)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func (c *Client) violate(format string, args ...any) {
	c.mu.Lock()
	c.violations = append(c.violations, fmt.Sprintf(format, args...))
	c.mu.Unlock()
}

// answer runs the handler for one agent request and sends its answer.
func (c *Client) answer(m Message) {
	var result any
	var rerr *RPCError
	if c.handler == nil {
		rerr = &RPCError{Code: -32601, Message: "no handler"}
	} else {
		result, rerr = c.handler(m.Method, m.Params)
	}
	out := map[string]any{"jsonrpc": "2.0", "id": m.ID}
	if rerr != nil {
		out["error"] = rerr
	} else {
		out["result"] = result
	}
	c.send(out)
}

func (c *Client) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.WriteLine(string(b))
}

// WriteLine writes one raw line (for malformed input).
func (c *Client) WriteLine(s string) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := io.WriteString(c.w, s+"\n")
	return err
}

// Start sends a request and returns the channel its response comes on.
func (c *Client) Start(method string, params any) (<-chan Message, error) {
	c.mu.Lock()
	c.next++
	n := c.next
	id := strconv.Itoa(n)
	ch := make(chan Message, 1)
	c.pending[id] = ch
	c.methods[id] = method
	c.mu.Unlock()
	return ch, c.send(map[string]any{"jsonrpc": "2.0", "id": n, "method": method, "params": params})
}

// Call sends a request and waits for its response. A JSON-RPC error is
// returned as *RPCError.
func (c *Client) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	ch, err := c.Start(method, params)
	if err != nil {
		return nil, err
	}
	return c.Wait(ctx, ch)
}

// Wait waits for a response from Start.
func (c *Client) Wait(ctx context.Context, ch <-chan Message) (json.RawMessage, error) {
	select {
	case m := <-ch:
		if m.Error != nil {
			return nil, m.Error
		}
		return m.Result, nil
	case <-c.done:
		return nil, fmt.Errorf("the agent closed its output: %v", c.readErr)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Notify sends a notification.
func (c *Client) Notify(method string, params any) error {
	return c.send(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
}

// Updates returns the session/update notifications received so far, in
// order.
func (c *Client) Updates() []Update {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Update(nil), c.updates...)
}

// NullErrors returns the error responses received so far that answer no
// request of Start or Call: answers to lines written with WriteLine (id
// null, or the id the line had).
func (c *Client) NullErrors() []RPCError {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]RPCError(nil), c.nullErrors...)
}

// Violations returns what the agent sent that ACP does not allow.
func (c *Client) Violations() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.violations...)
}

// WaitFor waits until cond, checked after every message, holds.
func (c *Client) WaitFor(ctx context.Context, cond func() bool) error {
	for {
		c.mu.Lock()
		ch := c.changed
		c.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-c.done:
			if cond() {
				return nil
			}
			return fmt.Errorf("the agent closed its output")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Done is closed when the agent's output ends.
func (c *Client) Done() <-chan struct{} { return c.done }

package acp

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/plexus-agent/plexus/engine"
)

// ACP error codes beyond JSON-RPC's.
const (
	// codeNotFound is ACP's "Resource not found": an unknown session id.
	codeNotFound = -32002
)

// listPageSize is how many sessions one session/list answer holds.
const listPageSize = 100

// conn is one client connection: the sdk.Agent the SDK dispatches to.
type conn struct {
	s    *Server
	out  *lineWriter
	conn *sdk.AgentSideConnection
	// ctx ends when the connection shuts down; notifications and client
	// requests that must outlive a cancelled prompt use it.
	ctx    context.Context
	cancel context.CancelFunc

	mu          sync.Mutex
	initialized bool
	caps        sdk.ClientCapabilities
	sessions    map[string]*session
	// afterResponse runs, once, after the response whose result carries
	// that sessionId was written.
	afterResponse map[string]func()
}

var (
	_ sdk.Agent       = (*conn)(nil)
	_ sdk.AgentLoader = (*conn)(nil)
)

func newConn(s *Server, out *lineWriter) *conn {
	c := &conn{s: s, out: out, sessions: map[string]*session{}, afterResponse: map[string]func(){}}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	out.after = c.written
	return c
}

// written runs the afterResponse hook of a response line.
func (c *conn) written(line []byte) {
	c.mu.Lock()
	if len(c.afterResponse) == 0 {
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	id := responseSessionID(line)
	if id == "" {
		return
	}
	c.mu.Lock()
	f := c.afterResponse[id]
	delete(c.afterResponse, id)
	c.mu.Unlock()
	if f != nil {
		go f()
	}
}

// shutdown cancels the running prompts and waits for their answers
// (bounded), then closes the sessions' MCP servers.
func (c *conn) shutdown() {
	c.mu.Lock()
	sessions := make([]*session, 0, len(c.sessions))
	for _, s := range c.sessions {
		sessions = append(sessions, s)
	}
	c.sessions = map[string]*session{}
	c.mu.Unlock()
	for _, s := range sessions {
		s.close(10 * time.Second)
	}
	c.cancel()
}

// notify sends one session/update. It uses the connection's context, not
// a prompt's: updates a cancelled prompt still owes are sent.
func (c *conn) notify(sessionID string, u sdk.SessionUpdate) {
	if err := c.conn.SessionUpdate(c.ctx, sdk.SessionNotification{SessionId: sdk.SessionId(sessionID), Update: u}); err != nil {
		c.s.log.Debug("session/update not sent", "session", sessionID, "error", err)
	}
}

func (c *conn) clientCaps() sdk.ClientCapabilities {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.caps
}

// errorf is a JSON-RPC error with a message that says what to do.
func errorf(code int, format string, args ...any) *sdk.RequestError {
	return &sdk.RequestError{Code: code, Message: fmt.Sprintf(format, args...)}
}

func invalidParams(format string, args ...any) *sdk.RequestError {
	return errorf(-32602, format, args...)
}

// engineError maps an engine error onto a JSON-RPC error.
func engineError(err error) *sdk.RequestError {
	var re *sdk.RequestError
	switch {
	case errors.As(err, &re):
		return re
	case errors.Is(err, engine.ErrNotFound):
		return errorf(codeNotFound, "%v", err)
	case errors.Is(err, engine.ErrInvalidRequest), errors.Is(err, engine.ErrUnknownProvider),
		errors.Is(err, engine.ErrModelNotFound), errors.Is(err, engine.ErrUnsupported):
		return errorf(-32602, "%v", err)
	case errors.Is(err, context.Canceled):
		return errorf(-32800, "cancelled")
	}
	return errorf(-32603, "%v", err)
}

func (c *conn) requireInit() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.initialized {
		return errorf(-32600, "call initialize first")
	}
	return nil
}

// Initialize negotiates the protocol version (1; a client asking for
// another gets 1, which it may refuse) and records the client's
// capabilities.
func (c *conn) Initialize(_ context.Context, p sdk.InitializeRequest) (sdk.InitializeResponse, error) {
	c.mu.Lock()
	c.initialized = true
	c.caps = p.ClientCapabilities
	c.mu.Unlock()
	if p.ProtocolVersion != ProtocolVersion {
		c.s.log.Info("client asked for another ACP version; answering with ours", "asked", p.ProtocolVersion, "ours", ProtocolVersion)
	}
	name := "?"
	if p.ClientInfo != nil {
		name = p.ClientInfo.Name + " " + p.ClientInfo.Version
	}
	c.s.log.Info("ACP client connected", "client", name,
		"fs.readTextFile", p.ClientCapabilities.Fs.ReadTextFile, "fs.writeTextFile", p.ClientCapabilities.Fs.WriteTextFile,
		"terminal", p.ClientCapabilities.Terminal)
	caps := sdk.AgentCapabilities{
		LoadSession:        c.s.persistent,
		PromptCapabilities: sdk.PromptCapabilities{EmbeddedContext: true},
		McpCapabilities:    sdk.McpCapabilities{Http: c.s.opts.MCP != nil},
		SessionCapabilities: sdk.SessionCapabilities{
			List:  &sdk.SessionListCapabilities{},
			Close: &sdk.SessionCloseCapabilities{},
		},
	}
	if c.s.persistent {
		caps.SessionCapabilities.Resume = &sdk.SessionResumeCapabilities{}
	}
	return sdk.InitializeResponse{
		ProtocolVersion:   ProtocolVersion,
		AgentCapabilities: caps,
		AgentInfo:         &sdk.Implementation{Name: "plexus", Title: sdk.Ptr("Plexus"), Version: c.s.opts.Version},
		AuthMethods:       []sdk.AuthMethod{},
	}, nil
}

// Authenticate is never needed: Plexus runs on the user's machine with the
// user's model configuration, and advertises no authentication method.
func (c *conn) Authenticate(_ context.Context, p sdk.AuthenticateRequest) (sdk.AuthenticateResponse, error) {
	return sdk.AuthenticateResponse{}, invalidParams("unknown authentication method %q: Plexus runs locally and needs no authentication (initialize lists no authMethods)", p.MethodId)
}

// Logout is not offered (no authentication).
func (c *conn) Logout(context.Context, sdk.LogoutRequest) (sdk.LogoutResponse, error) {
	return sdk.LogoutResponse{}, sdk.NewMethodNotFound("logout")
}

// NewSession opens the workspace at cwd and starts a session in it with
// the MCP servers the client names.
func (c *conn) NewSession(ctx context.Context, p sdk.NewSessionRequest) (sdk.NewSessionResponse, error) {
	if err := c.requireInit(); err != nil {
		return sdk.NewSessionResponse{}, err
	}
	root, err := workspaceDir(p.Cwd)
	if err != nil {
		return sdk.NewSessionResponse{}, invalidParams("%v", err)
	}
	if len(p.AdditionalDirectories) > 0 {
		return sdk.NewSessionResponse{}, invalidParams("additionalDirectories is not supported (the agent does not advertise it): a session works in one directory, cwd")
	}
	tools, err := c.startMCP(ctx, p.McpServers)
	if err != nil {
		return sdk.NewSessionResponse{}, err
	}
	ws, err := c.s.opts.Engine.OpenWorkspace(root)
	if err != nil {
		closeTools(tools)
		return sdk.NewSessionResponse{}, invalidParams("%v", err)
	}
	es, err := c.s.opts.Engine.NewSession(ws, "")
	if err != nil {
		closeTools(tools)
		return sdk.NewSessionResponse{}, engineError(err)
	}
	s := c.addSession(es, tools)
	c.s.log.Info("session started", "session", es.ID(), "workspace", ws.Root, "mcp_servers", len(p.McpServers))
	c.mu.Lock()
	c.afterResponse[es.ID()] = func() { c.notify(es.ID(), availableCommands()) }
	c.mu.Unlock()
	return sdk.NewSessionResponse{SessionId: sdk.SessionId(es.ID()), Modes: s.modeState(), ConfigOptions: s.configOptions(ctx)}, nil
}

// LoadSession loads a stored session and replays its conversation as
// session/update notifications before answering.
func (c *conn) LoadSession(ctx context.Context, p sdk.LoadSessionRequest) (sdk.LoadSessionResponse, error) {
	s, err := c.reopen(ctx, string(p.SessionId), p.Cwd, p.AdditionalDirectories, p.McpServers)
	if err != nil {
		return sdk.LoadSessionResponse{}, err
	}
	if err := s.replay(ctx); err != nil {
		return sdk.LoadSessionResponse{}, engineError(err)
	}
	c.notify(s.id, availableCommands())
	return sdk.LoadSessionResponse{Modes: s.modeState(), ConfigOptions: s.configOptions(ctx)}, nil
}

// ResumeSession is session/load without the replay.
func (c *conn) ResumeSession(ctx context.Context, p sdk.ResumeSessionRequest) (sdk.ResumeSessionResponse, error) {
	s, err := c.reopen(ctx, string(p.SessionId), p.Cwd, p.AdditionalDirectories, p.McpServers)
	if err != nil {
		return sdk.ResumeSessionResponse{}, err
	}
	c.mu.Lock()
	c.afterResponse[s.id] = func() { c.notify(s.id, availableCommands()) }
	c.mu.Unlock()
	return sdk.ResumeSessionResponse{Modes: s.modeState(), ConfigOptions: s.configOptions(ctx)}, nil
}

// reopen makes a stored (or in-memory) session active on this connection.
func (c *conn) reopen(ctx context.Context, id, cwd string, dirs []string, servers []sdk.McpServer) (*session, error) {
	if err := c.requireInit(); err != nil {
		return nil, err
	}
	if !c.s.persistent {
		return nil, errorf(-32601, "this agent keeps no sessions (started without a session store), so it cannot load or resume them")
	}
	root, err := workspaceDir(cwd)
	if err != nil {
		return nil, invalidParams("%v", err)
	}
	if len(dirs) > 0 {
		return nil, invalidParams("additionalDirectories is not supported (the agent does not advertise it)")
	}
	es, err := c.s.opts.Engine.Session(id)
	if err != nil {
		if errors.Is(err, engine.ErrNotFound) {
			return nil, errorf(codeNotFound, "unknown session %q (session/list lists the sessions)", id)
		}
		return nil, engineError(err)
	}
	if es.Workspace().Root != root {
		return nil, invalidParams("session %s works in %s, not in cwd %s", id, es.Workspace().Root, cwd)
	}
	tools, err := c.startMCP(ctx, servers)
	if err != nil {
		return nil, err
	}
	if old := c.session(id); old != nil {
		old.close(10 * time.Second)
	}
	return c.addSession(es, tools), nil
}

func (c *conn) addSession(es *engine.Session, tools Toolset) *session {
	s := newSession(c, es, tools)
	c.mu.Lock()
	c.sessions[es.ID()] = s
	c.mu.Unlock()
	return s
}

// session returns the session id active on this connection, or nil.
func (c *conn) session(id string) *session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[id]
}

// activeSession is session, or the error for an id that is not active.
func (c *conn) activeSession(id sdk.SessionId) (*session, error) {
	if err := c.requireInit(); err != nil {
		return nil, err
	}
	if s := c.session(string(id)); s != nil {
		return s, nil
	}
	if _, err := c.s.opts.Engine.Session(string(id)); err == nil && c.s.persistent {
		return nil, errorf(codeNotFound, "session %q is not open on this connection; call session/load first", id)
	}
	return nil, errorf(codeNotFound, "unknown session %q", id)
}

// ListSessions lists the stored sessions (of cwd's workspace when given),
// oldest first, listPageSize at a time.
func (c *conn) ListSessions(ctx context.Context, p sdk.ListSessionsRequest) (sdk.ListSessionsResponse, error) {
	if err := c.requireInit(); err != nil {
		return sdk.ListSessionsResponse{}, err
	}
	var ws *engine.Workspace
	if p.Cwd != nil && *p.Cwd != "" {
		root, err := workspaceDir(*p.Cwd)
		if err != nil {
			return sdk.ListSessionsResponse{Sessions: []sdk.SessionInfo{}}, nil // no such directory: no sessions in it
		}
		ws = &engine.Workspace{ID: engine.WorkspaceID(root), Root: root}
	}
	offset := 0
	if p.Cursor != nil && *p.Cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(*p.Cursor)
		n, nerr := strconv.Atoi(string(b))
		if err != nil || nerr != nil || n < 0 {
			return sdk.ListSessionsResponse{}, invalidParams("cursor %q is not one this agent gave (pass nextCursor unchanged)", *p.Cursor)
		}
		offset = n
	}
	recs, err := c.s.opts.Engine.Sessions(ctx, ws)
	if err != nil {
		return sdk.ListSessionsResponse{}, engineError(err)
	}
	// Newest first: the ones a user most likely goes back to.
	slices.Reverse(recs)
	out := sdk.ListSessionsResponse{Sessions: []sdk.SessionInfo{}}
	for i := offset; i < len(recs) && i < offset+listPageSize; i++ {
		r := recs[i]
		info := sdk.SessionInfo{SessionId: sdk.SessionId(r.ID), Cwd: r.WorkspaceRoot,
			Meta: map[string]any{"created": r.Created.UTC().Format(time.RFC3339)}}
		if s := c.session(r.ID); s != nil {
			info.Title, info.UpdatedAt = s.titleAndUpdated()
		}
		out.Sessions = append(out.Sessions, info)
	}
	if offset+listPageSize < len(recs) {
		out.NextCursor = sdk.Ptr(base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(offset + listPageSize))))
	}
	return out, nil
}

// CloseSession cancels the session's prompt, stops its MCP servers and
// forgets it on this connection (it stays stored).
func (c *conn) CloseSession(ctx context.Context, p sdk.CloseSessionRequest) (sdk.CloseSessionResponse, error) {
	s, err := c.activeSession(p.SessionId)
	if err != nil {
		return sdk.CloseSessionResponse{}, err
	}
	c.mu.Lock()
	delete(c.sessions, s.id)
	c.mu.Unlock()
	s.close(10 * time.Second)
	if err := c.s.opts.Engine.CloseSession(ctx, s.id); err != nil && !errors.Is(err, engine.ErrNotFound) {
		c.s.log.Warn("closing the engine session failed", "session", s.id, "error", err)
	}
	return sdk.CloseSessionResponse{}, nil
}

// Prompt runs one turn.
func (c *conn) Prompt(ctx context.Context, p sdk.PromptRequest) (sdk.PromptResponse, error) {
	s, err := c.activeSession(p.SessionId)
	if err != nil {
		return sdk.PromptResponse{}, err
	}
	return s.prompt(ctx, p.Prompt)
}

// Cancel cancels the session's running prompt, which then answers with
// stopReason cancelled.
func (c *conn) Cancel(_ context.Context, p sdk.CancelNotification) error {
	s := c.session(string(p.SessionId))
	if s == nil {
		c.s.log.Warn("session/cancel for a session that is not open", "session", p.SessionId)
		return nil
	}
	s.cancelPrompt()
	return nil
}

// SetSessionMode switches the session's mode.
func (c *conn) SetSessionMode(_ context.Context, p sdk.SetSessionModeRequest) (sdk.SetSessionModeResponse, error) {
	s, err := c.activeSession(p.SessionId)
	if err != nil {
		return sdk.SetSessionModeResponse{}, err
	}
	if err := s.setMode(string(p.ModeId)); err != nil {
		return sdk.SetSessionModeResponse{}, err
	}
	return sdk.SetSessionModeResponse{}, nil
}

// SetSessionConfigOption sets the mode or the model.
func (c *conn) SetSessionConfigOption(ctx context.Context, p sdk.SetSessionConfigOptionRequest) (sdk.SetSessionConfigOptionResponse, error) {
	if p.Boolean != nil {
		return sdk.SetSessionConfigOptionResponse{}, invalidParams("config option %q is not a boolean option", p.Boolean.ConfigId)
	}
	v := p.ValueId
	if v == nil {
		return sdk.SetSessionConfigOptionResponse{}, invalidParams("value is required")
	}
	s, err := c.activeSession(v.SessionId)
	if err != nil {
		return sdk.SetSessionConfigOptionResponse{}, err
	}
	switch v.ConfigId {
	case configMode:
		if err := s.setMode(string(v.Value)); err != nil {
			return sdk.SetSessionConfigOptionResponse{}, err
		}
		s.c.notify(s.id, sdk.SessionUpdate{CurrentModeUpdate: &sdk.SessionCurrentModeUpdate{CurrentModeId: sdk.SessionModeId(v.Value)}})
	case configModel:
		if err := s.setModel(ctx, string(v.Value)); err != nil {
			return sdk.SetSessionConfigOptionResponse{}, err
		}
	default:
		return sdk.SetSessionConfigOptionResponse{}, invalidParams("unknown config option %q (the options are %q and %q)", v.ConfigId, configMode, configModel)
	}
	return sdk.SetSessionConfigOptionResponse{ConfigOptions: s.configOptions(ctx)}, nil
}

// startMCP starts a session's MCP servers.
func (c *conn) startMCP(ctx context.Context, servers []sdk.McpServer) (Toolset, error) {
	if len(servers) == 0 {
		return nil, nil
	}
	list := make([]MCPServer, 0, len(servers))
	for i, sv := range servers {
		switch {
		case sv.Stdio != nil:
			env := map[string]string{}
			for _, e := range sv.Stdio.Env {
				env[e.Name] = e.Value
			}
			list = append(list, MCPServer{Name: sv.Stdio.Name, Command: sv.Stdio.Command, Args: sv.Stdio.Args, Env: env})
		case sv.Http != nil:
			h := map[string]string{}
			for _, e := range sv.Http.Headers {
				h[e.Name] = e.Value
			}
			list = append(list, MCPServer{Name: sv.Http.Name, URL: sv.Http.Url, Headers: h})
		case sv.Sse != nil:
			return nil, invalidParams("mcpServers[%d] (%s): the SSE transport is not supported (mcpCapabilities.sse is false; MCP deprecated it): use the HTTP transport", i, sv.Sse.Name)
		default:
			return nil, invalidParams("mcpServers[%d]: only stdio and http servers are supported", i)
		}
	}
	if c.s.opts.MCP == nil {
		return nil, invalidParams("this agent was started without MCP support; start the session without mcpServers")
	}
	tools, err := c.s.opts.MCP(ctx, list)
	if err != nil {
		return nil, invalidParams("mcpServers: %v", err)
	}
	return tools, nil
}

func closeTools(t Toolset) {
	if t != nil {
		t.Close()
	}
}

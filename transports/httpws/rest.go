package httpws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/plexus-agent/plexus/engine"
)

// routes is the contract's endpoint table (Go 1.22 patterns); unknown
// paths get 404 and other methods on a known path 405, in error bodies.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	handle := func(method, path string, h http.HandlerFunc) { mux.HandleFunc(method+" "+path, h) }
	handle("GET", "/v1/health", s.handleHealth)
	handle("GET", "/v1/workspaces", s.handleWorkspaces)
	handle("POST", "/v1/workspaces/register", s.handleRegister)
	handle("GET", "/v1/workspaces/{workspace_id}", s.withWorkspace(s.handleWorkspace))
	handle("GET", "/v1/workspaces/{workspace_id}/policy", s.withWorkspace(s.handleGetPolicy))
	handle("PUT", "/v1/workspaces/{workspace_id}/policy", s.withWorkspace(s.handlePutPolicy))
	handle("POST", "/v1/workspaces/{workspace_id}/index/rebuild", s.withWorkspace(s.handleBuild(true)))
	handle("POST", "/v1/workspaces/{workspace_id}/index/refresh", s.withWorkspace(s.handleBuild(false)))
	handle("POST", "/v1/workspaces/{workspace_id}/index/incremental", s.withWorkspace(s.handleIncremental))
	handle("GET", "/v1/workspaces/{workspace_id}/index/status", s.withWorkspace(s.handleIndexStatus))
	handle("POST", "/v1/workspaces/{workspace_id}/search", s.withWorkspace(s.handleSearch))
	handle("POST", "/v1/sessions", s.handleCreateSession)
	handle("GET", "/v1/sessions", s.handleListSessions)
	handle("GET", "/v1/sessions/{session_id}", s.handleGetSession)
	handle("DELETE", "/v1/sessions/{session_id}", s.handleDeleteSession)
	handle("GET", "/v1/sessions/{session_id}/stream", s.handleStream)
	handle("GET", "/v1/models", s.handleModels)
	handle("GET", "/v1/models/current", s.handleGetCurrent)
	handle("PUT", "/v1/models/current", s.handlePutCurrent)
	// The mux answers unknown paths and methods in plain text; these
	// answers use the error body format, and a 405 lists Allow.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		var allow []string
		for _, m := range []string{"GET", "POST", "PUT", "DELETE"} {
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, pattern := mux.Handler(probe); pattern != "" {
				allow = append(allow, m)
			}
		}
		if len(allow) == 0 {
			writeError(w, http.StatusNotFound, codeNotFound, fmt.Sprintf("no endpoint %s %s; see the OpenAPI description (transports/httpws/schemas/openapi.json)", r.Method, r.URL.Path), nil)
			return
		}
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, http.StatusMethodNotAllowed, codeMethodNotAllowed, fmt.Sprintf("%s does not take %s; use %s", r.URL.Path, r.Method, strings.Join(allow, ", ")), nil)
	})
}

// readBody reads a request body of at most MaxMessageBytes and validates
// it against the named request schema, decoding it into v. It answers
// 413 or 400 itself and returns false then.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, schema string, v any) bool {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxMessageBytes))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		writeError(w, http.StatusRequestEntityTooLarge, codeTooLarge, fmt.Sprintf("the body is over %d bytes", s.opts.MaxMessageBytes), nil)
		return false
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, codeInvalidRequest, "reading the body failed: "+err.Error(), nil)
		return false
	}
	if len(data) == 0 {
		writeError(w, http.StatusBadRequest, codeInvalidRequest, "the body is empty; send a JSON object", map[string]any{"field": "body"})
		return false
	}
	if err := decodeChecked(compiled().rest[schema], data, v); err != nil {
		var bad *invalid
		field := "body"
		if errors.As(err, &bad) && bad.Field != "" {
			field = bad.Field
		}
		writeError(w, http.StatusBadRequest, codeInvalidRequest, "invalid "+schema+": "+err.Error(), map[string]any{"field": field})
		return false
	}
	return true
}

type healthResponse struct {
	Status        string        `json:"status"`
	Version       string        `json:"version"`
	UptimeSeconds float64       `json:"uptime_seconds"`
	Model         *currentModel `json:"model"`
	ActiveTurns   int           `json:"active_turns"`
	Connections   int           `json:"connections"`
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	out := healthResponse{Status: "ok", Version: s.opts.Version, UptimeSeconds: time.Since(s.started).Seconds()}
	if ref := s.eng.CurrentModel(); !ref.IsZero() {
		out.Model = &currentModel{Provider: ref.Provider, ModelName: ref.Name, Capabilities: []string{}}
	}
	for _, h := range s.allHubs() {
		h.mu.Lock()
		if h.turn != nil {
			out.ActiveTurns++
		}
		out.Connections += len(h.subs)
		h.mu.Unlock()
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleWorkspaces(w http.ResponseWriter, r *http.Request) {
	all, err := s.eng.Workspaces(r.Context())
	if err != nil {
		writeEngineError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"workspaces": nonNil(all)})
}

func (s *Server) handleRegister(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Path string `json:"path"`
		Name string `json:"name"`
	}
	if !s.readBody(w, r, schemaRegisterWorkspace, &req) {
		return
	}
	if !filepath.IsAbs(req.Path) {
		// Relative to what? The server's working directory is not the
		// client's.
		writeError(w, http.StatusBadRequest, codeInvalidRequest,
			fmt.Sprintf("path %q is relative; give the workspace directory's absolute path", req.Path), map[string]any{"field": "/path"})
		return
	}
	before, _ := s.eng.Workspaces(r.Context())
	rec, err := s.eng.RegisterWorkspace(r.Context(), req.Path, req.Name)
	if err != nil {
		status, code := engineStatus(err)
		writeError(w, status, code, err.Error(), map[string]any{"field": "/path"})
		return
	}
	status := http.StatusCreated
	for _, b := range before {
		if b.ID == rec.ID {
			status = http.StatusOK
		}
	}
	writeJSON(w, status, rec)
}

// withWorkspace resolves {workspace_id} (404 when unknown) for h.
func (s *Server) withWorkspace(h func(http.ResponseWriter, *http.Request, *engine.Workspace, engine.WorkspaceRecord)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ws, rec, err := s.eng.WorkspaceByID(r.Context(), r.PathValue("workspace_id"))
		if err != nil {
			writeEngineError(w, err)
			return
		}
		h(w, r, ws, rec)
	}
}

func (s *Server) handleWorkspace(w http.ResponseWriter, _ *http.Request, _ *engine.Workspace, rec engine.WorkspaceRecord) {
	writeJSON(w, http.StatusOK, rec)
}

func (s *Server) handleGetPolicy(w http.ResponseWriter, r *http.Request, ws *engine.Workspace, _ engine.WorkspaceRecord) {
	doc, err := s.eng.Policy(r.Context(), ws)
	if err != nil {
		writeEngineError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(doc)
}

func (s *Server) handlePutPolicy(w http.ResponseWriter, r *http.Request, ws *engine.Workspace, _ engine.WorkspaceRecord) {
	var doc json.RawMessage
	if !s.readBody(w, r, schemaPolicy, &doc) {
		return
	}
	if err := s.eng.SetPolicy(r.Context(), ws, doc); err != nil {
		status, code := engineStatus(err)
		writeError(w, status, code, err.Error(), nil)
		return
	}
	s.handleGetPolicy(w, r, ws, engine.WorkspaceRecord{})
}

type sessionSummary struct {
	SessionID   string    `json:"session_id"`
	WorkspaceID string    `json:"workspace_id"`
	CreatedAt   time.Time `json:"created_at"`
}

type sessionResponse struct {
	sessionSummary
	Busy     bool                `json:"busy"`
	Turns    int                 `json:"turns"`
	LastSeq  uint64              `json:"last_seq"`
	State    engine.SessionState `json:"state"`
	Messages []engine.Message    `json:"messages"`
}

func sessionBody(sess *engine.Session) sessionResponse {
	st := sess.Status()
	return sessionResponse{
		sessionSummary: sessionSummary{SessionID: st.ID, WorkspaceID: st.WorkspaceID, CreatedAt: st.Created.UTC()},
		Busy:           st.Busy, Turns: st.Turns, LastSeq: st.LastSeq, State: sess.State(), Messages: nonNil(sess.History()),
	}
}

func (s *Server) handleCreateSession(w http.ResponseWriter, r *http.Request) {
	var req struct {
		WorkspaceID string `json:"workspace_id"`
	}
	if !s.readBody(w, r, schemaCreateSession, &req) {
		return
	}
	ws, _, err := s.eng.WorkspaceByID(r.Context(), req.WorkspaceID)
	if err != nil {
		status, code := engineStatus(err)
		writeError(w, status, code, err.Error()+"; register it first with POST /v1/workspaces/register", map[string]any{"field": "/workspace_id"})
		return
	}
	sess, err := s.eng.NewSession(ws, "")
	if err != nil {
		writeEngineError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, sessionBody(sess))
}

func (s *Server) handleListSessions(w http.ResponseWriter, r *http.Request) {
	var ws *engine.Workspace
	if id := r.URL.Query().Get("workspace_id"); id != "" {
		var err error
		if ws, _, err = s.eng.WorkspaceByID(r.Context(), id); err != nil {
			// A filter naming no workspace is a bad request, not a
			// missing resource: /v1/sessions exists.
			status, code := engineStatus(err)
			if errors.Is(err, engine.ErrNotFound) {
				status, code = http.StatusBadRequest, codeInvalidRequest
			}
			writeError(w, status, code, err.Error()+"; GET /v1/workspaces lists the registered workspaces", map[string]any{"field": "workspace_id"})
			return
		}
	}
	recs, err := s.eng.Sessions(r.Context(), ws)
	if err != nil {
		writeEngineError(w, err)
		return
	}
	out := make([]sessionSummary, len(recs))
	for i, rec := range recs {
		out[i] = sessionSummary{SessionID: rec.ID, WorkspaceID: rec.WorkspaceID, CreatedAt: rec.Created.UTC()}
	}
	writeJSON(w, http.StatusOK, map[string]any{"sessions": out})
}

func (s *Server) handleGetSession(w http.ResponseWriter, r *http.Request) {
	sess, err := s.eng.Session(r.PathValue("session_id"))
	if err != nil {
		writeEngineError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sessionBody(sess))
}

// handleDeleteSession cancels the session's running turn, closes its
// streams (1000, "session deleted") and deletes it with its history and
// events.
func (s *Server) handleDeleteSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("session_id")
	h, err := s.hub(id)
	if err != nil {
		writeEngineError(w, err)
		return
	}
	h.mu.Lock()
	h.deleted = true
	if h.turn != nil {
		h.turn(errors.New("the session was deleted"))
	}
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	if err := s.eng.DeleteSession(ctx, id); err != nil {
		h.mu.Lock()
		h.deleted = false // the session is still there
		h.mu.Unlock()
		writeEngineError(w, err)
		return
	}
	h.closeAll(websocket.StatusNormalClosure, "session deleted")
	s.dropHub(id)
	w.WriteHeader(http.StatusNoContent)
}

type currentModel struct {
	Provider     string   `json:"provider"`
	ModelName    string   `json:"model_name"`
	Capabilities []string `json:"capabilities"`
}

type modelEntry struct {
	Provider string `json:"provider"`
	Model    string `json:"model_name"`
	engine.ModelInfo
}

// MarshalJSON keeps model_name (not ModelInfo's name) as the name.
func (m modelEntry) MarshalJSON() ([]byte, error) {
	type info engine.ModelInfo
	b, err := json.Marshal(info(m.ModelInfo))
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	json.Unmarshal(b, &obj)
	delete(obj, "name")
	obj["provider"], obj["model_name"] = m.Provider, m.Model
	if obj["capabilities"] == nil {
		obj["capabilities"] = []string{}
	}
	return json.Marshal(obj)
}

type providerError struct {
	Provider string `json:"provider"`
	Message  string `json:"message"`
}

// handleModels lists the models of every provider (engine.AllModels). A
// provider that does not answer is reported in errors, one that lacks
// configuration in not_configured (it was not contacted), neither as a
// failed request.
func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	models := []modelEntry{}
	errs, skipped := []providerError{}, []providerError{}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	lists := s.eng.AllModels(ctx)
	cancel()
	for _, pm := range lists {
		switch {
		case pm.NotConfigured():
			skipped = append(skipped, providerError{Provider: pm.Provider, Message: providerMessage(pm.Err)})
		case pm.Err != nil:
			errs = append(errs, providerError{Provider: pm.Provider, Message: pm.Err.Error()})
		}
		for _, in := range pm.Models {
			models = append(models, modelEntry{Provider: pm.Provider, Model: in.Name, ModelInfo: in})
		}
	}
	sort.SliceStable(models, func(i, j int) bool {
		if models[i].Provider != models[j].Provider {
			return models[i].Provider < models[j].Provider
		}
		return models[i].Model < models[j].Model
	})
	var cur *currentModel
	if c, err := s.current(r.Context(), ""); err == nil {
		cur = &c
	}
	writeJSON(w, http.StatusOK, map[string]any{"models": models, "current": cur, "errors": errs, "not_configured": skipped})
}

// providerMessage is a provider's error without the provider's name in
// front (the entry names it).
func providerMessage(err error) string {
	var me *engine.ModelError
	if errors.As(err, &me) {
		return me.Message
	}
	return err.Error()
}

// current is the model a session uses (its own choice, else the current
// model; the current model when sessionID is "") with the capabilities
// its provider lists (engine.DescribeModel, as GET /v1/models shows them;
// none when the provider does not answer). Errors: ErrNotFound when no
// model is chosen or the session is unknown.
func (s *Server) current(ctx context.Context, sessionID string) (currentModel, error) {
	ref := s.eng.CurrentModel()
	if sessionID != "" {
		sess, err := s.eng.Session(sessionID)
		if err != nil {
			return currentModel{}, err
		}
		ref = sess.Model()
	}
	if ref.IsZero() {
		return currentModel{}, fmt.Errorf("%w: no current model; choose one with PUT /v1/models/current", engine.ErrNotFound)
	}
	return s.describe(ctx, ref), nil
}

// describe is ref with the capabilities its provider lists (none when it
// does not answer within 5 s or does not list the model).
func (s *Server) describe(ctx context.Context, ref engine.ModelRef) currentModel {
	out := currentModel{Provider: ref.Provider, ModelName: ref.Name, Capabilities: []string{}}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if info, err := s.eng.DescribeModel(ctx, ref); err == nil {
		out.Capabilities = nonNil(info.Capabilities)
	}
	return out
}

func (s *Server) handleGetCurrent(w http.ResponseWriter, r *http.Request) {
	cur, err := s.current(r.Context(), r.URL.Query().Get("session_id"))
	if err != nil {
		writeEngineError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, cur)
}

// handlePutCurrent switches the current model, or with session_id one
// session's model, after the provider confirms it lists the model and the
// model has what turns need: an unknown provider or model, or a missing
// capability, is a 400 naming the field; an unknown session a 404; an
// unreachable provider a 503.
func (s *Server) handlePutCurrent(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Provider  string `json:"provider"`
		ModelName string `json:"model_name"`
		SessionID string `json:"session_id"`
	}
	if !s.readBody(w, r, schemaSetCurrentModel, &req) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	ref := engine.ModelRef{Provider: req.Provider, Name: req.ModelName}
	var err error
	if req.SessionID != "" {
		var sess *engine.Session
		if sess, err = s.eng.Session(req.SessionID); err != nil {
			writeEngineError(w, err)
			return
		}
		err = sess.SetModel(ctx, ref)
	} else {
		err = s.eng.SetCurrentModel(ctx, ref)
	}
	switch {
	case errors.Is(err, engine.ErrUnknownProvider):
		writeError(w, http.StatusBadRequest, codeModelError, err.Error(), map[string]any{"field": "/provider", "providers": s.eng.Providers()})
		return
	case errors.Is(err, engine.ErrNotConfigured):
		writeError(w, http.StatusBadRequest, codeModelError, err.Error(), map[string]any{"field": "/provider"})
		return
	case errors.Is(err, engine.ErrModelNotFound):
		writeError(w, http.StatusBadRequest, codeModelError, err.Error()+"; GET /v1/models lists them", map[string]any{"field": "/model_name"})
		return
	case errors.Is(err, engine.ErrUnsupported):
		writeError(w, http.StatusBadRequest, codeModelError, err.Error(), map[string]any{"field": "/model_name"})
		return
	case errors.Is(err, engine.ErrNotFound):
		writeEngineError(w, err) // the session was deleted meanwhile
		return
	case err != nil && req.SessionID != "" && !isModelError(err):
		writeError(w, http.StatusInternalServerError, codeInternal, err.Error(), nil) // the session store failed
		return
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, codeModelUnavailable, "the provider could not confirm the model: "+err.Error(), map[string]any{"provider": req.Provider})
		return
	}
	cur, err := s.current(r.Context(), req.SessionID)
	if err != nil {
		writeEngineError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, cur)
}

// isModelError reports whether err came from asking the model provider
// (as opposed to the session store): its errors, or its time running out.
func isModelError(err error) bool {
	var me *engine.ModelError
	return errors.As(err, &me) || errors.Is(err, engine.ErrModelUnavailable) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

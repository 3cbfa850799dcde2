package httpws

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

// indexJob is a background index build of one workspace.
type indexJob struct {
	mu       sync.Mutex
	Kind     string     `json:"kind"`
	State    string     `json:"state"`
	Started  time.Time  `json:"started_at"`
	Finished *time.Time `json:"finished_at,omitempty"`
	Stats    any        `json:"stats,omitempty"`
	Error    string     `json:"error,omitempty"`
}

// Index job states.
const (
	jobRunning = "running"
	jobDone    = "done"
	jobFailed  = "failed"
)

// snapshot copies the job for JSON.
func (j *indexJob) snapshot() *indexJob {
	j.mu.Lock()
	defer j.mu.Unlock()
	return &indexJob{Kind: j.Kind, State: j.State, Started: j.Started, Finished: j.Finished, Stats: j.Stats, Error: j.Error}
}

func (s *Server) noIndex(w http.ResponseWriter) bool {
	if s.opts.Indexer == nil {
		writeError(w, http.StatusNotImplemented, codeIndexFailed, "this server has no index", nil)
		return true
	}
	return false
}

// handleBuild starts a rebuild (every file) or refresh (changed files) in
// the background and answers 202 with the job; GET .../index/status
// follows it. A second build while one runs is a 409.
func (s *Server) handleBuild(rebuild bool) func(http.ResponseWriter, *http.Request, *engine.Workspace, engine.WorkspaceRecord) {
	kind := "refresh"
	if rebuild {
		kind = "rebuild"
	}
	return func(w http.ResponseWriter, r *http.Request, ws *engine.Workspace, _ engine.WorkspaceRecord) {
		if s.noIndex(w) {
			return
		}
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			writeError(w, http.StatusServiceUnavailable, codeInternal, "the server is shutting down", nil)
			return
		}
		if j := s.indexing[ws.ID]; j != nil && j.snapshot().State == jobRunning {
			s.mu.Unlock()
			writeError(w, http.StatusConflict, codeConflict, fmt.Sprintf("an index %s of this workspace is running; follow it with GET .../index/status", j.snapshot().Kind), nil)
			return
		}
		job := &indexJob{Kind: kind, State: jobRunning, Started: time.Now().UTC()}
		s.indexing[ws.ID] = job
		s.jobs.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.jobs.Done()
			stats, err := s.opts.Indexer.Build(s.base, ws.Root, rebuild)
			now := time.Now().UTC()
			job.mu.Lock()
			job.Finished, job.Stats, job.State = &now, stats, jobDone
			if err != nil {
				job.State, job.Error = jobFailed, err.Error()
				s.log.Warn("index build failed", "workspace", ws.ID, "error", err)
			}
			job.mu.Unlock()
		}()
		writeJSON(w, http.StatusAccepted, map[string]any{"workspace_id": ws.ID, "job": job.snapshot()})
	}
}

func (s *Server) handleIncremental(w http.ResponseWriter, r *http.Request, ws *engine.Workspace, _ engine.WorkspaceRecord) {
	if s.noIndex(w) {
		return
	}
	var req struct {
		Changes []FileChange `json:"changes"`
	}
	if !s.readBody(w, r, schemaIncremental, &req) {
		return
	}
	if i, err := checkFileChanges(ws.Root, req.Changes); err != nil {
		status, code, _ := indexErrorStatus(err)
		writeError(w, status, code, err.Error()+"; nothing was indexed", map[string]any{"field": fmt.Sprintf("/changes/%d/file_path", i)})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Minute)
	defer cancel()
	stats, err := s.opts.Indexer.ApplyChanges(ctx, ws.Root, req.Changes)
	if err != nil {
		status, code, _ := indexErrorStatus(err)
		writeError(w, status, code, "updating the index failed: "+err.Error(), nil)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"workspace_id": ws.ID, "changes": len(req.Changes), "stats": stats})
}

func (s *Server) handleIndexStatus(w http.ResponseWriter, r *http.Request, ws *engine.Workspace, _ engine.WorkspaceRecord) {
	if s.noIndex(w) {
		return
	}
	st, err := s.opts.Indexer.Status(r.Context(), ws.Root)
	if err != nil {
		writeError(w, http.StatusInternalServerError, codeIndexFailed, "reading the index status failed: "+err.Error(), nil)
		return
	}
	s.mu.Lock()
	job := s.indexing[ws.ID]
	s.mu.Unlock()
	var snap *indexJob
	if job != nil {
		snap = job.snapshot()
	}
	writeJSON(w, http.StatusOK, map[string]any{"workspace_id": ws.ID, "status": st, "job": snap})
}

package faultsuite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// LoadResult is the summary examples/clients/ws-node/load.mjs prints.
type LoadResult struct {
	Sessions []struct {
		ID      string `json:"id"`
		LastSeq uint64 `json:"last_seq"`
		Turns   int    `json:"turns"`
	} `json:"sessions"`
	Turns        int     `json:"turns"`
	FailedTurns  int     `json:"failed_turns"`
	ServerErrors int     `json:"server_errors"`
	SeqGaps      int     `json:"seq_gaps"`
	ElapsedMS    int64   `json:"elapsed_ms"`
	TurnsPerS    float64 `json:"turns_per_s"`
	FirstTokenMS struct {
		P50 float64 `json:"p50"`
		P99 float64 `json:"p99"`
		N   int     `json:"n"`
	} `json:"first_token_ms"`
	Problems []string `json:"problems"`
}

// tourScript is the replay script of the load: every turn reads
// README.md and answers in twenty streamed words.
func tourScript(turns int) string {
	var b strings.Builder
	for k := range turns {
		call, _ := json.Marshal(map[string]any{"text": "Let me read the README first.",
			"tool_calls": []any{map[string]any{"name": "read_file", "arguments": map[string]any{"path": "README.md"}}}})
		answer, _ := json.Marshal(map[string]any{"text": fmt.Sprintf("Answer %d: the README has {{ with .Result \"read_file\" }}{{ get . \"total_lines\" }}{{ end }} lines; one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen.", k), "delay_ms": 5})
		b.Write(call)
		b.WriteByte('\n')
		b.Write(answer)
		b.WriteByte('\n')
	}
	return b.String()
}

// LoadRig runs load rounds of examples/clients/ws-node/load.mjs against
// one plexus serve --transport http.
type LoadRig struct {
	*Rig
	node, client, script string
	url, token, wsID     string
	proc                 *Proc
}

// NewLoadRig starts the server for load rounds; it skips when Node.js or
// the client's npm dependencies are missing (a failure when
// PLEXUS_REQUIRE_NODE is set).
func NewLoadRig(t testing.TB, bin string, opts Options) *LoadRig {
	node, err := exec.LookPath("node")
	client, _ := filepath.Abs("../../examples/clients/ws-node/load.mjs")
	_, statErr := os.Stat(filepath.Join(filepath.Dir(client), "node_modules", "ws"))
	if err != nil || statErr != nil {
		msg := "node or examples/clients/ws-node/node_modules is missing (npm ci --prefix examples/clients/ws-node)"
		if os.Getenv("PLEXUS_REQUIRE_NODE") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	r := &LoadRig{Rig: NewRig(t, bin, "load", opts), node: node, client: client}
	r.script = filepath.Join(t.TempDir(), "tour.jsonl")
	WriteFile(t, r.script, tourScript(8))
	WriteFile(t, filepath.Join(r.WS, "README.md"), "# A test repository\n\nIt holds a README and a Go file.\n")
	WriteFile(t, filepath.Join(r.WS, "main.go"), "package main\n\nfunc main() {}\n")
	r.Serve()
	var ws struct {
		Workspaces []struct {
			ID string `json:"workspace_id"`
		} `json:"workspaces"`
	}
	r.rest("GET", "/v1/workspaces", "", &ws)
	if len(ws.Workspaces) != 1 {
		t.Fatalf("workspaces: %+v", ws)
	}
	r.wsID = ws.Workspaces[0].ID
	return r
}

// Serve starts (or restarts) the server.
func (r *LoadRig) Serve() {
	r.proc = r.Start("serve", "--transport", "http", "-w", r.WS, "--model", "replay:"+r.script, "--embed-model", "none", "--addr", "127.0.0.1:0")
	r.url = r.proc.WaitFor(r.t, httpServing, time.Minute)[1]
	tok, err := os.ReadFile(filepath.Join(r.Data, "http-token"))
	if err != nil {
		r.t.Fatal(err)
	}
	r.token = strings.TrimSpace(string(tok))
}

// Stop stops the server with SIGTERM (a graceful shutdown).
func (r *LoadRig) Stop() { r.proc.Term(r.t, 2*time.Minute) }

func (r *LoadRig) rest(method, path, body string, out any) {
	h := &httpRig{Rig: r.Rig, url: r.url, token: r.token}
	h.rest(method, path, body, out)
}

// Round runs load.mjs with sessions new sessions of turns turns each and
// returns its summary; err is set when the client exits non-zero.
func (r *LoadRig) Round(sessions, turns int) (LoadResult, error) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.node, r.client, "--url", r.url, "--token", r.token, "--workspace", r.wsID,
		"--sessions", fmt.Sprint(sessions), "--turns", fmt.Sprint(turns))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	runErr := cmd.Run()
	var res LoadResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		r.t.Fatalf("load.mjs printed no summary (%v): %s\n%s", runErr, out.String(), errOut.String())
	}
	return res, runErr
}

// Session is a session as GET /v1/sessions/{id} shows it: its messages
// (as JSON, to compare) and last sequence number.
type Session struct {
	Messages string
	LastSeq  uint64
}

// Session returns GET /v1/sessions/{id}.
func (r *LoadRig) Session(id string) Session {
	var s struct {
		Messages json.RawMessage `json:"messages"`
		LastSeq  uint64          `json:"last_seq"`
	}
	r.rest("GET", "/v1/sessions/"+id, "", &s)
	return Session{Messages: string(s.Messages), LastSeq: s.LastSeq}
}

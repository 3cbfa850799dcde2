package policy_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/policy"
	"github.com/plexus-agent/plexus/tools/shell"
)

// askingHost answers approvals with answer and counts the questions.
type askingHost struct {
	answer func(engine.ApprovalRequest) engine.ApprovalDecision
	asked  []string
}

func (h *askingHost) RequestApproval(_ context.Context, r engine.ApprovalRequest) (engine.ApprovalDecision, error) {
	h.asked = append(h.asked, r.Command.Command)
	return h.answer(r), nil
}

// TestRememberedChoicesAcrossTurns runs turns through the engine with the
// real shell tool and a Gatekeeper on the real store: a command approved
// with "apply to similar" makes a similar command run without asking in a
// later turn, and in a new engine on the same database; a command denied
// with "remember this choice" is denied without asking, and never runs.
func TestRememberedChoicesAcrossTurns(t *testing.T) {
	dir := t.TempDir()
	ws := t.TempDir()
	script := filepath.Join(t.TempDir(), "script.jsonl")
	var lines []string
	for _, cmd := range []string{"go env GOOS", "touch denied.txt", "go env GOARCH", "touch denied.txt", "go env -json GOROOT"} {
		b, _ := json.Marshal(map[string]any{"text": "running", "tool_calls": []any{
			map[string]any{"name": "run_command", "arguments": map[string]string{"command": cmd}},
		}})
		lines = append(lines, string(b), `{"text": "done"}`)
	}
	if err := os.WriteFile(script, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tools := shell.New(shell.Options{Sandbox: shell.SandboxNone})
	newEngine := func() *engine.Session {
		s, _ := newSess(t, ws, script, tools, policy.NewGatekeeper(openStore(t, dir)), nil)
		return s
	}
	h := &askingHost{answer: func(r engine.ApprovalRequest) engine.ApprovalDecision {
		if strings.HasPrefix(r.Command.Command, "touch") {
			return engine.ApprovalDecision{Reason: "not this", Remember: true}
		}
		return engine.ApprovalDecision{Approved: true, Remember: true, ApplyToSimilar: true}
	}}
	sess := newEngine()
	statuses := map[engine.ToolStatus]int{}
	run := func(s *engine.Session) {
		t.Helper()
		onEvent := func(e engine.Event) {
			if c, ok := e.Data.(*engine.ToolCallEvent); ok {
				statuses[c.Status]++
			}
		}
		if _, err := s.Run(t.Context(), engine.TurnInput{Message: "go"}, engine.TurnOptions{Host: h, OnEvent: onEvent}); err != nil {
			t.Fatal(err)
		}
	}
	run(sess) // go env GOOS: asked, approved for similar commands (go env *)
	run(sess) // touch denied.txt: asked, denied and remembered
	run(sess) // go env GOARCH: allowed by the similar rule
	if want := []string{"go env GOOS", "touch denied.txt"}; strings.Join(h.asked, "|") != strings.Join(want, "|") {
		t.Errorf("asked about %q, want %q", h.asked, want)
	}
	// A new engine on the same database: the rules were stored.
	sess = newEngine()
	// The script walks by the conversation's length, so replay the two
	// remaining steps in a session that already holds three turns.
	for range 3 {
		if _, err := sess.Run(t.Context(), engine.TurnInput{Message: "go"}, engine.TurnOptions{ApproveAll: true}); err != nil {
			t.Fatal(err)
		}
	}
	h.asked = nil
	clear(statuses)
	run(sess) // touch denied.txt: denied by the remembered rule
	run(sess) // go env -json GOROOT: allowed
	if len(h.asked) != 0 {
		t.Errorf("asked about %q after the choices were remembered", h.asked)
	}
	if statuses[engine.ToolDenied] != 1 || statuses[engine.ToolCompleted] != 1 {
		t.Errorf("tool call statuses %v; want one denied and one completed", statuses)
	}
	if _, err := os.Stat(filepath.Join(ws, "denied.txt")); err == nil {
		t.Error("denied.txt exists: a denied command ran")
	}
}

// clientTerminal is a Host that runs commands itself (the VS Code
// terminal of local_terminal mode) and approves everything.
type clientTerminal struct {
	ran []engine.CommandRequest
}

func (c *clientTerminal) RequestApproval(context.Context, engine.ApprovalRequest) (engine.ApprovalDecision, error) {
	return engine.ApprovalDecision{Approved: true}, nil
}

func (c *clientTerminal) RunCommand(_ context.Context, req engine.CommandRequest) (engine.CommandResult, error) {
	c.ran = append(c.ran, req)
	return engine.CommandResult{ExitCode: 3, Stdout: "from the client\n"}, nil
}

// TestCommandModeRoutesCommands checks the policy's execution mode: in
// local_terminal mode a Host that runs commands gets the command (the
// engine's own runner does not run it); in server_runner mode the engine
// runs it even though the Host could.
func TestCommandModeRoutesCommands(t *testing.T) {
	ws := t.TempDir()
	script := filepath.Join(t.TempDir(), "script.jsonl")
	step := `{"text": "running", "tool_calls": [{"name": "run_command", "arguments": {"command": "touch made.txt"}}]}` + "\n" +
		`{"text": "{{ json (.Result \"run_command\") }}"}` + "\n"
	if err := os.WriteFile(script, []byte(step+step), 0o644); err != nil {
		t.Fatal(err)
	}
	gk := policy.NewGatekeeper(openStore(t, t.TempDir()))
	sess, w := newSess(t, ws, script, shell.New(shell.Options{Sandbox: shell.SandboxNone}), gk, nil)
	host := &clientTerminal{}
	run := func() (string, []engine.EventData) {
		t.Helper()
		var events []engine.EventData
		res, err := sess.Run(t.Context(), engine.TurnInput{Message: "go"}, engine.TurnOptions{Host: host,
			OnEvent: func(e engine.Event) { events = append(events, e.Data) }})
		if err != nil {
			t.Fatal(err)
		}
		return res.Message, events
	}

	if err := gk.SetPolicy(t.Context(), w.ID, json.RawMessage(`{"version": 1, "commands": {"mode": "local_terminal"}}`)); err != nil {
		t.Fatal(err)
	}
	msg, events := run()
	if len(host.ran) != 1 || host.ran[0].Command != "touch made.txt" || host.ran[0].WorkingDir != w.Root {
		t.Errorf("the client ran %+v; want touch made.txt in %s", host.ran, w.Root)
	}
	if _, err := os.Stat(filepath.Join(ws, "made.txt")); err == nil {
		t.Error("made.txt exists: the engine ran the command although the client runs commands")
	}
	if !strings.Contains(msg, `"exit_code":3`) || !strings.Contains(msg, "from the client") {
		t.Errorf("the model saw %s; want the client's result", msg)
	}
	sawRequest := false
	for _, e := range events {
		if _, ok := e.(*engine.CommandRequestEvent); ok {
			sawRequest = true
		}
	}
	if !sawRequest {
		t.Error("no command_request event in local_terminal mode")
	}

	if err := gk.SetPolicy(t.Context(), w.ID, json.RawMessage(`{"version": 1, "commands": {"mode": "server_runner"}}`)); err != nil {
		t.Fatal(err)
	}
	msg, _ = run()
	if len(host.ran) != 1 {
		t.Errorf("the client ran %d commands in server_runner mode, want none more", len(host.ran)-1)
	}
	if _, err := os.Stat(filepath.Join(ws, "made.txt")); err != nil || !strings.Contains(msg, `"exit_code":0`) {
		t.Errorf("server_runner: made.txt %v, result %s; want the engine to run it", err, msg)
	}
}

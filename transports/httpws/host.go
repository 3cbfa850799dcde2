package httpws

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

// ClientApplyTimeout bounds how long a turn waits for the
// client.patch_apply_result messages of an approved patch that the client
// applies itself; ClientCommandTimeout how long it waits for the
// client.command_result of a command the client runs.
const (
	ClientApplyTimeout   = 5 * time.Minute
	ClientCommandTimeout = 15 * time.Minute
)

// turnHost is the engine.Host of a turn: approvals come from any client of
// the session (client.approval_response).
type turnHost struct{ h *hub }

var _ engine.Host = (*turnHost)(nil)

// newTurnHost returns the Host of a turn started by a client with caps:
// one that also runs commands in the client's terminal (terminal_exec)
// and/or lets the client apply patches (patch_apply).
func newTurnHost(h *hub, caps map[string]bool) engine.Host {
	base := &turnHost{h: h}
	switch {
	case caps[capTerminalExec] && caps[capPatchApply]:
		return &struct {
			*turnHost
			*commandHost
			*applyHost
		}{base, &commandHost{h}, &applyHost{h}}
	case caps[capTerminalExec]:
		return &struct {
			*turnHost
			*commandHost
		}{base, &commandHost{h}}
	case caps[capPatchApply]:
		return &struct {
			*turnHost
			*applyHost
		}{base, &applyHost{h}}
	}
	return base
}

// RequestApproval waits for the answer to req, registered by onEvent
// when the ApprovalEvent went out.
func (t *turnHost) RequestApproval(ctx context.Context, req engine.ApprovalRequest) (engine.ApprovalDecision, error) {
	h := t.h
	h.mu.Lock()
	ch, ok := h.approvals[req.ID]
	h.mu.Unlock()
	if !ok {
		return engine.ApprovalDecision{}, fmt.Errorf("approval request %s was not announced", req.ID)
	}
	defer func() {
		h.mu.Lock()
		delete(h.approvals, req.ID)
		if req.Command != nil {
			delete(h.commandApprovals, req.Command.ID)
		}
		h.mu.Unlock()
	}()
	select {
	case dec := <-ch:
		return dec, nil
	case <-ctx.Done():
		return engine.ApprovalDecision{}, context.Cause(ctx)
	}
}

// commandHost runs commands in the client's terminal (local_terminal mode):
// the command goes out as command.request_approval with requires_approval
// false, and the client answers with client.command_result.
type commandHost struct{ h *hub }

var _ engine.CommandRunner = (*commandHost)(nil)

// RunCommand waits for the client's result of req.
func (c *commandHost) RunCommand(ctx context.Context, req engine.CommandRequest) (engine.CommandResult, error) {
	h := c.h
	h.mu.Lock()
	ch, ok := h.commands[req.ID]
	h.mu.Unlock()
	if !ok {
		return engine.CommandResult{}, fmt.Errorf("command %s was not announced", req.ID)
	}
	defer func() {
		h.mu.Lock()
		delete(h.commands, req.ID)
		h.mu.Unlock()
	}()
	timer := time.NewTimer(ClientCommandTimeout)
	defer timer.Stop()
	select {
	case res := <-ch:
		return res, nil
	case <-timer.C:
		return engine.CommandResult{}, fmt.Errorf("no client.command_result for %s within %s", req.ID, ClientCommandTimeout)
	case <-ctx.Done():
		return engine.CommandResult{}, context.Cause(ctx)
	}
}

// applyHost lets the client apply approved patches (the VS Code
// extension's WorkspaceEdit): it waits for one client.patch_apply_result
// per approved file, for up to ClientApplyTimeout.
type applyHost struct{ h *hub }

var _ engine.PatchApplier = (*applyHost)(nil)

// ApplyPatch waits for the apply results of the selected files and
// returns their applied hashes; the engine checks them against what the
// selection must produce. Errors: a file the client failed to apply (its
// error message), a missing result.
func (a *applyHost) ApplyPatch(ctx context.Context, set *engine.PatchSet, sel engine.PatchSelection) (map[string]string, error) {
	h := a.h
	ctx, cancel := context.WithTimeout(ctx, ClientApplyTimeout)
	defer cancel()
	got := map[string]string{}
	var failed []string
	for _, f := range set.Files {
		if !sel.All && !slices.Contains(sel.Files, f.Path) && len(sel.Hunks[f.Path]) == 0 {
			continue
		}
		h.mu.Lock()
		ch, ok := h.applies[f.ID]
		h.mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("patch %s (%s) was not announced", f.ID, f.Path)
		}
		select {
		case res := <-ch:
			if !res.Success {
				msg := "no reason given"
				if res.Error != nil {
					msg = res.Error.Message
					if res.Error.Type != "" {
						msg = res.Error.Type + ": " + msg
					}
				}
				failed = append(failed, fmt.Sprintf("%s (%s)", f.Path, msg))
				continue
			}
			got[f.Path] = res.AppliedHash
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return nil, fmt.Errorf("no client.patch_apply_result for %s (patch %s) within %s", f.Path, f.ID, ClientApplyTimeout)
			}
			return nil, context.Cause(ctx)
		}
	}
	if len(failed) > 0 {
		return got, fmt.Errorf("the client did not apply %s", strings.Join(failed, ", "))
	}
	return got, nil
}

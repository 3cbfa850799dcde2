package acp

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/plexus-agent/plexus/engine"
)

// Permission option ids (and kinds) of session/request_permission.
const (
	optAllowOnce    = "allow_once"
	optAllowAlways  = "allow_always"
	optRejectOnce   = "reject_once"
	optRejectAlways = "reject_always"
)

var permissionOptions = []sdk.PermissionOption{
	{OptionId: optAllowOnce, Name: "Allow once", Kind: sdk.PermissionOptionKindAllowOnce},
	{OptionId: optAllowAlways, Name: "Always allow", Kind: sdk.PermissionOptionKindAllowAlways},
	{OptionId: optRejectOnce, Name: "Reject", Kind: sdk.PermissionOptionKindRejectOnce},
	{OptionId: optRejectAlways, Name: "Always reject", Kind: sdk.PermissionOptionKindRejectAlways},
}

// Limits of buffers read through fs/read_text_file.
const (
	// maxBufferBytes: larger files are read from the disk.
	maxBufferBytes = 4 << 20
	// sniffBytes are looked at for NUL bytes; a binary file is read from
	// the disk (fs/read_text_file is for text).
	sniffBytes = 8 << 10
)

// host is the engine.Host of one turn of a session: approvals through
// session/request_permission, file reads through fs/read_text_file, and
// the session's MCP tools. Writes (fs/write_text_file) and commands
// (terminal/*) are added by the types engineHost picks, so that the
// engine finds engine.PatchApplier and engine.CommandRunner only when the
// client offers them.
type host struct {
	s     *session
	mode  string
	caps  sdk.ClientCapabilities
	specs []engine.ToolSpec
}

var (
	_ engine.Host           = (*host)(nil)
	_ engine.BufferReader   = (*host)(nil)
	_ engine.ClientToolHost = (*host)(nil)
	_ engine.PatchApplier   = writingHost{}
	_ engine.CommandRunner  = terminalHost{}
	_ engine.PatchApplier   = fullHost{}
	_ engine.CommandRunner  = fullHost{}
)

// writingHost applies approved patches through fs/write_text_file.
type writingHost struct{ *host }

func (h writingHost) ApplyPatch(ctx context.Context, set *engine.PatchSet, sel engine.PatchSelection) (map[string]string, error) {
	return h.applyPatch(ctx, set, sel)
}

// terminalHost runs commands in the client's terminal.
type terminalHost struct{ *host }

func (h terminalHost) RunCommand(ctx context.Context, req engine.CommandRequest) (engine.CommandResult, error) {
	return h.runCommand(ctx, req)
}

// fullHost does both.
type fullHost struct{ *host }

func (h fullHost) ApplyPatch(ctx context.Context, set *engine.PatchSet, sel engine.PatchSelection) (map[string]string, error) {
	return h.applyPatch(ctx, set, sel)
}

func (h fullHost) RunCommand(ctx context.Context, req engine.CommandRequest) (engine.CommandResult, error) {
	return h.runCommand(ctx, req)
}

func newHost(s *session, mode string) *host {
	return &host{s: s, mode: mode, caps: s.c.clientCaps()}
}

// engineHost is h as the engine should see it, by the client's
// capabilities.
func (h *host) engineHost() engine.Host {
	switch w, t := h.caps.Fs.WriteTextFile, h.caps.Terminal; {
	case w && t:
		return fullHost{h}
	case w:
		return writingHost{h}
	case t:
		return terminalHost{h}
	}
	return h
}

// loadClientTools lists the session's MCP tools for the turn.
func (h *host) loadClientTools(ctx context.Context) error {
	if h.s.tools == nil {
		return nil
	}
	specs, err := h.s.tools.Tools(ctx)
	h.specs = specs
	return err
}

// ClientTools are the session's MCP tools.
func (h *host) ClientTools() []engine.ToolSpec { return h.specs }

// InvokeClientTool runs one MCP tool of the session.
func (h *host) InvokeClientTool(ctx context.Context, call engine.ToolCall) (engine.ToolResult, error) {
	return h.s.tools.Invoke(ctx, engine.InvokeRequest{CallID: call.ID, Tool: call.Name, Args: call.Args, WorkspaceRoot: h.s.root},
		func(engine.ToolUpdate) {})
}

// RequestApproval asks the client with session/request_permission. A
// patch set is asked about file by file, each on the edit call that
// proposed it (with its diff); the answer approves the files allowed. An
// "always" answer becomes a remembered policy rule. In accept-edits mode
// patch sets are approved without asking.
func (h *host) RequestApproval(ctx context.Context, req engine.ApprovalRequest) (engine.ApprovalDecision, error) {
	if req.PatchSet != nil {
		if h.mode == ModeAcceptEdits {
			return engine.ApprovalDecision{Approved: true, Reason: "the session is in accept-edits mode", Actor: "mode"}, nil
		}
		return h.approvePatch(ctx, req)
	}
	tc := sdk.ToolCallUpdate{ToolCallId: sdk.ToolCallId(req.CallID)}
	if req.CallID == "" {
		tc.ToolCallId = sdk.ToolCallId(req.ID)
	}
	tc.Title = sdk.Ptr(req.Description)
	tc.Status = sdk.Ptr(sdk.ToolCallStatusPending)
	h.s.withTurn(func(m *mapper) []sdk.SessionUpdate {
		if m == nil {
			return nil
		}
		if c, ok := m.calls[req.CallID]; ok {
			tc.Title, tc.Kind, tc.Locations, tc.RawInput = sdk.Ptr(c.title), sdk.Ptr(c.kind), c.locations, rawJSON(c.args)
		}
		return nil
	})
	if p := req.Preview; p != nil && p.Content != "" {
		text := p.Content
		if p.Type == "command" {
			text = "```sh\n" + p.Content + "\n```"
		}
		tc.Content = []sdk.ToolCallContent{sdk.ToolContent(sdk.TextBlock(text))}
	}
	choice, err := h.ask(ctx, tc)
	if err != nil {
		return engine.ApprovalDecision{}, err
	}
	return decision(choice), nil
}

// approvePatch asks about each file of a patch set.
func (h *host) approvePatch(ctx context.Context, req engine.ApprovalRequest) (engine.ApprovalDecision, error) {
	set := req.PatchSet
	var allowed []string
	var choices []string
	for _, f := range set.Files {
		tc := sdk.ToolCallUpdate{ToolCallId: sdk.ToolCallId(set.ID + "/" + f.Path), Status: sdk.Ptr(sdk.ToolCallStatusPending)}
		verb := map[string]string{"create": "Create", "delete": "Delete"}[f.Op]
		if verb == "" {
			verb = "Edit"
		}
		tc.Title = sdk.Ptr(verb + " " + f.Path)
		h.s.withTurn(func(m *mapper) []sdk.SessionUpdate {
			if m == nil {
				return nil
			}
			for _, id := range set.CallIDs {
				c, ok := m.calls[id]
				if ok && slices.ContainsFunc(m.filesOf(c, set), func(g engine.FilePatch) bool { return g.Path == f.Path }) {
					tc.ToolCallId, tc.Kind, tc.RawInput = sdk.ToolCallId(c.id), sdk.Ptr(c.kind), rawJSON(c.args)
					break
				}
			}
			tc.Content = []sdk.ToolCallContent{m.diff(f)}
			loc := sdk.ToolCallLocation{Path: m.abs(f.Path)}
			if len(f.Hunks) > 0 && f.Hunks[0].NewStart > 0 {
				loc.Line = sdk.Ptr(f.Hunks[0].NewStart)
			}
			tc.Locations = []sdk.ToolCallLocation{loc}
			return nil
		})
		choice, err := h.ask(ctx, tc)
		if err != nil {
			return engine.ApprovalDecision{}, err
		}
		choices = append(choices, choice)
		if choice == optAllowOnce || choice == optAllowAlways {
			allowed = append(allowed, f.Path)
		}
	}
	// An "always" answer is remembered when every file's answer agrees:
	// the engine remembers one rule for the decision (see doc.go).
	alwaysAllow, alwaysReject := true, true
	for _, c := range choices {
		if c == optAllowOnce {
			alwaysAllow = false
		}
		if c != optRejectAlways {
			alwaysReject = false
		}
	}
	if len(allowed) == 0 {
		return engine.ApprovalDecision{Reason: "the user rejected the change", Remember: alwaysReject, Actor: "user"}, nil
	}
	return engine.ApprovalDecision{Approved: true, Scope: "file", Files: allowed, Remember: alwaysAllow, Actor: "user"}, nil
}

// ask sends session/request_permission and returns the option chosen. The
// client answering "cancelled" (it cancelled the prompt) cancels the
// prompt here too, and ask returns the context's error.
func (h *host) ask(ctx context.Context, tc sdk.ToolCallUpdate) (string, error) {
	resp, err := h.s.c.conn.RequestPermission(ctx, sdk.RequestPermissionRequest{
		SessionId: sdk.SessionId(h.s.id), ToolCall: tc, Options: permissionOptions,
	})
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", fmt.Errorf("the client did not answer the permission request: %v", err)
	}
	if resp.Outcome.Cancelled != nil || resp.Outcome.Selected == nil {
		h.s.cancelPrompt()
		<-ctx.Done()
		return "", ctx.Err()
	}
	id := string(resp.Outcome.Selected.OptionId)
	switch id {
	case optAllowOnce, optAllowAlways, optRejectOnce, optRejectAlways:
		return id, nil
	}
	return "", fmt.Errorf("the client chose option %q, which was not offered", id)
}

// decision is the engine's decision for a permission option.
func decision(choice string) engine.ApprovalDecision {
	switch choice {
	case optAllowOnce:
		return engine.ApprovalDecision{Approved: true, Actor: "user"}
	case optAllowAlways:
		return engine.ApprovalDecision{Approved: true, Remember: true, Actor: "user"}
	case optRejectAlways:
		return engine.ApprovalDecision{Reason: "the user rejected it (always)", Remember: true, Actor: "user"}
	}
	return engine.ApprovalDecision{Reason: "the user rejected it", Actor: "user"}
}

// ReadBuffer reads a file through fs/read_text_file when the client offers
// it, so that read-only tools see unsaved editor buffers. Binary files and
// files over maxBufferBytes are left to the disk (ok false).
func (h *host) ReadBuffer(ctx context.Context, path string) ([]byte, bool, error) {
	if !h.caps.Fs.ReadTextFile || !inside(h.s.root, path) {
		return nil, false, nil
	}
	if !textFile(path) {
		return nil, false, nil
	}
	resp, err := h.s.c.conn.ReadTextFile(ctx, sdk.ReadTextFileRequest{SessionId: sdk.SessionId(h.s.id), Path: path})
	if err != nil {
		return nil, false, err
	}
	return []byte(resp.Content), true, nil
}

// textFile reports whether the file at path is small enough and has no
// NUL byte in its first sniffBytes.
func textFile(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || fi.Size() > maxBufferBytes {
		return false
	}
	buf := make([]byte, sniffBytes)
	n, _ := f.Read(buf)
	return bytes.IndexByte(buf[:n], 0) < 0
}

// applyPatch writes an approved selection of a patch set through
// fs/write_text_file, so the editor's buffers and undo stay in step: each
// chosen file's content (read through fs/read_text_file when offered,
// else from the disk) must still be the one the patch was computed from
// (an engine.ErrConflict otherwise, and nothing is written); a deleted
// file is removed from the disk (ACP has no delete). The undo record is
// kept in Options.Patches, as engine.Patcher keeps its own. It returns the
// hash of each file written ("" for a deleted one).
func (h *host) applyPatch(ctx context.Context, set *engine.PatchSet, sel engine.PatchSelection) (map[string]string, error) {
	if len(sel.Hunks) > 0 {
		return nil, fmt.Errorf("%w: applying single hunks through the editor is not supported; approve whole files", engine.ErrInvalidRequest)
	}
	var chosen []engine.FilePatch
	for _, f := range set.Files {
		if sel.All || slices.Contains(sel.Files, f.Path) {
			chosen = append(chosen, f)
		}
	}
	abs := func(p string) (string, error) {
		full := filepath.Join(h.s.root, filepath.FromSlash(p))
		if !inside(h.s.root, full) {
			return "", fmt.Errorf("%w: %s is outside the workspace", engine.ErrPermissionDenied, p)
		}
		return full, nil
	}
	for _, f := range chosen {
		full, err := abs(f.Path)
		if err != nil {
			return nil, err
		}
		cur, exists, err := h.current(ctx, full)
		if err != nil {
			return nil, fmt.Errorf("read %s before writing it: %w", f.Path, err)
		}
		switch {
		case f.Op == "create" && exists:
			return nil, fmt.Errorf("%w: %s exists now; it did not when the change was proposed", engine.ErrConflict, f.Path)
		case f.Op != "create" && (!exists || hashOf(cur) != f.BaseHash):
			return nil, fmt.Errorf("%w: %s changed since the patch was proposed; ask for a new patch", engine.ErrConflict, f.Path)
		}
	}
	applied := &engine.AppliedPatch{ID: newID("apl"), SetID: set.ID, Workspace: engine.WorkspaceID(h.s.root), Session: h.s.id, Time: time.Now()}
	got := map[string]string{}
	var werr error
	for _, f := range chosen {
		full, _ := abs(f.Path)
		mode := uint32(0o644)
		if fi, err := os.Stat(full); err == nil {
			mode = uint32(fi.Mode().Perm())
		}
		if f.Op == "delete" {
			if err := os.Remove(full); err != nil {
				werr = fmt.Errorf("delete %s: %w", f.Path, err)
				break
			}
			got[f.Path] = ""
		} else {
			if _, err := h.s.c.conn.WriteTextFile(ctx, sdk.WriteTextFileRequest{SessionId: sdk.SessionId(h.s.id), Path: full, Content: string(f.New)}); err != nil {
				werr = fmt.Errorf("the editor could not write %s: %v", f.Path, err)
				break
			}
			got[f.Path] = hashOf(f.New)
		}
		applied.Files = append(applied.Files, engine.AppliedFile{Path: f.Path, Op: f.Op, Before: f.Base,
			BeforeExisted: f.Op != "create", Mode: mode, AfterHash: got[f.Path]})
	}
	if st := h.s.c.s.opts.Patches; st != nil && len(applied.Files) > 0 {
		if err := st.SaveApplied(context.WithoutCancel(ctx), applied); err != nil {
			h.s.c.notify(h.s.id, sdk.UpdateAgentThoughtText("Warning: saving the undo record failed (plexus undo cannot take this change back): "+err.Error()+"\n"))
		}
	}
	return got, werr
}

// current is a file's content as the editor has it (fs/read_text_file
// when offered) or as the disk does.
func (h *host) current(ctx context.Context, full string) ([]byte, bool, error) {
	if _, err := os.Stat(full); errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if h.caps.Fs.ReadTextFile && textFile(full) {
		resp, err := h.s.c.conn.ReadTextFile(ctx, sdk.ReadTextFileRequest{SessionId: sdk.SessionId(h.s.id), Path: full})
		if err != nil {
			return nil, true, err
		}
		return []byte(resp.Content), true, nil
	}
	b, err := os.ReadFile(full)
	return b, err == nil, err
}

// runCommand runs an approved command in the client's terminal
// (terminal/create with /bin/sh -c), shows the terminal on the running
// tool call, waits for it to exit (killing it when the turn is
// cancelled), reads its output and releases it.
func (h *host) runCommand(ctx context.Context, req engine.CommandRequest) (engine.CommandResult, error) {
	c := h.s.c
	var env []sdk.EnvVariable
	for k, v := range req.Env {
		env = append(env, sdk.EnvVariable{Name: k, Value: v})
	}
	slices.SortFunc(env, func(a, b sdk.EnvVariable) int { return strings.Compare(a.Name, b.Name) })
	start := time.Now()
	created, err := c.conn.CreateTerminal(ctx, sdk.CreateTerminalRequest{
		SessionId: sdk.SessionId(h.s.id), Command: "/bin/sh", Args: []string{"-c", req.Command},
		Cwd: sdk.Ptr(req.WorkingDir), Env: env, OutputByteLimit: sdk.Ptr(c.s.opts.TerminalOutputBytes),
	})
	if err != nil {
		return engine.CommandResult{}, fmt.Errorf("terminal/create: %v", err)
	}
	id := created.TerminalId
	bg := context.WithoutCancel(ctx)
	defer func() {
		if _, err := c.conn.ReleaseTerminal(bg, sdk.ReleaseTerminalRequest{SessionId: sdk.SessionId(h.s.id), TerminalId: id}); err != nil {
			c.s.log.Debug("terminal/release failed", "terminal", id, "error", err)
		}
	}()
	h.s.withTurn(func(m *mapper) []sdk.SessionUpdate {
		if m == nil || m.calls[m.current] == nil {
			return nil
		}
		call := m.calls[m.current]
		call.terminal = id
		return m.update(call, "", nil)
	})
	exit, err := c.conn.WaitForTerminalExit(ctx, sdk.WaitForTerminalExitRequest{SessionId: sdk.SessionId(h.s.id), TerminalId: id})
	if err != nil {
		if ctx.Err() != nil {
			c.conn.KillTerminal(bg, sdk.KillTerminalRequest{SessionId: sdk.SessionId(h.s.id), TerminalId: id})
			return engine.CommandResult{}, ctx.Err()
		}
		return engine.CommandResult{}, fmt.Errorf("terminal/wait_for_exit: %v", err)
	}
	out, err := c.conn.TerminalOutput(ctx, sdk.TerminalOutputRequest{SessionId: sdk.SessionId(h.s.id), TerminalId: id})
	if err != nil {
		return engine.CommandResult{}, fmt.Errorf("terminal/output: %v", err)
	}
	res := engine.CommandResult{ExitCode: -1, Stdout: out.Output, Duration: time.Since(start)}
	if exit.ExitCode != nil {
		res.ExitCode = *exit.ExitCode
	}
	if exit.Signal != nil && *exit.Signal != "" {
		res.Stderr = "killed by signal " + *exit.Signal
	}
	if out.Truncated {
		res.Stdout = "[the terminal kept only the end of the output]\n" + res.Stdout
	}
	return res, nil
}

// hashOf is "sha256:<hex>" of b, as engine.FilePatch hashes are.
func hashOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// newID is prefix_ and 16 random hex digits, as the engine's ids.
func newID(prefix string) string {
	var b [8]byte
	rand.Read(b[:])
	return prefix + "_" + hex.EncodeToString(b[:])
}

package patch_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/patch"
	"github.com/plexus-agent/plexus/engine/receipts"
	"github.com/plexus-agent/plexus/engine/store"
	"github.com/plexus-agent/plexus/internal/testtree"
	"github.com/plexus-agent/plexus/models/replay"
	"github.com/plexus-agent/plexus/tools/fs"
)

// These tests run turns with the real parts in-process: the replay model
// playing a script, the file tools proposing edits, this package's
// Patcher, the SQLite store and the receipt log.

type rig struct {
	eng      *engine.Engine
	ws       *engine.Workspace
	sess     *engine.Session
	dir      string
	receipts string
	capture  *capture
}

// capture records the model's requests.
type capture struct {
	engine.Model
	mu   sync.Mutex
	reqs []engine.ChatRequest
}

func (c *capture) Chat(ctx context.Context, req engine.ChatRequest, on func(engine.ChatChunk) error) error {
	c.mu.Lock()
	c.reqs = append(c.reqs, req)
	c.mu.Unlock()
	return c.Model.Chat(ctx, req, on)
}

func newRig(t *testing.T, files map[string]string, script ...string) *rig {
	t.Helper()
	dir := t.TempDir()
	testtree.Write(t, dir, files)
	scriptPath := filepath.Join(t.TempDir(), "script.jsonl")
	os.WriteFile(scriptPath, []byte(strings.Join(script, "\n")+"\n"), 0o644)
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "plexus.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	rdir := t.TempDir()
	key, err := receipts.LoadOrCreateKey(filepath.Join(t.TempDir(), "keys"))
	if err != nil {
		t.Fatal(err)
	}
	log, err := receipts.Open(rdir, receipts.Options{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	tools := fs.New(fs.Options{})
	t.Cleanup(func() { tools.Close() })
	p := patch.NewPatcher()
	t.Cleanup(func() { p.Close() })
	model := &capture{Model: replay.New()}
	eng, err := engine.New(engine.Options{
		Models: map[string]engine.Model{"replay": model}, Model: engine.ModelRef{Provider: "replay", Name: scriptPath},
		Tools: tools, Patcher: p, Patches: st, Recorder: receipts.NewRecorder(log),
	})
	if err != nil {
		t.Fatal(err)
	}
	ws, _ := eng.OpenWorkspace(dir)
	sess, _ := eng.NewSession(ws, "")
	return &rig{eng: eng, ws: ws, sess: sess, dir: dir, receipts: rdir, capture: model}
}

// host answers approvals with a function and records patch requests.
type host struct {
	answer func(engine.ApprovalRequest) engine.ApprovalDecision
	asked  []engine.ApprovalRequest
}

func (h *host) RequestApproval(_ context.Context, r engine.ApprovalRequest) (engine.ApprovalDecision, error) {
	h.asked = append(h.asked, r)
	return h.answer(r), nil
}

func (r *rig) run(t *testing.T, h engine.Host, msg string) (engine.TurnResult, []engine.EventData) {
	t.Helper()
	var events []engine.EventData
	res, err := r.sess.Run(context.Background(), engine.TurnInput{Message: msg}, engine.TurnOptions{Host: h,
		OnEvent: func(e engine.Event) { events = append(events, e.Data) }})
	if err != nil {
		t.Fatal(err)
	}
	return res, events
}

func (r *rig) read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, p))
	if err != nil {
		return "<missing>"
	}
	return string(b)
}

func call(id, name string, args any) map[string]any {
	return map[string]any{"id": id, "name": name, "arguments": args}
}

func line(t *testing.T, v map[string]any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const (
	mainGo = "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hello\")\n}\n"
	utilGo = "package main\n\n// greet returns a greeting.\nfunc greet(name string) string {\n\treturn \"hi \" + name\n}\n"
)

func twoFileScript(t *testing.T) []string {
	return []string{
		line(t, map[string]any{"text": "Updating the greeting in both files.", "tool_calls": []any{
			call("c1", "edit_file", map[string]any{"path": "main.go", "old_string": "\"hello\"", "new_string": "greet(\"world\")", "rationale": "use the helper"}),
			call("c2", "edit_file", map[string]any{"path": "util.go", "old_string": "\"hi \"", "new_string": "\"hello, \"", "acceptance_criteria": []string{"go build ./... passes"}}),
		}}),
		line(t, map[string]any{"text": "Done."}),
	}
}

func TestTwoFileChangeOneFileApprovedThenUndone(t *testing.T) {
	r := newRig(t, map[string]string{"main.go": mainGo, "util.go": utilGo}, twoFileScript(t)...)
	h := &host{answer: func(req engine.ApprovalRequest) engine.ApprovalDecision {
		return engine.ApprovalDecision{Approved: true, Scope: "file", Files: []string{"main.go"}}
	}}
	res, events := r.run(t, h, "use greet in main")
	if res.Status != engine.TurnCompleted {
		t.Fatalf("turn %+v", res)
	}
	// One approval for the whole set, showing both diffs.
	if len(h.asked) != 1 || h.asked[0].PatchSet == nil || len(h.asked[0].PatchSet.Files) != 2 {
		t.Fatalf("asked %+v", h.asked)
	}
	set := h.asked[0].PatchSet
	if !strings.Contains(set.Files[0].Diff, "-\tfmt.Println(\"hello\")\n+\tfmt.Println(greet(\"world\"))\n") ||
		!strings.Contains(set.Files[1].Diff, "+\treturn \"hello, \" + name") || set.Rationale != "use the helper" ||
		len(set.AcceptanceCriteria) != 1 || set.Files[0].BaseHash == "" || len(set.Files[0].Hunks) != 1 {
		t.Errorf("set %+v", set)
	}
	var proposed *engine.PatchProposedEvent
	var result *engine.PatchResultEvent
	for _, e := range events {
		switch d := e.(type) {
		case *engine.PatchProposedEvent:
			proposed = d
		case *engine.PatchResultEvent:
			result = d
		}
	}
	if proposed == nil || !proposed.RequiresApproval || result == nil || result.Status != engine.PatchPartiallyApplied ||
		strings.Join(result.Applied, ",") != "main.go" || strings.Join(result.Rejected, ",") != "util.go" || result.AppliedID == "" {
		t.Fatalf("proposed %+v result %+v", proposed, result)
	}
	if got := r.read(t, "main.go"); got != strings.Replace(mainGo, "\"hello\"", "greet(\"world\")", 1) {
		t.Errorf("main.go = %q", got)
	}
	if got := r.read(t, "util.go"); got != utilGo {
		t.Errorf("util.go was changed: %q", got)
	}
	if !slicesEqual(res.Metadata.FilesModified, []string{"main.go"}) {
		t.Errorf("files modified %v", res.Metadata.FilesModified)
	}
	// The model learns what happened to each edit.
	second := r.capture.reqs[1].Messages
	var toolMsgs []string
	for _, m := range second {
		if m.Role == engine.RoleTool {
			toolMsgs = append(toolMsgs, m.Content)
		}
	}
	if len(toolMsgs) != 2 || !strings.Contains(toolMsgs[0], `"status":"partially_applied"`) || !strings.Contains(toolMsgs[1], `"rejected_files":["util.go"]`) {
		t.Errorf("tool messages %v", toolMsgs)
	}
	// Undo restores main.go byte for byte.
	a, err := r.eng.Undo(context.Background(), r.ws, "", false)
	if err != nil || a.ID != result.AppliedID {
		t.Fatalf("undo %+v %v", a, err)
	}
	if r.read(t, "main.go") != mainGo || r.read(t, "util.go") != utilGo {
		t.Error("undo did not restore the files")
	}
	if _, err := r.eng.Undo(context.Background(), r.ws, "", false); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("second undo: %v", err)
	}
	// Receipts: the approval, the apply and the undo, chained and signed.
	rep, err := receipts.NewReader(r.receipts).Verify(context.Background(), receipts.VerifyOptions{})
	if err != nil || rep.Receipts != 3 || rep.Signed != 3 {
		t.Fatalf("receipts %+v %v", rep, err)
	}
	entries, _ := receipts.NewReader(r.receipts).List(context.Background(), receipts.Month{})
	var kinds []string
	for _, e := range entries {
		kinds = append(kinds, string(e.Receipt.Kind))
	}
	if strings.Join(kinds, ",") != "approval,patch_apply,patch_undo" || entries[1].Receipt.DiffHash == "" {
		t.Errorf("receipts %v %+v", kinds, entries)
	}
}

func slicesEqual(a, b []string) bool { return strings.Join(a, "\x00") == strings.Join(b, "\x00") }

func TestConflictWhenFileChangedAfterProposal(t *testing.T) {
	r := newRig(t, map[string]string{"main.go": mainGo, "util.go": utilGo}, twoFileScript(t)...)
	h := &host{answer: func(req engine.ApprovalRequest) engine.ApprovalDecision {
		// The user edits util.go while the proposal waits.
		os.WriteFile(filepath.Join(r.dir, "util.go"), []byte(utilGo+"// edited by hand\n"), 0o644)
		return engine.ApprovalDecision{Approved: true}
	}}
	_, events := r.run(t, h, "go")
	var result *engine.PatchResultEvent
	for _, e := range events {
		if d, ok := e.(*engine.PatchResultEvent); ok {
			result = d
		}
	}
	if result == nil || result.Status != engine.PatchConflict || !strings.Contains(result.Reason, "util.go changed since the patch was proposed") {
		t.Fatalf("result %+v", result)
	}
	if r.read(t, "main.go") != mainGo {
		t.Error("main.go was written although the set conflicted")
	}
	if r.read(t, "util.go") != utilGo+"// edited by hand\n" {
		t.Error("the hand edit was overwritten")
	}
}

func TestEditsInOneResponseCompose(t *testing.T) {
	script := []string{
		line(t, map[string]any{"tool_calls": []any{
			call("c1", "write_file", map[string]any{"path": "notes/todo.md", "content": "- one\n", "create_dirs": true}),
			call("c2", "edit_file", map[string]any{"path": "notes/todo.md", "old_string": "- one\n", "new_string": "- one\n- two\n"}),
			call("c3", "read_file", map[string]any{"path": "notes/todo.md"}),
		}}),
		line(t, map[string]any{"text": "ok"}),
	}
	r := newRig(t, map[string]string{"README.md": "# x\n"}, script...)
	r.run(t, &host{answer: func(engine.ApprovalRequest) engine.ApprovalDecision { return engine.ApprovalDecision{Approved: true} }}, "todo")
	if got := r.read(t, "notes/todo.md"); got != "- one\n- two\n" {
		t.Fatalf("todo.md = %q", got)
	}
	msgs := r.capture.reqs[1].Messages
	if read := msgs[len(msgs)-1].Content; !strings.Contains(read, `"pending":true`) || !strings.Contains(read, "- two") {
		t.Errorf("read_file did not see the pending content: %s", read)
	}
}

func TestRejectedWithoutHost(t *testing.T) {
	r := newRig(t, map[string]string{"main.go": mainGo, "util.go": utilGo}, twoFileScript(t)...)
	res, _ := r.run(t, nil, "go")
	if r.read(t, "main.go") != mainGo || r.read(t, "util.go") != utilGo || len(res.Metadata.FilesModified) != 0 {
		t.Error("a change was applied with no one to approve it")
	}
	msgs := r.capture.reqs[1].Messages
	if !strings.Contains(msgs[len(msgs)-1].Content, `"status":"rejected"`) {
		t.Errorf("model told %s", msgs[len(msgs)-1].Content)
	}
}

// clientHost applies patches itself, reporting hashes (optionally wrong).
type clientHost struct {
	host
	lie bool
}

func (c *clientHost) ApplyPatch(_ context.Context, set *engine.PatchSet, sel engine.PatchSelection) (map[string]string, error) {
	out := map[string]string{}
	for _, f := range set.Files {
		out[f.Path] = f.NewHash
		if c.lie {
			out[f.Path] = "sha256:" + strings.Repeat("0", 64)
		}
	}
	return out, nil
}

func TestClientSideApplyIsVerified(t *testing.T) {
	for _, lie := range []bool{false, true} {
		r := newRig(t, map[string]string{"main.go": mainGo, "util.go": utilGo}, twoFileScript(t)...)
		h := &clientHost{host: host{answer: func(engine.ApprovalRequest) engine.ApprovalDecision { return engine.ApprovalDecision{Approved: true} }}, lie: lie}
		_, events := r.run(t, h, "go")
		var result *engine.PatchResultEvent
		for _, e := range events {
			if d, ok := e.(*engine.PatchResultEvent); ok {
				result = d
			}
		}
		if !result.ClientSide || (lie && (result.Status != engine.PatchFailed || !strings.Contains(result.Reason, "is not what the approved patch produces"))) || (!lie && result.Status != engine.PatchApplied) {
			t.Errorf("lie=%v: %+v", lie, result)
		}
		if r.read(t, "main.go") != mainGo {
			t.Error("the engine wrote a file the client was to apply")
		}
	}
}

func TestEditEscapesRefused(t *testing.T) {
	outside := t.TempDir()
	script := []string{
		line(t, map[string]any{"tool_calls": []any{
			call("c1", "write_file", map[string]any{"path": "../escape.txt", "content": "x"}),
			call("c2", "write_file", map[string]any{"path": filepath.Join(outside, "abs.txt"), "content": "x"}),
			call("c3", "delete_file", map[string]any{"path": "../../etc/passwd"}),
		}}),
		line(t, map[string]any{"text": "ok"}),
	}
	r := newRig(t, map[string]string{"a.txt": "a\n"}, script...)
	h := &host{answer: func(engine.ApprovalRequest) engine.ApprovalDecision { return engine.ApprovalDecision{Approved: true} }}
	_, events := r.run(t, h, "escape")
	denied := 0
	for _, e := range events {
		if d, ok := e.(*engine.ToolCallEvent); ok && d.Status == engine.ToolFailed && d.ErrorCode == engine.ToolCodePermissionDenied {
			denied++
		}
		if _, ok := e.(*engine.PatchProposedEvent); ok {
			t.Error("an escaping edit was proposed")
		}
	}
	if denied != 3 || len(h.asked) != 0 {
		t.Errorf("%d of 3 refused, %d approvals asked", denied, len(h.asked))
	}
	if _, err := os.Stat(filepath.Join(outside, "abs.txt")); err == nil {
		t.Error("a file was written outside the workspace")
	}
	_ = bytes.Equal
}

// TestHunkScopeAppliesOnlyApprovedHunks approves one of two hunks of one
// file through a turn: exactly that hunk is written, the set is partially
// applied, and undo restores the file.
func TestHunkScopeAppliesOnlyApprovedHunks(t *testing.T) {
	var lines []string
	for i := range 40 {
		lines = append(lines, fmt.Sprintf("line %d\n", i))
	}
	orig := strings.Join(lines, "")
	edited := strings.Replace(strings.Replace(orig, "line 2\n", "line two\n", 1), "line 35\n", "line thirty-five\n", 1)
	r := newRig(t, map[string]string{"notes.txt": orig},
		line(t, map[string]any{"text": "Two edits.", "tool_calls": []any{
			call("c1", "write_file", map[string]any{"path": "notes.txt", "content": edited}),
		}}),
		line(t, map[string]any{"text": "Done."}))
	h := &host{answer: func(req engine.ApprovalRequest) engine.ApprovalDecision {
		return engine.ApprovalDecision{Approved: true, Scope: "hunk", Hunks: map[string][]int{"notes.txt": {1}}}
	}}
	_, events := r.run(t, h, "edit notes")
	if len(h.asked) != 1 || len(h.asked[0].PatchSet.Files) != 1 || len(h.asked[0].PatchSet.Files[0].Hunks) != 2 {
		t.Fatalf("asked %+v; want one file with two hunks", h.asked)
	}
	var result *engine.PatchResultEvent
	for _, e := range events {
		if d, ok := e.(*engine.PatchResultEvent); ok {
			result = d
		}
	}
	if result == nil || result.Status != engine.PatchPartiallyApplied {
		t.Fatalf("result %+v; want partially applied", result)
	}
	if got, want := r.read(t, "notes.txt"), strings.Replace(orig, "line 35\n", "line thirty-five\n", 1); got != want {
		t.Errorf("notes.txt = %q, want only the second hunk applied", got)
	}
	if _, err := r.eng.Undo(context.Background(), r.ws, "", false); err != nil || r.read(t, "notes.txt") != orig {
		t.Errorf("undo: %v; file %q", err, r.read(t, "notes.txt"))
	}
}

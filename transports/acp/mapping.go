package acp

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/plexus-agent/plexus/engine"
)

// Limits of what a tool call's content repeats.
const (
	// outputTail is how much of a running call's streamed output the
	// tool call's content keeps (the end of it).
	outputTail = 16 << 10
	// maxLocations caps the locations of one tool call.
	maxLocations = 20
)

// mapper turns one session's engine events into session/update
// notifications: the one place where the event stream meets ACP. It
// follows the tool calls of the turn so that each ends completed or
// failed, whatever the engine reported (or did not, when the turn ended
// first). Not safe for concurrent use; the session serialises it.
type mapper struct {
	root  string
	specs map[string]engine.ToolSpec
	calls map[string]*toolCall
	// order is the order in which calls were announced.
	order []string
	// current is the call running now (the engine runs a turn's calls
	// one at a time), for the command a client terminal runs.
	current string
	// stepLimit is set when the engine stopped the turn at its step limit.
	stepLimit bool
}

// toolCall is what the mapper knows of one tool call.
type toolCall struct {
	id, name  string
	args      json.RawMessage
	kind      sdk.ToolKind
	title     string
	paths     []string // workspace-relative, as the arguments name them
	locations []sdk.ToolCallLocation
	announced bool
	done      bool
	// edit calls propose a patch: they end with the patch's result.
	edit bool
	// content the call shows: streamed output, then the result; diffs of
	// its proposed patch; the client terminal it runs in.
	output   string
	progress string
	diffs    []sdk.ToolCallContent
	terminal string
}

func newMapper(root string, specs []engine.ToolSpec) *mapper {
	m := &mapper{root: root, specs: map[string]engine.ToolSpec{}, calls: map[string]*toolCall{}}
	for _, sp := range specs {
		m.specs[sp.Name] = sp
	}
	return m
}

// updates maps one event. It returns nil for events ACP has no place for.
func (m *mapper) updates(ev engine.Event) []sdk.SessionUpdate {
	switch d := ev.Data.(type) {
	case *engine.TokenEvent:
		return one(sdk.UpdateAgentMessageText(d.Text))
	case *engine.ThinkingEvent:
		return one(sdk.UpdateAgentThoughtText(d.Message + "\n"))
	case *engine.RetrievalEvent:
		return one(sdk.UpdateAgentThoughtText(fmt.Sprintf("%s: %s\n", d.Stage, d.Message)))
	case *engine.PlanEvent:
		return one(planUpdate(d))
	case *engine.ToolCallEvent:
		return m.toolCall(d)
	case *engine.ApprovalEvent:
		// The call waits for session/request_permission (asked by the
		// Host): it is announced as pending first. A patch set's
		// approval is about edit calls announced already.
		if d.Request.CallID == "" || d.Request.PatchSet != nil {
			return nil
		}
		c := m.call(d.Request.CallID, d.Request.Tool, d.Request.Args)
		if c.announced {
			return nil
		}
		return one(m.announce(c, sdk.ToolCallStatusPending))
	case *engine.PatchProposedEvent:
		return m.patchProposed(&d.Set)
	case *engine.PatchResultEvent:
		return m.patchResult(d)
	case *engine.ErrorEvent:
		if d.Code == engine.CodeInternal && strings.HasPrefix(d.Message, "stopped after ") {
			m.stepLimit = true
		}
		if !d.Recoverable || d.Details["call_id"] != nil || d.Details["patch_set_id"] != nil {
			// Tool and patch errors show on their tool call; the error
			// that ends a turn is the prompt's answer.
			return nil
		}
		return one(sdk.UpdateAgentThoughtText("Warning: " + d.Message + "\n"))
	case *engine.FinalEvent:
		return m.closeAll(d)
	}
	return nil
}

func one(u sdk.SessionUpdate) []sdk.SessionUpdate { return []sdk.SessionUpdate{u} }

// call returns the call id, creating its record on first sight.
func (m *mapper) call(id, name string, args json.RawMessage) *toolCall {
	if c, ok := m.calls[id]; ok {
		return c
	}
	spec := m.specs[name]
	c := &toolCall{id: id, name: name, args: args, edit: spec.Kind == engine.ToolKindEdit}
	c.kind = toolKind(name, spec)
	c.title = toolTitle(name, args)
	c.paths = argPaths(args)
	line := startLine(args)
	for _, p := range c.paths {
		if len(c.locations) == maxLocations {
			break
		}
		loc := sdk.ToolCallLocation{Path: m.abs(p)}
		if line > 0 {
			loc.Line = sdk.Ptr(line)
		}
		c.locations = append(c.locations, loc)
	}
	m.calls[id] = c
	return c
}

// announce is the tool_call update that introduces c.
func (m *mapper) announce(c *toolCall, status sdk.ToolCallStatus) sdk.SessionUpdate {
	c.announced = true
	m.order = append(m.order, c.id)
	tc := &sdk.SessionUpdateToolCall{
		ToolCallId: sdk.ToolCallId(c.id), Title: c.title, Kind: c.kind, Status: status,
		Locations: c.locations, RawInput: rawJSON(c.args), Content: c.content(),
		// ACP v1 has no field for the tool's name; clients that want it
		// (to group or filter calls) find it here.
		Meta: map[string]any{"tool_name": c.name},
	}
	if status == sdk.ToolCallStatusCompleted || status == sdk.ToolCallStatusFailed {
		c.done = true
	}
	return sdk.SessionUpdate{ToolCall: tc}
}

// update is a tool_call_update of c (announcing it first when needed).
func (m *mapper) update(c *toolCall, status sdk.ToolCallStatus, rawOutput any) []sdk.SessionUpdate {
	if !c.announced {
		u := m.announce(c, status)
		u.ToolCall.RawOutput = rawOutput
		return one(u)
	}
	up := &sdk.SessionToolCallUpdate{ToolCallId: sdk.ToolCallId(c.id), Content: c.content(), RawOutput: rawOutput}
	if status != "" {
		up.Status = sdk.Ptr(status)
		if status == sdk.ToolCallStatusCompleted || status == sdk.ToolCallStatusFailed {
			c.done = true
		}
	}
	return one(sdk.SessionUpdate{ToolCallUpdate: up})
}

func (m *mapper) toolCall(d *engine.ToolCallEvent) []sdk.SessionUpdate {
	c := m.call(d.CallID, d.Name, d.Args)
	switch d.Status {
	case engine.ToolStarted:
		m.current = c.id
		return m.update(c, sdk.ToolCallStatusInProgress, nil)
	case engine.ToolRunning:
		if d.Update == nil {
			return nil
		}
		if o := d.Update.Output; o != nil {
			c.output = tail(c.output+o.Text, outputTail)
		}
		if p := d.Update.Progress; p != nil {
			c.progress = p.Message
			if p.Percentage != nil {
				c.progress = fmt.Sprintf("%s (%.0f%%)", p.Message, *p.Percentage)
			}
		}
		return m.update(c, "", nil)
	case engine.ToolCompleted:
		c.progress = ""
		if c.edit {
			// The proposal is made; the call ends with its patch.
			c.output = d.Summary
			return m.update(c, "", rawJSON(d.Result))
		}
		if c.output == "" {
			c.output = d.Summary
		} else {
			c.output = tail(c.output, outputTail) + "\n" + d.Summary
		}
		c.locations = append(c.locations, m.resultLocations(c, d.Result)...)
		ups := m.update(c, sdk.ToolCallStatusCompleted, rawJSON(d.Result))
		if len(c.locations) > 0 && ups[0].ToolCallUpdate != nil {
			ups[0].ToolCallUpdate.Locations = c.locations
		}
		return ups
	case engine.ToolFailed, engine.ToolDenied:
		c.progress = ""
		what := "failed"
		if d.Status == engine.ToolDenied {
			what = "was not run"
		}
		c.output = fmt.Sprintf("%s %s: %s", d.Name, what, d.Error)
		return m.update(c, sdk.ToolCallStatusFailed, map[string]string{"error": d.Error, "code": string(d.ErrorCode)})
	}
	return nil
}

// patchProposed shows each edit call of the set its diffs, pending the
// approval.
func (m *mapper) patchProposed(set *engine.PatchSet) []sdk.SessionUpdate {
	var out []sdk.SessionUpdate
	for _, id := range set.CallIDs {
		c, ok := m.calls[id]
		if !ok {
			continue
		}
		c.diffs = nil
		for _, f := range m.filesOf(c, set) {
			c.diffs = append(c.diffs, m.diff(f))
		}
		out = append(out, m.update(c, sdk.ToolCallStatusPending, nil)...)
	}
	return out
}

// patchResult ends each edit call of the set: completed when a file it
// edited was applied, failed otherwise.
func (m *mapper) patchResult(r *engine.PatchResultEvent) []sdk.SessionUpdate {
	var out []sdk.SessionUpdate
	for _, id := range m.order {
		c := m.calls[id]
		if !c.edit || c.done || len(c.diffs) == 0 {
			continue
		}
		var applied, rejected []string
		for _, p := range c.diffPaths() {
			if slices.Contains(r.Applied, p) {
				applied = append(applied, p)
			} else {
				rejected = append(rejected, p)
			}
		}
		status := sdk.ToolCallStatusCompleted
		switch {
		case len(applied) == 0:
			status = sdk.ToolCallStatusFailed
			c.output = fmt.Sprintf("Not applied (%s)", r.Status)
			if r.Reason != "" {
				c.output += ": " + r.Reason
			}
		case len(rejected) > 0:
			c.output = fmt.Sprintf("Applied %s; not applied: %s", strings.Join(applied, ", "), strings.Join(rejected, ", "))
		default:
			c.output = "Applied " + strings.Join(applied, ", ")
		}
		out = append(out, m.update(c, status, map[string]any{"patch_set_id": r.SetID, "status": r.Status,
			"applied_files": applied, "rejected_files": rejected, "applied_id": r.AppliedID})...)
	}
	return out
}

// closeAll ends every call the turn left open: an edit call whose patch
// never came to a decision, a call cut short by cancellation.
func (m *mapper) closeAll(f *engine.FinalEvent) []sdk.SessionUpdate {
	var out []sdk.SessionUpdate
	for _, id := range m.order {
		c := m.calls[id]
		if c.done {
			continue
		}
		why := "the turn ended (" + string(f.Status) + ") before this call finished"
		if c.edit && f.Status == engine.TurnCompleted {
			why = "its change was not applied"
		}
		c.progress = ""
		c.output = strings.TrimSpace(c.output + "\n" + why)
		out = append(out, m.update(c, sdk.ToolCallStatusFailed, nil)...)
	}
	return out
}

// content is what a call shows: its diffs, its terminal, its output.
func (c *toolCall) content() []sdk.ToolCallContent {
	var out []sdk.ToolCallContent
	out = append(out, c.diffs...)
	if c.terminal != "" {
		out = append(out, sdk.ToolTerminalRef(c.terminal))
	}
	text := strings.TrimSpace(c.output)
	if c.progress != "" {
		text = strings.TrimSpace(text + "\n" + c.progress)
	}
	if text != "" {
		out = append(out, sdk.ToolContent(sdk.TextBlock(text)))
	}
	return out
}

// diffPaths are the workspace paths of c's diffs.
func (c *toolCall) diffPaths() []string {
	var out []string
	for _, d := range c.diffs {
		if d.Diff != nil {
			out = append(out, d.Diff.Meta["path"].(string))
		}
	}
	return out
}

// filesOf returns the files of set that call c proposed: those its
// arguments name (the file itself, symlinks resolved, is the set's path),
// or all of them when c is the set's only call.
func (m *mapper) filesOf(c *toolCall, set *engine.PatchSet) []engine.FilePatch {
	var out []engine.FilePatch
	for _, f := range set.Files {
		for _, p := range c.paths {
			if cleanRel(p) == f.Path || realRel(m.root, p) == f.Path {
				out = append(out, f)
				break
			}
		}
	}
	if len(out) == 0 && len(set.CallIDs) == 1 {
		out = set.Files
	}
	return out
}

// diff is the ACP diff content of one file of a patch set: the whole old
// and new text, as ACP's Diff carries them. Its _meta keeps the
// workspace path for patchResult.
func (m *mapper) diff(f engine.FilePatch) sdk.ToolCallContent {
	d := sdk.ToolDiffContent(m.abs(f.Path), string(f.New))
	if f.Op != "create" {
		d.Diff.OldText = sdk.Ptr(string(f.Base))
	}
	d.Diff.Meta = map[string]any{"path": f.Path, "op": f.Op, "patch_id": f.ID}
	return d
}

// resultLocations are the files a completed search or listing found, from
// its result's matches, files or results (each a path or an object with
// path or file_path and line), at most maxLocations with those of the
// arguments.
func (m *mapper) resultLocations(c *toolCall, result json.RawMessage) []sdk.ToolCallLocation {
	if c.kind != sdk.ToolKindSearch || len(result) == 0 {
		return nil
	}
	var r map[string]json.RawMessage
	if json.Unmarshal(result, &r) != nil {
		return nil
	}
	var out []sdk.ToolCallLocation
	seen := map[string]bool{}
	for _, key := range []string{"matches", "results", "symbols", "hits"} {
		var items []struct {
			Path     string `json:"path"`
			FilePath string `json:"file_path"`
			Line     int    `json:"line"`
		}
		if json.Unmarshal(r[key], &items) != nil {
			continue
		}
		for _, it := range items {
			p := cmpOr(it.Path, it.FilePath)
			if p == "" || len(c.locations)+len(out) >= maxLocations {
				continue
			}
			k := fmt.Sprintf("%s:%d", p, it.Line)
			if seen[k] {
				continue
			}
			seen[k] = true
			loc := sdk.ToolCallLocation{Path: m.abs(p)}
			if it.Line > 0 {
				loc.Line = sdk.Ptr(it.Line)
			}
			out = append(out, loc)
		}
	}
	return out
}

// abs is a workspace path made absolute (ACP locations and diffs carry
// absolute paths).
func (m *mapper) abs(p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(m.root, filepath.FromSlash(cleanRel(p)))
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// planUpdate maps a plan. The engine's steps have no priority; ACP needs
// one, and every entry gets "medium".
func planUpdate(p *engine.PlanEvent) sdk.SessionUpdate {
	entries := make([]sdk.PlanEntry, 0, len(p.Steps))
	for _, s := range p.Steps {
		status := sdk.PlanEntryStatusPending
		switch s.Status {
		case engine.StepInProgress:
			status = sdk.PlanEntryStatusInProgress
		case engine.StepCompleted:
			status = sdk.PlanEntryStatusCompleted
		}
		content := s.Description
		if len(s.FilesInvolved) > 0 {
			content += " (" + strings.Join(s.FilesInvolved, ", ") + ")"
		}
		entries = append(entries, sdk.PlanEntry{Content: content, Priority: sdk.PlanEntryPriorityMedium, Status: status})
	}
	return sdk.UpdatePlan(entries...)
}

// toolKind is the ACP kind of a tool: by what the engine knows of it (an
// edit tool, a command tool, update_plan), then by its name.
func toolKind(name string, spec engine.ToolSpec) sdk.ToolKind {
	lower := strings.ToLower(name)
	switch {
	case name == "update_plan":
		return sdk.ToolKindThink
	case spec.Kind == engine.ToolKindEdit && strings.Contains(lower, "delete"):
		return sdk.ToolKindDelete
	case spec.Kind == engine.ToolKindEdit:
		return sdk.ToolKindEdit
	case spec.Kind == engine.ToolKindCommand:
		return sdk.ToolKindExecute
	case strings.Contains(lower, "search"), strings.Contains(lower, "list"), strings.Contains(lower, "grep"), strings.Contains(lower, "find"):
		return sdk.ToolKindSearch
	case strings.Contains(lower, "fetch"), strings.Contains(lower, "http"), strings.Contains(lower, "web"):
		return sdk.ToolKindFetch
	case strings.Contains(lower, "read"):
		return sdk.ToolKindRead
	}
	return sdk.ToolKindOther
}

// toolTitle says what a call does and what it touches, from its
// arguments: "Read README.md (lines 1-40)", "Run `go test ./...`".
func toolTitle(name string, raw json.RawMessage) string {
	var a map[string]any
	json.Unmarshal(raw, &a)
	str := func(k string) string { s, _ := a[k].(string); return s }
	num := func(k string) int { f, _ := a[k].(float64); return int(f) }
	paths := strings.Join(argPaths(raw), ", ")
	switch name {
	case "read_file":
		t := "Read " + str("path")
		if s, e := num("start_line"), num("end_line"); s > 0 || e > 0 {
			switch {
			case e == 0:
				t += fmt.Sprintf(" (from line %d)", s)
			case s == 0:
				t += fmt.Sprintf(" (to line %d)", e)
			default:
				t += fmt.Sprintf(" (lines %d-%d)", s, e)
			}
		}
		return t
	case "list_files":
		return "List " + cmpOr(str("path"), ".")
	case "write_file":
		return "Write " + str("path")
	case "edit_file":
		return "Edit " + str("path")
	case "delete_file":
		return "Delete " + str("path")
	case "update_plan":
		return "Update the plan"
	case "search_text":
		t := "Search text"
		if q := cmpOr(str("pattern"), str("query")); q != "" {
			t += fmt.Sprintf(" %q", q)
		}
		if paths != "" {
			t += " in " + paths
		}
		return t
	case "search_symbols":
		return fmt.Sprintf("Search symbols %q", str("query"))
	case "vector_search":
		return fmt.Sprintf("Search code like %q", str("query"))
	}
	if cmd := str("command"); cmd != "" {
		t := "Run `" + truncate(cmd, 120) + "`"
		if cwd := str("cwd"); cwd != "" {
			t += " in " + cwd
		}
		return t
	}
	if paths != "" {
		return name + " " + paths
	}
	return name
}

// argPaths are the paths a call's arguments name ("path", "file_path",
// "paths", "cwd"), as the engine's policy reads them.
func argPaths(raw json.RawMessage) []string {
	var a map[string]any
	if json.Unmarshal(raw, &a) != nil {
		return nil
	}
	var out []string
	for _, k := range []string{"path", "file_path", "cwd"} {
		if s, ok := a[k].(string); ok && s != "" {
			out = append(out, s)
		}
	}
	if list, ok := a["paths"].([]any); ok {
		for _, v := range list {
			if s, ok := v.(string); ok && s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// startLine is a call's "start_line" or "line" argument; 0 when none.
func startLine(raw json.RawMessage) int {
	var a struct {
		Start *int `json:"start_line"`
		Line  *int `json:"line"`
	}
	json.Unmarshal(raw, &a)
	switch {
	case a.Start != nil && *a.Start > 0:
		return *a.Start
	case a.Line != nil && *a.Line > 0:
		return *a.Line
	}
	return 0
}

// rawJSON passes a JSON value through as rawInput or rawOutput; nil for
// none or invalid JSON (which then is a string).
func rawJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	if !json.Valid(b) {
		return string(b)
	}
	return b
}

// tail is the last n bytes of s, cut on a line or rune boundary.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 && i < 200 {
		return "…" + s[i:]
	}
	for len(s) > 0 && s[0]&0xC0 == 0x80 {
		s = s[1:]
	}
	return "…" + s
}

// truncate cuts s to n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

package unixrpc

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/plexus-agent/plexus/engine"
)

// maxOutputBytes caps a tool's output in tool.complete and its
// tool_output block.
const maxOutputBytes = 64 << 10

// note is one notification made from an engine event, before it is
// queued. tok is set for a token (which the outbox may batch); approval
// for a tool.request_approval (the connection registers it before it goes
// out); final for stream.complete, which the query sends after the turn
// has ended.
type note struct {
	method   string
	params   any
	tok      *tokenItem
	approval *engine.ApprovalRequest
	final    bool
}

// mapper turns the events of one query into notifications. One mapper
// sees every event of its query, in order.
type mapper struct {
	queryID string
	// stream sends tokens; without it the answer goes out as one text
	// block at the end.
	stream bool
	// approvalTimeout is tool.request_approval's timeout, in seconds.
	approvalTimeout int
	// nextBlock returns a new block id.
	nextBlock func() string

	tokens int // tokens seen so far (the next token's index)
	fence  fenceScanner
}

// notes maps one event: the single place where engine events become
// wire messages. Events the protocol has no message for map to none.
func (m *mapper) notes(ev engine.Event) []note {
	var out []note
	if _, isToken := ev.Data.(*engine.TokenEvent); !isToken {
		// Any other event ends the text of a model reply.
		out = m.codeBlocks(m.fence.flush())
	}
	switch d := ev.Data.(type) {
	case *engine.ThinkingEvent:
		out = append(out, m.thinking(phase(d.Phase), d.Message))
	case *engine.RetrievalEvent:
		msg := d.Message
		if msg == "" {
			msg = fmt.Sprintf("%s: %d results", d.Stage, d.Count)
		}
		out = append(out, m.thinking("analyzing", msg))
	case *engine.PlanEvent:
		var b strings.Builder
		for _, s := range d.Steps {
			fmt.Fprintf(&b, "%d. %s", s.Number, s.Description)
			if s.Status != "" {
				fmt.Fprintf(&b, " [%s]", s.Status)
			}
			b.WriteByte('\n')
		}
		if d.Rationale != "" {
			b.WriteString("\n" + d.Rationale + "\n")
		}
		out = append(out, m.thinking("planning", fmt.Sprintf("Planned %d steps", len(d.Steps))),
			m.block(block{Type: blockText, Content: b.String(), Metadata: map[string]any{"kind": "plan", "steps": d.Steps}}))
	case *engine.TokenEvent:
		idx := m.tokens
		m.tokens++
		if m.stream {
			out = append(out, note{method: methodToken, tok: &tokenItem{queryID: m.queryID, token: d.Text, index: idx}})
		}
		out = append(out, m.codeBlocks(m.fence.feed(d.Text))...)
	case *engine.ToolCallEvent:
		out = append(out, m.toolCall(d)...)
	case *engine.ApprovalEvent:
		r := d.Request
		out = append(out, note{method: methodApproval, approval: &r, params: m.approval(r)},
			m.block(block{Type: blockInteractive, Content: r.Description, Metadata: map[string]any{
				"kind": "approval", "execution_id": executionID(r), "tool": r.Tool, "risk": r.Risk.Level,
			}}))
	case *engine.PatchProposedEvent:
		for _, f := range d.Set.Files {
			out = append(out, m.block(block{Type: blockDiff, Language: "diff", Content: f.Diff, Metadata: map[string]any{
				"file": f.Path, "diff": true, "executable": false, "op": f.Op, "patch_id": f.ID,
				"patch_set_id": d.Set.ID, "requires_approval": d.RequiresApproval,
			}}))
		}
	case *engine.PatchResultEvent:
		text := fmt.Sprintf("Patch %s", strings.ReplaceAll(d.Status, "_", " "))
		if len(d.Applied) > 0 {
			text += ": " + strings.Join(d.Applied, ", ")
		}
		if d.Reason != "" {
			text += " (" + d.Reason + ")"
		}
		out = append(out, m.block(block{Type: blockText, Content: text, Metadata: map[string]any{
			"kind": "patch_result", "status": d.Status, "patch_set_id": d.SetID,
			"applied_files": nonNil(d.Applied), "rejected_files": nonNil(d.Rejected),
		}}))
	case *engine.ErrorEvent:
		code := eventCode(d.Code)
		if !d.Recoverable {
			out = append(out, note{method: methodError, params: streamErrorParams{QueryID: m.queryID,
				Error: streamError{Code: code, Message: codeText[code][1], Details: d.Message}}})
			break
		}
		if _, ofCall := d.Details["call_id"]; ofCall {
			break // tool.complete reported it
		}
		out = append(out, m.block(block{Type: blockError, Content: d.Message, Metadata: map[string]any{
			"code": code, "error_code": string(d.Code), "recoverable": true,
		}}))
	case *engine.FinalEvent:
		if !m.stream && d.Message != "" {
			out = append(out, m.block(block{Type: blockText, Content: d.Message, Metadata: map[string]any{"kind": "answer"}}))
		}
		out = append(out, m.complete(d))
	}
	return out
}

func (m *mapper) thinking(phase, msg string) note {
	return note{method: methodThinking, params: thinkingParams{QueryID: m.queryID, Phase: phase, Message: msg}}
}

func (m *mapper) block(b block) note {
	return note{method: methodBlock, params: blockParams{QueryID: m.queryID, BlockID: m.nextBlock(), Block: b}}
}

// codeBlocks turns fenced blocks of the answer text into code blocks
// (diff blocks for diff and patch fences).
func (m *mapper) codeBlocks(fs []fenced) []note {
	var out []note
	for _, f := range fs {
		typ := blockCode
		if f.lang == "diff" || f.lang == "patch" {
			typ = blockDiff
		}
		md := map[string]any{"diff": typ == blockDiff, "executable": isShell(f.lang)}
		if f.unterminated {
			md["unterminated"] = true
		}
		out = append(out, m.block(block{Type: typ, Language: f.lang, Content: f.content, Metadata: md}))
	}
	return out
}

// toolCall maps a tool call event: progress while it runs, tool.complete
// and a block when it ends.
func (m *mapper) toolCall(d *engine.ToolCallEvent) []note {
	progressNote := func(p progress) note {
		return note{method: methodProgress, params: progressParams{ExecutionID: d.CallID, QueryID: m.queryID, Progress: p}}
	}
	switch d.Status {
	case engine.ToolStarted:
		zero := 0.0
		return []note{progressNote(progress{Percentage: &zero, Status: "started", Message: "Running " + d.Name})}
	case engine.ToolRunning:
		u := d.Update
		switch {
		case u == nil:
			return nil
		case u.Progress != nil:
			return []note{progressNote(progress{Percentage: u.Progress.Percentage, Status: "processing", Message: u.Progress.Message})}
		case u.Output != nil:
			return []note{progressNote(progress{Status: "processing", Output: &toolOutput{Stream: u.Output.Stream, Text: u.Output.Text}})}
		}
		return nil
	case engine.ToolCompleted:
		output := outputText(d.Result)
		out := []note{{method: methodToolDone, params: toolCompleteParams{ExecutionID: d.CallID, QueryID: m.queryID, Status: "success",
			Result: toolResult{Output: output, FilesModified: []string{}, DurationMS: d.Duration.Milliseconds(), Summary: d.Summary}}}}
		if output != "" {
			out = append(out, m.block(block{Type: blockToolOutput, Content: output, Metadata: map[string]any{
				"tool": d.Name, "execution_id": d.CallID, "summary": d.Summary,
			}}))
		}
		return out
	}
	// failed or denied
	code := toolErrorCode(d)
	status := "error"
	switch {
	case d.Status == engine.ToolDenied:
		status = "denied"
	case d.ErrorCode == engine.ToolCodeCancelled:
		status = "cancelled"
	case d.ErrorCode == engine.ToolCodeTimeout:
		status = "timeout"
	}
	return []note{{method: methodToolDone, params: toolCompleteParams{ExecutionID: d.CallID, QueryID: m.queryID, Status: status,
		Result: toolResult{FilesModified: []string{}, DurationMS: d.Duration.Milliseconds(),
			Error: &streamError{Code: code, Message: codeText[code][1], Details: d.Error}}}}}
}

// approval maps an approval request.
func (m *mapper) approval(r engine.ApprovalRequest) approvalParams {
	p := approvalParams{
		ExecutionID: executionID(r), QueryID: m.queryID,
		Tool:      toolInfo{Name: r.Tool, Description: r.Description, Category: toolCategory(r)},
		Arguments: r.Args,
		RiskAssessment: riskAssessment{Level: string(r.Risk.Level), Reasons: nonNil(r.Risk.Reasons),
			Reversible: r.Risk.Reversible},
		Timeout: m.approvalTimeout,
	}
	if p.RiskAssessment.Level == "" {
		p.RiskAssessment.Level = string(engine.RiskMedium)
	}
	if set := r.PatchSet; set != nil {
		files := make([]string, 0, len(set.Files))
		for _, f := range set.Files {
			files = append(files, f.Path)
		}
		p.Arguments, _ = json.Marshal(map[string]any{"patch_set_id": set.ID, "files": files, "rationale": set.Rationale})
	}
	if len(p.Arguments) == 0 {
		p.Arguments = json.RawMessage(`{}`)
	}
	if r.Preview != nil {
		p.Preview = &preview{Type: r.Preview.Type, Content: r.Preview.Content}
	}
	return p
}

// complete maps the final event to stream.complete.
func (m *mapper) complete(d *engine.FinalEvent) note {
	md := d.Metadata
	total := md.CompletionTokens
	if total == 0 {
		total = int64(m.tokens)
	}
	tps := 0.0
	if secs := md.Duration.Seconds(); secs > 0 {
		tps = math.Round(float64(total)/secs*10) / 10
	}
	status := map[engine.TurnStatus]string{
		engine.TurnCompleted: "success", engine.TurnError: "error",
		engine.TurnCancelled: "cancelled", engine.TurnTimeout: "timeout",
	}[d.Status]
	if status == "" {
		status = "error"
	}
	cm := completeMeta{
		TotalTokens: total, TokensPerSecond: tps, ToolsExecuted: nonNil(md.ToolsUsed), ModelUsed: md.Model,
		DurationMS: md.Duration.Milliseconds(), PromptTokens: md.PromptTokens, CompletionTokens: md.CompletionTokens,
		FilesModified: nonNil(md.FilesModified),
	}
	if d.Status != engine.TurnCompleted {
		cm.Error = d.Error
	}
	return note{method: methodComplete, final: true, params: completeParams{QueryID: m.queryID, Status: status, Metadata: cm}}
}

// ended returns the stream.complete of a query that ended without a turn:
// cancelled before it ran, or refused by the engine (err). A refusal is
// reported by stream.error first.
func (m *mapper) ended(status string, err error) []note {
	var out []note
	cm := completeMeta{ToolsExecuted: []string{}, FilesModified: []string{}}
	if err != nil {
		code := engineCode(err)
		out = append(out, note{method: methodError, params: streamErrorParams{QueryID: m.queryID,
			Error: streamError{Code: code, Message: codeText[code][1], Details: err.Error()}}})
		cm.Error = err.Error()
	}
	return append(out, note{method: methodComplete, final: true, params: completeParams{QueryID: m.queryID, Status: status, Metadata: cm}})
}

// executionID is the execution_id of an approval: the tool call's id, so
// that tool.request_approval, tool.progress and tool.complete of one call
// share it; the request's own id for an approval of no single call (a
// patch set).
func executionID(r engine.ApprovalRequest) string {
	if r.CallID != "" {
		return r.CallID
	}
	return r.ID
}

// phase maps the engine's phases onto the contract's four: retrieving is
// part of analyzing.
func phase(p engine.Phase) string {
	switch p {
	case engine.PhaseAnalyzing, engine.PhasePlanning, engine.PhaseGenerating, engine.PhaseExecuting:
		return string(p)
	}
	return string(engine.PhaseAnalyzing)
}

// toolCategory is tool.request_approval's tool.category.
func toolCategory(r engine.ApprovalRequest) string {
	n := r.Tool
	switch {
	case r.Command != nil || strings.Contains(n, "command") || strings.Contains(n, "shell") || strings.Contains(n, "exec"):
		return "shell"
	case r.PatchSet != nil || strings.Contains(n, "file") || strings.Contains(n, "patch") || strings.Contains(n, "dir"):
		return "file_system"
	case strings.Contains(n, "search"):
		return "search"
	case n == "update_plan":
		return "planning"
	case strings.Contains(n, "http") || strings.Contains(n, "fetch") || strings.Contains(n, "web"):
		return "network"
	}
	return "other"
}

// outputText is a tool result as text: a string result as it is, the
// "content" of a file read, the stdout and stderr of a command, other
// JSON compact; cut to maxOutputBytes.
func outputText(res json.RawMessage) string {
	if len(res) == 0 {
		return ""
	}
	var s string
	text := string(res)
	if json.Unmarshal(res, &s) == nil {
		text = s
	} else {
		var obj map[string]any
		if json.Unmarshal(res, &obj) == nil {
			if c, ok := obj["content"].(string); ok {
				text = c
			} else if so, ok := obj["stdout"].(string); ok {
				text = so
				if se, _ := obj["stderr"].(string); se != "" {
					text += se
				}
			}
		}
	}
	return cut(text, maxOutputBytes)
}

// cut shortens s to at most n bytes on a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + fmt.Sprintf("\n… (%d more bytes)", len(s)-i)
}

func isShell(lang string) bool {
	switch lang {
	case "sh", "bash", "zsh", "fish", "shell", "console", "shell-session", "powershell", "ps1":
		return true
	}
	return false
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

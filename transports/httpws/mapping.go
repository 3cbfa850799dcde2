package httpws

import (
	"encoding/json"
	"strconv"

	"github.com/plexus-agent/plexus/engine"
)

// mapper turns a session's engine events into server messages. It keeps
// the text of the current turn's assistant message for assistant.token's
// cumulative_text, so one mapper must see every event of a turn in order.
//
// cumulative_text is the text of the assistant message being written:
// each model call of a turn (engine.TokenEvent.Step) writes one message,
// so it starts again with the first token of the next call, and the last
// call's text is assistant.message_final's message. A client shows each
// step's text as its own message, beside the tool calls it made, as GET
// /v1/sessions/{id} lists them.
type mapper struct {
	// texts are the turns' current message text so far, by turn id,
	// JSON-escaped (without quotes): the k-th token message repeats all k
	// tokens, so escaping only the new one keeps the cost of a turn's
	// token messages to copying. Kept per turn, because events of an
	// ended turn (a patch approval answered later) may come between a
	// running turn's tokens; dropped at the turn's final event.
	texts map[string][]byte
	// steps are the model call each turn's text is of.
	steps map[string]int
}

// preEncoded is a server message already encoded as JSON; senders write it
// as it is instead of marshalling it.
type preEncoded []byte

// encode returns the JSON of a server message.
func encode(m any) ([]byte, error) {
	if p, ok := m.(preEncoded); ok {
		return p, nil
	}
	return json.Marshal(m)
}

// seed sets the text (unescaped) that step of turn had reached, for a
// replay that starts inside the turn.
func (m *mapper) seed(turn string, step int, text string) {
	q, _ := json.Marshal(text)
	m.texts[turn] = q[1 : len(q)-1]
	m.steps[turn] = step
}

// tokenMessage encodes assistant.token ({"type", "seq", "turn_id",
// "token", "cumulative_text"}) and appends the token to the text of its
// turn's step, which a new step starts again.
func (m *mapper) tokenMessage(hd header, tok string, step int) preEncoded {
	q, _ := json.Marshal(tok) // a string always marshals
	prev := m.texts[hd.TurnID]
	if s, ok := m.steps[hd.TurnID]; ok && s != step {
		prev = prev[:0]
	}
	m.steps[hd.TurnID] = step
	text := append(prev, q[1:len(q)-1]...)
	m.texts[hd.TurnID] = text
	turn, _ := json.Marshal(hd.TurnID)
	b := make([]byte, 0, len(text)+len(q)+len(turn)+96)
	b = append(b, `{"type":"`+typeToken+`","seq":`...)
	b = strconv.AppendUint(b, hd.Seq, 10)
	if hd.TurnID != "" {
		b = append(b, `,"turn_id":`...)
		b = append(b, turn...)
	}
	b = append(b, `,"token":`...)
	b = append(b, q...)
	b = append(b, `,"cumulative_text":"`...)
	b = append(b, text...)
	b = append(b, `"}`...)
	return b
}

func newMapper() *mapper { return &mapper{texts: map[string][]byte{}, steps: map[string]int{}} }

// messages returns the server messages of ev (none for events this
// protocol does not carry).
func (m *mapper) messages(ev engine.Event) []any {
	hd := header{Seq: ev.Seq, TurnID: ev.TurnID}
	with := func(t string) header { h := hd; h.Type = t; return h }
	switch d := ev.Data.(type) {
	case *engine.ThinkingEvent:
		return []any{thinking{header: with(typeThinking), Phase: phase(d.Phase), Message: d.Message}}
	case *engine.PlanEvent:
		steps := make([]planStep, len(d.Steps))
		for i, st := range d.Steps {
			steps[i] = planStep{Number: st.Number, Description: st.Description, FilesInvolved: nonNil(st.FilesInvolved), Status: st.Status}
		}
		return []any{plan{header: with(typePlan), Steps: steps, Rationale: d.Rationale}}
	case *engine.RetrievalEvent:
		return []any{retrieveStatus{header: with(typeRetrieveStatus), Stage: d.Stage, ResultsCount: d.Count, Message: d.Message}}
	case *engine.TokenEvent:
		return []any{m.tokenMessage(hd, d.Text, d.Step)}
	case *engine.ToolCallEvent:
		return []any{toolMessage(with(typeToolExecute), d)}
	case *engine.PatchProposedEvent:
		out := make([]any, 0, len(d.Set.Files))
		for _, f := range d.Set.Files {
			out = append(out, patchProposed{
				header: with(typePatchProposed), PatchID: f.ID, PatchSetID: d.Set.ID, FilePath: f.Path, Op: f.Op,
				BaseHash: f.BaseHash, NewHash: f.NewHash, Diff: f.Diff, Rationale: d.Set.Rationale,
				AcceptanceCriteria: nonNil(d.Set.AcceptanceCriteria), RequiresApproval: d.RequiresApproval, Hunks: nonNil(f.Hunks),
			})
		}
		return out
	case *engine.ApprovalEvent:
		return []any{approvalMessage(hd, d.Request)}
	case *engine.CommandRequestEvent:
		r := d.Request
		return []any{commandApproval{
			header: with(typeCommandApproval), CommandID: r.ID, Command: r.Command, WorkingDirectory: r.WorkingDir,
			Environment: nonNilMap(r.Env), RequiresApproval: false, Reason: r.Reason,
		}}
	case *engine.ApprovalResultEvent:
		return []any{approvalResolved{header: with(typeApprovalResolved), RequestID: d.RequestID, Approved: d.Approved,
			Scope: d.Scope, Actor: d.Actor, Reason: d.Reason}}
	case *engine.PatchResultEvent:
		return []any{patchResult{header: with(typePatchResult), PatchSetID: d.SetID, Status: d.Status,
			AppliedFiles: nonNil(d.Applied), RejectedFiles: nonNil(d.Rejected), AppliedID: d.AppliedID,
			ClientSide: d.ClientSide, Reason: d.Reason}}
	case *engine.ErrorEvent:
		return []any{serverError{header: with(typeServerError), Error: errorBody{
			Code: string(d.Code), Message: d.Message, Details: d.Details, Recoverable: d.Recoverable}}}
	case *engine.FinalEvent:
		delete(m.texts, ev.TurnID)
		delete(m.steps, ev.TurnID)
		md := d.Metadata
		return []any{messageFinal{header: with(typeMessageFinal), Message: finalText(d), Metadata: finalMetadata{
			TokensUsed: md.TokensUsed, FilesModified: len(md.FilesModified), ToolsUsed: nonNil(md.ToolsUsed),
			Success: d.Status == engine.TurnCompleted, Status: string(d.Status), Error: d.Error, Model: md.Model,
			PromptTokens: md.PromptTokens, CompletionTokens: md.CompletionTokens, FilesChanged: nonNil(md.FilesModified),
			DurationMS: md.Duration.Milliseconds(),
		}}}
	}
	return nil
}

// finalText is the final message: the answer, or what ended the turn.
func finalText(d *engine.FinalEvent) string {
	if d.Status == engine.TurnCompleted || d.Error == "" {
		return d.Message
	}
	return d.Error
}

// phase maps the engine's phases onto the contract's four; generating
// (reading tool results to write the next step) is shown as analyzing.
func phase(p engine.Phase) string {
	switch p {
	case engine.PhasePlanning, engine.PhaseRetrieving, engine.PhaseExecuting, engine.PhaseAnalyzing:
		return string(p)
	}
	return string(engine.PhaseAnalyzing)
}

// toolMessage maps a tool call event: running updates go out as status
// "started" with progress; a denied call is "failed" with denied true in
// its result.
func toolMessage(hd header, d *engine.ToolCallEvent) toolExecute {
	out := toolExecute{header: hd, CallID: d.CallID, ToolName: d.Name, Args: rawOrEmpty(d.Args)}
	switch d.Status {
	case engine.ToolStarted:
		out.Status = "started"
	case engine.ToolRunning:
		out.Status, out.Progress = "started", d.Update
	case engine.ToolCompleted:
		out.Status = "completed"
		res := map[string]any{"summary": d.Summary, "duration_ms": d.Duration.Milliseconds()}
		if len(d.Result) > 0 {
			res["content"] = json.RawMessage(d.Result)
		}
		out.Result = res
	default:
		out.Status = "failed"
		out.Result = map[string]any{"error": d.Error, "error_code": d.ErrorCode, "denied": d.Status == engine.ToolDenied}
	}
	return out
}

// approvalMessage maps an approval request: command.request_approval for
// a command, tool.request_approval for the rest. A patch set is asked
// about as write_file (delete_file when it only deletes), with its patch
// ids; tool names the contract lists pass through, run_command becomes
// execute_command.
func approvalMessage(hd header, r engine.ApprovalRequest) any {
	if c := r.Command; c != nil {
		hd.Type = typeCommandApproval
		return commandApproval{
			header: hd, CommandID: c.ID, RequestID: r.ID, Command: c.Command, WorkingDirectory: c.WorkingDir,
			Environment: nonNilMap(c.Env), RequiresApproval: true, Reason: orString(c.Reason, r.Description),
			RiskLevel: riskLevel(r.Risk.Level),
		}
	}
	hd.Type = typeToolApproval
	out := toolApproval{
		header: hd, RequestID: r.ID, ToolName: r.Tool, Args: rawOrEmpty(r.Args), RiskLevel: riskLevel(r.Risk.Level),
		Description: r.Description, Reasons: nonNil(r.Risk.Reasons), Reversible: r.Risk.Reversible,
	}
	if set := r.PatchSet; set != nil {
		out.ToolName = "write_file"
		deletesOnly := len(set.Files) > 0
		files := make([]string, 0, len(set.Files))
		for _, f := range set.Files {
			out.PatchIDs = append(out.PatchIDs, f.ID)
			files = append(files, f.Path)
			deletesOnly = deletesOnly && f.Op == "delete"
		}
		if deletesOnly {
			out.ToolName = "delete_file"
		}
		out.PatchSetID = set.ID
		args := map[string]any{"reason": orString(set.Rationale, r.Description), "files": files}
		if len(files) > 0 {
			args["file_path"] = files[0]
		}
		out.Args, _ = json.Marshal(args)
	} else if r.Tool == "run_command" {
		out.ToolName = "execute_command"
	}
	return out
}

// riskLevel maps the engine's four levels onto the contract's three:
// critical is reported as high (the reasons say why).
func riskLevel(l engine.RiskLevel) string {
	switch l {
	case engine.RiskLow, engine.RiskMedium:
		return string(l)
	}
	return string(engine.RiskHigh)
}

func rawOrEmpty(r json.RawMessage) json.RawMessage {
	if len(r) == 0 {
		return json.RawMessage(`{}`)
	}
	return r
}

func orString(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

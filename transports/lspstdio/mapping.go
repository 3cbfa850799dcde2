package lspstdio

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/plexus-agent/plexus/engine"
)

// note is one notification to send.
type note struct {
	method string
	params any
}

// taskMapper maps the events of one task's turn onto notifications. It
// keeps the last unrecoverable error, for $/taskError's details.
type taskMapper struct {
	taskID  string
	lastErr *engine.ErrorEvent
	// text is true once the task streamed text; toolsSince is true when
	// tool calls came after it, so the next text starts a new paragraph.
	text, toolsSince bool
}

func newTaskMapper(taskID string) *taskMapper { return &taskMapper{taskID: taskID} }

// maxArgsShown caps the tool arguments quoted in a thought.
const maxArgsShown = 200

// notes maps one engine event onto the notifications it becomes, in
// order; nil drops it. The FinalEvent becomes the executeTask result (and
// $/taskError), sent by runTask after the turn, so it maps to nothing.
func (m *taskMapper) notes(ev engine.Event) []note {
	switch d := ev.Data.(type) {
	case *engine.TokenEvent:
		if d.Text == "" {
			return nil
		}
		t := d.Text
		if m.text && m.toolsSince {
			// The text of a later model call (after tool calls) is a new
			// paragraph of the stream.
			t = "\n\n" + t
		}
		m.text, m.toolsSince = true, false
		return []note{m.partial(partialText, t)}
	case *engine.ThinkingEvent:
		return []note{status(d.Message, nil)}
	case *engine.RetrievalEvent:
		msg := d.Message
		if msg == "" {
			msg = fmt.Sprintf("%s: %d results", d.Stage, d.Count)
		}
		return []note{status(msg, nil)}
	case *engine.PlanEvent:
		return []note{m.partial(partialThought, planText(d))}
	case *engine.ToolCallEvent:
		m.toolsSince = true
		return m.toolCall(d)
	case *engine.ApprovalEvent:
		return []note{status("Waiting for approval: "+d.Request.Description, nil)}
	case *engine.PatchProposedEvent:
		out := make([]note, 0, len(d.Set.Files))
		for _, f := range d.Set.Files {
			out = append(out, m.partial(partialCode, f.Diff))
		}
		return out
	case *engine.PatchResultEvent:
		return []note{m.partial(partialThought, patchText(d))}
	case *engine.ErrorEvent:
		if !d.Recoverable {
			m.lastErr = d
			return nil
		}
		return []note{{methodLogMessage, logMessage{Type: logWarn, Message: fmt.Sprintf("task %s: %s", m.taskID, d.Message)}}}
	}
	// FinalEvent (the result), ApprovalResultEvent (the host answered it
	// itself), CommandRequestEvent (commands run in the engine here).
	return nil
}

func (m *taskMapper) partial(typ, content string) note {
	return note{methodPartialResult, partialResult{TaskID: m.taskID, Content: content, Type: typ}}
}

func status(msg string, progress *float64) note {
	return note{methodStatusUpdate, statusUpdate{Message: msg, Progress: progress}}
}

// toolCall maps a tool call: started and ended calls become thoughts
// (update_plan's are left to its PlanEvent), progress becomes a status
// update, output is dropped.
func (m *taskMapper) toolCall(d *engine.ToolCallEvent) []note {
	if d.Name == "update_plan" && d.Status != engine.ToolFailed {
		return nil
	}
	switch d.Status {
	case engine.ToolStarted:
		return []note{
			m.partial(partialThought, fmt.Sprintf("Calling %s %s\n", d.Name, argsText(d.Args))),
			status("Running "+d.Name, nil),
		}
	case engine.ToolRunning:
		if d.Update == nil || d.Update.Progress == nil {
			return nil
		}
		p := d.Update.Progress
		return []note{status(d.Name+": "+p.Message, p.Percentage)}
	case engine.ToolCompleted:
		summary := d.Summary
		if summary == "" {
			summary = "done"
		}
		return []note{m.partial(partialThought, fmt.Sprintf("%s: %s\n", d.Name, oneLine(summary)))}
	case engine.ToolDenied:
		return []note{m.partial(partialThought, fmt.Sprintf("%s was not run: %s\n", d.Name, oneLine(d.Error)))}
	default: // failed
		return []note{m.partial(partialThought, fmt.Sprintf("%s failed (%s): %s\n", d.Name, d.ErrorCode, oneLine(d.Error)))}
	}
}

// argsText is a call's arguments, compact and capped.
func argsText(args json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, args) != nil {
		b.Reset()
		b.Write(args)
	}
	return snippet(b.String(), maxArgsShown)
}

func planText(d *engine.PlanEvent) string {
	var b strings.Builder
	b.WriteString("Plan:\n")
	for _, s := range d.Steps {
		fmt.Fprintf(&b, "%d. %s", s.Number, s.Description)
		if s.Status != "" {
			fmt.Fprintf(&b, " [%s]", s.Status)
		}
		if len(s.FilesInvolved) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(s.FilesInvolved, ", "))
		}
		b.WriteString("\n")
	}
	if d.Rationale != "" {
		b.WriteString(d.Rationale + "\n")
	}
	return b.String()
}

func patchText(d *engine.PatchResultEvent) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Changes %s", strings.ReplaceAll(d.Status, "_", " "))
	if len(d.Applied) > 0 {
		fmt.Fprintf(&b, "; applied: %s", strings.Join(d.Applied, ", "))
	}
	if len(d.Rejected) > 0 {
		fmt.Fprintf(&b, "; not applied: %s", strings.Join(d.Rejected, ", "))
	}
	if d.Reason != "" {
		fmt.Fprintf(&b, " (%s)", oneLine(d.Reason))
	}
	b.WriteString("\n")
	return b.String()
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return snippet(s, 500)
}

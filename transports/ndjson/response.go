package ndjson

import (
	"encoding/json"

	"github.com/plexus-agent/plexus/engine"
)

// ProtocolVersion is the version of protocols/ndjson-stdio.md this package
// speaks, sent in the ready line.
const ProtocolVersion = "1.0.0"

// capabilities are sent in the ready line: streamed tokens, tool calls
// reported as tool_use/tool_result, attachments on user_message.
var capabilities = []string{"streaming", "tools", "attachments"}

// cancelledText is the error of a request cancelled because Serve is ending.
const cancelledText = "request cancelled: the agent is shutting down"

// Wire messages. Each embeds head first and tail last, so the fields come
// out in the contract's order: type, id, the payload, timestamp.

// head starts every response but ready.
type head struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

func (h *head) header() (typ, id string) { return h.Type, h.ID }

// tail ends every message.
type tail struct {
	// Timestamp is Unix milliseconds, set when the line is written.
	Timestamp int64 `json:"timestamp"`
}

func (t *tail) stamp(ms int64) { t.Timestamp = ms }

type readyResponse struct {
	Type         string   `json:"type"`
	Version      string   `json:"version"`
	Capabilities []string `json:"capabilities"`
	tail
}

func (r *readyResponse) header() (typ, id string) { return r.Type, "" }

type tokenResponse struct {
	head
	Token string `json:"token"`
	tail
}

type toolUseResponse struct {
	head
	Data toolUseData `json:"data"`
	tail
}

type toolUseData struct {
	ToolID   string          `json:"toolId"`
	ToolName string          `json:"toolName"`
	Input    json.RawMessage `json:"input"`
}

type toolResultResponse struct {
	head
	Data toolResultData `json:"data"`
	tail
}

type toolResultData struct {
	ToolID   string          `json:"toolId"`
	ToolName string          `json:"toolName"`
	Result   json.RawMessage `json:"result"`
}

// toolFailure is the result of a failed or denied tool call.
type toolFailure struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

type doneResponse struct {
	head
	tail
}

type errorResponse struct {
	head
	Error string `json:"error"`
	tail
}

type statusResponse struct {
	head
	Data statusData `json:"data"`
	tail
}

type statusData struct {
	// State is "idle" or "busy".
	State string `json:"state"`
	// ConversationLength counts user and assistant messages.
	ConversationLength int `json:"conversationLength"`
	// Uptime is milliseconds since the engine started.
	Uptime int64 `json:"uptime"`
}

func newReady() *readyResponse {
	return &readyResponse{Type: "ready", Version: ProtocolVersion, Capabilities: capabilities}
}

func newDone(id string) *doneResponse { return &doneResponse{head: head{"done", id}} }

func newError(id, text string) *errorResponse {
	return &errorResponse{head: head{"error", id}, Error: text}
}

func newStatus(id string, d statusData) *statusResponse {
	return &statusResponse{head: head{"status", id}, Data: d}
}

// turnMapper maps the events of one user_message turn onto wire messages.
type turnMapper struct {
	id string // the request id
	// announced holds the call ids that have had a tool_use.
	announced map[string]bool
}

func newTurnMapper(id string) *turnMapper {
	return &turnMapper{id: id, announced: map[string]bool{}}
}

// wire maps one engine event onto the wire messages it becomes, in order;
// nil drops the event. A FinalEvent becomes the turn's terminal message
// (done or error), which isTerminal recognises.
func (m *turnMapper) wire(ev engine.Event) []message {
	switch d := ev.Data.(type) {
	case *engine.TokenEvent:
		if d.Text == "" {
			return nil
		}
		return []message{&tokenResponse{head: head{"token", m.id}, Token: d.Text}}
	case *engine.ToolCallEvent:
		return m.toolCall(d)
	case *engine.FinalEvent:
		switch d.Status {
		case engine.TurnCompleted:
			return []message{newDone(m.id)}
		case engine.TurnCancelled:
			return []message{newError(m.id, cancelledText)}
		}
		text := d.Error
		if text == "" {
			text = "the turn ended with status " + string(d.Status)
		}
		return []message{newError(m.id, text)}
	}
	// ThinkingEvent, PlanEvent, RetrievalEvent, ApprovalEvent and
	// ErrorEvent have no message in the contract (see the package doc).
	return nil
}

// toolCall maps a tool call event: started → tool_use; completed, failed
// and denied → tool_result, preceded by the call's tool_use when it had
// none (a call refused before it started).
func (m *turnMapper) toolCall(d *engine.ToolCallEvent) []message {
	var out []message
	switch d.Status {
	case engine.ToolStarted, engine.ToolCompleted, engine.ToolFailed, engine.ToolDenied:
		if !m.announced[d.CallID] {
			m.announced[d.CallID] = true
			out = append(out, &toolUseResponse{head: head{"tool_use", m.id}, Data: toolUseData{
				ToolID: d.CallID, ToolName: d.Name, Input: toolInput(d.Args),
			}})
		}
	default: // running: progress and output are dropped
		return nil
	}
	if d.Status == engine.ToolStarted {
		return out
	}
	var result json.RawMessage
	if d.Status == engine.ToolCompleted {
		result = jsonValue(d.Result)
	} else {
		code := string(d.ErrorCode)
		if code == "" {
			code = string(engine.ToolCodeFailed)
		}
		text := d.Error
		if text == "" {
			text = d.Name + " " + string(d.Status)
		}
		result, _ = json.Marshal(toolFailure{Error: text, Code: code})
	}
	return append(out, &toolResultResponse{head: head{"tool_result", m.id}, Data: toolResultData{
		ToolID: d.CallID, ToolName: d.Name, Result: result,
	}})
}

// isTerminal reports whether m ends its request.
func isTerminal(m message) bool {
	switch m.(type) {
	case *doneResponse, *errorResponse, *statusResponse:
		return true
	}
	return false
}

// toolInput is a call's arguments as the tool_use input: the JSON value
// itself, {} when empty, or the raw text as a JSON string when it is not
// valid JSON.
func toolInput(args json.RawMessage) json.RawMessage {
	if len(args) == 0 {
		return json.RawMessage("{}")
	}
	return jsonValue(args)
}

// jsonValue returns raw when it is valid JSON, and raw's text as a JSON
// string otherwise (null when empty).
func jsonValue(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	if json.Valid(raw) {
		return raw
	}
	b, _ := json.Marshal(string(raw))
	return b
}

package httpws_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/transports/httpws"
)

// TestReplayInterleavedCumulative resumes a stream just after a patch
// approval of an ended turn was answered in the middle of a running
// turn's message: the replayed tokens carry the message's whole text.
func TestReplayInterleavedCumulative(t *testing.T) {
	gate := make(chan struct{})
	ts := newTestServer(t, map[string][]step{
		"edit": {{calls: []engine.ToolCall{callOf("e1", "edit_file", editArgs)}}, {text: "done"}},
		"talk": {{lead: "aaa", text: "bbb", gate: gate}},
	})
	sid := ts.newSession(t)
	c := ts.connect(t, sid)
	c.send(map[string]any{"type": "client.user_message", "message": "edit"})
	ask := c.until("tool.request_approval")
	c.send(map[string]any{"type": "client.cancel"})
	c.until("assistant.message_final")
	c.until("session.state")
	c.send(map[string]any{"type": "client.user_message", "message": "talk"})
	c.until("assistant.token")
	c.send(map[string]any{"type": "client.approval_response", "request_id": ask["request_id"], "approved": true})
	pr := c.until("patch.result")
	p := uint64(pr["seq"].(float64))
	close(gate)
	for {
		m := c.until("assistant.token")
		if m["token"] == "bbb" {
			if m["cumulative_text"] != "aaabbb" {
				t.Fatalf("live cumulative_text %q", m["cumulative_text"])
			}
			break
		}
	}
	c.until("assistant.message_final")
	// resume with since = the patch.result seq
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, strings.Replace(ts.url, "http", "ws", 1)+"/v1/sessions/"+sid+"/stream?since="+strconv.FormatUint(p, 10),
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + ts.token}}})
	if err != nil {
		t.Fatal(err)
	}
	c2 := &client{t: t, c: ws}
	c2.send(map[string]any{"type": "client.hello", "client_info": map[string]any{"name": "t", "version": "1", "capabilities": []string{}}})
	for {
		m := c2.until("assistant.token")
		if m["token"] == "bbb" {
			if m["cumulative_text"] != "aaabbb" {
				t.Errorf("replayed cumulative_text %q, live was aaabbb", m["cumulative_text"])
			}
			break
		}
	}
}

// slowIndexer's ApplyChanges waits like engine/index's does during a
// rebuild.
type slowIndexer struct {
	fakeIndexer
	block chan struct{}
}

func (s *slowIndexer) ApplyChanges(ctx context.Context, root string, ch []httpws.FileChange) (any, error) {
	<-s.block // like engine/index waiting for buildMu during a rebuild
	return buildStats(len(ch), false), nil
}

// TestFileChangesDoNotBlockTheConnection: a slow index update does not
// keep the connection from reading client.cancel.
func TestFileChangesDoNotBlockTheConnection(t *testing.T) {
	gate := make(chan struct{})
	defer close(gate)
	si := &slowIndexer{block: make(chan struct{})}
	defer close(si.block)
	ts := newTestServer(t, map[string][]step{"wait": {{text: "never", gate: gate}}}, func(o *httpws.Options) { o.Indexer = si })
	c := ts.connect(t, ts.newSession(t))
	c.send(map[string]any{"type": "client.user_message", "message": "wait"})
	c.until("assistant.thinking")
	c.send(map[string]any{"type": "client.file_changes", "changes": []any{map[string]any{"type": "modified", "file_path": "calc.go"}}})
	c.send(map[string]any{"type": "client.cancel"})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	for {
		_, data, err := c.c.Read(ctx)
		if err != nil {
			t.Fatalf("no assistant.message_final 3 s after client.cancel: %v", err)
		}
		if strings.Contains(string(data), "assistant.message_final") {
			return
		}
	}
}

// TestCumulativeTextPerStep: cumulative_text is the text of the assistant
// message being written, which each model call of a turn starts again;
// assistant.message_final's message is the last one's, the cumulative_text
// of the turn's last token. A stream resumed in the middle of the second
// message rebuilds that message's text only.
func TestCumulativeTextPerStep(t *testing.T) {
	gate := make(chan struct{})
	ts := newTestServer(t, map[string][]step{
		"two steps": {
			{text: "I will read calc.go.", calls: []engine.ToolCall{callOf("r1", "read_file", `{"path":"calc.go"}`)}},
			{lead: "Add ", gate: gate, text: "subtracts."},
		},
	})
	sid := ts.newSession(t)
	c := ts.connect(t, sid)
	c.send(map[string]any{"type": "client.user_message", "message": "two steps"})
	if m := c.until("assistant.token"); m["cumulative_text"] != "I will read calc.go." {
		t.Errorf("first message: %v", m)
	}
	lead := c.until("assistant.token")
	if lead["cumulative_text"] != "Add " {
		t.Errorf("the second model call's first token carries %q, want its own text only", lead["cumulative_text"])
	}
	close(gate)
	last := c.until("assistant.token")
	final := c.until("assistant.message_final")
	if last["cumulative_text"] != "Add subtracts." || final["message"] != last["cumulative_text"] {
		t.Errorf("last cumulative_text %q, final message %q: want both %q", last["cumulative_text"], final["message"], "Add subtracts.")
	}
	// Resume just after the second message's first token.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	since := strconv.FormatUint(uint64(lead["seq"].(float64)), 10)
	ws, _, err := websocket.Dial(ctx, strings.Replace(ts.url, "http", "ws", 1)+"/v1/sessions/"+sid+"/stream?since="+since,
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + ts.token}}})
	if err != nil {
		t.Fatal(err)
	}
	c2 := &client{t: t, c: ws}
	c2.send(map[string]any{"type": "client.hello", "client_info": map[string]any{"name": "t", "version": "1", "capabilities": []string{}}})
	if m := c2.until("assistant.token"); m["cumulative_text"] != "Add subtracts." {
		t.Errorf("replayed cumulative_text %q, want %q", m["cumulative_text"], "Add subtracts.")
	}
}

package httpws_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/transports/httpws"
)

// TestHealthWhileTurnsStart polls /v1/health while turns start in several
// sessions: the two take the server's and the sessions' locks, and must
// never wait for each other in a cycle.
func TestHealthWhileTurnsStart(t *testing.T) {
	ts := newTestServer(t, map[string][]step{"hi": {{text: "hello"}}})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		c := ts.connect(t, ts.newSession(t))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				data := []byte(`{"type":"client.user_message","message":"hi"}`)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := c.c.Write(ctx, websocket.MessageText, data)
				if err == nil {
					for {
						_, msg, err := c.c.Read(ctx)
						if err != nil || strings.Contains(string(msg), `"session.state"`) || strings.Contains(string(msg), `"SESSION_BUSY"`) {
							break
						}
					}
				}
				cancel()
			}
		}()
	}
	client := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(1500 * time.Millisecond)
	for n := 0; time.Now().Before(deadline); n++ {
		req, _ := http.NewRequest("GET", ts.url+"/v1/health", nil)
		req.Header.Set("Authorization", "Bearer "+ts.token)
		resp, err := client.Do(req)
		if err != nil {
			close(stop)
			t.Fatalf("health request %d: %v (a lock cycle?)", n, err)
		}
		resp.Body.Close()
	}
	close(stop)
	wg.Wait()
}

// TestMultiFilePatchReachesLiveClients: one model response edits two
// files; a live client gets both patch.proposed messages (one event, two
// messages with the same seq).
func TestMultiFilePatchReachesLiveClients(t *testing.T) {
	ts := newTestServer(t, map[string][]step{"two": {
		{calls: []engine.ToolCall{callOf("e1", "edit_file", editArgs), callOf("w1", "write_file", `{"path": "new.go", "content": "package calc\n"}`)}},
		{text: "done"},
	}})
	c := ts.connect(t, ts.newSession(t))
	c.send(map[string]any{"type": "client.user_message", "message": "two"})
	ask := c.until("tool.request_approval")
	var files []string
	for _, m := range c.seen {
		if m["type"] == "patch.proposed" {
			files = append(files, m["file_path"].(string))
		}
	}
	if fmt.Sprint(files) != "[calc.go new.go]" || len(ask["patch_ids"].([]any)) != 2 {
		t.Fatalf("patch.proposed files %v, approval %v", files, ask)
	}
	// An empty selection approves nothing (the schema refuses it).
	c.send(map[string]any{"type": "client.approval_response", "request_id": ask["request_id"], "approved": true, "scope": "hunk", "file_path": "calc.go", "hunks": []int{}})
	if e := c.until("server.error"); errCode(e) != "INVALID_MESSAGE" {
		t.Fatalf("empty hunks: %v", e)
	}
	c.send(map[string]any{"type": "client.approval_response", "request_id": ask["request_id"], "approved": true, "scope": "file", "file_path": "new.go"})
	res := c.until("patch.result")
	if fmt.Sprint(res["applied_files"]) != "[new.go]" || fmt.Sprint(res["rejected_files"]) != "[calc.go]" {
		t.Errorf("patch.result %v", res)
	}
}

// TestShutdownClosesStreamsBeforeHello: a client that never says hello
// does not hold Shutdown up; it gets 1001.
func TestShutdownClosesStreamsBeforeHello(t *testing.T) {
	ts := newTestServer(t, map[string][]step{})
	sessID := ts.newSession(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, strings.Replace(ts.url, "http", "ws", 1)+"/v1/sessions/"+sessID+"/stream",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + ts.token}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	// The client reads (a client that never reads can hold its own close
	// handshake for the library's 5 s), but never says hello.
	closed := make(chan error, 1)
	go func() { _, _, err := c.Read(ctx); closed <- err }()
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	if err := ts.srv.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown with a silent client: %v", err)
	}
	if err := <-closed; websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Errorf("silent client: %v, want close 1001", err)
	}
}

// TestStreamRefusals: since beyond the last event, and a GET without the
// WebSocket upgrade, are 400s in the error body format.
func TestStreamRefusals(t *testing.T) {
	ts := newTestServer(t, map[string][]step{})
	sessID := ts.newSession(t)
	if code, body := ts.do(t, "GET", "/v1/sessions/"+sessID+"/stream", ""); code != 400 || !strings.Contains(fmt.Sprint(body), "WebSocket") {
		t.Errorf("plain GET of the stream: %d %v", code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, resp, err := websocket.Dial(ctx, strings.Replace(ts.url, "http", "ws", 1)+"/v1/sessions/"+sessID+"/stream?since=1000",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + ts.token}}})
	if err == nil || resp == nil || resp.StatusCode != 400 {
		t.Errorf("since beyond the last event: %v %v", resp, err)
	}
	_, resp, err = websocket.Dial(ctx, strings.Replace(ts.url, "http", "ws", 1)+"/v1/sessions/ses_0000000000000000/stream",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + ts.token}}})
	if err == nil || resp == nil || resp.StatusCode != 404 {
		t.Errorf("unknown session: %v %v", resp, err)
	}
}

// TestOrphanedTurnIsCancelled: when the only client leaves while a turn
// waits for its approval, the turn is cancelled after OrphanTimeout, and
// its patch approval stays answerable.
func TestOrphanedTurnIsCancelled(t *testing.T) {
	ts := newTestServer(t, map[string][]step{"fix": {{calls: []engine.ToolCall{callOf("e1", "edit_file", editArgs)}}, {text: "done"}}},
		func(o *httpws.Options) { o.OrphanTimeout = 300 * time.Millisecond })
	sessID := ts.newSession(t)
	c := ts.connect(t, sessID)
	c.send(map[string]any{"type": "client.user_message", "message": "fix"})
	ask := c.until("tool.request_approval")
	c.c.Close(websocket.StatusNormalClosure, "bye")
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, body := ts.do(t, "GET", "/v1/sessions/"+sessID, "")
		if body["busy"] == false {
			st := body["state"].(map[string]any)
			if fmt.Sprint(st["pending_approvals"]) != fmt.Sprintf("[%v]", ask["request_id"]) {
				t.Errorf("state after the orphaned turn: %v", st)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the orphaned turn is still running")
		}
		time.Sleep(50 * time.Millisecond)
	}
	c2 := ts.connect(t, sessID)
	c2.send(map[string]any{"type": "client.approval_response", "request_id": ask["request_id"], "approved": true})
	if res := c2.until("patch.result"); res["status"] != "applied" {
		t.Errorf("answering the orphaned turn's approval: %v", res)
	}
}

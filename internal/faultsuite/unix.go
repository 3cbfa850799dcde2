package faultsuite

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"
)

var unixServing = regexp.MustCompile(`serving JSON-RPC on unix socket`)

// unixRig is the unix front-end's run: one server, several connections,
// each saving its session to a file after every turn and loading it
// again after a restart.
type unixRig struct {
	*Rig
	script string
	sock   string

	mu      sync.Mutex
	applied []ackEdit
	// saved is, by client, the messages_count of the last session file
	// whose session.save answered.
	saved map[int]int
}

// RunUnix runs the unix front-end's fault run.
func RunUnix(t testing.TB, bin string, opts Options) {
	start := time.Now()
	r := &unixRig{Rig: NewRig(t, bin, "unix", opts), saved: map[int]int{}}
	r.script = filepath.Join(t.TempDir(), "notes.jsonl")
	WriteFile(t, r.script, noteScript(400))
	WriteFile(t, filepath.Join(r.WS, "README.md"), "# workspace\n")
	r.sock = filepath.Join(t.TempDir(), "plexus.sock")
	p := r.serve()
	for range opts.Kills {
		r.load(p, false)
		r.Killed()
		p = r.serve()
		r.check()
	}
	r.load(p, true)
	p.Term(t, time.Minute)
	p = r.serve()
	r.check()
	p.Term(t, time.Minute)
	r.Report(time.Since(start))
}

func (r *unixRig) serve() *Proc {
	os.Remove(r.sock) // a killed server leaves its socket
	p := r.Start("serve", "--transport", "unix", "-w", r.WS, "--model", "replay:"+r.script, "--embed-model", "none", "--socket", r.sock)
	p.WaitFor(r.t, unixServing, time.Minute)
	return p
}

func (r *unixRig) sessionFile(client int) string {
	return filepath.Join(r.Data, "sessions", fmt.Sprintf("client-%d.json", client))
}

// rpc is one client connection.
type rpc struct {
	conn net.Conn
	in   chan map[string]any
	wmu  sync.Mutex
	n    int
}

func (r *unixRig) dial() *rpc {
	c, err := net.Dial("unix", r.sock)
	if err != nil {
		return nil
	}
	x := &rpc{conn: c, in: make(chan map[string]any, 1<<14)}
	go func() {
		defer close(x.in)
		sc := bufio.NewScanner(c)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				x.in <- m
			}
		}
	}()
	return x
}

func (x *rpc) send(method string, params any) (int, bool) {
	x.wmu.Lock()
	defer x.wmu.Unlock()
	x.n++
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": x.n, "method": method, "params": params})
	_, err := x.conn.Write(append(b, '\n'))
	return x.n, err == nil
}

func (x *rpc) next() map[string]any {
	select {
	case m, ok := <-x.in:
		if ok {
			return m
		}
	case <-time.After(time.Minute):
	}
	return nil
}

// call sends a request and returns its response; nil when the connection
// ended.
func (x *rpc) call(method string, params any) map[string]any {
	id, ok := x.send(method, params)
	if !ok {
		return nil
	}
	for {
		m := x.next()
		if m == nil || m["id"] == float64(id) {
			return m
		}
	}
}

// load runs every client until the server is killed (last: one turn
// each, which must complete).
func (r *unixRig) load(p *Proc, last bool) {
	var wg sync.WaitGroup
	for i := range r.Opts.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := r.client(i, last)
			if last && n < 1 {
				r.t.Errorf("unix client %d: no turn completed after the last restart: the server does not serve again\n%s", i, p.Stderr())
			}
		}()
	}
	if last {
		wg.Wait()
		return
	}
	time.Sleep(r.Between(300*time.Millisecond, 2500*time.Millisecond))
	p.Kill()
	wg.Wait()
}

// client connects, loads its saved session (when it has one), and runs
// turns, saving the session after each; it returns the turns completed.
func (r *unixRig) client(i int, last bool) int {
	x := r.dial()
	if x == nil {
		return 0
	}
	defer x.conn.Close()
	if m := x.call("initialize", map[string]any{"protocol_version": "1.0.0", "client_info": map[string]any{"name": "faultsuite", "version": "1"}}); m == nil || m["error"] != nil {
		return 0
	}
	file := r.sessionFile(i)
	if _, err := os.Stat(file); err == nil {
		m := x.call("session.load", map[string]any{"path": file})
		if m == nil {
			return 0
		}
		r.Check(m["error"] == nil, "client %d: session.load of its saved session failed: %v", i, m["error"])
	}
	done := 0
	for turn := 0; !last || done < 1; turn++ {
		if !r.turn(x, i, turn, last) {
			return done
		}
		done++
		m := x.call("session.save", map[string]any{"path": file})
		if m == nil {
			return done
		}
		if m["error"] != nil {
			r.t.Errorf("client %d: session.save: %v", i, m["error"])
			return done
		}
		// Answered: the file is written (and synced) now.
		count, err := messagesCount(file)
		r.Check(err == nil, "client %d: the session file session.save answered for is unreadable: %v", i, err)
		r.mu.Lock()
		r.saved[i] = count
		r.mu.Unlock()
		r.Ack("session saves")
	}
	return done
}

// turn runs one agent.query to stream.complete, approving edits (a
// seeded quarter refused unless always), recording applied notes.
func (r *unixRig) turn(x *rpc, client, turn int, always bool) bool {
	id, ok := x.send("agent.query", map[string]any{"message": fmt.Sprintf("client %d query %d", client, turn)})
	if !ok {
		return false
	}
	for {
		m := x.next()
		if m == nil {
			return false
		}
		if m["id"] == float64(id) && m["error"] != nil {
			r.t.Logf("client %d: agent.query refused: %v", client, m["error"])
			return false
		}
		p, _ := m["params"].(map[string]any)
		switch m["method"] {
		case "tool.request_approval":
			x.send("tool.approve", map[string]any{"execution_id": p["execution_id"], "approved": always || r.Intn(4) > 0})
		case "stream.block":
			b, _ := p["block"].(map[string]any)
			md, _ := b["metadata"].(map[string]any)
			if md["kind"] == "patch_result" && md["status"] == "applied" {
				files, _ := md["applied_files"].([]any)
				for _, f := range files {
					var k int
					if _, err := fmt.Sscanf(fmt.Sprint(f), "notes/%d.txt", &k); err == nil {
						r.mu.Lock()
						r.applied = append(r.applied, ackEdit{root: r.WS, k: k})
						r.mu.Unlock()
						r.Ack("edits")
					}
				}
			}
		case "stream.complete":
			return p["status"] == "success"
		}
	}
}

// messagesCount reads messages_count from a session file.
func messagesCount(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var f struct {
		Session struct {
			MessagesCount *int `json:"messages_count"`
		} `json:"session"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return 0, err
	}
	if f.Session.MessagesCount == nil {
		return 0, fmt.Errorf("no session.messages_count in %s", path)
	}
	return *f.Session.MessagesCount, nil
}

// check checks every saved session and applied edit.
func (r *unixRig) check() {
	r.CheckDatabase()
	r.CheckReceipts()
	r.mu.Lock()
	saved := make(map[int]int, len(r.saved))
	for k, v := range r.saved {
		saved[k] = v
	}
	edits := slices.Clone(r.applied)
	r.mu.Unlock()
	for i, want := range saved {
		got, err := messagesCount(r.sessionFile(i))
		r.Check(err == nil && got >= want, "client %d: its session file holds %d messages (%v), the last save that answered had %d", i, got, err, want)
		x := r.dial()
		if x == nil {
			r.t.Fatal("the restarted server refuses connections")
		}
		x.call("initialize", map[string]any{"protocol_version": "1.0.0", "client_info": map[string]any{"name": "faultsuite-check", "version": "1"}})
		m := x.call("session.load", map[string]any{"path": r.sessionFile(i)})
		res, _ := m["result"].(map[string]any)
		sess, _ := res["session"].(map[string]any)
		r.Check(m != nil && m["error"] == nil && sess["messages_count"] == float64(got), "client %d: session.load after the restart: %v", i, m)
		x.conn.Close()
	}
	st := r.OpenStore()
	defer st.Close()
	checkEdits(r.Rig, st, r.Receipts(filepath.Join(r.Data, "receipts")), edits)
}

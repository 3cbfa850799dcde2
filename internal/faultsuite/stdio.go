package faultsuite

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/receipts"
	"github.com/plexus-agent/plexus/engine/store"
)

// stdioRig is the run of a front-end a client spawns (ndjson, lsp-stdio):
// every client is a plexus process of its own, all on one data directory
// (one state database, one receipt log), each epoch in fresh workspaces.
type stdioRig struct {
	*Rig
	transport string
	script    string

	mu sync.Mutex
	// applied lists the edits clients were told were applied.
	applied []ackEdit
}

// ackEdit is an edit a client was told was applied: file notes/K.txt of
// the workspace root.
type ackEdit struct {
	root string
	k    int
}

// RunStdio runs the fault run of transport "ndjson" or "lsp-stdio".
func RunStdio(t testing.TB, bin, transport string, opts Options) {
	start := time.Now()
	r := &stdioRig{Rig: NewRig(t, bin, transport, opts), transport: transport}
	r.script = filepath.Join(t.TempDir(), "notes.jsonl")
	WriteFile(t, r.script, noteScript(400))
	for epoch := range opts.Kills {
		r.load(epoch, false)
		r.Killed()
		r.check()
	}
	// Serves again: a fresh process per client runs a turn to its end
	// and stops when its input closes.
	r.load(opts.Kills, true)
	r.check()
	r.Report(time.Since(start))
}

// load starts one process per client, each running turns, and kills them
// all at a seeded random point; last lets each run one turn and close
// its input instead.
func (r *stdioRig) load(epoch int, last bool) {
	var wg sync.WaitGroup
	procs := make([]*Proc, r.Opts.Clients)
	for i := range procs {
		root := filepath.Join(r.t.TempDir(), fmt.Sprintf("client-%d-epoch-%d", i, epoch))
		WriteFile(r.t, filepath.Join(root, "README.md"), "# workspace\n")
		args := []string{"serve", "--transport", r.transport, "-w", root, "--model", "replay:" + r.script, "--embed-model", "none"}
		if r.transport == "ndjson" {
			args = append(args, "--approve-all") // ndjson cannot ask
		}
		procs[i] = r.Start(args...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			turns := -1
			if last {
				turns = 1
			}
			var n int
			if r.transport == "ndjson" {
				n = r.ndjson(procs[i], root, turns)
			} else {
				n = r.lsp(procs[i], root, i, turns)
			}
			if last && n < 1 {
				r.t.Errorf("%s client %d: no turn completed after the last restart: the front-end does not serve again\n%s", r.transport, i, procs[i].Stderr())
			}
		}()
	}
	if last {
		wg.Wait()
		for _, p := range procs {
			p.Stdin.Close()
			select {
			case <-p.Done():
			case <-time.After(time.Minute):
				r.t.Errorf("%s did not exit after its input closed", r.transport)
			}
		}
		return
	}
	time.Sleep(r.Between(600*time.Millisecond, 3*time.Second))
	for _, p := range procs {
		p.Kill()
	}
	wg.Wait()
}

func (r *stdioRig) ackEdit(root string, k int) {
	r.mu.Lock()
	r.applied = append(r.applied, ackEdit{root: root, k: k})
	r.mu.Unlock()
	r.Ack("edits")
}

// ndjson runs turns on one ndjson process (approve-all: every edit is
// applied before the turn goes on) until its output ends or turns (> 0)
// have completed; a turn that reports done has applied its note. It
// returns the turns completed.
func (r *stdioRig) ndjson(p *Proc, root string, turns int) int {
	lines := bufio.NewScanner(p.Stdout)
	lines.Buffer(make([]byte, 64<<10), 64<<20)
	next := func() map[string]any {
		if !lines.Scan() {
			return nil
		}
		var m map[string]any
		json.Unmarshal(lines.Bytes(), &m)
		return m
	}
	if m := next(); m == nil || m["type"] != "ready" {
		return 0
	}
	for k := 0; turns < 0 || k < turns; k++ {
		id := fmt.Sprintf("q%d", k)
		b, _ := json.Marshal(map[string]any{"id": id, "kind": "user_message", "message": "write note " + strconv.Itoa(k)})
		if _, err := p.Stdin.Write(append(b, '\n')); err != nil {
			return k
		}
		for {
			m := next()
			if m == nil {
				return k
			}
			if m["id"] != id {
				continue
			}
			if m["type"] == "done" {
				r.ackEdit(root, k)
				break
			}
			if m["type"] == "error" {
				r.t.Errorf("ndjson turn %s failed: %v", id, m)
				return k
			}
		}
	}
	return turns
}

// lsp runs executeTask requests on one lsp-stdio process, answering the
// approvals it asks for (a seeded quarter refused), until its output ends
// or turns (> 0) have completed; a completed task whose filesModified
// names a note has applied it. It returns the turns completed.
func (r *stdioRig) lsp(p *Proc, root string, client, turns int) int {
	br := bufio.NewReader(p.Stdout)
	var wmu sync.Mutex
	write := func(v any) error {
		b, _ := json.Marshal(v)
		wmu.Lock()
		defer wmu.Unlock()
		_, err := fmt.Fprintf(p.Stdin, "Content-Length: %d\r\n\r\n%s", len(b), b)
		return err
	}
	read := func() map[string]any {
		n := -1
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return nil
			}
			line = strings.TrimRight(line, "\r\n")
			if line == "" {
				break
			}
			if v, ok := strings.CutPrefix(line, "Content-Length: "); ok {
				n, _ = strconv.Atoi(v)
			}
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(br, body); err != nil {
			return nil
		}
		var m map[string]any
		json.Unmarshal(body, &m)
		return m
	}
	if write(map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": map[string]any{"workspaceRoot": root, "initialConfig": map[string]any{"hostTools": []any{}}}}) != nil {
		return 0
	}
	for {
		m := read()
		if m == nil {
			return 0
		}
		if m["id"] == 0.0 {
			break
		}
	}
	done := 0
	for k := 1; turns < 0 || done < turns; k++ {
		if write(map[string]any{"jsonrpc": "2.0", "id": k, "method": "executeTask", "params": map[string]any{"taskId": fmt.Sprintf("t%d", k), "prompt": fmt.Sprintf("client %d task %d", client, k)}}) != nil {
			return done
		}
		for {
			m := read()
			if m == nil {
				return done
			}
			if m["method"] == "$/requestToolExecution" {
				params, _ := m["params"].(map[string]any)
				if params["toolName"] != "approve" {
					write(map[string]any{"jsonrpc": "2.0", "id": m["id"], "error": map[string]any{"code": -32601, "message": "no such host tool"}})
					continue
				}
				write(map[string]any{"jsonrpc": "2.0", "id": m["id"], "result": map[string]any{"approved": turns > 0 || r.Intn(4) > 0}})
				continue
			}
			if m["id"] != float64(k) {
				continue
			}
			res, _ := m["result"].(map[string]any)
			if res["status"] != "completed" {
				r.t.Errorf("lsp-stdio task %d ended %v", k, m)
				return done
			}
			done++
			md, _ := res["metadata"].(map[string]any)
			files, _ := md["filesModified"].([]any)
			for _, f := range files {
				var n int
				if _, err := fmt.Sscanf(fmt.Sprint(f), "notes/%d.txt", &n); err == nil {
					r.ackEdit(root, n)
				}
			}
			break
		}
	}
	return done
}

// check checks every acknowledged edit: the note on disk, an undo record
// of it, and a patch_apply receipt for its workspace; and the state
// database and the receipt log.
func (r *stdioRig) check() {
	r.CheckDatabase()
	r.CheckReceipts()
	st := r.OpenStore()
	defer st.Close()
	checkEdits(r.Rig, st, r.Receipts(filepath.Join(r.Data, "receipts")), r.edits())
}

func (r *stdioRig) edits() []ackEdit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.applied)
}

// checkEdits checks acknowledged edits against the files, the undo
// records of st and the receipts rcpts: each note holds its content, has
// an applied change naming it in its workspace, and each workspace has at
// least as many patch_apply receipts as acknowledged edits.
func checkEdits(r *Rig, st *store.Store, rcpts []receipts.Receipt, edits []ackEdit) {
	byWS := map[string][]ackEdit{}
	for _, e := range edits {
		byWS[e.root] = append(byWS[e.root], e)
	}
	for root, es := range byWS {
		real, err := filepath.EvalSymlinks(root)
		if err != nil {
			r.t.Fatal(err)
		}
		wsID := engine.WorkspaceID(real)
		files := map[string]bool{}
		for _, a := range r.AppliedIDs(st, wsID) {
			for _, f := range a.Files {
				files[filepath.ToSlash(f.Path)] = true
			}
		}
		receipted := 0
		for _, rc := range rcpts {
			if rc.Kind == receipts.KindPatchApply && rc.Workspace == wsID {
				receipted++
			}
		}
		seen := map[int]bool{}
		for _, e := range es {
			name := fmt.Sprintf("notes/%d.txt", e.k)
			b, err := os.ReadFile(filepath.Join(root, name))
			r.Check(err == nil && string(b) == noteContent(e.k), "%s: applied %s holds %q (%v)", root, name, b, err)
			r.Check(files[name], "%s: applied %s has no undo record", root, name)
			seen[e.k] = true
		}
		r.Check(receipted >= len(seen), "%s: %d edits applied, %d patch_apply receipts", root, len(seen), receipted)
	}
}

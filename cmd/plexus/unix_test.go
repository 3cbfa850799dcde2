package main

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeUnix runs plexus serve --transport unix on a socket, checks its
// mode, runs a query over it with the replay model (the real fs tools in
// their plugin process), then stops the server with SIGTERM and checks
// that the socket is gone.
func TestServeUnix(t *testing.T) {
	ws, script := calcFixture(t)
	u := startUnix(t, "-w", ws, "--model", "replay:"+script)
	cmd, sock, enc, read := u.cmd, u.sock, u.enc, u.read
	fi, err := os.Lstat(sock)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %v %v", fi, err)
	}
	// The first turn of fixScript plans, reads calc.go and proposes an
	// edit; the edit needs approval, which is denied here.
	enc.Encode(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "agent.query", "params": map[string]any{"message": "Fix the failing test"}})
	var methods []string
	for {
		m := read()
		method, _ := m["method"].(string)
		methods = append(methods, method)
		if method == "tool.request_approval" {
			p := m["params"].(map[string]any)
			enc.Encode(map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tool.approve", "params": map[string]any{
				"execution_id": p["execution_id"], "approved": false}})
		}
		if method == "stream.complete" {
			if p := m["params"].(map[string]any); p["status"] != "success" {
				t.Errorf("stream.complete %v", p)
			}
			break
		}
	}
	joined := strings.Join(methods, " ")
	for _, want := range []string{"agent.thinking", "tool.progress", "tool.complete", "tool.request_approval", "stream.token"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no %s in %v", want, methods)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "calc.go")); !strings.Contains(string(data), "a - b") {
		t.Errorf("a denied edit was applied:\n%s", data)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("after SIGTERM: %v", err)
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("the socket is still there after shutdown: %v", err)
	}
}

// unixServer is plexus serve --transport unix on a private socket, with an
// initialized JSON-RPC connection to it.
type unixServer struct {
	cmd  *exec.Cmd
	sock string
	enc  *json.Encoder
	// read returns the next message, failing the test after 60 s.
	read func() map[string]any
}

// startUnix starts plexus serve --transport unix with args (and a private
// plugin and data directory unless env overrides them), connects and
// initializes the connection.
func startUnix(t *testing.T, args ...string) *unixServer {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "plexus.sock")
	cmd := exec.Command(plexusBin, append([]string{"serve", "--transport", "unix", "--socket", sock}, args...)...)
	cmd.Env = append(os.Environ(), "PLEXUS_PLUGIN_PATH="+t.TempDir(), "PLEXUS_DATA_DIR="+t.TempDir())
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "serving JSON-RPC on unix socket") {
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(60 * time.Second):
		t.Fatal("no serving line")
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(60 * time.Second))
	enc, sc := json.NewEncoder(c), bufio.NewScanner(c)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	read := func() map[string]any {
		t.Helper()
		if !sc.Scan() {
			t.Fatalf("read: %v", sc.Err())
		}
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%v: %s", err, sc.Bytes())
		}
		return m
	}
	enc.Encode(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocol_version": "1.0.0", "client_info": map[string]any{"name": "test", "version": "1"}}})
	if m := read(); m["result"].(map[string]any)["status"] != "ready" {
		t.Fatalf("initialize: %v", m)
	}
	return &unixServer{cmd: cmd, sock: sock, enc: enc, read: read}
}

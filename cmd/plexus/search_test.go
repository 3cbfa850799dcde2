package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSearchServer runs plexus search as a user would with the per-user
// search server: the first search answers by itself and starts the server;
// later ones are answered by it (a file created after it started, in a
// new directory, is found at once, since it watches the workspace), also
// through --server SOCKET; the server exits on its own when idle.
func TestSearchServer(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.go"), []byte("package a\n\n// Hello greets.\nfunc Hello() string { return \"hello\" }\n"), 0o644)
	data := t.TempDir()
	env := []string{"PLEXUS_DATA_DIR=" + data, "PLEXUS_SEARCH_SERVER=auto", "PLEXUS_SEARCH_IDLE_TIMEOUT=3s"}
	socket := searchSocketFor(data, plexusBin)

	r := plexus(t, ws, "", env, "search", "--kind", "text", "hello")
	if r.code != 0 || !strings.Contains(r.stdout, "a.go:4:31: func Hello() string { return \"hello\" }") {
		t.Fatalf("first search: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The server starts in the background; wait until it answers.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := net.Dial("unix", socket); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(data, "search-server.log"))
			t.Fatalf("no search server on %s after the first search; its log:\n%s", socket, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	os.MkdirAll(filepath.Join(ws, "pkg", "later"), 0o755)
	os.WriteFile(filepath.Join(ws, "pkg", "later", "b.go"), []byte("package later\n\nfunc Goodbye() {}\n"), 0o644)
	for _, args := range [][]string{
		{"search", "--kind", "symbol", "Goodbye"},
		{"search", "--kind", "symbol", "--server", socket, "Goodbye"},
	} {
		r := plexus(t, ws, "", env, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "pkg/later/b.go:3") {
			t.Errorf("%v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	r = plexus(t, ws, "", env, "search", "--kind", "text", "--regex", "func (", "--server", socket)
	if r.code != 1 || !strings.Contains(r.stderr, "regular expression") {
		t.Errorf("bad regex through the server: exit %d\n%s", r.code, r.stderr)
	}
	r = plexus(t, ws, "", env, "search", "--kind", "text", "x", "--server", filepath.Join(t.TempDir(), "none.sock"))
	if r.code != 1 || !strings.Contains(r.stderr, "plexus serve --transport unix") {
		t.Errorf("no server at --server: exit %d\n%s", r.code, r.stderr)
	}
	log, _ := os.ReadFile(filepath.Join(data, "search-server.log"))
	if !strings.Contains(string(log), "search server listening") {
		t.Errorf("server log:\n%s", log)
	}
	// noProcessesLeft (run by plexus's cleanup) waits 5 s for the server
	// to exit after its 3 s idle timeout.
}

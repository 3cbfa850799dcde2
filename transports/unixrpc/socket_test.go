package unixrpc_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/transports/unixrpc"
)

func TestListen(t *testing.T) {
	dir := t.TempDir()
	t.Run("mode 0600", func(t *testing.T) {
		p := filepath.Join(dir, "a.sock")
		ln, err := unixrpc.Listen(p)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
			t.Errorf("mode %v, want a socket with 0600", fi.Mode())
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 2 {
			t.Errorf("%d entries in the directory, want the socket and its lock file", len(ents))
		}
		if fi, err := os.Lstat(p + ".lock"); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("lock file: %v %v", fi, err)
		}
		ln.Close()
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the socket file is still there after Close: %v", err)
		}
		if _, err := os.Lstat(p + ".lock"); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the lock file is still there after Close: %v", err)
		}
	})
	t.Run("stale socket removed", func(t *testing.T) {
		p := filepath.Join(dir, "stale.sock")
		old, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		old.SetUnlinkOnClose(false)
		old.Close() // a server that died: the file stays, nobody answers
		if _, err := os.Lstat(p); err != nil {
			t.Fatal(err)
		}
		ln, err := unixrpc.Listen(p)
		if err != nil {
			t.Fatalf("Listen over a stale socket: %v", err)
		}
		defer ln.Close()
		go func() {
			if c, err := ln.Accept(); err == nil {
				c.Close()
			}
		}()
		c, err := net.Dial("unix", p)
		if err != nil {
			t.Fatalf("the new socket does not answer: %v", err)
		}
		c.Close()
	})
	t.Run("live server refused", func(t *testing.T) {
		p := filepath.Join(dir, "live.sock")
		ln, err := unixrpc.Listen(p)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		_, err = unixrpc.Listen(p)
		if !errors.Is(err, unixrpc.ErrServerRunning) {
			t.Fatalf("second Listen: %v, want ErrServerRunning", err)
		}
		if _, err := os.Lstat(p); err != nil {
			t.Fatalf("the live socket was removed: %v", err)
		}
	})
	t.Run("not a socket", func(t *testing.T) {
		p := filepath.Join(dir, "file.sock")
		os.WriteFile(p, []byte("keep me"), 0o644)
		if _, err := unixrpc.Listen(p); err == nil {
			t.Fatal("Listen over a regular file succeeded")
		}
		if data, _ := os.ReadFile(p); string(data) != "keep me" {
			t.Fatal("the file was changed")
		}
		l := filepath.Join(dir, "link.sock")
		os.Symlink(p, l)
		if _, err := unixrpc.Listen(l); err == nil {
			t.Fatal("Listen over a symlink succeeded")
		}
	})
}

func TestDefaultSocketPath(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/1000")
	if got, want := unixrpc.DefaultSocketPath(), filepath.Join("/run/user/1000", "plexus-"+strconv.Itoa(os.Getpid())+".sock"); got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	t.Setenv("XDG_RUNTIME_DIR", "")
	if got, want := unixrpc.DefaultSocketPath(), "/tmp/plexus-"+strconv.Itoa(os.Getpid())+".sock"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// TestShutdown: a running query ends cancelled and is reported, the
// connection closes, Serve returns nil and the socket file is gone.
func TestShutdown(t *testing.T) {
	e := newEnv(t)
	e.model.set("long", step{chunks: []string{"working"}, gate: make(chan struct{})})
	c := e.initialized(t)
	qid := c.call("agent.query", map[string]any{"message": "long"}).str("query_id")
	c.waitFor("stream.token", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if done := c.waitFor("stream.complete", func(m msg) bool { return m.str("query_id") == qid }); done.str("status") != "cancelled" {
		t.Fatalf("stream.complete: %s", done.raw)
	}
	c.waitClosed()
	select {
	case err := <-e.serveCh:
		if err != nil {
			t.Errorf("Serve returned %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Serve did not return")
	}
	if _, err := os.Lstat(e.sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket file is still there: %v", err)
	}
}

package mcp_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/plugins/mcp"
)

// TestCloseDoesNotWaitForBackoff kills a stdio server, makes a call that
// waits out the ten-minute reconnect backoff, and closes the toolset:
// Close must return without waiting for the backoff, and the waiting call
// must end (issue 14: plexus exited up to 10 s after its turn).
func TestCloseDoesNotWaitForBackoff(t *testing.T) {
	bin := buildCmd(t, "./internal/noopserver", "noopserver")
	lost, backoff := make(chan struct{}), make(chan struct{})
	var onceLost, onceBackoff sync.Once
	log := slog.New(signalHandler{slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}), func(r slog.Record) {
		switch {
		case strings.HasPrefix(r.Message, "MCP server connection lost"):
			onceLost.Do(func() { close(lost) })
		case r.Message == "reconnecting after the backoff":
			onceBackoff.Do(func() { close(backoff) })
		}
	}})
	ts := mcp.New(&mcp.Config{Servers: map[string]mcp.ServerConfig{"noop": {Command: bin}}},
		mcp.Options{MinBackoff: 10 * time.Minute, MaxBackoff: 10 * time.Minute, Logger: log})
	ctx := context.Background()
	if _, err := ts.Tools(ctx); err != nil {
		ts.Close()
		t.Fatal(err)
	}
	pid := serverPid(t, ts, "noop")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-lost
	waiting := make(chan error, 1)
	go func() {
		_, err := ts.Invoke(ctx, engine.InvokeRequest{CallID: "c", Tool: "noop__noop", Args: json.RawMessage(`{}`)}, func(engine.ToolUpdate) {})
		waiting <- err
	}()
	// The call notices the lost connection and waits out the backoff;
	// Close must not wait with it.
	select {
	case <-backoff:
	case err := <-waiting:
		t.Fatalf("the call after the kill ended without waiting for a reconnect: %v", err)
	}
	closed := make(chan struct{})
	go func() {
		ts.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Close is still waiting after 30 s: it waits out the reconnect backoff (10 minutes)")
	}
	select {
	case err := <-waiting:
		if err == nil {
			t.Error("the call waiting for a reconnect succeeded after Close")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the call waiting for a reconnect did not end after Close")
	}
}

// signalHandler is a slog.Handler that passes each record to h and to on.
type signalHandler struct {
	slog.Handler
	on func(slog.Record)
}

func (s signalHandler) Handle(ctx context.Context, r slog.Record) error {
	s.on(r)
	return s.Handler.Handle(ctx, r)
}

func (s signalHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return signalHandler{s.Handler.WithAttrs(as), s.on}
}

func (s signalHandler) WithGroup(name string) slog.Handler {
	return signalHandler{s.Handler.WithGroup(name), s.on}
}

// TestSpecsCarryCallTimeout: a server's tool specs carry its "timeout",
// else Options.CallTimeout, so the engine's deadline is the server's.
func TestSpecsCarryCallTimeout(t *testing.T) {
	bin := buildCmd(t, "./internal/noopserver", "noopserver")
	ts := mcp.New(&mcp.Config{Servers: map[string]mcp.ServerConfig{
		"own":     {Command: bin, Timeout: 7 * time.Second},
		"default": {Command: bin},
	}}, mcp.Options{CallTimeout: 45 * time.Second, Logger: testLogger(t)})
	defer ts.Close()
	specs, err := ts.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Duration{"own__noop": 7 * time.Second, "default__noop": 45 * time.Second}
	for _, s := range specs {
		if s.Timeout != want[s.Name] {
			t.Errorf("%s: Timeout %s, want %s", s.Name, s.Timeout, want[s.Name])
		}
	}
	if len(specs) != 2 {
		t.Errorf("specs %+v", specs)
	}
}

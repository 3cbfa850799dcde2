package task

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

// serve runs r.srv.Serve on a fresh loopback listener and returns its base
// URL and the channel Serve's result arrives on.
func (r *rig) serve(t *testing.T) (string, chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- r.srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), errc
}

func postTo(t *testing.T, client *http.Client, url, body string) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+ProcessPath, strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return reply{}
	}
	return roundTrip(t, client, req)
}

// Shutdown lets a running task finish within its grace period, refuses
// new connections meanwhile, and makes Serve return nil.
func TestShutdownGrace(t *testing.T) {
	gate := newGate(func(string) bool { return true })
	r := newRig(t, rigConfig{wrap: func(m engine.Model) engine.Model { gate.Model = m; return gate }})
	url, served := r.serve(t)
	client := &http.Client{}
	done := make(chan reply, 1)
	go func() { done <- postTo(t, client, url, taskBody("running", "medium", "")) }()
	<-gate.entered

	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shut <- r.srv.Shutdown(ctx)
	}()
	waitFor(t, "the listener to close", func() bool {
		c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	if rep := r.post(t, exampleRequest); rep.status != http.StatusServiceUnavailable {
		t.Errorf("a request during shutdown: %d %s", rep.status, rep.body)
	}
	close(gate.release)
	(<-done).success(t)
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if list := listReceipts(t, r.receiptDir("test-repo")); len(list) != 1 {
		t.Errorf("%d receipts, want 1", len(list))
	}
}

// When the grace period ends, running and queued tasks are cancelled:
// their clients get 503, their receipts record it, and Shutdown returns
// ctx.Err().
func TestShutdownForced(t *testing.T) {
	gate := newGate(func(string) bool { return true })
	r := newRig(t, rigConfig{
		wrap: func(m engine.Model) engine.Model { gate.Model = m; return gate },
		opts: func(o *Options) { o.Concurrency = 1 },
	})
	url, served := r.serve(t)
	client := &http.Client{}
	var wg sync.WaitGroup
	replies := make([]reply, 2)
	for i, id := range []string{"running", "queued"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i] = postTo(t, client, url, taskBody(id, "medium", ""))
		}()
		if i == 0 {
			<-gate.entered
		}
	}
	waitFor(t, "the second task to queue", func() bool { return r.srv.queue.len() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := r.srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown = %v, want DeadlineExceeded", err)
	}
	wg.Wait()
	for i, rep := range replies {
		if e := rep.envelope(t); rep.status != http.StatusServiceUnavailable || e.Code != CodeServiceUnavailable ||
			!strings.Contains(e.Details["reason"].(string), "shutting down") {
			t.Errorf("task %d: %d %s", i, rep.status, rep.body)
		}
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	list := listReceipts(t, r.receiptDir("test-repo"))
	if len(list) != 2 {
		t.Fatalf("%d receipts, want 2", len(list))
	}
	for _, e := range list {
		if !strings.Contains(e.Receipt.Reason, "shutting down") {
			t.Errorf("reason %q", e.Receipt.Reason)
		}
	}
	if got := gate.calls(); len(got) != 1 {
		t.Errorf("model calls %v: the queued task ran", got)
	}
}

// TestShutdownSlowBody: a client that sends half a body does not hold a
// forced shutdown up (the handler would otherwise wait for the body until
// its 30 s read deadline).
func TestShutdownSlowBody(t *testing.T) {
	r := newRig(t, rigConfig{})
	url, served := r.serve(t)
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{", ProcessPath)
	time.Sleep(300 * time.Millisecond) // the handler is reading the body
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	r.srv.Shutdown(ctx)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Shutdown took %s with a slow request body; want about its deadline plus the flush second", d)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

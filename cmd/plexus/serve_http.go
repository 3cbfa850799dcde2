package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/plexus-agent/plexus/engine/index"
	"github.com/plexus-agent/plexus/transports/httpws"
)

type httpFlags struct {
	addr, token, tlsCert, tlsKey string
	allowRemote                  bool
	maxMessageBytes              int64
}

// serveHTTP serves the HTTP + WebSocket front-end until ctx ends, then
// shuts down gracefully (running turns get httpws.DefaultShutdownGrace to
// finish, then are cancelled; sockets close with 1001).
func serveHTTP(ctx context.Context, stderr io.Writer, rt *runtime, dataDir string, f httpFlags) error {
	host, _, err := net.SplitHostPort(f.addr)
	if err != nil {
		return usageErr("--addr %q: %v (use host:port, like %s)", f.addr, err, httpws.DefaultAddr)
	}
	useTLS := f.tlsCert != "" || f.tlsKey != ""
	if useTLS && (f.tlsCert == "" || f.tlsKey == "") {
		return usageErr("--tls-cert and --tls-key go together")
	}
	if ip := net.ParseIP(host); !useTLS && !f.allowRemote && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return usageErr("--addr %q is not a loopback address: serve TLS there (--tls-cert, --tls-key) or, on a network you trust, pass --allow-insecure-remote", f.addr)
	}
	token, source := f.token, "--token/$PLEXUS_TOKEN"
	if token == "" {
		path := filepath.Join(dataDir, httpws.TokenFile)
		if token, err = httpws.LoadOrCreateToken(path); err != nil {
			return err
		}
		source = path
	}
	// The workspace of -w is registered, so a client finds it at once.
	if _, err := rt.engine.RegisterWorkspace(ctx, rt.workspace.Root, ""); err != nil {
		return err
	}
	srv, err := httpws.New(httpws.Options{
		Engine: rt.engine, Token: token, Indexer: indexAdapter{rt.index}, Version: version,
		MaxMessageBytes: f.maxMessageBytes, Logger: rt.log,
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (is another server using the port? choose another with --addr)", f.addr, err)
	}
	scheme := "http"
	if useTLS {
		cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			ln.Close()
			return fmt.Errorf("load the TLS certificate: %w", err)
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}})
		scheme = "https"
	}
	fmt.Fprintf(stderr, "plexus: serving %s://%s (WebSocket /v1/sessions/{id}/stream) with %s; bearer token in %s; workspace %s\n",
		scheme, ln.Addr(), rt.engine.CurrentModel(), source, rt.workspace.ID)
	return serveUntil(ctx, ln, srv, httpws.DefaultShutdownGrace+20*time.Second, func() {
		fmt.Fprintln(stderr, "plexus: shutting down: running turns get", httpws.DefaultShutdownGrace, "to finish")
	})
}

// indexAdapter serves the index endpoints from the index service.
type indexAdapter struct{ svc *index.Service }

var _ httpws.Indexer = indexAdapter{}

func (a indexAdapter) Build(ctx context.Context, root string, rebuild bool) (any, error) {
	ix, err := a.svc.Workspace(ctx, root)
	if err != nil {
		return nil, err
	}
	return ix.Build(ctx, index.BuildOptions{Rebuild: rebuild})
}

func (a indexAdapter) ApplyChanges(ctx context.Context, root string, changes []httpws.FileChange) (any, error) {
	ix, err := a.svc.Workspace(ctx, root)
	if err != nil {
		return nil, err
	}
	fc := make([]index.FileChange, len(changes))
	for i, c := range changes {
		fc[i] = index.FileChange{Type: c.Type, Path: c.Path, ContentHash: c.ContentHash}
	}
	return ix.ApplyChanges(ctx, fc)
}

func (a indexAdapter) Status(ctx context.Context, root string) (any, error) {
	ix, err := a.svc.Workspace(ctx, root)
	if err != nil {
		return nil, err
	}
	return ix.Status(), nil
}

// envToken is the token given by environment.
func envToken() string { return os.Getenv("PLEXUS_TOKEN") }

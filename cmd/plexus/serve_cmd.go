package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/index"
	"github.com/plexus-agent/plexus/transports/httpws"
	"github.com/plexus-agent/plexus/transports/lspstdio"
	"github.com/plexus-agent/plexus/transports/ndjson"
	"github.com/plexus-agent/plexus/transports/task"
	"github.com/plexus-agent/plexus/transports/unixrpc"
)

func newServeCmd(g *globalFlags) *cobra.Command {
	var transport, addr, zuRoot string
	var watch bool
	var concurrency int
	var hf httpFlags
	var socket string
	cmd := &cobra.Command{
		Use:   "serve --transport ndjson|task|http|lsp-stdio|unix|acp",
		Short: "Serve the engine to a client over a front-end protocol",
		Long: `Serve the engine to a client program.

Transports:
  ndjson   newline-delimited JSON on stdin/stdout (protocols/ndjson-stdio.md),
           for the desktop shell; logs go to stderr, never stdout.
  task     HTTP task front-end (protocols/http-task-receipts.md): POST
           /api/task/process on --addr (default 127.0.0.1:8080) runs one
           turn per task and answers with the result and the path of the
           signed receipt it appended under
           {ZU_ROOT}/ide/receipts/{repoId}/{yyyy}/{mm}/receipts.jsonl
           (--zu-root, default $ZU_ROOT, else the data directory).
           Read them with plexus receipts list|show|verify --repo ID.
  http     HTTP + WebSocket front-end (protocols/http-websocket-sessions.md)
           on --addr (default 127.0.0.1:3199): workspaces, sessions, models
           and index over REST under /v1, one WebSocket stream per session
           at /v1/sessions/{id}/stream (?since=SEQ resumes). Every request
           needs Authorization: Bearer TOKEN; the token is --token,
           $PLEXUS_TOKEN, or generated on first start into
           DATA_DIR/http-token (mode 0600). --tls-cert/--tls-key serve TLS;
           plain HTTP listens on loopback only unless
           --allow-insecure-remote. Sessions, their events and pending
           approvals are kept in DATA_DIR/plexus.db and survive a restart.
           Each request and stream is logged on stderr (level info unless
           --log-level says otherwise). The OpenAPI description is
           transports/httpws/schemas/openapi.json.
  lsp-stdio  JSON-RPC 2.0 on stdin/stdout with LSP Content-Length framing
           (protocols/jsonrpc-stdio-lsp-framing.md), for a VS Code extension
           that spawns plexus: initialize, executeTask, updateConfiguration,
           shutdown; host-side tools through $/requestToolExecution.
           Nothing but framed messages goes to stdout; logs go to stderr.
  unix     JSON-RPC 2.0, one message per line, on a Unix socket
           (protocols/jsonrpc-unix-socket.md), for the terminal UI: --socket
           (default $XDG_RUNTIME_DIR/plexus-PID.sock, else
           /tmp/plexus-PID.sock), mode 0600, removed on shutdown; a stale
           socket is replaced. Each connection has its own sessions;
           session.save writes under DATA_DIR/sessions by default.
  acp      the Agent Client Protocol v1 (agentclientprotocol.com) on
           stdin/stdout, one JSON-RPC message per line, for editors that
           spawn their agent: Zed (agent_servers in settings.json),
           JetBrains IDEs (acp.json), Neovim (CodeCompanion, avante.nvim),
           Emacs (agent-shell). Each session works in the cwd the editor
           sends; approvals are the editor's permission prompts; unsaved
           buffers are read, and approved edits written, through the
           editor when it offers fs/*; sessions are kept in
           DATA_DIR/plexus.db (session/load replays them). Nothing but ACP
           messages goes to stdout; logs go to stderr. See the README's
           "Editors (ACP)" for each editor's configuration.

The server embeds new code chunks in the background with the embedding
model; --watch also keeps the index current as files change.

The ndjson and task protocols cannot ask for approvals: calls that need
one (file writes, commands) are denied unless --approve-all is given
(ndjson; the task front-end never approves). The http front-end asks its
WebSocket clients, the acp front-end the editor. SIGTERM (or closing stdin, for ndjson) shuts down
gracefully: running turns end with a response.`,
		Example: `  plexus serve --transport acp -m ollama:qwen2.5-coder:7b   # what an editor runs

  echo '{"id":"1","kind":"user_message","message":"Give me a tour"}' | \
    plexus serve --transport ndjson --model replay:examples/replay/tour.jsonl

  ZU_ROOT=~/.zu plexus serve --transport task --model ollama:qwen2.5-coder:7b
  curl -s localhost:8080/api/task/process -d '{"task": {"id": "t1", "type": "code_review",
    "data": {"file_path": "main.go"}}, "repoId": "my-repo"}'

  plexus serve --transport http -w ~/src/app --model ollama:qwen2.5-coder:7b
  curl -H "Authorization: Bearer $(cat ~/.local/share/plexus/http-token)" localhost:3199/v1/health`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch transport {
			case "ndjson", "task", "http", "lsp-stdio", "unix", "acp":
			case "":
				return usageErr("--transport is required: ndjson, task, http, lsp-stdio, unix or acp")
			default:
				return usageErr("transport %q is not available; available: ndjson, task, http, lsp-stdio, unix, acp", transport)
			}
			changed := func(names ...string) bool {
				for _, n := range names {
					if cmd.Flags().Changed(n) {
						return true
					}
				}
				return false
			}
			if transport != "task" && transport != "http" && changed("addr") {
				return usageErr("--addr is for --transport task or http")
			}
			if transport != "unix" && changed("socket") {
				return usageErr("--socket is for --transport unix")
			}
			if transport != "task" && changed("concurrency", "zu-root") {
				return usageErr("--concurrency and --zu-root are for --transport task")
			}
			if transport != "http" && changed("token", "tls-cert", "tls-key", "allow-insecure-remote", "max-message-bytes") {
				return usageErr("--token, --tls-cert, --tls-key, --allow-insecure-remote and --max-message-bytes are for --transport http")
			}
			if (transport == "http" || transport == "unix") && g.approveAll {
				return usageErr("--approve-all is not available with --transport %s: its clients answer approvals", transport)
			}
			if addr == "" {
				addr = task.DefaultAddr
				if transport == "http" {
					addr = httpws.DefaultAddr
				}
			}
			// The http and acp front-ends keep sessions across restarts
			// (the unix one saves them to files when asked, so it stores
			// none); http logs a line per request (info) unless told
			// otherwise.
			g.persistSessions = transport == "http" || transport == "acp"
			if transport == "http" && g.logLevelDefault {
				g.logLevel = "info"
			}
			if transport == "task" && g.approveAll {
				return usageErr("--approve-all is not available with --transport task: a task is never allowed to write files or run commands")
			}
			g.longRunning = true
			rt, err := newRuntime(g, cmd.ErrOrStderr(), true, nil)
			if err != nil {
				return err
			}
			defer rt.Close()
			if watch {
				ix, err := rt.index.Workspace(cmd.Context(), rt.workspace.Root)
				if err != nil {
					return err
				}
				go func() {
					err := ix.Watch(cmd.Context(), func(st index.BuildStats, err error) {
						if err != nil {
							rt.log.Warn("index update failed", "error", err)
						}
					})
					if err != nil && cmd.Context().Err() == nil {
						rt.log.Warn("index watcher stopped", "error", err)
					}
				}()
			}
			if transport == "http" {
				hf.addr = addr
				if hf.token == "" {
					hf.token = envToken()
				}
				return serveHTTP(cmd.Context(), cmd.ErrOrStderr(), rt, g.dataDir, hf)
			}
			switch transport {
			case "lsp-stdio":
				srv := lspstdio.New(lspstdio.Options{
					Engine: rt.engine, Workspace: rt.workspace, ApproveAll: g.approveAll, Logger: rt.log,
				})
				if err := srv.Serve(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout()); err != nil {
					return fmt.Errorf("serve lsp-stdio: %w", err)
				}
				return nil
			case "acp":
				return serveACP(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout(), rt, g)
			case "unix":
				return serveUnix(cmd.Context(), cmd.ErrOrStderr(), rt, socket, filepath.Join(g.dataDir, "sessions"))
			}
			if transport == "task" {
				return serveTask(cmd.Context(), cmd.ErrOrStderr(), rt, taskFlags{addr: addr, zuRoot: zuRoot, dataDir: g.dataDir, concurrency: concurrency})
			}
			srv := ndjson.New(ndjson.Options{
				Engine: rt.engine, Workspace: rt.workspace, ApproveAll: g.approveAll, Logger: rt.log,
			})
			if err := srv.Serve(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout()); err != nil {
				return fmt.Errorf("serve ndjson: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&transport, "transport", "", "front-end protocol: ndjson, task, http, lsp-stdio, unix or acp")
	cmd.Flags().StringVar(&socket, "socket", "", "unix: the socket path (default $XDG_RUNTIME_DIR/plexus-PID.sock, else /tmp/plexus-PID.sock)")
	cmd.Flags().StringVar(&addr, "addr", "", "task, http: the address to listen on, host:port (default 127.0.0.1:8080 for task, 127.0.0.1:3199 for http)")
	cmd.Flags().StringVar(&hf.token, "token", "", "http: the bearer token clients must send (default $PLEXUS_TOKEN, else generated into DATA_DIR/http-token)")
	cmd.Flags().StringVar(&hf.tlsCert, "tls-cert", "", "http: serve TLS with this PEM certificate (with --tls-key)")
	cmd.Flags().StringVar(&hf.tlsKey, "tls-key", "", "http: the PEM private key of --tls-cert")
	cmd.Flags().BoolVar(&hf.allowRemote, "allow-insecure-remote", false, "http: allow plain HTTP on a non-loopback --addr")
	cmd.Flags().Int64Var(&hf.maxMessageBytes, "max-message-bytes", httpws.DefaultMaxMessageBytes, "http: the largest WebSocket message or request body a client may send")
	cmd.Flags().StringVar(&zuRoot, "zu-root", os.Getenv("ZU_ROOT"), "task: storage root of the receipts (default $ZU_ROOT, else the data directory)")
	cmd.Flags().IntVar(&concurrency, "concurrency", 2, "task: tasks processed at once; the others wait, by priority")
	cmd.Flags().BoolVar(&g.approveAll, "approve-all", false, "approve every call that needs approval (file writes, commands)")
	cmd.Flags().BoolVar(&watch, "watch", false, "keep the workspace index current as files change (fsnotify)")
	return cmd
}

type taskFlags struct {
	addr, zuRoot, dataDir string
	concurrency           int
}

// serveTask serves the task front-end until ctx ends (SIGTERM, SIGINT),
// then shuts down: running tasks get 10 s to finish and are then
// cancelled.
func serveTask(ctx context.Context, stderr io.Writer, rt *runtime, f taskFlags) error {
	if f.concurrency < 1 {
		return usageErr("--concurrency must be at least 1")
	}
	host, _, err := net.SplitHostPort(f.addr)
	if err != nil {
		return usageErr("--addr %q: %v (use host:port, like 127.0.0.1:8080)", f.addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		// The contract is localhost-only and has no authentication.
		return usageErr("--addr %q is not a loopback address; the task protocol has no authentication, so it only listens on localhost (127.0.0.1, ::1)", f.addr)
	}
	if f.zuRoot == "" {
		f.zuRoot = f.dataDir
	}
	srv, err := task.New(task.Options{
		Engine: rt.engine, Workspace: rt.workspace, ZURoot: f.zuRoot, Concurrency: f.concurrency,
		Ready: modelReady(rt), Logger: rt.log,
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		srv.Close()
		return fmt.Errorf("listen on %s: %w (is another server using the port? choose another with --addr)", f.addr, err)
	}
	// One line on stderr (stdout stays empty), so that a person or a
	// supervisor sees where to send tasks.
	fmt.Fprintf(stderr, "plexus: serving tasks on http://%s%s with %s; receipts under %s\n",
		ln.Addr(), task.ProcessPath, rt.engine.CurrentModel(), filepath.Join(f.zuRoot, "ide", "receipts"))
	return serveUntil(ctx, ln, srv, 10*time.Second, nil)
}

// server is what serveUntil runs: task.Server and httpws.Server.
type server interface {
	Serve(net.Listener) error
	Shutdown(context.Context) error
	Close() error
}

// serveUntil serves ln until srv fails or ctx ends (SIGTERM, SIGINT), then
// calls stopping (when set) and shuts srv down within grace.
func serveUntil(ctx context.Context, ln net.Listener, srv server, grace time.Duration, stopping func()) error {
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		srv.Close()
		return err
	case <-ctx.Done():
	}
	if stopping != nil {
		stopping()
	}
	gctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(gctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return <-done
}

// modelReady reports whether the current model's provider answers (it
// lists its models), remembering the answer for 5 s so that a burst of
// tasks asks the provider once. The check has its own 5 s deadline and
// does not end with the request that triggered it, so a client that hangs
// up cannot make the provider look unreachable to the others.
func modelReady(rt *runtime) func(context.Context) error {
	var mu sync.Mutex
	var checked time.Time
	var last error
	return func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(checked) < 5*time.Second {
			return last
		}
		ref := rt.engine.CurrentModel()
		if ref.IsZero() {
			last = errors.New("no model is configured (start plexus serve with --model)")
		} else {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_, err := rt.engine.ListModels(cctx, ref.Provider)
			cancel()
			last = nil
			switch {
			case errors.Is(err, engine.ErrNotConfigured):
				last = fmt.Errorf("the model provider %s is not configured: %v", ref.Provider, err)
			case err != nil:
				last = fmt.Errorf("the model provider %s cannot be reached: %v", ref.Provider, err)
			}
		}
		checked = time.Now()
		return last
	}
}

// serveUnix serves the JSON-RPC socket front-end until ctx ends, then
// shuts down (running queries get 10 s) and removes the socket.
func serveUnix(ctx context.Context, stderr io.Writer, rt *runtime, path, sessionDir string) error {
	if path == "" {
		path = unixrpc.DefaultSocketPath()
	}
	srv, err := unixrpc.New(unixrpc.Options{
		Engine: rt.engine, Workspace: rt.workspace, Logger: rt.log, Version: version,
		SessionDir: sessionDir,
	})
	if err != nil {
		return err
	}
	ln, err := unixrpc.Listen(path)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "plexus: serving JSON-RPC on unix socket %s with %s\n", path, rt.engine.CurrentModel())
	return serveUntil(ctx, ln, srv, 10*time.Second, nil)
}

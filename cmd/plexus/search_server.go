package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/index"
	"github.com/plexus-agent/plexus/transports/unixrpc"
)

// The per-user search server. plexus search answers text and symbol
// queries from a long-running plexus that keeps the index in memory, as
// gopls -remote=auto shares one gopls daemon: the first search that finds
// no server starts one in the background (plexus search-server, detached,
// logging to DATA_DIR/search-server.log) and answers itself; later
// searches connect to it. The server speaks the Unix socket front-end's
// JSON-RPC (search.text, search.symbols), watches the workspaces it has
// opened so that it never answers from a stale index, and exits after
// --idle-timeout without a connection. Its socket is private to the user
// (mode 0600, in $XDG_RUNTIME_DIR or /tmp) and named after the data
// directory and the plexus binary (path, size, modification time), so a
// rebuilt binary starts a server of its own and the old one idles out.

// envSearchServer chooses the server when --server is not given.
const envSearchServer = "PLEXUS_SEARCH_SERVER"

// envSearchIdle, when set, is the --idle-timeout of the search servers
// plexus search starts (a Go duration).
const envSearchIdle = "PLEXUS_SEARCH_IDLE_TIMEOUT"

// defaultSearchIdle is how long the search server waits without a
// connection before it exits.
const defaultSearchIdle = 15 * time.Minute

// searchSocket is the per-user search server's socket for a data
// directory and this binary.
func searchSocket(dataDir string) string {
	exe, _ := os.Executable()
	return searchSocketFor(dataDir, exe)
}

// searchSocketFor is searchSocket for the binary exe.
func searchSocketFor(dataDir, exe string) string {
	h := sha256.New()
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		abs = dataDir
	}
	fmt.Fprintf(h, "%s\x00", abs)
	if fi, err := os.Stat(exe); err == nil {
		fmt.Fprintf(h, "%s\x00%d\x00%d", exe, fi.Size(), fi.ModTime().UnixNano())
	}
	name := "plexus-search-" + hex.EncodeToString(h.Sum(nil))[:16] + ".sock"
	dir := os.Getenv("XDG_RUNTIME_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "plexus-"+strconv.Itoa(os.Getuid()))
		os.MkdirAll(dir, 0o700)
	}
	return filepath.Join(dir, name)
}

// startSearchServer starts plexus search-server in the background for
// the data directory, detached from this process (its own session), and
// does not wait for it.
func startSearchServer(g *globalFlags, socket string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(g.dataDir, 0o755); err != nil {
		return err
	}
	logPath := filepath.Join(g.dataDir, "search-server.log")
	if fi, err := os.Stat(logPath); err == nil && fi.Size() > 1<<20 {
		os.Rename(logPath, logPath+".old")
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	args := []string{"search-server", "--socket", socket, "--data-dir", g.dataDir, "--log-level", "info"}
	if d := os.Getenv(envSearchIdle); d != "" {
		args = append(args, "--idle-timeout", d)
	}
	cmd := exec.Command(exe, args...)
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	return cmd.Process.Release()
}

func newSearchServerCmd(g *globalFlags) *cobra.Command {
	var socket string
	var idle time.Duration
	cmd := &cobra.Command{
		Use:    "search-server --socket PATH",
		Short:  "The per-user search server that plexus search starts (not for direct use)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if socket == "" {
				return usageErr("--socket is required")
			}
			log, err := g.logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			idx, err := index.Open(ctx, index.Options{Path: filepath.Join(g.dataDir, "index.db"), Logger: log, Background: true, Watch: true})
			if err != nil {
				return err
			}
			defer idx.Close()
			eng, err := engine.New(engine.Options{Searcher: idx, Logger: log})
			if err != nil {
				return err
			}
			ws, err := eng.OpenWorkspace(g.workspace)
			if err != nil {
				return usageErr("--workspace: %v", err)
			}
			srv, err := unixrpc.New(unixrpc.Options{Engine: eng, Workspace: ws, Logger: log, Version: version, AnyWorkspace: true})
			if err != nil {
				return err
			}
			ln, err := unixrpc.Listen(socket)
			if errors.Is(err, unixrpc.ErrServerRunning) {
				log.Info("a search server already answers on the socket; exiting", "socket", socket)
				return nil
			}
			if err != nil {
				return err
			}
			il := newIdleListener(ln)
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			go il.exitWhenIdle(ctx, idle, cancel)
			log.Info("search server listening", "socket", socket, "pid", os.Getpid(), "idle_timeout", idle)
			err = serveUntil(ctx, il, srv, 5*time.Second, nil)
			log.Info("search server stopped", "error", err)
			return err
		},
	}
	cmd.Flags().StringVar(&socket, "socket", "", "the Unix socket to listen on")
	cmd.Flags().DurationVar(&idle, "idle-timeout", defaultSearchIdle, "exit after this long without a connection")
	return cmd
}

// idleListener counts open connections and remembers when the last one
// closed, so that the search server can exit when nobody uses it.
type idleListener struct {
	net.Listener
	open atomic.Int64
	last atomic.Int64 // UnixNano of the last activity
}

func newIdleListener(ln net.Listener) *idleListener {
	l := &idleListener{Listener: ln}
	l.last.Store(time.Now().UnixNano())
	return l
}

func (l *idleListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.open.Add(1)
	l.last.Store(time.Now().UnixNano())
	return &idleConn{Conn: c, l: l}, nil
}

type idleConn struct {
	net.Conn
	l    *idleListener
	once sync.Once
}

func (c *idleConn) Close() error {
	c.once.Do(func() {
		c.l.open.Add(-1)
		c.l.last.Store(time.Now().UnixNano())
	})
	return c.Conn.Close()
}

// exitWhenIdle calls stop once no connection has been open for idle.
func (l *idleListener) exitWhenIdle(ctx context.Context, idle time.Duration, stop func()) {
	tick := time.NewTicker(min(idle/4, 30*time.Second) + time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if l.open.Load() == 0 && time.Since(time.Unix(0, l.last.Load())) >= idle {
				stop()
				return
			}
		}
	}
}

// rpcClient is a JSON-RPC 2.0 client of one Unix socket connection, one
// message per line, for plexus search.
type rpcClient struct {
	nc   net.Conn
	r    *bufio.Reader
	next int
}

// rpcError is an error response.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

func (e *rpcError) Error() string { return e.Message }

// dialSearch connects to a search server and completes the handshake.
func dialSearch(ctx context.Context, socket string) (*rpcClient, error) {
	d := net.Dialer{Timeout: time.Second}
	nc, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, err
	}
	c := &rpcClient{nc: nc, r: bufio.NewReaderSize(nc, 1<<16)}
	_, err = c.call("initialize", map[string]any{
		"protocol_version": unixrpc.ProtocolVersion,
		"client_info":      map[string]string{"name": "plexus search", "version": version},
		"capabilities":     []string{},
	}, nil)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("search server %s: %w", socket, err)
	}
	return c, nil
}

func (c *rpcClient) Close() error { return c.nc.Close() }

// call sends a request and reads messages until its response; onNote (may
// be nil) sees the notifications that come first.
func (c *rpcClient) call(method string, params any, onNote func(method string, params json.RawMessage) error) (json.RawMessage, error) {
	c.next++
	id := c.next
	req, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	if _, err := c.nc.Write(append(req, '\n')); err != nil {
		return nil, err
	}
	for {
		line, err := c.r.ReadBytes('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("the server closed the connection")
			}
			return nil, err
		}
		var m struct {
			ID     *int            `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			Result json.RawMessage `json:"result"`
			Error  *rpcError       `json:"error"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			return nil, fmt.Errorf("the server sent something that is not JSON: %w", err)
		}
		if m.Method != "" {
			if onNote != nil {
				if err := onNote(m.Method, m.Params); err != nil {
					return nil, err
				}
			}
			continue
		}
		if m.ID == nil || *m.ID != id {
			continue
		}
		if m.Error != nil {
			return nil, m.Error
		}
		return m.Result, nil
	}
}

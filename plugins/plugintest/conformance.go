package plugintest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/plugins"
)

// Options configure Check. Zero values mean defaults.
type Options struct {
	// Kind is plugins.KindTool or plugins.KindModel; default from the
	// file name (plexus-tool-NAME, plexus-model-NAME), else tool.
	Kind string
	// Args are the plugin's arguments (built-in plugins are
	// `plexus plugin serve KIND NAME`).
	Args []string
	// Timeout bounds each step (default 20 s).
	Timeout time.Duration
	// Env names host environment variables the plugin gets on top of
	// plugins.DefaultEnv, as Plexus passes the names in
	// $PLEXUS_PLUGIN_ENV; the rest of the environment is withheld, as
	// Plexus does.
	Env []string
}

// Result is one check: its name and, when it failed, why.
type Result struct {
	Name string
	Err  error
}

// Report is the outcome of Check for one binary.
type Report struct {
	Path, Kind string
	// Tools are what a tool plugin described.
	Tools   []engine.ToolSpec
	Results []Result
}

// Failed reports whether any check failed.
func (r Report) Failed() bool {
	for _, c := range r.Results {
		if c.Err != nil {
			return true
		}
	}
	return false
}

// forcedAfter is how long a plugin has to exit on its own once the host
// closed the connection: what go-plugin's Client.Kill waits before killing
// it (v1.8.0, client.go).
const forcedAfter = 2 * time.Second

// Check launches the plugin at path as Plexus does (its own process
// group, the allow-listed environment, a private socket directory) and
// runs the
// conformance checks, in order; it stops at the first check the rest
// depend on (the handshake). The checks:
//
//   - handshake: the plugin starts, speaks gRPC and the Plexus handshake,
//     and negotiates plugins.ProtocolVersion.
//   - tool plugins: describe (at least one tool; names unique and 1 to
//     64 of [a-zA-Z0-9_-]; a description; an input schema that is a valid
//     JSON Schema of an object; a known risk level; the same answer
//     twice), unknown_tool (a call of a tool it does not have gets a
//     *engine.ToolError with code unknown_tool), bad_arguments (each tool,
//     given a JSON array instead of an object, answers with a
//     *engine.ToolError rather than crashing), concurrent_calls (16 calls
//     at once all get their answer).
//   - model plugins: list_models (answers, or fails with a classified
//     *engine.ModelError), chat_without_model (a chat naming no model
//     fails with an error instead of crashing).
//   - stdout: the plugin wrote nothing to stdout after the handshake
//     (stdout belongs to the protocol; log to stderr).
//   - alive: the plugin still answers a health check after all this.
//   - stop: the process exits on its own when the host closes the
//     connection, before go-plugin resorts to killing it (2 s).
func Check(ctx context.Context, path string, opts Options) Report {
	if opts.Timeout <= 0 {
		opts.Timeout = 20 * time.Second
	}
	if opts.Kind == "" {
		opts.Kind = plugins.KindTool
		if strings.HasPrefix(filepath.Base(path), "plexus-model-") {
			opts.Kind = plugins.KindModel
		}
	}
	r := &Report{Path: path, Kind: opts.Kind}
	socketDir, err := os.MkdirTemp("", "plexus-plugintest-")
	if err == nil {
		defer os.RemoveAll(socketDir)
		err = os.Chmod(socketDir, 0o700)
	}
	if err != nil {
		r.Results = append(r.Results, Result{Name: "handshake", Err: fmt.Errorf("create a socket directory: %w", err)})
		return *r
	}
	var stdout syncBuffer
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig: plugins.Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{plugins.ProtocolVersion: {
			plugins.KindTool: &plugins.ToolPlugin{}, plugins.KindModel: &plugins.ModelPlugin{}}},
		Cmd:              plugins.LaunchCommand(path, opts.Args, socketDir, opts.Env),
		SkipHostEnv:      true,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           hclog.NewNullLogger(),
		StartTimeout:     opts.Timeout,
		SyncStdout:       &stdout,
	})
	defer client.Kill()

	var view any
	ok := r.run("handshake", func() error {
		rpc, err := client.Client()
		if err != nil {
			return fmt.Errorf("the plugin did not complete the handshake (is it built with plugins.Serve, and does it print nothing to stdout before?): %w", err)
		}
		if v := client.NegotiatedVersion(); v != plugins.ProtocolVersion {
			return fmt.Errorf("negotiated plugin protocol %d; Plexus speaks %d", v, plugins.ProtocolVersion)
		}
		raw, err := rpc.Dispense(opts.Kind)
		if err != nil {
			return fmt.Errorf("the plugin does not serve kind %q: %w", opts.Kind, err)
		}
		view, err = plugins.Dispensed(raw, filepath.Base(path))
		return err
	})
	if !ok {
		return *r
	}
	step := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, opts.Timeout) }
	switch v := view.(type) {
	case engine.Toolset:
		r.checkTools(step, v)
	case plugins.ConfigurableModel:
		r.checkModel(step, v)
	}
	r.run("stdout", func() error {
		if out := stdout.String(); out != "" {
			return fmt.Errorf("the plugin wrote %d bytes to stdout (%q); stdout belongs to the plugin protocol, log to stderr with plugins.Logger", len(out), truncate(out, 80))
		}
		return nil
	})
	r.run("alive", func() error {
		rpc, err := client.Client()
		if err == nil {
			err = rpc.Ping()
		}
		if err != nil {
			return fmt.Errorf("the plugin stopped answering during the checks: %w", err)
		}
		return nil
	})
	r.run("stop", func() error {
		// As the host does: close the connection (go-plugin's Shutdown
		// call), then give the plugin forcedAfter to exit on its own
		// before it is killed.
		pid := 0
		if rc := client.ReattachConfig(); rc != nil {
			pid = rc.Pid
		}
		defer plugins.Reap(pid) // anything the plugin left running
		rpc, err := client.Client()
		if err == nil {
			err = rpc.Close()
		}
		if err != nil {
			client.Kill()
			return fmt.Errorf("the host could not close the connection: %w", err)
		}
		deadline := time.Now().Add(forcedAfter)
		for !client.Exited() {
			if time.Now().After(deadline) {
				client.Kill()
				return fmt.Errorf("the plugin did not exit within %v of the host closing the connection, so it had to be killed; return from main when plugins.Serve returns and stop background work", forcedAfter)
			}
			time.Sleep(10 * time.Millisecond)
		}
		client.Kill() // releases go-plugin's side
		return nil
	})
	return *r
}

func (r *Report) run(name string, fn func() error) bool {
	err := fn()
	r.Results = append(r.Results, Result{Name: name, Err: err})
	return err == nil
}

func (r *Report) checkTools(step func() (context.Context, context.CancelFunc), ts engine.Toolset) {
	ok := r.run("describe", func() error {
		ctx, cancel := step()
		defer cancel()
		specs, err := ts.Tools(ctx)
		if err != nil {
			return fmt.Errorf("describe failed: %w", err)
		}
		if len(specs) == 0 {
			return errors.New("the plugin describes no tools")
		}
		r.Tools = specs
		var errs []error
		seen := map[string]bool{}
		for _, s := range specs {
			if err := plugins.CheckToolSpec(s); err != nil {
				errs = append(errs, fmt.Errorf("tool %q: %w", s.Name, err))
			}
			if seen[s.Name] {
				errs = append(errs, fmt.Errorf("two tools are named %q", s.Name))
			}
			seen[s.Name] = true
		}
		again, err := ts.Tools(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("the second describe failed: %w", err))
		} else if a, b := mustJSON(specs), mustJSON(again); !bytes.Equal(a, b) {
			errs = append(errs, errors.New("two describes in a row gave different tools; the host may ask at any time"))
		}
		return errors.Join(errs...)
	})
	if !ok {
		return
	}
	unknown := engine.InvokeRequest{CallID: "conformance", Tool: "plexus_conformance_no_such_tool", Args: json.RawMessage(`{}`), WorkspaceRoot: "/nonexistent"}
	r.run("unknown_tool", func() error {
		ctx, cancel := step()
		defer cancel()
		_, err := ts.Invoke(ctx, unknown, func(engine.ToolUpdate) {})
		return wantToolError(err, engine.ToolCodeUnknownTool)
	})
	r.run("bad_arguments", func() error {
		var errs []error
		for _, s := range r.Tools {
			ctx, cancel := step()
			_, err := ts.Invoke(ctx, engine.InvokeRequest{CallID: "conformance", Tool: s.Name, Args: json.RawMessage(`[1,2,3]`), WorkspaceRoot: "/nonexistent"}, func(engine.ToolUpdate) {})
			cancel()
			if err := wantToolError(err, ""); err != nil {
				errs = append(errs, fmt.Errorf("tool %q given a JSON array: %w", s.Name, err))
			}
		}
		return errors.Join(errs...)
	})
	r.run("concurrent_calls", func() error {
		ctx, cancel := step()
		defer cancel()
		errs := make([]error, 16)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := ts.Invoke(ctx, unknown, func(engine.ToolUpdate) {})
				errs[i] = wantToolError(err, engine.ToolCodeUnknownTool)
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	})
}

// wantToolError checks err is a *engine.ToolError (of code, when given).
func wantToolError(err error, code engine.ToolErrorCode) error {
	var te *engine.ToolError
	switch {
	case err == nil:
		return errors.New("the call succeeded; want a tool error")
	case !errors.As(err, &te):
		return fmt.Errorf("want a tool error, got a failure of the call itself: %v", err)
	case code != "" && te.Code != code:
		return fmt.Errorf("want a tool error with code %s, got %s: %s", code, te.Code, te.Message)
	}
	return nil
}

func (r *Report) checkModel(step func() (context.Context, context.CancelFunc), m plugins.ConfigurableModel) {
	r.run("list_models", func() error {
		ctx, cancel := step()
		defer cancel()
		_, err := m.ListModels(ctx)
		var me *engine.ModelError
		if err != nil && !errors.As(err, &me) {
			return fmt.Errorf("want models or a *engine.ModelError, got %v", err)
		}
		if err != nil && me.Kind == nil {
			return fmt.Errorf("the error is not classified (no engine error kind; return a gRPC status via engine errors): %v", err)
		}
		return nil
	})
	r.run("chat_without_model", func() error {
		ctx, cancel := step()
		defer cancel()
		err := m.Chat(ctx, engine.ChatRequest{Messages: []engine.Message{{Role: engine.RoleUser, Content: "hi"}}}, func(engine.ChatChunk) error { return nil })
		if err == nil {
			return errors.New("a chat naming no model succeeded; want an error naming what is missing")
		}
		if errors.Is(err, engine.ErrPluginCrashed) {
			return fmt.Errorf("the plugin crashed: %v", err)
		}
		return nil
	})
}

// Conformance runs Check on the plugin binary at path (with args, for
// plugins that need them) and reports each check as a subtest.
func Conformance(t *testing.T, path string, args ...string) Report {
	t.Helper()
	r := Check(t.Context(), path, Options{Args: args})
	for _, c := range r.Results {
		t.Run(c.Name, func(t *testing.T) {
			if c.Err != nil {
				t.Error(c.Err)
			}
		})
	}
	return r
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// syncBuffer is a bytes.Buffer safe for go-plugin's copying goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

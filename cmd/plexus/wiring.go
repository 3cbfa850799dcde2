package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/index"
	"github.com/plexus-agent/plexus/engine/patch"
	"github.com/plexus-agent/plexus/engine/policy"
	"github.com/plexus-agent/plexus/engine/receipts"
	"github.com/plexus-agent/plexus/engine/store"
	"github.com/plexus-agent/plexus/models/ollama"
	"github.com/plexus-agent/plexus/models/openai"
	"github.com/plexus-agent/plexus/models/replay"
	"github.com/plexus-agent/plexus/plugins"
	"github.com/plexus-agent/plexus/plugins/mcp"
	fstool "github.com/plexus-agent/plexus/tools/fs"
	"github.com/plexus-agent/plexus/tools/search"
	"github.com/plexus-agent/plexus/tools/shell"
)

// builtins are the plugins compiled into this binary, each served by
// `plexus plugin serve KIND NAME` in its own process.
var builtins = map[plugins.Ref]func(){
	{Kind: plugins.KindTool, Name: "fs"}:      fstool.Serve,
	{Kind: plugins.KindTool, Name: "search"}:  search.Serve,
	{Kind: plugins.KindTool, Name: "shell"}:   shell.Serve,
	{Kind: plugins.KindModel, Name: "ollama"}: ollama.Serve,
	{Kind: plugins.KindModel, Name: "openai"}: openai.Serve,
	{Kind: plugins.KindModel, Name: "replay"}: replay.Serve,
}

// builtinEnv are the host variables built-in plugins need beyond
// plugins.DefaultEnv. The shell plugin gets the whole environment: it
// builds each command's environment itself, from its own allow-list plus
// the workspace policy's "env" names, which may name any variable.
var builtinEnv = map[plugins.Ref][]string{
	{Kind: plugins.KindTool, Name: "shell"}:   {"*"},
	{Kind: plugins.KindModel, Name: "ollama"}: {"OLLAMA_*"},
	{Kind: plugins.KindModel, Name: "openai"}: {openai.EnvBaseURL, openai.EnvAPIKey},
	{Kind: plugins.KindModel, Name: "replay"}: {replay.EnvDir},
}

// envPluginEnv names the variable listing extra host variables every
// plugin inherits (names or PREFIX_*, separated by commas or spaces).
const envPluginEnv = "PLEXUS_PLUGIN_ENV"

func extraPluginEnv() []string {
	return strings.FieldsFunc(os.Getenv(envPluginEnv), func(r rune) bool { return r == ',' || r == ' ' })
}

func builtinRefs() []plugins.Ref {
	refs := make([]plugins.Ref, 0, len(builtins))
	for r := range builtins {
		refs = append(refs, r)
	}
	sort.Slice(refs, func(i, j int) bool {
		if refs[i].Kind != refs[j].Kind {
			return refs[i].Kind > refs[j].Kind // tools first
		}
		return refs[i].Name < refs[j].Name
	})
	return refs
}

// runtime is the engine, its plugin host and its code index, wired from
// the flags.
type runtime struct {
	log       *slog.Logger
	plugins   *plugins.Manager
	mcp       *mcp.Toolset
	index     *index.Service
	store     *store.Store
	patcher   *patch.Patcher
	receipts  *receipts.Log
	engine    *engine.Engine
	workspace *engine.Workspace
}

// newRuntime wires the plugin host and the engine. needModel makes a
// missing --model a usage error. When record is non-nil, every response
// of the chosen model is also written to it as a replay script line.
func newRuntime(g *globalFlags, stderr io.Writer, needModel bool, record io.Writer) (*runtime, error) {
	log, err := g.logger(stderr)
	if err != nil {
		return nil, err
	}
	var ref engine.ModelRef
	if needModel {
		if ref, err = g.modelRef(); err != nil {
			return nil, err
		}
	}
	settings := map[string]map[string]string{
		"ollama": nonEmpty(map[string]string{"host": g.ollamaHost}),
		"openai": nonEmpty(map[string]string{"base_url": g.openaiBaseURL, "api_key": g.openaiAPIKey}),
		"replay": nonEmpty(map[string]string{"scripts": strings.Join(g.replayScripts(), "\n")}),
	}
	reattach, err := plugins.ReattachFromEnv()
	if err != nil {
		return nil, usageErr("%v", err)
	}
	timeouts, err := g.timeouts.parse()
	if err != nil {
		return nil, err
	}
	mgr, err := plugins.NewManager(plugins.Options{
		Builtins:  builtinRefs(),
		Dirs:      g.pluginDirs,
		Settings:  settings,
		Timeouts:  timeouts.forPlugins(),
		Logger:    log,
		Env:       extraPluginEnv(),
		PluginEnv: builtinEnv,
		Reattach:  reattach,
		// Beside the engine's other state, which commands cannot read or
		// write (see plugins/doc.go for why this keeps the lock file's
		// guarantee).
		VerifiedCache: filepath.Join(g.dataDir, "plugins-verified.json"),
	})
	if err != nil {
		return nil, err
	}
	if g.numCtx < 0 || g.maxSteps < 1 || g.keepAlive < 0 {
		mgr.Close()
		return nil, usageErr("--num-ctx and --keep-alive must not be negative, --max-steps must be at least 1")
	}
	models := mgr.Models()
	if _, ok := models[ref.Provider]; needModel && !ok {
		mgr.Close()
		return nil, usageErr("--model %s: %w %q (loaded providers: %s)", g.model, engine.ErrUnknownProvider, ref.Provider, strings.Join(sortedKeys(models), ", "))
	}
	if m, ok := models[ref.Provider]; ok && record != nil {
		models[ref.Provider] = replay.NewRecorder(m, record)
	}
	idx, err := g.openIndex(context.Background(), models, log)
	if err != nil {
		mgr.Close()
		return nil, err
	}
	rt := &runtime{log: log, plugins: mgr, index: idx, patcher: patch.NewPatcher()}
	mcpCfg, err := g.loadMCPConfig()
	if err != nil {
		rt.Close()
		return nil, err
	}
	if err := timeouts.applyToMCP(mcpCfg, mgr.Plugins()); err != nil {
		rt.Close()
		return nil, err
	}
	rt.mcp = mcp.New(mcpCfg, mcp.Options{Logger: log, ClientVersion: version, Env: extraPluginEnv(), CallTimeout: timeouts.global})
	if err := g.openState(rt); err != nil {
		rt.Close()
		return nil, err
	}
	opts := engine.Options{
		Patcher:     rt.patcher,
		Gatekeeper:  policy.NewGatekeeper(rt.store),
		Patches:     rt.store,
		Recorder:    receipts.NewRecorder(rt.receipts),
		Searcher:    idx,
		Retriever:   idx,
		Models:      models,
		Tools:       plugins.NewUnion(mgr.Toolset(), rt.mcp),
		Model:       ref,
		Logger:      log,
		MaxSteps:    g.maxSteps,
		ToolTimeout: timeouts.global,
		Chat:        engine.ChatOptions{NumCtx: g.numCtx, KeepAlive: g.keepAlive},
	}
	if g.persistSessions {
		opts.Sessions, opts.Workspaces = rt.store, rt.store
	}
	eng, err := engine.New(opts)
	if err != nil {
		rt.Close()
		return nil, usageErr("--model %s: %v", g.model, err)
	}
	ws, err := eng.OpenWorkspace(g.workspace)
	if err != nil {
		rt.Close()
		return nil, usageErr("--workspace: %v", err)
	}
	rt.engine, rt.workspace = eng, ws
	return rt, nil
}

// flushTimeout bounds saving the sessions at shutdown.
const flushTimeout = 30 * time.Second

// openState opens the state database (plexus.db: policies, patch sets,
// undo records) and the decision receipt log (receipts/, signed with the
// key in keys/, created on first use with mode 0600).
func (g *globalFlags) openState(rt *runtime) error {
	st, err := store.Open(context.Background(), filepath.Join(g.dataDir, "plexus.db"))
	if err != nil {
		return fmt.Errorf("%w (choose another place with --data-dir)", err)
	}
	rt.store = st
	key, err := receipts.LoadOrCreateKey(filepath.Join(g.dataDir, "keys"))
	if err != nil {
		return fmt.Errorf("receipt signing key: %w", err)
	}
	log, err := receipts.Open(filepath.Join(g.dataDir, "receipts"), receipts.Options{Key: key, Logger: rt.log})
	if err != nil {
		return fmt.Errorf("receipt log: %w", err)
	}
	rt.receipts = log
	return nil
}

// Close stores what the engine holds only in memory (Engine.Flush: the
// front-end has ended its turns by now), then stops the index (and its
// background embedding), the state and receipt stores and the plugins.
func (r *runtime) Close() {
	if r.engine != nil {
		ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
		if err := r.engine.Flush(ctx); err != nil {
			r.log.Error("saving the sessions at shutdown failed; what is listed was not saved", "error", err)
		}
		cancel()
	}
	if r.index != nil {
		r.index.Close()
	}
	if r.receipts != nil {
		r.receipts.Close()
	}
	if r.store != nil {
		r.store.Close()
	}
	r.patcher.Close()
	if r.mcp != nil {
		r.mcp.Close()
	}
	r.plugins.Close()
}

// loadMCPConfig reads --mcp-config; a missing default file means no MCP
// servers.
func (g *globalFlags) loadMCPConfig() (*mcp.Config, error) {
	if g.mcpConfigOptional {
		if _, err := os.Stat(g.mcpConfig); errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
	}
	cfg, err := mcp.LoadConfig(g.mcpConfig)
	if err != nil {
		return nil, usageErr("--mcp-config: %v", err)
	}
	return cfg, nil
}

// openIndex opens the code index in the data directory. Chunks are
// embedded with --embed-model, by default the --model (the issue's "current
// model"); "none" turns vector search off.
func (g *globalFlags) openIndex(ctx context.Context, models map[string]engine.Model, log *slog.Logger) (*index.Service, error) {
	opts := index.Options{Path: filepath.Join(g.dataDir, "index.db"), Logger: log, Background: g.longRunning}
	embed := g.embedModel
	if embed == "" {
		embed = g.model
	}
	if embed != "" && embed != "none" {
		ref, err := engine.ParseModelRef(embed)
		if err != nil {
			return nil, usageErr("--embed-model: %v", err)
		}
		m, ok := models[ref.Provider]
		if !ok {
			return nil, usageErr("--embed-model %s: no model provider %q is loaded", embed, ref.Provider)
		}
		opts.Embedder, opts.EmbedModel, opts.EmbedLabel = m, ref.Name, ref.String()
	}
	if g.rerankModel != "" {
		ref, err := engine.ParseModelRef(g.rerankModel)
		if err != nil {
			return nil, usageErr("--rerank-model: %v", err)
		}
		m, ok := models[ref.Provider]
		if !ok {
			return nil, usageErr("--rerank-model %s: no model provider %q is loaded", g.rerankModel, ref.Provider)
		}
		opts.Reranker, opts.RerankModel, opts.RerankLabel = m, ref.Name, ref.String()
	}
	svc, err := index.Open(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("open the index in %s: %w (choose another place with --data-dir)", g.dataDir, err)
	}
	return svc, nil
}

// replayScripts are the scripts of the replay models the flags name
// (--model, --embed-model, --rerank-model): the replay provider lists
// them, so the model in use is among the models listed everywhere.
func (g *globalFlags) replayScripts() []string {
	var out []string
	for _, m := range []string{g.model, g.embedModel, g.rerankModel} {
		if ref, err := engine.ParseModelRef(m); err == nil && ref.Provider == "replay" && !slices.Contains(out, ref.Name) {
			out = append(out, ref.Name)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func nonEmpty(m map[string]string) map[string]string {
	for k, v := range m {
		if v == "" {
			delete(m, k)
		}
	}
	return m
}

// newPluginCmd is the hidden `plexus plugin serve KIND NAME` that the
// plugin host runs to start a built-in plugin.
func newPluginCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "plugin", Hidden: true, Short: "Internal: serve a built-in plugin"}
	serveCmd := &cobra.Command{
		Use:   "serve KIND NAME [--debug]",
		Short: "Serve a built-in plugin over go-plugin (started by the plugin host, not by hand)",
		Long: `Serve a built-in plugin over go-plugin. The plugin host runs this; run by
hand with --debug, the plugin serves in debug mode: it prints a
PLEXUS_REATTACH_PLUGINS=... line to give plexus, which then attaches to it
instead of launching it, so it can run under a debugger.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			serve, ok := builtins[plugins.Ref{Kind: args[0], Name: args[1]}]
			if !ok {
				var names []string
				for _, r := range builtinRefs() {
					names = append(names, r.Kind+" "+r.Name)
				}
				return usageErr("no built-in %s plugin %q; built-ins: %s", args[0], args[1], strings.Join(names, ", "))
			}
			serve() // reads --debug from os.Args itself
			return nil
		},
	}
	serveCmd.Flags().Bool("debug", false, "serve in debug mode and print the PLEXUS_REATTACH_PLUGINS line")
	cmd.AddCommand(serveCmd)
	return cmd
}

var version = "0.1.0-dev"

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the Plexus version and plugin protocol version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "plexus %s (plugin protocol %d)\n", version, plugins.ProtocolVersion)
			return err
		},
	}
}

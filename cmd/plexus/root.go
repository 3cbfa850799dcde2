package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/plexus-agent/plexus/engine"
)

// globalFlags are the flags every command shares.
type globalFlags struct {
	workspace     string
	model         string
	pluginDirs    []string
	ollamaHost    string
	openaiBaseURL string
	openaiAPIKey  string
	logLevel      string
	approveAll    bool
	numCtx        int
	keepAlive     time.Duration
	maxSteps      int
	dataDir       string
	embedModel    string
	rerankModel   string
	// mcpConfig is the MCP server configuration file; mcpConfigOptional
	// is set when it is the default DATA_DIR/mcp.json, which may be
	// missing.
	mcpConfig         string
	mcpConfigOptional bool
	// longRunning is set by serve: the index then embeds new chunks in
	// the background.
	longRunning bool
	// logLevelDefault is true when neither --log-level nor
	// $PLEXUS_LOG_LEVEL chose the level.
	logLevelDefault bool
	// persistSessions is set by serve --transport http and acp: sessions and
	// registered workspaces are then kept in plexus.db.
	persistSessions bool
	// timeouts are --tool-timeout and --plugin-timeout (timeouts.go).
	timeouts timeoutFlags
}

func newRootCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:   "plexus",
		Short: "Plexus: a pluggable agent engine for coding tools",
		Long: `Plexus runs agent turns on a repository: a model (Ollama, any OpenAI-compatible
server, or a recorded replay script) calls tools (files, search, shell) that run
as separate plugin processes, and may call the tools of configured MCP servers
(--mcp-config).

Models are named PROVIDER:MODEL, for example ollama:qwen2.5-coder:7b,
openai:gpt-4o-mini or replay:examples/replay/tour.jsonl.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	pf := root.PersistentFlags()
	pf.StringVarP(&g.workspace, "workspace", "w", ".", "workspace directory the agent works in")
	pf.StringVarP(&g.model, "model", "m", "", "model as PROVIDER:MODEL (default $PLEXUS_MODEL)")
	pf.StringSliceVar(&g.pluginDirs, "plugin-dir", nil, "directories searched for plexus-tool-NAME and plexus-model-NAME plugins, repeatable (default $PLEXUS_PLUGIN_PATH, else $XDG_DATA_HOME/plexus/plugins, ~/.local/share/plexus/plugins when XDG_DATA_HOME is unset)")
	pf.StringVar(&g.ollamaHost, "ollama-host", "", "Ollama server URL (default $OLLAMA_HOST, else http://127.0.0.1:11434)")
	pf.StringVar(&g.openaiBaseURL, "openai-base-url", "", "OpenAI-compatible API base URL (default $OPENAI_BASE_URL, else https://api.openai.com/v1 when an API key is set; with neither, the OpenAI provider is not configured and never contacted)")
	pf.StringVar(&g.openaiAPIKey, "openai-api-key", "", "API key for the OpenAI-compatible server (default $OPENAI_API_KEY)")
	pf.StringVar(&g.dataDir, "data-dir", "", "where Plexus keeps its database (code index) (default $PLEXUS_DATA_DIR, else $XDG_DATA_HOME/plexus, ~/.local/share/plexus when XDG_DATA_HOME is unset)")
	pf.StringVar(&g.embedModel, "embed-model", "", "model that embeds code for vector search, PROVIDER:MODEL, or none (default: the --model)")
	pf.StringVar(&g.rerankModel, "rerank-model", "", "model that reranks retrieved code after the feature-based rerank, PROVIDER:MODEL (default: none)")
	pf.StringVar(&g.mcpConfig, "mcp-config", "", `MCP servers whose tools the agent may call, a JSON file {"mcpServers": {NAME: {"command": ..., "args": [...]} or {"url": ...}}} (default $PLEXUS_MCP_CONFIG, else DATA_DIR/mcp.json when it exists)`)
	pf.IntVar(&g.numCtx, "num-ctx", 0, "context window in tokens asked of the model (Ollama's num_ctx), capped at the model's context length; 0 sizes it from each prompt (Ollama: at least 8192)")
	pf.DurationVar(&g.keepAlive, "keep-alive", 0, "how long Ollama keeps the model loaded after a call, e.g. 30m (0: Ollama's default)")
	pf.IntVar(&g.maxSteps, "max-steps", engine.DefaultMaxSteps, "most model calls in one turn")
	pf.StringVar(&g.logLevel, "log-level", "", "log level on stderr: debug, info, warn or error (default $PLEXUS_LOG_LEVEL, else warn)")
	g.timeouts.register(pf)
	root.PersistentPreRun = func(*cobra.Command, []string) { g.applyEnvDefaults() }

	root.AddCommand(
		newRunCmd(g),
		newServeCmd(g),
		newPluginsCmd(g),
		newModelsCmd(g),
		newIndexCmd(g),
		newSearchCmd(g),
		newSearchServerCmd(g),
		newUndoCmd(g),
		newPolicyCmd(g),
		newReceiptsCmd(g),
		newPluginCmd(),
		newVersionCmd(),
	)
	addSandboxExecCmd(root)
	return root
}

// applyEnvDefaults fills flags left unset from the environment (kept out
// of the flag defaults so --help shows the rule, not this machine's value).
func (g *globalFlags) applyEnvDefaults() {
	if g.model == "" {
		g.model = os.Getenv("PLEXUS_MODEL")
	}
	if g.logLevel == "" {
		g.logLevel = os.Getenv("PLEXUS_LOG_LEVEL")
	}
	if g.logLevel == "" {
		g.logLevel, g.logLevelDefault = "warn", true
	}
	if g.pluginDirs == nil {
		g.pluginDirs = defaultPluginDirs()
	}
	if g.dataDir == "" {
		g.dataDir = defaultDataDir()
	}
	if g.mcpConfig == "" {
		g.mcpConfig = os.Getenv("PLEXUS_MCP_CONFIG")
	}
	if g.mcpConfig == "" {
		g.mcpConfig, g.mcpConfigOptional = filepath.Join(g.dataDir, "mcp.json"), true
	}
}

// defaultDataDir is $PLEXUS_DATA_DIR or $XDG_DATA_HOME/plexus
// (~/.local/share/plexus).
func defaultDataDir() string {
	if d := os.Getenv("PLEXUS_DATA_DIR"); d != "" {
		return d
	}
	return filepath.Join(xdgDataHome(), "plexus")
}

func xdgDataHome() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return os.TempDir()
	}
	return filepath.Join(home, ".local", "share")
}

// defaultPluginDirs is $PLEXUS_PLUGIN_PATH (colon-separated) or
// $XDG_DATA_HOME/plexus/plugins (~/.local/share/plexus/plugins).
func defaultPluginDirs() []string {
	if p := os.Getenv("PLEXUS_PLUGIN_PATH"); p != "" {
		return filepath.SplitList(p)
	}
	return []string{filepath.Join(xdgDataHome(), "plexus", "plugins")}
}

// logger writes text logs to stderr at the --log-level.
func (g *globalFlags) logger(stderr io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(strings.ToLower(g.logLevel))); err != nil {
		return nil, usageErr("--log-level %q: use debug, info, warn or error", g.logLevel)
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})), nil
}

// modelRef parses --model, or explains how to choose one.
func (g *globalFlags) modelRef() (engine.ModelRef, error) {
	if g.model == "" {
		return engine.ModelRef{}, usageErr(`no model chosen: pass --model PROVIDER:MODEL or set PLEXUS_MODEL, for example
  --model ollama:qwen2.5-coder:7b            (a model your Ollama server has)
  --model openai:gpt-4o-mini                 (OPENAI_API_KEY set, or --openai-base-url for a local server)
  --model replay:examples/replay/tour.jsonl  (a recorded script, offline)
'plexus models' lists what your providers offer`)
	}
	ref, err := engine.ParseModelRef(g.model)
	if err != nil {
		return engine.ModelRef{}, usageErr("--model: %v", err)
	}
	return ref, nil
}

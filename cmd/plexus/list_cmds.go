package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/plugins"
	"github.com/plexus-agent/plexus/plugins/contain"
	"github.com/plexus-agent/plexus/plugins/mcp"
)

func newPluginsCmd(g *globalFlags) *cobra.Command {
	var verbose bool
	cmd := &cobra.Command{
		Use:   "plugins",
		Short: "List built-in and discovered plugins and MCP servers with their tools",
		Long: `List the built-in plugins, those found in the plugin directories
(--plugin-dir) and the MCP servers of --mcp-config (kind "mcp", with the
transport and the command or URL), starting each once to ask what it offers,
with its version and checksum state (third-party plugins are launched only
when their SHA-256 matches plexus-plugins.lock). A plugin or server that
fails to start is listed with the reason. Subcommands install, verify and
remove manage third-party plugins; check runs the conformance checks against
a plugin binary.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rt, err := newRuntime(g, cmd.ErrOrStderr(), false, nil)
			if err != nil {
				return err
			}
			defer rt.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			var servers []mcp.ServerStatus
			done := make(chan struct{})
			go func() {
				defer close(done)
				servers = rt.mcp.Describe(ctx)
			}()
			statuses := rt.plugins.Describe(ctx)
			<-done
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KIND\tNAME\tVERSION\tCHECKSUM\tSOURCE\tOFFERS")
			failed := 0
			for _, s := range statuses {
				source, ver := "built-in", version
				if !s.Builtin || s.Attach != nil {
					source, ver = s.Path, versionText(s.Lock)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Kind, s.Name, ver, checksumState(s), source, offers(s))
				if s.Err != nil {
					failed++
				}
			}
			for _, s := range servers {
				ver := s.Version
				if ver == "" {
					ver = "-"
				}
				fmt.Fprintf(tw, "mcp\t%s\t%s\t-\t%s: %s\t%s\n", s.Name, ver, s.Transport, s.Target, toolNames(s.Tools, s.Err))
				if s.Err != nil {
					failed++
				}
			}
			tw.Flush()
			fmt.Fprintf(cmd.OutOrStdout(), "\n%s\n", containmentNote())
			if verbose {
				describe := func(tools []engine.ToolSpec, source string) {
					for _, t := range tools {
						fmt.Fprintf(cmd.OutOrStdout(), "\n%s (%s; risk %s, read-only %v, needs approval %v)\n  %s\n",
							t.Name, source, t.Risk, t.ReadOnly, t.NeedsApproval, t.Description)
					}
				}
				for _, s := range statuses {
					describe(s.Tools, s.Name+" plugin")
				}
				for _, s := range servers {
					describe(s.Tools, s.Name+" MCP server")
				}
			}
			if failed > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%d of %d plugins and MCP servers failed to start", failed, len(statuses)+len(servers))}
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "describe each tool")
	cmd.AddCommand(newPluginsInstallCmd(g), newPluginsVerifyCmd(g), newPluginsRemoveCmd(g), newPluginsCheckCmd())
	return cmd
}

// containmentNote says how third-party plugins and MCP stdio servers are
// contained on this system (package plugins/contain).
func containmentNote() string {
	mode := contain.Available()
	if mode.SurvivesSIGKILL() {
		return fmt.Sprintf("Third-party plugins and MCP stdio servers each run in a %s: every process they start ends with them, and with plexus even when it is killed.", mode)
	}
	return fmt.Sprintf("Third-party plugins and MCP stdio servers each lead a session: Close ends what they start, but processes that leave the session survive if plexus is killed (no PID namespace here: %v).", contain.Why())
}

// checksumState says whether a plugin's binary was verified: "ok" (its
// SHA-256 matched the lock file when it started), "MISMATCH", "not locked",
// "lock error", "built-in" or "debug attach" (neither is checked).
func checksumState(s plugins.PluginStatus) string {
	switch {
	case s.Attach != nil:
		return "debug attach"
	case s.Builtin:
		return "built-in"
	case errors.Is(s.Err, plugins.ErrChecksumMismatch):
		return "MISMATCH"
	case errors.Is(s.Err, plugins.ErrChecksumUnverified):
		return "UNREADABLE"
	case errors.Is(s.LockErr, plugins.ErrNotLocked):
		return "not locked"
	case s.LockErr != nil:
		return "lock error"
	}
	return "ok (" + s.Lock.SHA256[:8] + ")" // checked before any other start failure
}

func offers(s plugins.PluginStatus) string {
	if s.Kind == plugins.KindModel && s.Err == nil {
		return "models (see 'plexus models')"
	}
	return toolNames(s.Tools, s.Err)
}

// toolNames lists tools, marking those that need approval, or says why
// there are none.
func toolNames(tools []engine.ToolSpec, err error) string {
	if err != nil {
		// One table row: a server's stderr tail goes on the same line.
		return "FAILED: " + strings.ReplaceAll(strings.ReplaceAll(err.Error(), "\n  ", " | "), "\n", " ")
	}
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
		if t.NeedsApproval {
			names[i] += " (approval)"
		}
	}
	return strings.Join(names, ", ")
}

// formatSize prints a byte count in decimal units (as Ollama does).
func formatSize(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}

// emptyHint explains an empty model list, by provider.
var emptyHint = map[string]string{
	"replay": " (the directory has no *.jsonl scripts; any script can be named directly as replay:PATH)",
	"ollama": ` (pull one with "ollama pull qwen2.5-coder:7b")`,
}

func newModelsCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "models [PROVIDER...]",
		Short: "List the models each provider offers now",
		Long: `List the models each model provider (plugin) offers now, with their
capabilities: Ollama's local models, the OpenAI-compatible server's
models, the replay scripts in use and in $PLEXUS_REPLAY_DIR. A provider
that cannot be reached is listed with the reason and how to fix it. A
provider that lacks configuration (OpenAI without an API key or a base
URL) is reported as "not configured", saying what to set, and is not
contacted.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			rt, err := newRuntime(g, cmd.ErrOrStderr(), false, nil)
			if err != nil {
				return err
			}
			defer rt.Close()
			out := cmd.OutOrStdout()
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "MODEL\tCAPABILITIES\tCONTEXT\tSIZE\tLOADED")
			var problems []string
			listed := 0
			ctx, cancel := context.WithTimeout(cmd.Context(), 15*time.Second)
			lists := rt.engine.AllModels(ctx, args...)
			cancel()
			for _, pm := range lists {
				p := pm.Provider
				if err := pm.Err; err != nil {
					var me *engine.ModelError
					if errors.As(err, &me) && me.Provider == p {
						problems = append(problems, err.Error()) // already names the provider
					} else {
						problems = append(problems, fmt.Sprintf("%s: %v", p, err))
					}
					continue
				}
				if len(pm.Models) == 0 {
					problems = append(problems, fmt.Sprintf("%s: no models listed%s", p, emptyHint[p]))
				}
				listed += len(pm.Models)
				for _, m := range pm.Models {
					ctxLen, size, loaded := "-", "-", ""
					if m.ContextLength > 0 {
						ctxLen = fmt.Sprint(m.ContextLength)
					}
					if m.SizeBytes > 0 {
						size = formatSize(m.SizeBytes)
					}
					if m.Loaded {
						loaded = "yes"
					}
					caps := strings.Join(m.Capabilities, ",")
					if caps == "" {
						caps = "-"
					}
					fmt.Fprintf(tw, "%s:%s\t%s\t%s\t%s\t%s\n", p, m.Name, caps, ctxLen, size, loaded)
				}
			}
			if listed > 0 {
				tw.Flush()
			}
			for i, p := range problems {
				if i > 0 || listed > 0 {
					fmt.Fprintln(cmd.ErrOrStderr())
				}
				fmt.Fprintln(cmd.ErrOrStderr(), p)
			}
			if listed == 0 {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	return cmd
}

package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/plexus-agent/plexus/plugins"
	"github.com/plexus-agent/plexus/plugins/plugintest"
)

// installDir is where plugins install, remove and the lock file go: the
// first plugin directory.
func (g *globalFlags) installDir() (string, error) {
	if len(g.pluginDirs) == 0 || g.pluginDirs[0] == "" {
		return "", usageErr("no plugin directory: pass --plugin-dir DIR or set PLEXUS_PLUGIN_PATH")
	}
	return g.pluginDirs[0], nil
}

func newPluginsInstallCmd(g *globalFlags) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "install PATH_OR_GO_PACKAGE",
		Short: "Copy or build a plugin into the plugin directory and record its checksum",
		Long: `Install a third-party plugin into the first plugin directory (--plugin-dir,
$PLEXUS_PLUGIN_PATH, else ~/.local/share/plexus/plugins):

  plexus plugins install ./bin/plexus-tool-loc                     an executable: copied
  plexus plugins install ./examples/plexus-tool-loc                a directory: go build
  plexus plugins install example.com/x/cmd/plexus-tool-loc@v1.2.0  go install

The plugin is launched once through the plugin handshake to check that it is
a Plexus plugin of the kind its name says (a tool plugin lists its tools),
then moved into place as plexus-tool-NAME or plexus-model-NAME and recorded
in plexus-plugins.lock with its version, protocol version and SHA-256.
Plexus launches only recorded plugins whose SHA-256 still matches.
Installing again replaces the plugin and its entry. A name of a built-in
plugin (plexus-tool-fs, plexus-model-ollama, ...) is refused: the built-in
always wins, so the plugin would never run.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := g.installDir()
			if err != nil {
				return err
			}
			log, err := g.logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			inst, err := plugins.Install(cmd.Context(), plugins.InstallOptions{
				Source: args[0], Name: name, Dir: dir, Stderr: cmd.ErrOrStderr(), Env: extraPluginEnv(), Logger: log, Builtins: builtinRefs(),
			})
			if err != nil {
				return err
			}
			e := inst.Entry
			out := cmd.OutOrStdout()
			verb := "installed"
			if inst.Replaced {
				verb = "reinstalled"
			}
			fmt.Fprintf(out, "%s %s plugin %q: %s\n", verb, e.Kind, e.Name, inst.Path)
			fmt.Fprintf(out, "  version   %s\n", versionText(&e))
			fmt.Fprintf(out, "  protocol  %s\n", joinInts(e.ProtocolVersions))
			fmt.Fprintf(out, "  sha256    %s\n", e.SHA256)
			fmt.Fprintf(out, "  lock file %s\n", inst.LockFile)
			if e.Kind == plugins.KindTool {
				names := make([]string, len(inst.Tools))
				for i, t := range inst.Tools {
					names[i] = t.Name
				}
				fmt.Fprintf(out, "  tools     %s\n", strings.Join(names, ", "))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "installed file name, plexus-tool-NAME or plexus-model-NAME (default: the file or package name)")
	return cmd
}

func newPluginsVerifyCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "verify",
		Short: "Check every installed plugin against the lock file",
		Long: `Check each plugin directory's plexus-plugins.lock: every recorded plugin's
file is present and its SHA-256 matches; plugin binaries that are not
recorded are reported too (plexus refuses to launch them). One line per
plugin; exit 1 if anything is wrong.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			results := plugins.Verify(g.pluginDirs)
			out := cmd.OutOrStdout()
			if len(results) == 0 {
				fmt.Fprintf(out, "no third-party plugins in %s\n", strings.Join(g.pluginDirs, ", "))
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			bad := 0
			for _, r := range results {
				name := "-"
				if r.Ref.Kind != "" {
					name = r.Ref.Kind + "/" + r.Ref.Name
				}
				if r.State == plugins.VerifyOK {
					fmt.Fprintf(tw, "ok\t%s\t%s\t%s\tsha256 %s\n", name, r.Path, versionText(r.Entry), r.Entry.SHA256[:16])
					continue
				}
				bad++
				fmt.Fprintf(tw, "%s\t%s\t%s\t%v\n", strings.ToUpper(string(r.State)), name, r.Path, r.Err)
			}
			tw.Flush()
			if bad > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%d of %d plugins failed verification", bad, len(results))}
			}
			return nil
		},
	}
}

func newPluginsRemoveCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "remove KIND/NAME | plexus-KIND-NAME",
		Short: "Remove an installed plugin and its lock file entry",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := g.installDir()
			if err != nil {
				return err
			}
			ref, ok := plugins.ParseBinaryName(args[0])
			if !ok {
				kind, name, _ := strings.Cut(args[0], "/")
				ref, ok = plugins.ParseBinaryName(plugins.BinaryName(plugins.Ref{Kind: kind, Name: name}))
			}
			if !ok {
				return usageErr("%q: want KIND/NAME (tool/loc) or the file name (plexus-tool-loc)", args[0])
			}
			if err := plugins.Uninstall(dir, ref); err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return &exitError{code: 1, err: err}
				}
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed %s plugin %q from %s\n", ref.Kind, ref.Name, dir)
			return nil
		},
	}
}

// versionText is a lock entry's version and short revision, or "-".
func versionText(e *plugins.LockEntry) string {
	if e == nil {
		return "-"
	}
	v := e.Version
	if v == "" {
		v = "unknown"
	}
	if r := e.Revision; r != "" {
		if len(r) > 12 && !strings.HasSuffix(r, "+dirty") {
			r = r[:12]
		} else if len(r) > 18 {
			r = r[:12] + "+dirty"
		}
		v += " " + r
	}
	return v
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ",")
}

func newPluginsCheckCmd() *cobra.Command {
	var kind string
	cmd := &cobra.Command{
		Use:   "check BINARY [-- ARGS...]",
		Short: "Run the plugin conformance checks against a plugin binary",
		Long: `Launch a plugin binary (installed or not) as Plexus does and check the
contract every plugin must keep: the handshake and protocol version, nothing
written to stdout, a valid description (tool names, descriptions, input
schemas, risk levels), typed errors for an unknown tool and for arguments
that are not an object, 16 concurrent calls, and an exit within 5 s of being
stopped. One line per check; exit 1 if any fails. The same checks run in Go
tests with plugintest.Conformance.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if kind != "" && kind != plugins.KindTool && kind != plugins.KindModel {
				return usageErr("--kind is tool or model, not %q", kind)
			}
			r := plugintest.Check(cmd.Context(), args[0], plugintest.Options{Kind: kind, Args: args[1:], Env: extraPluginEnv()})
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "%s plugin %s\n", r.Kind, r.Path)
			failed := 0
			for _, c := range r.Results {
				if c.Err != nil {
					failed++
					fmt.Fprintf(out, "FAIL  %s: %v\n", c.Name, c.Err)
					continue
				}
				fmt.Fprintf(out, "ok    %s\n", c.Name)
			}
			for _, t := range r.Tools {
				fmt.Fprintf(out, "tool  %s (risk %s, read-only %v, needs approval %v)\n", t.Name, t.Risk, t.ReadOnly, t.NeedsApproval)
			}
			if failed > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%d of %d checks failed", failed, len(r.Results))}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&kind, "kind", "", "tool or model (default from the name plexus-KIND-NAME, else tool)")
	return cmd
}

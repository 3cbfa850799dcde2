package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/plexus-agent/plexus/engine"
)

func newUndoCmd(g *globalFlags) *cobra.Command {
	var list, force bool
	cmd := &cobra.Command{
		Use:   "undo [APPLIED_ID]",
		Short: "Undo the last change Plexus applied to the workspace, byte for byte",
		Long: `Undo restores the files of an applied change exactly as they were: the
workspace's latest change that is not undone yet, or the one named. It refuses
when a file changed since the change was applied (--force restores anyway).
--list shows the applied changes, newest first.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rt, err := newRuntime(g, cmd.ErrOrStderr(), false, nil)
			if err != nil {
				return err
			}
			defer rt.Close()
			out := cmd.OutOrStdout()
			if list {
				applied, err := rt.engine.AppliedPatches(cmd.Context(), rt.workspace, 0)
				if err != nil {
					return err
				}
				if len(applied) == 0 {
					fmt.Fprintln(out, "no changes were applied in this workspace")
					return nil
				}
				tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "APPLIED\tWHEN\tFILES\tSTATE")
				for _, a := range applied {
					state := "applied"
					if a.UndoneAt != nil {
						state = "undone " + a.UndoneAt.Local().Format(time.DateTime)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", a.ID, a.Time.Local().Format(time.DateTime), appliedPaths(a), state)
				}
				return tw.Flush()
			}
			id := ""
			if len(args) == 1 {
				id = args[0]
			}
			a, err := rt.engine.Undo(cmd.Context(), rt.workspace, id, force)
			if err != nil {
				if errors.Is(err, engine.ErrConflict) {
					return &exitError{code: 1, err: fmt.Errorf("%w (undo --force restores anyway, losing those changes)", err)}
				}
				return err
			}
			fmt.Fprintf(out, "undid %s: restored %s\n", a.ID, appliedPaths(a))
			return nil
		},
	}
	cmd.Flags().BoolVar(&list, "list", false, "list the applied changes instead")
	cmd.Flags().BoolVar(&force, "force", false, "restore even files that changed since the apply")
	return cmd
}

func appliedPaths(a *engine.AppliedPatch) string {
	paths := make([]string, 0, len(a.Files))
	for _, f := range a.Files {
		paths = append(paths, f.Path)
	}
	return strings.Join(paths, ", ")
}

func newPolicyCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Show or replace the workspace's policy (allow / ask / deny rules)",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "show",
		Short: "Print the workspace's policy as JSON",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rt, err := newRuntime(g, cmd.ErrOrStderr(), false, nil)
			if err != nil {
				return err
			}
			defer rt.Close()
			doc, err := rt.engine.Policy(cmd.Context(), rt.workspace)
			if err != nil {
				return err
			}
			var v any
			if err := json.Unmarshal(doc, &v); err != nil {
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(v)
		},
	}, &cobra.Command{
		Use:   "set FILE",
		Short: "Replace the workspace's policy with the JSON in FILE (- for stdin), after validating it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var doc []byte
			var err error
			if args[0] == "-" {
				doc, err = io.ReadAll(cmd.InOrStdin())
			} else {
				doc, err = os.ReadFile(args[0])
			}
			if err != nil {
				return usageErr("read the policy: %v", err)
			}
			rt, err := newRuntime(g, cmd.ErrOrStderr(), false, nil)
			if err != nil {
				return err
			}
			defer rt.Close()
			if err := rt.engine.SetPolicy(cmd.Context(), rt.workspace, doc); err != nil {
				if errors.Is(err, engine.ErrInvalidRequest) {
					return usageErr("%v", err)
				}
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "policy of %s replaced\n", rt.workspace.Root)
			return nil
		},
	})
	return cmd
}

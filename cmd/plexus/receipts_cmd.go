package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/plexus-agent/plexus/engine/receipts"
	"github.com/plexus-agent/plexus/transports/task"
)

func newReceiptsCmd(g *globalFlags) *cobra.Command {
	var month, repo, zuRoot string
	cmd := &cobra.Command{
		Use:   "receipts",
		Short: "List, show and verify the signed, hash-chained receipt logs",
		Long: `Every approval, denial, patch apply and undo, and command Plexus runs
appends a receipt to an append-only log in the data directory
(receipts/{yyyy}/{mm}/receipts.jsonl), chained to the previous receipt's
hash and signed with the key in keys/.

With --repo ID the commands read the task receipts that
plexus serve --transport task writes instead:
{ZU_ROOT}/ide/receipts/{ID}/{yyyy}/{mm}/receipts.jsonl, signed with the key
in {ZU_ROOT}/ide/keys.`,
	}
	cmd.PersistentFlags().StringVar(&repo, "repo", "", "read the task receipts of this repository id (kebab-case) under ZU_ROOT")
	cmd.PersistentFlags().StringVar(&zuRoot, "zu-root", os.Getenv("ZU_ROOT"), "storage root of the task receipts (default $ZU_ROOT, else the data directory, as plexus serve --transport task)")
	// where returns the log directory and the directory of the signing
	// keys the commands read.
	where := func() (dir, keys string, err error) {
		if repo == "" {
			return filepath.Join(g.dataDir, "receipts"), filepath.Join(g.dataDir, "keys"), nil
		}
		if zuRoot == "" {
			zuRoot = g.dataDir // where plexus serve --transport task puts them without ZU_ROOT
		}
		dir, err = task.ReceiptsDir(zuRoot, repo)
		if err != nil {
			return "", "", usageErr("--repo: %v", err)
		}
		return dir, task.KeyDir(zuRoot), nil
	}
	parseMonth := func() (receipts.Month, error) {
		if month == "" {
			return receipts.Month{}, nil
		}
		m, err := receipts.ParseMonth(month)
		if err != nil {
			return m, usageErr("--month: %v (use YYYY-MM)", err)
		}
		return m, nil
	}
	entries := func(cmd *cobra.Command) ([]receipts.Entry, error) {
		m, err := parseMonth()
		if err != nil {
			return nil, err
		}
		dir, _, err := where()
		if err != nil {
			return nil, err
		}
		return receipts.NewReader(dir).List(cmd.Context(), m)
	}
	list := &cobra.Command{
		Use:   "list [--month YYYY-MM]",
		Short: "List the receipts, oldest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			es, err := entries(cmd)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TIME\tKIND\tACTOR\tTOOL\tID\tREASON")
			for _, e := range es {
				r := e.Receipt
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Time.Local().Format(time.DateTime), r.Kind, r.Actor, r.Tool, r.ID, cut(r.Reason, 60))
			}
			return tw.Flush()
		},
	}
	show := &cobra.Command{
		Use:   "show ID [--month YYYY-MM]",
		Short: "Print one receipt (by id, or a unique prefix of it) as JSON, with its file and line",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			es, err := entries(cmd)
			if err != nil {
				return err
			}
			var found []receipts.Entry
			for _, e := range es {
				if strings.HasPrefix(e.Receipt.ID, args[0]) {
					found = append(found, e)
				}
			}
			switch {
			case len(found) == 0:
				return &exitError{code: 1, err: fmt.Errorf("no receipt with id %q (plexus receipts list shows the ids)", args[0])}
			case len(found) > 1:
				return usageErr("%d receipts have ids starting with %q; give more of the id", len(found), args[0])
			}
			b, err := json.MarshalIndent(found[0].Receipt, "", "  ")
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n# %s:%d\n", b, found[0].File, found[0].Line)
			return nil
		},
	}
	verify := &cobra.Command{
		Use:   "verify",
		Short: "Check every receipt's hash, chain link and signature; report the first bad line",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Verify against the key directory's public keys, so rewriting
			// both the log and its published key is detected too.
			dir, keyDir, err := where()
			if err != nil {
				return err
			}
			keys, err := receipts.LoadPublicKeys(keyDir)
			_, statErr := os.Stat(filepath.Join(keyDir, receipts.PublicKeyFile))
			switch {
			case err != nil:
				return fmt.Errorf("the signing keys in %s cannot be read, so the log cannot be checked against them: %w", keyDir, err)
			case len(keys) == 0 && statErr == nil:
				return fmt.Errorf("%s holds no public key, so the log cannot be checked against it; restore it from a backup", filepath.Join(keyDir, receipts.PublicKeyFile))
			case len(keys) == 0:
				// No key directory (an unsigned log, or one copied from
				// elsewhere): the log's own published keys verify it.
				keys = nil
			}
			rep, err := receipts.NewReader(dir).Verify(cmd.Context(), receipts.VerifyOptions{PublicKeys: keys})
			if err != nil {
				var le *receipts.LineError
				if errors.As(err, &le) {
					return &exitError{code: 1, err: fmt.Errorf("receipt log is NOT intact: %v (%d receipts before it verified)", err, rep.Receipts)}
				}
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d receipts in %d files verified (%d signed); head %s\n", rep.Receipts, rep.Files, rep.Signed, orDash(rep.Head))
			return nil
		},
	}
	for _, c := range []*cobra.Command{list, show} {
		c.Flags().StringVar(&month, "month", "", "only this month (YYYY-MM)")
	}
	cmd.AddCommand(list, show, verify)
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

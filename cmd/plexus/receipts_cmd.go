package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/plexus-agent/plexus/engine/receipts"
)

func newReceiptsCmd(g *globalFlags) *cobra.Command {
	var month string
	cmd := &cobra.Command{
		Use:   "receipts",
		Short: "List and verify the signed, hash-chained log of decisions",
		Long: `Every approval, denial, patch apply and undo, and command Plexus runs
appends a receipt to an append-only log in the data directory
(receipts/{yyyy}/{mm}/receipts.jsonl), chained to the previous receipt's
hash and signed with the key in keys/.`,
	}
	dir := func() string { return filepath.Join(g.dataDir, "receipts") }
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
	list := &cobra.Command{
		Use:   "list [--month YYYY-MM]",
		Short: "List the receipts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := parseMonth()
			if err != nil {
				return err
			}
			entries, err := receipts.NewReader(dir()).List(cmd.Context(), m)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TIME\tKIND\tACTOR\tTOOL\tREASON")
			for _, e := range entries {
				r := e.Receipt
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Time.Local().Format(time.DateTime), r.Kind, r.Actor, r.Tool, cut(r.Reason, 60))
			}
			return tw.Flush()
		},
	}
	verify := &cobra.Command{
		Use:   "verify",
		Short: "Check every receipt's hash, chain link and signature; report the first bad line",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Verify against the key directory's public keys, so rewriting
			// both the log and its published key is detected too.
			keys, err := receipts.LoadPublicKeys(filepath.Join(g.dataDir, "keys"))
			if err != nil {
				keys = nil
			}
			rep, err := receipts.NewReader(dir()).Verify(cmd.Context(), receipts.VerifyOptions{PublicKeys: keys})
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
	for _, c := range []*cobra.Command{list} {
		c.Flags().StringVar(&month, "month", "", "only this month (YYYY-MM)")
	}
	cmd.AddCommand(list, verify)
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

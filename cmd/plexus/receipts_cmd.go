package main

import (
	"crypto/ed25519"
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
		Short: "List, show, verify and repair the signed, hash-chained receipt logs",
		Long: `Every approval, denial, patch apply and undo, and command Plexus runs
appends a receipt to an append-only log in the data directory
(receipts/{yyyy}/{mm}/receipts.jsonl), chained to the previous receipt's
hash and signed with the key in keys/. After each receipt, the log's
signed head (receipts/receipts.head) records how many receipts the chain
holds and the last one's hash, so that receipts removed from the end are
detected too.

With --repo ID the commands read the task receipts that
plexus serve --transport task writes instead:
{ZU_ROOT}/ide/receipts/{ID}/{yyyy}/{mm}/receipts.jsonl, signed with the key
in {ZU_ROOT}/ide/keys.

A log or repository with no receipts at all is an error (exit 1) that
names it: there is nothing to list or verify there.`,
	}
	cmd.PersistentFlags().StringVar(&repo, "repo", "", "read the task receipts of this repository id (kebab-case) under ZU_ROOT")
	cmd.PersistentFlags().StringVar(&zuRoot, "zu-root", os.Getenv("ZU_ROOT"), "storage root of the task receipts (default $ZU_ROOT, else the data directory, as plexus serve --transport task)")
	// where returns the log directory and the directory of the signing
	// keys the commands read.
	// It fails (exit 1) when the log directory does not exist, naming
	// it and, for --repo, the repositories that do have receipts.
	where := func() (dir, keys string, err error) {
		if repo == "" {
			dir, keys = filepath.Join(g.dataDir, "receipts"), filepath.Join(g.dataDir, "keys")
			if _, err := os.Stat(dir); err != nil {
				return "", "", &exitError{code: 1, err: fmt.Errorf("no receipt log at %s: nothing has been recorded with this data directory (choose another with --data-dir, or read task receipts with --repo)", dir)}
			}
			return dir, keys, nil
		}
		if zuRoot == "" {
			zuRoot = g.dataDir // where plexus serve --transport task puts them without ZU_ROOT
		}
		dir, err = task.ReceiptsDir(zuRoot, repo)
		if err != nil {
			return "", "", usageErr("--repo: %v", err)
		}
		if _, err := os.Stat(dir); err != nil {
			return "", "", &exitError{code: 1, err: fmt.Errorf("no task receipts for repository %q: %s does not exist (%s)", repo, dir, knownRepos(filepath.Dir(dir)))}
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
	// keys returns the public keys to verify with: those of the key
	// directory, so rewriting both the log and its published key is
	// detected too; nil (the log's own) when there is no key directory.
	keys := func(keyDir string) ([]ed25519.PublicKey, error) {
		keys, err := receipts.LoadPublicKeys(keyDir)
		_, statErr := os.Stat(filepath.Join(keyDir, receipts.PublicKeyFile))
		switch {
		case err != nil:
			return nil, fmt.Errorf("the signing keys in %s cannot be read, so the log cannot be checked against them: %w", keyDir, err)
		case len(keys) == 0 && statErr == nil:
			return nil, fmt.Errorf("%s holds no public key, so the log cannot be checked against it; restore it from a backup", filepath.Join(keyDir, receipts.PublicKeyFile))
		case len(keys) == 0:
			// No key directory (an unsigned log, or one copied from
			// elsewhere): the log's own published keys verify it.
			return nil, nil
		}
		return keys, nil
	}
	verify := &cobra.Command{
		Use:   "verify",
		Short: "Check every receipt's hash, chain link and signature, and the signed head; report the first problem",
		Long: `Verify checks every receipt's hash, its link to the previous receipt and
its signature, and the log's signed head: that the log still reaches the
receipt the head names (receipts removed from the end are reported) and
that it is that receipt. Exit 0 when all holds, 1 naming the first bad
line (file:line) or the head otherwise, with what to do about it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, keyDir, err := where()
			if err != nil {
				return err
			}
			pubs, err := keys(keyDir)
			if err != nil {
				return err
			}
			rep, err := receipts.NewReader(dir).Verify(cmd.Context(), receipts.VerifyOptions{PublicKeys: pubs, RequireHead: true})
			if err != nil {
				return &exitError{code: 1, err: fmt.Errorf("receipt log is NOT intact: %v (%d receipts before it verified)%s", err, rep.Receipts, verifyHint(err, repo))}
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "%d receipts in %d files verified (%d signed); head %s", rep.Receipts, rep.Files, rep.Signed, orDash(rep.Head))
			if a := rep.Anchor; a != nil && a.Count > 0 {
				signed := "signed"
				if a.KeyID == "" {
					signed = "unsigned"
				}
				fmt.Fprintf(out, "; %s head at receipt %d", signed, a.Count)
				if rep.AfterAnchor > 0 {
					fmt.Fprintf(out, " (%d after it: an append stopped before updating the head; the next one, or plexus receipts repair, brings it forward)", rep.AfterAnchor)
				}
			}
			fmt.Fprintln(out)
			return nil
		},
	}
	repair := &cobra.Command{
		Use:   "repair",
		Short: "Move a torn last line aside and bring the signed head up to date, saying what changed",
		Long: `A crash during an append can leave a torn last line: bytes of a receipt
whose append never returned, so that nobody was told it was recorded.
The next append moves them aside by itself; repair does it now: it moves
them to receipts.jsonl.torn beside the month file and says so, verifies
the whole log, and writes the signed head for the log's end when the log
has none (it was written before heads existed) or an append stopped
before updating it. It changes nothing else: a damaged whole line, a
broken chain or receipts missing from the end are reported (exit 1), for
a person to look at or restore from a backup. Signing the head needs the
key in the key directory.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, keyDir, err := where()
			if err != nil {
				return err
			}
			var key ed25519.PrivateKey
			if _, err := os.Stat(filepath.Join(keyDir, receipts.KeyFile)); err == nil {
				if key, err = receipts.LoadOrCreateKey(keyDir); err != nil {
					return err
				}
			}
			log, err := receipts.Open(dir, receipts.Options{Key: key})
			if err != nil {
				return err
			}
			defer log.Close()
			res, err := log.Repair(cmd.Context())
			out := cmd.OutOrStdout()
			for _, tt := range res.Torn {
				fmt.Fprintf(out, "moved %d torn bytes at the end of %s (line %d: an append was interrupted, so that receipt was never acknowledged) to %s\n",
					tt.Bytes, tt.File, tt.Line, tt.SavedTo)
			}
			if err != nil {
				return &exitError{code: 1, err: fmt.Errorf("not repaired: %v%s", err, verifyHint(err, repo))}
			}
			rep := res.Report
			switch {
			case res.HeadWritten:
				fmt.Fprintf(out, "wrote the signed head: %d receipts, the last %s\n", rep.Receipts, rep.Head)
			case len(res.Torn) == 0:
				fmt.Fprint(out, "nothing to repair: ")
			}
			fmt.Fprintf(out, "%d receipts in %d files verified (%d signed)\n", rep.Receipts, rep.Files, rep.Signed)
			return nil
		},
	}
	for _, c := range []*cobra.Command{list, show} {
		c.Flags().StringVar(&month, "month", "", "only this month (YYYY-MM)")
	}
	cmd.AddCommand(list, show, verify, repair)
	return cmd
}

// verifyHint says what to do about a verification error.
func verifyHint(err error, repo string) string {
	flag := ""
	if repo != "" {
		flag = " --repo " + repo
	}
	switch {
	case errors.Is(err, receipts.ErrTruncated):
		return "; an append was interrupted, so that last line's receipt was never acknowledged: plexus receipts repair" + flag + " moves it aside"
	case errors.Is(err, receipts.ErrNoHead):
		return "; a log written before signed heads has none: plexus receipts repair" + flag + " writes one for the log as it is now (it cannot tell whether receipts were removed before)"
	case errors.Is(err, receipts.ErrMissingReceipts), errors.Is(err, receipts.ErrHeadMismatch):
		return "; the log was cut or rewritten after its head was signed: restore it from a backup"
	}
	return ""
}

// knownRepos names the repositories with task receipts in dir (the
// ide/receipts directory of a ZU_ROOT).
func knownRepos(dir string) string {
	entries, err := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	switch {
	case err != nil || len(names) == 0:
		return "no repository has task receipts there; set --zu-root or $ZU_ROOT as plexus serve --transport task had it"
	case len(names) > 20:
		return fmt.Sprintf("%d repositories have receipts there, for example %s", len(names), strings.Join(names[:20], ", "))
	}
	return "repositories with receipts there: " + strings.Join(names, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/index"
)

func newIndexCmd(g *globalFlags) *cobra.Command {
	var rebuild, watch, noEmbed, status bool
	cmd := &cobra.Command{
		Use:   "index",
		Short: "Index the workspace for symbol, text and vector search",
		Long: `Index the workspace: catalog its files (gitignore-aware, files over 1 MiB and
binary files left out), extract symbols and chunks, build the text index,
then embed the chunks for vector search with the embedding model (by default
the --model, see --embed-model). Running it again only reads files that
changed; contents already analysed are never parsed again.

The index lives in the data directory (--data-dir). A progress bar shows on
a terminal; a summary line ends the run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rt, err := newRuntime(g, cmd.ErrOrStderr(), false, nil)
			if err != nil {
				return err
			}
			defer rt.Close()
			ctx := cmd.Context()
			ix, err := rt.index.Workspace(ctx, rt.workspace.Root)
			if err != nil {
				return err
			}
			if status {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(ix.Status())
			}
			errw := cmd.ErrOrStderr()
			bar := newBar(errw, "indexing")
			st, err := ix.Build(ctx, index.BuildOptions{Rebuild: rebuild, Progress: bar.progress})
			bar.finish()
			if err != nil {
				return err
			}
			// The size reported is the database file's once the
			// write-ahead log is folded into it.
			if err := rt.index.Checkpoint(ctx); err != nil {
				rt.log.Warn("index checkpoint", "error", err)
			}
			status := ix.Status()
			fmt.Fprintf(cmd.OutOrStdout(), "indexed %d files (%d read, %d changed, %d analysed, %d left out) in %s: %d symbols, %d chunks; index %s\n",
				st.Files, st.Read, st.Changed, st.Analyzed, st.Skipped, st.Duration.Round(time.Millisecond),
				status.Symbols, status.Chunks, formatSize(status.DatabaseBytes))
			if !noEmbed {
				if err := embedChunks(ctx, ix, cmd.OutOrStdout(), errw); err != nil {
					return err
				}
			}
			if !watch {
				return nil
			}
			fmt.Fprintf(errw, "watching %s for changes (Ctrl-C to stop)\n", rt.workspace.Root)
			err = ix.Watch(ctx, func(st index.BuildStats, err error) {
				if err != nil {
					fmt.Fprintf(errw, "update failed: %v\n", err)
					return
				}
				fmt.Fprintf(errw, "updated %d files (%d removed) in %s\n", st.Changed, st.Removed, st.Duration.Round(time.Millisecond))
			})
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&rebuild, "rebuild", false, "rebuild the text index from every file (analyses of unchanged contents are still reused)")
	cmd.Flags().BoolVar(&watch, "watch", false, "keep running and update the index as files change")
	cmd.Flags().BoolVar(&noEmbed, "no-embed", false, "skip embedding (vector search stays unavailable)")
	cmd.Flags().BoolVar(&status, "status", false, "print the index's status as JSON (files, chunks, symbols, embeddings, last update) and do nothing else")
	return cmd
}

// embedChunks runs the embedding to completion with a progress bar, or
// says why vector search is unavailable.
func embedChunks(ctx context.Context, ix *index.Index, out, errw io.Writer) error {
	if st := ix.Status().Vectors; st.Model == "" {
		fmt.Fprintf(out, "vector search: %s (pass --model or --embed-model to embed the chunks)\n", st.Skipped)
		return nil
	}
	bar := newBar(errw, "embedding")
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				v := ix.Status().Vectors
				bar.progress(index.Progress{Phase: "embedding", Done: v.Embedded, Total: v.Total})
			}
		}
	}()
	start := time.Now()
	vs, err := ix.Embed(ctx)
	close(done)
	bar.finish()
	switch {
	case errors.Is(err, engine.ErrUnsupported) || errors.Is(err, engine.ErrModelNotFound) || errors.Is(err, engine.ErrModelUnavailable):
		fmt.Fprintf(out, "vector search unavailable with %s: %v\n", vs.Model, err)
		return nil
	case err != nil:
		return fmt.Errorf("embedding with %s: %w", vs.Model, err)
	}
	fmt.Fprintf(out, "embedded %d of %d chunks with %s in %s\n", vs.Embedded, vs.Total, vs.Model, time.Since(start).Round(time.Millisecond))
	return nil
}

// bar is a progress bar on a terminal, nothing elsewhere.
type bar struct {
	pb    *progressbar.ProgressBar
	label string
}

func newBar(w io.Writer, label string) *bar {
	f, ok := w.(*os.File)
	if !ok || !isTerminal(f) {
		return &bar{label: label}
	}
	return &bar{label: label, pb: progressbar.NewOptions(-1,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(label),
		progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)}
}

func (b *bar) progress(p index.Progress) {
	if b.pb == nil {
		return
	}
	if p.Total > 0 && b.pb.GetMax() != p.Total {
		b.pb.ChangeMax(p.Total)
	}
	b.pb.Describe(p.Phase)
	b.pb.Set(p.Done)
}

func (b *bar) finish() {
	if b.pb != nil {
		b.pb.Finish()
	}
}

func newSearchCmd(g *globalFlags) *cobra.Command {
	var kind, path, include, server string
	var regex, ignoreCase bool
	var limit int
	cmd := &cobra.Command{
		Use:   "search [--kind hybrid|symbol|text|vector] QUERY",
		Short: "Search the workspace index and print ranked results",
		Long: `Search the workspace index (built on first use if needed):

  hybrid  (default) symbols the query names, BM25 over identifier-split
          words and vectors, fused and reranked; prints code chunks
  symbol  definitions by name: exact, then prefix, then fuzzy
          (camelCase and snake_case aware); Package.Name and Type.Method
          qualify a name (os.ReadFile, Buffer.Write)
  text    literal text (--regex for an RE2 expression), every matching
          line as path:line:column: text (--limit 0 prints them all)
  vector  chunks by embedding similarity (needs an embedding model)

Text and symbol searches are answered by a per-user search server that
keeps the index in memory and watches the workspace, so answers are
current and fast: the first search starts it in the background (it exits
after 15 idle minutes, logging to DATA_DIR/search-server.log) and answers
by itself, after refreshing the index from the files that changed.
--server off always answers in this process; --server SOCKET uses a
running plexus serve --transport unix instead.`,
		Example: `  plexus search --kind symbol ReadFile
  plexus search --kind symbol os.ReadFile
  plexus search --kind text --regex 'func \(\w+ \*Index\) Search'
  plexus search --kind text --limit 0 -i 'straße'
  plexus search "where are plugin crashes detected"`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			query := strings.Join(args, " ")
			if limit < 0 {
				return usageErr("--limit must be 0 (every match) or more")
			}
			if kind == "text" || kind == "symbol" {
				if server == "" {
					server = os.Getenv(envSearchServer)
				}
				q := quickSearch{g: g, kind: kind, query: query, path: path, include: include, regex: regex, ignoreCase: ignoreCase, limit: limit, server: server}
				return q.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			if limit == 0 {
				return usageErr("--limit 0 (every result) is for --kind text")
			}
			rt, err := newRuntime(g, cmd.ErrOrStderr(), false, nil)
			if err != nil {
				return err
			}
			defer rt.Close()
			ctx := cmd.Context()
			root := rt.workspace.Root
			out := cmd.OutOrStdout()
			switch kind {
			case "vector":
				hits, err := rt.index.SearchVectors(ctx, root, engine.ChunkQuery{Query: query, Path: path, Limit: limit})
				if err != nil {
					return searchErr(err)
				}
				printChunks(out, hits)
				return noHits(len(hits), query)
			case "hybrid":
				res, err := rt.index.Retrieve(ctx, engine.RetrievalRequest{Root: root, Query: query, TokenBudget: hybridBudget},
					func(ev engine.RetrievalEvent) {
						fmt.Fprintf(cmd.ErrOrStderr(), "· %s: %s\n", ev.Stage, ev.Message)
					})
				if err != nil {
					return searchErr(err)
				}
				snips := res.Snippets
				if len(snips) > limit {
					snips = snips[:limit]
				}
				for _, s := range snips {
					name := ""
					if s.Name != "" {
						name = " " + s.Kind + " " + s.Name
					}
					fmt.Fprintf(out, "%s:%d-%d%s  (%.2f; %s)\n", s.Path, s.StartLine, s.EndLine, name, s.Score, strings.Join(s.Sources, "+"))
				}
				return noHits(len(snips), query)
			}
			return usageErr("--kind %q: use hybrid, symbol, text or vector", kind)
		},
	}
	cmd.Flags().StringVarP(&kind, "kind", "k", "hybrid", "hybrid, symbol, text or vector")
	cmd.Flags().StringVar(&path, "path", "", "only results under this workspace-relative path")
	cmd.Flags().StringVar(&include, "include", "", "text search: only files matching this glob (*.go, src/**/*.ts)")
	cmd.Flags().BoolVar(&regex, "regex", false, "text search: QUERY is an RE2 regular expression")
	cmd.Flags().BoolVarP(&ignoreCase, "ignore-case", "i", false, "text search: ignore case")
	cmd.Flags().IntVarP(&limit, "limit", "n", 20, "most results (text: 0 prints every match)")
	cmd.Flags().StringVar(&server, "server", "", "text and symbol searches: auto (use or start the per-user search server), off (search in this process) or the socket of a plexus serve --transport unix (default $"+envSearchServer+", else auto)")
	return cmd
}

// hybridBudget is the token budget of `plexus search --kind hybrid`: room
// for --limit results of ordinary size.
const hybridBudget = 16000

func printChunks(out io.Writer, hits []engine.ChunkHit) {
	for _, h := range hits {
		name := ""
		if h.Name != "" {
			name = " " + h.Kind + " " + h.Name
		}
		fmt.Fprintf(out, "%s:%d-%d%s  (%.3f)\n", h.Path, h.StartLine, h.EndLine, name, h.Score)
	}
}

func searchErr(err error) error {
	if errors.Is(err, engine.ErrInvalidRequest) || errors.Is(err, engine.ErrUnsupported) {
		return &exitError{code: 1, err: err}
	}
	return err
}

// noHits makes an empty result exit 1, as grep does.
func noHits(n int, query string) error {
	if n == 0 {
		return &exitError{code: 1, err: fmt.Errorf("no results for %q", query)}
	}
	return nil
}

package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/plexus-agent/plexus/engine/index"
	"github.com/plexus-agent/plexus/transports/ndjson"
)

func newServeCmd(g *globalFlags) *cobra.Command {
	var transport string
	var watch bool
	cmd := &cobra.Command{
		Use:   "serve --transport ndjson",
		Short: "Serve the engine to a client over a front-end protocol",
		Long: `Serve the engine to a client program.

Transports:
  ndjson   newline-delimited JSON on stdin/stdout (protocols/ndjson-stdio.md),
           for the desktop shell; logs go to stderr, never stdout.

The server embeds new code chunks in the background with the embedding
model; --watch also keeps the index current as files change.

The ndjson protocol cannot ask for approvals: calls that need one (file
writes, commands) are denied unless --approve-all is given. SIGTERM (or
closing stdin) shuts down gracefully: running turns end with a response.`,
		Example: `  echo '{"id":"1","kind":"user_message","message":"Give me a tour"}' | \
    plexus serve --transport ndjson --model replay:examples/replay/tour.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch transport {
			case "ndjson":
			case "":
				return usageErr("--transport is required: ndjson")
			default:
				return usageErr("transport %q is not available; available: ndjson", transport)
			}
			g.longRunning = true
			rt, err := newRuntime(g, cmd.ErrOrStderr(), true, nil)
			if err != nil {
				return err
			}
			defer rt.Close()
			if watch {
				ix, err := rt.index.Workspace(cmd.Context(), rt.workspace.Root)
				if err != nil {
					return err
				}
				go func() {
					err := ix.Watch(cmd.Context(), func(st index.BuildStats, err error) {
						if err != nil {
							rt.log.Warn("index update failed", "error", err)
						}
					})
					if err != nil && cmd.Context().Err() == nil {
						rt.log.Warn("index watcher stopped", "error", err)
					}
				}()
			}
			srv := ndjson.New(ndjson.Options{
				Engine: rt.engine, Workspace: rt.workspace, ApproveAll: g.approveAll, Logger: rt.log,
			})
			if err := srv.Serve(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout()); err != nil {
				return fmt.Errorf("serve ndjson: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&transport, "transport", "", "front-end protocol: ndjson")
	cmd.Flags().BoolVar(&g.approveAll, "approve-all", false, "approve every call that needs approval (file writes, commands)")
	cmd.Flags().BoolVar(&watch, "watch", false, "keep the workspace index current as files change (fsnotify)")
	return cmd
}

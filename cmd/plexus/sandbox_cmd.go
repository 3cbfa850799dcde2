package main

import (
	"github.com/spf13/cobra"

	"github.com/plexus-agent/plexus/tools/shell"
)

// addSandboxExecCmd adds the hidden `plexus plugin sandbox-exec` to the
// plugin command of root: the sandbox launcher that the shell plugin
// re-executes this binary as, to confine a command with Landlock and then
// execute it (see shell.SandboxMain). Its arguments go to SandboxMain
// unparsed, so they cannot clash with the global flags (--workspace).
func addSandboxExecCmd(root *cobra.Command) {
	plugin, _, err := root.Find([]string{"plugin"})
	if err != nil || plugin == root {
		panic("plexus: the plugin command is missing; register it before the sandbox launcher")
	}
	plugin.AddCommand(&cobra.Command{
		Use:                "sandbox-exec --workspace DIR --tmp DIR [--write DIR]... [--allow-network] [--status-fd N] -- PROGRAM [ARG]...",
		Short:              "Run PROGRAM confined to the workspace, without network (started by the shell plugin, not by hand)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			// SandboxMain returns only when it could not execute
			// PROGRAM; it has printed why.
			return &exitError{code: shell.SandboxMain(args)}
		},
	})
}

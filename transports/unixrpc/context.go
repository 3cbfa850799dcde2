package unixrpc

import (
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/plexus-agent/plexus/engine"
)

// Caps of the terminal context section added to a query's message.
const (
	maxContextCommands     = 10
	maxContextCommandBytes = 500
	maxContextOutputBytes  = 8 << 10
	maxOpenFiles           = 40
)

// terminalSection is the terminal context the model reads after the
// user's message: the working directory, the shell, the last commands
// with their exit codes and the tail of the recent output. The
// environment is not included (it may hold secrets). "" when the client
// sent none of these.
func terminalSection(tc termContext) string {
	out := ""
	if tc.RecentOutput != nil {
		out = strings.TrimRight(*tc.RecentOutput, "\n")
	}
	if tc.Cwd == "" && tc.Shell == "" && len(tc.RecentCommands) == 0 && out == "" {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n\n[Terminal context]\n")
	if tc.Cwd != "" {
		fmt.Fprintf(&b, "Working directory: %s\n", tc.Cwd)
	}
	if tc.Shell != "" {
		fmt.Fprintf(&b, "Shell: %s\n", tc.Shell)
	}
	if cmds := tc.RecentCommands; len(cmds) > 0 {
		if len(cmds) > maxContextCommands {
			cmds = cmds[len(cmds)-maxContextCommands:]
		}
		b.WriteString("Recent commands (oldest first):\n")
		for _, c := range cmds {
			exit := "exit status unknown"
			if c.ExitCode != nil {
				exit = fmt.Sprintf("exit %d", *c.ExitCode)
			}
			fmt.Fprintf(&b, "  $ %s   (%s)\n", cut(strings.ReplaceAll(c.Command, "\n", " "), maxContextCommandBytes), exit)
		}
	}
	if out != "" {
		if len(out) > maxContextOutputBytes {
			i := len(out) - maxContextOutputBytes
			for i < len(out) && !utf8.RuneStart(out[i]) {
				i++
			}
			out = out[i:]
			fmt.Fprintf(&b, "Recent output (the last %d bytes):\n", len(out))
		} else {
			b.WriteString("Recent output:\n")
		}
		b.WriteString("```\n" + out + "\n```\n")
	}
	return b.String()
}

// openFiles turns the client's open_files (relative to its cwd) into the
// engine's open editors; files outside the workspace are left out, as the
// engine would refuse them.
func openFiles(tc termContext, root string) *engine.TurnContext {
	var eds []engine.OpenEditor
	for _, f := range tc.OpenFiles {
		if len(eds) == maxOpenFiles {
			break
		}
		p := f
		if !filepath.IsAbs(p) {
			base := tc.Cwd
			if !filepath.IsAbs(base) {
				base = root
			}
			p = filepath.Join(base, p)
		}
		rel, err := filepath.Rel(root, filepath.Clean(p))
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			continue
		}
		eds = append(eds, engine.OpenEditor{FilePath: filepath.ToSlash(rel)})
	}
	if len(eds) == 0 {
		return nil
	}
	return &engine.TurnContext{OpenEditors: eds}
}

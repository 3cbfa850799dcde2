package fs

import (
	"strings"

	"github.com/plexus-agent/plexus/engine/workspace"
	"github.com/plexus-agent/plexus/tools/internal/toolkit"
)

// newGlob parses a glob argument (workspace.Glob syntax: *, ?, [...] and **
// for any number of directories; without a slash it matches base names);
// field names the argument in errors, which are *engine.ToolError with
// code invalid_input.
func newGlob(tool, field, pattern string) (*workspace.Glob, error) {
	g, err := workspace.ParseGlob(pattern)
	if err != nil {
		return nil, toolkit.Invalid(tool, field, "is not a valid glob: %s", strings.TrimPrefix(err.Error(), workspace.ErrBadGlob.Error()+": "))
	}
	return g, nil
}

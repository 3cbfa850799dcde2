package httpws

import (
	"errors"
	"fmt"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/workspace"
)

// checkFileChanges is the one check of file watcher events beyond their
// JSON schema, for POST .../index/incremental and client.file_changes
// alike (their schemas are the same too, see TestFileChangeSchemasAgree):
// every path must lie inside the workspace at root, as the index will
// resolve it (relative to the root, or absolute inside it; symlinks that
// lead out are refused as well). Nothing is applied when one does not.
// It returns the index of the first bad change and an error wrapping
// engine.ErrPermissionDenied (the path leaves the workspace) or
// engine.ErrInvalidRequest; -1 and nil when all are fine, or when the
// workspace cannot be opened (the index then reports that).
func checkFileChanges(root string, changes []FileChange) (int, error) {
	r, err := workspace.Open(root)
	if err != nil {
		return -1, nil
	}
	defer r.Close()
	for i, c := range changes {
		_, err := r.Resolve(c.Path)
		if errors.Is(err, engine.ErrPermissionDenied) || errors.Is(err, engine.ErrInvalidRequest) {
			return i, fmt.Errorf("change %d (%s): %w", i, c.Type, err)
		}
	}
	return -1, nil
}

// indexErrorStatus maps an index update's error: a path refused by the
// workspace's confinement or a malformed change is the client's (400
// INVALID_REQUEST on REST, POLICY_VIOLATION or INVALID_MESSAGE on the
// stream); anything else is the server's (500 INDEX_FAILED).
func indexErrorStatus(err error) (status int, code, wsCode string) {
	switch {
	case errors.Is(err, engine.ErrPermissionDenied):
		return 400, codeInvalidRequest, string(engine.CodePolicyViolation)
	case errors.Is(err, engine.ErrInvalidRequest):
		return 400, codeInvalidRequest, codeInvalidMessage
	}
	return 500, codeIndexFailed, codeIndexFailed
}

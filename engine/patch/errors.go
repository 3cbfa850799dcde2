package patch

import (
	"fmt"

	"github.com/plexus-agent/plexus/engine"
)

// ErrConflict matches every *ConflictError: a file is no longer what a
// patch was computed against (Apply) or what an apply left (Undo). It is
// engine.ErrConflict, so front-ends map it like the engine's other errors.
var ErrConflict = engine.ErrConflict

// ConflictError reports a file whose content changed under a patch. Hashes
// are "sha256:<hex>" of the whole file; "" means the file does not exist.
// It matches ErrConflict with errors.Is.
type ConflictError struct {
	Path string // workspace-relative, slash-separated
	Want string // the hash the patch expects: at proposal (Apply) or right after the apply (Undo)
	Got  string // the hash the file has now
	Undo bool   // reported by Undo rather than Apply
}

func (e *ConflictError) Error() string {
	if e.Undo {
		return fmt.Sprintf("%s changed since the patch was applied (%s now, %s then); undo with force to overwrite it", e.Path, hashOrAbsent(e.Got), hashOrAbsent(e.Want))
	}
	return fmt.Sprintf("%s changed since the patch was proposed (%s now, %s then); ask for a new patch", e.Path, hashOrAbsent(e.Got), hashOrAbsent(e.Want))
}

// Is matches ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

func hashOrAbsent(h string) string {
	if h == "" {
		return "absent"
	}
	return h
}

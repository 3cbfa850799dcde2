package fs

import (
	"path"
	"slices"
	"strings"

	"github.com/plexus-agent/plexus/engine"
)

// overlay is the pending content of a call's model response: the files
// earlier calls of the response edited, by clean workspace-relative slash
// path (engine.InvokeRequest.Overlay). A nil overlay is empty.
type overlay map[string]engine.OverlayFile

// newOverlay cleans the keys of a request's overlay. Keys that are
// absolute or climb out of the workspace are dropped: no edit inside the
// workspace has such a path.
func newOverlay(in map[string]engine.OverlayFile) overlay {
	if len(in) == 0 {
		return nil
	}
	ov := make(overlay, len(in))
	for k, f := range in {
		c := path.Clean(k)
		if c == "." || c == ".." || strings.HasPrefix(c, "../") || path.IsAbs(c) {
			continue
		}
		ov[c] = f
	}
	return ov
}

// get returns the pending state of the file p names: by its real path
// (the key this plugin's edits get), else by the path as named (an edit
// tool of another plugin may have keyed a symlink by its own name).
func (ov overlay) get(p resolved) (engine.OverlayFile, bool) {
	if f, ok := ov[p.file()]; ok {
		return f, true
	}
	f, ok := ov[p.show]
	return f, ok
}

// filesUnder returns the pending files (not deletions) below the
// directory dir (a clean slash path; "." for the workspace root), relative
// to dir, sorted.
func (ov overlay) filesUnder(dir string) []string {
	var out []string
	for k, f := range ov {
		if f.Deleted {
			continue
		}
		if dir == "." {
			out = append(out, k)
		} else if rest, ok := strings.CutPrefix(k, dir+"/"); ok {
			out = append(out, rest)
		}
	}
	slices.Sort(out)
	return out
}

// fileAbove returns the nearest directory above file (a clean slash path)
// that is a pending file, or "" when there is none.
func (ov overlay) fileAbove(file string) string {
	for dir := path.Dir(file); dir != "."; dir = path.Dir(dir) {
		if f, ok := ov[dir]; ok && !f.Deleted {
			return dir
		}
	}
	return ""
}

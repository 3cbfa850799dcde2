package patch

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/bluekeyes/go-gitdiff/gitdiff"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/workspace"
)

// ParseUnified parses a unified diff, git-style ("diff --git", renames,
// copies, creations and deletions, quoted names) or traditional ("---" and
// "+++" lines only, where an "a/" or "b/" prefix is dropped unless only
// the name with it exists), possibly of several files, and returns the
// edits it makes against the files' current contents, read through root.
// Feed them to Propose. A rename becomes a delete and a create; a file
// named twice gets edits that compose.
//
// Hunks apply like git apply: a hunk may sit at an offset from the line
// its header names (the nearest match wins, and later hunks keep the
// offset), but its context and removed lines must match exactly; a hunk
// without leading context at line 1 must match at the start, one without
// trailing context at the end, and a hunk with no context at all exactly
// where its header says.
//
// Errors match engine.ErrInvalidRequest when the diff does not parse,
// names no file, is binary, only changes a mode, creates a file that
// exists, names a path that cannot be a file (too long, a symlink loop,
// through a file) or has a hunk that does not apply (the error names the
// file, the hunk's 1-based position in the file's section and its header,
// and why); engine.ErrNotFound when a file it changes does not exist;
// engine.ErrPermissionDenied when a path leaves the workspace. Reading a
// file can also fail with an os error, wrapped.
func ParseUnified(root *workspace.Root, diff string) ([]Edit, error) {
	files, _, err := gitdiff.Parse(strings.NewReader(diff))
	if err != nil {
		return nil, fmt.Errorf("%w: parse diff: %v", engine.ErrInvalidRequest, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: the diff names no file (no \"diff --git\" or \"---\"/\"+++\" header followed by a hunk)", engine.ErrInvalidRequest)
	}
	u := &unifiedParse{root: root, traditional: !strings.HasPrefix(diff, "diff --git ") && !strings.Contains(diff, "\ndiff --git "), now: map[string]fileState{}}
	var edits []Edit
	for _, f := range files {
		es, err := u.file(f)
		if err != nil {
			return nil, err
		}
		edits = append(edits, es...)
	}
	if len(edits) == 0 {
		return nil, fmt.Errorf("%w: the diff changes no file content", engine.ErrInvalidRequest)
	}
	return edits, nil
}

// unifiedParse is the state of one ParseUnified call.
type unifiedParse struct {
	root        *workspace.Root
	traditional bool
	now         map[string]fileState // files as earlier sections of the diff left them
}

// file turns one file section of the diff into edits.
func (u *unifiedParse) file(f *gitdiff.File) ([]Edit, error) {
	isNew := f.IsNew || f.OldName == "/dev/null"
	isDelete := f.IsDelete || f.NewName == "/dev/null"
	shown := f.NewName
	if isDelete {
		shown = f.OldName
	}
	if f.IsBinary {
		return nil, fmt.Errorf("%w: %s: binary patches are not supported", engine.ErrInvalidRequest, shown)
	}
	if isNew && isDelete {
		return nil, fmt.Errorf("%w: %s: the diff both creates and deletes it", engine.ErrInvalidRequest, shown)
	}

	var oldPath, newPath string
	var err error
	if !isNew {
		if oldPath, err = u.path(f.OldName); err != nil {
			return nil, err
		}
	}
	if !isDelete {
		if newPath, err = u.path(f.NewName); err != nil {
			return nil, err
		}
	}

	var base fileState
	if !isNew {
		if base, err = u.state(oldPath); err != nil {
			return nil, err
		}
		if !base.exists {
			return nil, fmt.Errorf("%w: %s: the diff changes it, but it does not exist", engine.ErrNotFound, oldPath)
		}
	}
	if newPath != "" && newPath != oldPath {
		st, err := u.state(newPath)
		if err != nil {
			return nil, err
		}
		if st.exists {
			return nil, fmt.Errorf("%w: %s: the diff creates it, but it exists", engine.ErrInvalidRequest, newPath)
		}
	}

	if len(f.TextFragments) == 0 && !isNew && !isDelete && oldPath == newPath {
		if f.OldMode != 0 && f.NewMode != 0 && f.OldMode != f.NewMode {
			return nil, fmt.Errorf("%w: %s: the diff only changes its mode, which patches cannot do", engine.ErrInvalidRequest, oldPath)
		}
		return nil, nil // a header without changes
	}

	label := oldPath
	if isNew {
		label = newPath
	}
	result, err := applyFragments(label, base.content, f.TextFragments)
	if err != nil {
		return nil, err
	}

	var edits []Edit
	switch {
	case isNew:
		edits = append(edits, Edit{Path: newPath, New: result})
	case isDelete:
		if len(result) > 0 {
			return nil, fmt.Errorf("%w: %s: the diff deletes it, but its hunks leave %d bytes of it; a deletion must remove every line", engine.ErrInvalidRequest, oldPath, len(result))
		}
		edits = append(edits, Edit{Path: oldPath, Base: base.content, BaseExists: true, Delete: true})
	case newPath != oldPath:
		if !f.IsCopy {
			edits = append(edits, Edit{Path: oldPath, Base: base.content, BaseExists: true, Delete: true})
		}
		edits = append(edits, Edit{Path: newPath, New: result})
	default:
		edits = append(edits, Edit{Path: oldPath, Base: base.content, BaseExists: true, New: result})
	}
	for _, e := range edits {
		if e.Delete {
			u.now[e.Path] = fileState{}
		} else {
			u.now[e.Path] = fileState{exists: true, content: e.New}
		}
	}
	return edits, nil
}

// path turns a name from the diff into a clean workspace-relative,
// slash-separated path, confined through the root.
func (u *unifiedParse) path(name string) (string, error) {
	if name == "" || name == "/dev/null" {
		return "", fmt.Errorf("%w: the diff has a file section without a file name", engine.ErrInvalidRequest)
	}
	if u.traditional && (strings.HasPrefix(name, "a/") || strings.HasPrefix(name, "b/")) {
		stripped := name[2:]
		if !u.exists(stripped) && u.exists(name) {
			stripped = name
		}
		name = stripped
	}
	rel, err := u.root.Resolve(name)
	if err != nil {
		return "", badPath(err)
	}
	return cleanPath(filepath.ToSlash(rel))
}

// badPath classifies a path error caused by the name itself (too long, a
// symlink loop, a file used as a directory) as engine.ErrInvalidRequest;
// other errors pass unchanged.
func badPath(err error) error {
	if errors.Is(err, engine.ErrPermissionDenied) || errors.Is(err, engine.ErrInvalidRequest) {
		return err
	}
	if errors.Is(err, syscall.ENAMETOOLONG) || errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("%w: %v", engine.ErrInvalidRequest, err)
	}
	return err
}

// exists reports whether name (unconfirmed, as in the diff) names an
// existing file inside the workspace.
func (u *unifiedParse) exists(name string) bool {
	rel, err := u.root.Resolve(name)
	if err != nil {
		return false
	}
	p, err := cleanPath(filepath.ToSlash(rel))
	if err != nil {
		return false
	}
	st, err := u.state(p)
	return err == nil && st.exists
}

// state is the file at p as earlier sections left it, or as it is on disk.
func (u *unifiedParse) state(p string) (fileState, error) {
	if st, ok := u.now[p]; ok {
		return st, nil
	}
	rel, err := u.root.Real(filepath.FromSlash(p))
	if err != nil {
		return fileState{}, badPath(err)
	}
	st, err := readState(u.root, rel, p)
	if err != nil {
		return fileState{}, badPath(err)
	}
	if err := checkText(p, "current", st.content); err != nil {
		return fileState{}, err
	}
	return st, nil
}

// applyFragments applies text hunks to content the way git apply does by
// default (see ParseUnified). p names the file in errors.
func applyFragments(p string, content []byte, frags []*gitdiff.TextFragment) ([]byte, error) {
	lines := splitLines(string(content))
	order := make([]int, len(frags))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return frags[order[i]].OldPosition < frags[order[j]].OldPosition })

	var out strings.Builder
	pos, offset := 0, 0 // next line of lines not yet copied; where hunks matched minus where they said
	for _, i := range order {
		f := frags[i]
		fail := func(format string, args ...any) error {
			return fmt.Errorf("%w: %s: hunk %d (%s) does not apply: %s", engine.ErrInvalidRequest, p, i+1, f.Header(), fmt.Sprintf(format, args...))
		}
		var old, repl []string
		for _, l := range f.Lines {
			if l.Old() {
				old = append(old, l.Line)
			}
			if l.New() {
				repl = append(repl, l.Line)
			}
		}
		// The header's line, as a 0-based index: the first old line, or
		// for a hunk without old lines the line it inserts after.
		stated := int(min(max(f.OldPosition, 0), int64(len(lines)+1)))
		if len(old) > 0 && stated > 0 {
			stated--
		}
		want := stated + offset
		last := len(lines) - len(old) // the last index the hunk can start at
		atStart := f.LeadingContext == 0 && f.TrailingContext > 0 && f.OldPosition <= 1
		atEnd := f.TrailingContext == 0 && f.LeadingContext > 0
		exact := f.LeadingContext == 0 && f.TrailingContext == 0

		at := -1
		match := func(q int) bool {
			return q >= pos && q <= last && slices.Equal(lines[q:q+len(old)], old)
		}
		switch {
		case exact || len(old) == 0:
			if match(want) {
				at = want
			}
		case atStart:
			if match(0) {
				at = 0
			}
		case atEnd:
			if match(last) {
				at = last
			}
		default:
			for d := 0; want+d <= last || want-d >= pos; d++ {
				if match(want + d) {
					at = want + d
					break
				}
				if d > 0 && match(want-d) {
					at = want - d
					break
				}
			}
		}
		if at < 0 {
			switch {
			case len(old) == 0:
				return nil, fail("the file has %d lines; there is no line %d to insert after", len(lines), f.OldPosition)
			case exact:
				return nil, fail("without context lines it must match at line %d exactly, and its %d removed lines (from %s) are not there", want+1, len(old), quoteLine(old[0]))
			case atStart:
				return nil, fail("it starts at line 1 without leading context, so it must match at the start of the file, and its lines (from %s) are not there", quoteLine(old[0]))
			case atEnd:
				return nil, fail("it has no trailing context, so it must match at the end of the file, and its %d context and removed lines (from %s) are not there", len(old), quoteLine(old[0]))
			default:
				return nil, fail("its %d context and removed lines (from %s) are not in the file after the previous hunk", len(old), quoteLine(old[0]))
			}
		}
		for _, l := range lines[pos:at] {
			out.WriteString(l)
		}
		for _, l := range repl {
			out.WriteString(l)
		}
		pos = at + len(old)
		offset = at - stated
	}
	for _, l := range lines[pos:] {
		out.WriteString(l)
	}
	return []byte(out.String()), nil
}

// quoteLine quotes a line for an error message, shortened to 60 bytes.
func quoteLine(l string) string {
	l = strings.TrimRight(l, "\r\n")
	if len(l) > 60 {
		l = l[:60] + "…"
	}
	return fmt.Sprintf("%q", l)
}

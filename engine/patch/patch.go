package patch

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/plexus-agent/plexus/engine"
)

// Edit is one tool's proposed change of one file, computed against Base.
type Edit struct {
	// Path is the file, relative to the workspace root, slash-separated.
	Path string
	// Base is the content the edit was computed against; nil (or empty)
	// when the file did not exist.
	Base []byte
	// BaseExists says whether the file existed; false with a non-empty
	// Base is an error.
	BaseExists bool
	// New is the file's new content; ignored when Delete.
	New []byte
	// Delete removes the file; the file must have existed.
	Delete bool
}

// Op is what a file patch does to its file.
type Op string

// File patch operations.
const (
	OpCreate Op = "create"
	OpModify Op = "modify"
	OpDelete Op = "delete"
)

// Hunk is one hunk of a file patch, as in a unified diff. Lines are
// counted as git counts them; a last line without a newline counts.
type Hunk struct {
	// OldStart and OldLines are the header's old range: 1-based first
	// line and line count, or, for an empty side, the line before it (0 at
	// the start of the file) and 0. NewStart and NewLines likewise.
	OldStart int `json:"old_start"`
	OldLines int `json:"old_lines"`
	NewStart int `json:"new_start"`
	NewLines int `json:"new_lines"`
	// Content is the hunk's text: its "@@ -a,b +c,d @@" header line (with
	// git's function-name context after it when there is one) and the ' ',
	// '-' and '+' lines, each ending in "\n", with "\ No newline at end of
	// file" after a line that has none in the file.
	Content string `json:"content"`
}

// FilePatch is the change of one file in a Set. It survives JSON encoding
// (Base and New as base64), so a set can be stored and applied later.
type FilePatch struct {
	// ID is "patch_" and 16 random hex digits: the WebSocket patch_id.
	ID string `json:"id"`
	// Path is the file, relative to the workspace root, slash-separated,
	// clean.
	Path string `json:"path"`
	Op   Op     `json:"op"`
	// BaseHash is "sha256:<hex>" of Base; "" for a create.
	BaseHash string `json:"base_hash"`
	// NewHash is "sha256:<hex>" of New; "" for a delete.
	NewHash string `json:"new_hash"`
	// Diff is the whole file's git-style unified diff: "diff --git a/P b/P",
	// "new file mode 100644" or "deleted file mode 100644" for a create or
	// delete, no index line, "--- a/P" and "+++ b/P" (/dev/null for the
	// missing side; left out when there are no hunks, as git does for an
	// empty file), then the hunks. Names are quoted as git quotes them.
	Diff string `json:"diff"`
	// Hunks are the diff's hunks in file order; their indexes are what a
	// Selection names. A create or delete has one hunk, or none for an
	// empty file.
	Hunks []Hunk `json:"hunks"`
	// Base is the content the patch applies to (nil for a create); New the
	// content after all of it (nil for a delete).
	Base []byte `json:"base"`
	New  []byte `json:"new"`
}

// Set is the patches of one model response, one per file.
type Set struct {
	// ID is "pset_" and 16 random hex digits.
	ID                 string      `json:"id"`
	Files              []FilePatch `json:"files"`
	Rationale          string      `json:"rationale"`
	AcceptanceCriteria []string    `json:"acceptance_criteria"`
}

// Selection is what the user approved of a Set. A file is selected when All
// is set, when Files[path] is true (the whole file) or when Hunks[path]
// lists at least one hunk; the whole file wins over a hunk list. Hunk
// indexes are 0-based into FilePatch.Hunks, in any order, without
// repeats. A path not in the set, or an index out of range, is an error.
type Selection struct {
	All   bool             `json:"all,omitempty"`
	Files map[string]bool  `json:"files,omitempty"`
	Hunks map[string][]int `json:"hunks,omitempty"`
}

// Propose turns edits into a Set. Edits of one path compose in order: a
// later edit's Base (and BaseExists) must be the earlier one's result, else
// an error names the edit. A path whose edits change nothing in the end is
// dropped, and when nothing is left Propose fails with "the edits change
// nothing". Diffs are minimal (see the package doc) with 3 lines of
// context; files keep the order of their first edit.
//
// Errors: paths that are absolute or climb out with `..` match
// engine.ErrPermissionDenied; an empty path, binary content (a NUL byte)
// or an inconsistent edit (Base without BaseExists, deleting a file that
// did not exist, a path that is both a file and a directory of another
// file) match engine.ErrInvalidRequest.
func Propose(edits []Edit, rationale string, criteria []string) (*Set, error) {
	type state struct {
		path       string
		base       []byte
		baseExists bool
		cur        []byte
		curExists  bool
	}
	var order []*state
	byPath := map[string]*state{}
	for i, e := range edits {
		p, err := cleanPath(e.Path)
		if err != nil {
			return nil, fmt.Errorf("edit %d: %w", i+1, err)
		}
		if !e.BaseExists && len(e.Base) > 0 {
			return nil, fmt.Errorf("%w: edit %d of %s has a base but says the file did not exist", engine.ErrInvalidRequest, i+1, p)
		}
		if e.Delete && !e.BaseExists {
			return nil, fmt.Errorf("%w: edit %d deletes %s, which does not exist", engine.ErrInvalidRequest, i+1, p)
		}
		if err := checkText(p, "base", e.Base); err != nil {
			return nil, fmt.Errorf("edit %d: %w", i+1, err)
		}
		if !e.Delete {
			if err := checkText(p, "new", e.New); err != nil {
				return nil, fmt.Errorf("edit %d: %w", i+1, err)
			}
		}
		st := byPath[p]
		if st == nil {
			st = &state{path: p, base: e.Base, baseExists: e.BaseExists, cur: e.Base, curExists: e.BaseExists}
			byPath[p] = st
			order = append(order, st)
		} else if st.curExists != e.BaseExists || !bytes.Equal(st.cur, e.Base) {
			return nil, fmt.Errorf("%w: edit %d of %s was computed against other content than the earlier edits of that file left; recompute it", engine.ErrInvalidRequest, i+1, p)
		}
		if e.Delete {
			st.cur, st.curExists = nil, false
		} else {
			st.cur, st.curExists = e.New, true
		}
	}

	s := &Set{ID: newID("pset_"), Rationale: rationale, AcceptanceCriteria: criteria}
	for _, st := range order {
		var op Op
		switch {
		case !st.baseExists && st.curExists:
			op = OpCreate
		case st.baseExists && !st.curExists:
			op = OpDelete
		case st.baseExists && st.curExists && !bytes.Equal(st.base, st.cur):
			op = OpModify
		default:
			continue // no change
		}
		fp, err := newFilePatch(st.path, op, st.base, st.cur)
		if err != nil {
			return nil, err
		}
		s.Files = append(s.Files, *fp)
	}
	if len(s.Files) == 0 {
		return nil, fmt.Errorf("%w: the edits change nothing", engine.ErrInvalidRequest)
	}
	if err := checkNesting(s.Files); err != nil {
		return nil, err
	}
	return s, nil
}

// newFilePatch computes the patch of one file.
func newFilePatch(p string, op Op, base, cur []byte) (*FilePatch, error) {
	fp := &FilePatch{ID: newID("patch_"), Path: p, Op: op}
	if op != OpCreate {
		fp.Base = clone(base)
		fp.BaseHash = hashOf(base)
	}
	if op != OpDelete {
		fp.New = clone(cur)
		fp.NewHash = hashOf(cur)
	}
	a, b := splitLines(string(fp.Base)), splitLines(string(fp.New))
	ds, err := diffLines(a, b)
	if err != nil {
		return nil, fmt.Errorf("diff %s: %w", p, err)
	}
	fp.Hunks = buildHunks(a, b, ds)
	var sb strings.Builder
	sb.WriteString(fileHeader(p, op, len(fp.Hunks) > 0))
	for _, h := range fp.Hunks {
		sb.WriteString(h.Content)
	}
	fp.Diff = sb.String()
	return fp, nil
}

// Result returns the file's content after applying only the hunks with the
// given indexes (0-based, any order, no repeats) to Base, and whether the
// file exists then. All hunks give New (and for a delete, no file); none
// give Base (for a create, no file). A create or delete is all or nothing
// by construction, as it has one hunk; a file with no hunks (an empty file
// created or deleted) counts every list, even an empty one, as all hunks,
// so select such a file with Selection.Files. Errors (engine.ErrInvalidRequest)
// for an index out of range or repeated, or a patch whose hunks or hashes
// do not match its Base and New (a corrupted stored set).
func (fp *FilePatch) Result(hunks []int) (content []byte, exists bool, err error) {
	if err := fp.check(); err != nil {
		return nil, false, err
	}
	return fp.result(hunks)
}

// result is Result for a checked patch.
func (fp *FilePatch) result(hunks []int) ([]byte, bool, error) {
	sel := slices.Clone(hunks)
	slices.Sort(sel)
	for i, h := range sel {
		if h < 0 || h >= len(fp.Hunks) {
			return nil, false, fmt.Errorf("%w: %s has %d hunks; there is no hunk %d", engine.ErrInvalidRequest, fp.Path, len(fp.Hunks), h)
		}
		if i > 0 && sel[i-1] == h {
			return nil, false, fmt.Errorf("%w: hunk %d of %s is selected twice", engine.ErrInvalidRequest, h, fp.Path)
		}
	}
	if len(sel) == len(fp.Hunks) {
		return clone(fp.New), fp.Op != OpDelete, nil
	}
	if fp.Op != OpModify || len(sel) == 0 {
		return clone(fp.Base), fp.Op != OpCreate, nil
	}
	a, b := splitLines(string(fp.Base)), splitLines(string(fp.New))
	var out bytes.Buffer
	at := 0
	for _, i := range sel {
		h := fp.Hunks[i]
		o0, n0 := lineIndex(h.OldStart, h.OldLines), lineIndex(h.NewStart, h.NewLines)
		for _, l := range a[at:o0] {
			out.WriteString(l)
		}
		for _, l := range b[n0 : n0+h.NewLines] {
			out.WriteString(l)
		}
		at = o0 + h.OldLines
	}
	for _, l := range a[at:] {
		out.WriteString(l)
	}
	return out.Bytes(), true, nil
}

// lineIndex is the 0-based index of the first line of a hunk side written
// as start,n (for an empty side, the index the lines would go to).
func lineIndex(start, n int) int {
	if n == 0 {
		return start
	}
	return start - 1
}

// check verifies that a (possibly stored and reloaded) patch is
// consistent: a clean path, an op matching its hashes, hashes matching
// Base and New, and hunks that are ordered, in range and turn Base into
// New.
func (fp *FilePatch) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: patch %s of %s is corrupt: %s", engine.ErrInvalidRequest, fp.ID, fp.Path, fmt.Sprintf(format, args...))
	}
	if p, err := cleanPath(fp.Path); err != nil {
		return err
	} else if p != fp.Path {
		return bad("its path is not clean")
	}
	switch fp.Op {
	case OpCreate:
		if fp.BaseHash != "" || len(fp.Base) > 0 || fp.NewHash != hashOf(fp.New) {
			return bad("its content does not match its hashes")
		}
	case OpDelete:
		if fp.NewHash != "" || len(fp.New) > 0 || fp.BaseHash != hashOf(fp.Base) {
			return bad("its content does not match its hashes")
		}
	case OpModify:
		if fp.BaseHash != hashOf(fp.Base) || fp.NewHash != hashOf(fp.New) {
			return bad("its content does not match its hashes")
		}
	default:
		return bad("unknown op %q", fp.Op)
	}
	a, b := splitLines(string(fp.Base)), splitLines(string(fp.New))
	pa, pb := 0, 0
	for i, h := range fp.Hunks {
		o0, n0 := lineIndex(h.OldStart, h.OldLines), lineIndex(h.NewStart, h.NewLines)
		if h.OldLines < 0 || h.NewLines < 0 || h.OldLines+h.NewLines == 0 || o0 < pa || n0 < pb || o0+h.OldLines > len(a) || n0+h.NewLines > len(b) || o0-pa != n0-pb {
			return bad("hunk %d is out of place", i)
		}
		if !slices.Equal(a[pa:o0], b[pb:n0]) {
			return bad("the lines before hunk %d differ", i)
		}
		pa, pb = o0+h.OldLines, n0+h.NewLines
	}
	if !slices.Equal(a[pa:], b[pb:]) {
		return bad("its hunks do not turn its base into its new content")
	}
	return nil
}

// Expected returns, for each file sel selects, the "sha256:<hex>" its
// content must have after applying sel ("" when the file is deleted), for
// checking the applied_hash of a client-side apply. Files sel leaves alone
// are not in the map. Errors as Apply's selection errors.
func (s *Set) Expected(sel Selection) (map[string]string, error) {
	picks, err := s.pick(sel)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(picks))
	for _, pk := range picks {
		content, exists, err := pk.fp.result(pk.hunks)
		if err != nil {
			return nil, err
		}
		if exists {
			out[pk.fp.Path] = hashOf(content)
		} else {
			out[pk.fp.Path] = ""
		}
	}
	return out, nil
}

// pick is one selected file and the hunks selected of it.
type pick struct {
	fp    *FilePatch
	hunks []int
}

// pick checks the set and resolves sel into the selected files, in set
// order.
func (s *Set) pick(sel Selection) ([]pick, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	known := make(map[string]bool, len(s.Files))
	for _, fp := range s.Files {
		known[fp.Path] = true
	}
	for p, on := range sel.Files {
		if on && !known[p] {
			return nil, fmt.Errorf("%w: the selection names %s, which patch set %s does not change", engine.ErrInvalidRequest, p, s.ID)
		}
	}
	for p := range sel.Hunks {
		if !known[p] {
			return nil, fmt.Errorf("%w: the selection names %s, which patch set %s does not change", engine.ErrInvalidRequest, p, s.ID)
		}
	}
	var picks []pick
	for i := range s.Files {
		fp := &s.Files[i]
		var hunks []int
		switch {
		case sel.All || sel.Files[fp.Path]:
			hunks = make([]int, len(fp.Hunks))
			for h := range hunks {
				hunks[h] = h
			}
		case len(sel.Hunks[fp.Path]) > 0:
			hunks = sel.Hunks[fp.Path]
			if _, _, err := fp.result(hunks); err != nil {
				return nil, err
			}
		default:
			continue
		}
		picks = append(picks, pick{fp: fp, hunks: hunks})
	}
	return picks, nil
}

// check verifies every file patch and that no two name the same file or a
// file and a directory above it.
func (s *Set) check() error {
	for i := range s.Files {
		if err := s.Files[i].check(); err != nil {
			return err
		}
	}
	return checkNesting(s.Files)
}

// checkNesting refuses two patches of one path, and a path that another
// patch's path needs as a directory.
func checkNesting(files []FilePatch) error {
	paths := make(map[string]bool, len(files))
	for _, fp := range files {
		if paths[fp.Path] {
			return fmt.Errorf("%w: two patches change %s", engine.ErrInvalidRequest, fp.Path)
		}
		paths[fp.Path] = true
	}
	for _, fp := range files {
		for d := path.Dir(fp.Path); d != "."; d = path.Dir(d) {
			if paths[d] {
				return fmt.Errorf("%w: the patch set changes both %s and %s, which is inside it; a path cannot be a file and a directory in one set", engine.ErrInvalidRequest, d, fp.Path)
			}
		}
	}
	return nil
}

// cleanPath checks a workspace-relative, slash-separated path and returns
// it cleaned. Absolute paths and paths climbing out with `..` match
// engine.ErrPermissionDenied; an empty path, the root itself and a NUL
// byte match engine.ErrInvalidRequest.
func cleanPath(p string) (string, error) {
	switch {
	case p == "":
		return "", fmt.Errorf("%w: empty path", engine.ErrInvalidRequest)
	case strings.IndexByte(p, 0) >= 0:
		return "", fmt.Errorf("%w: path %q contains a NUL byte, which no file name can contain", engine.ErrInvalidRequest, p)
	case path.IsAbs(p):
		return "", fmt.Errorf("%w: path %q is absolute; patches name files relative to the workspace root", engine.ErrPermissionDenied, p)
	}
	c := path.Clean(p)
	switch {
	case c == "..", strings.HasPrefix(c, "../"):
		return "", fmt.Errorf("%w: path %q climbs out of the workspace; only paths inside the workspace are allowed", engine.ErrPermissionDenied, p)
	case c == ".":
		return "", fmt.Errorf("%w: path %q names the workspace root, not a file", engine.ErrInvalidRequest, p)
	}
	return c, nil
}

// checkText refuses binary content: a NUL byte anywhere.
func checkText(p, which string, b []byte) error {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return fmt.Errorf("%w: %s: the %s content is binary (a NUL byte at offset %d); only text files can be patched", engine.ErrInvalidRequest, p, which, i)
	}
	return nil
}

// hashOf is "sha256:<hex>" of b.
func hashOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// newID is prefix and 16 random hex digits.
func newID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it crashes the program instead)
	return prefix + hex.EncodeToString(b[:])
}

// clone copies b; nil stays nil and empty stays empty.
func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

package patch

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/workspace"
)

// Applied is what Apply did, all Undo needs. It survives JSON encoding
// (Before as base64), so it can be stored with the session.
type Applied struct {
	SetID string        `json:"set_id"`
	Time  time.Time     `json:"time"` // when the apply finished, UTC
	Files []AppliedFile `json:"files"`
	// Dirs are the directories Apply created for new files, relative to
	// the workspace root, slash-separated, parents first. Undo removes the
	// ones it leaves empty.
	Dirs []string `json:"dirs,omitempty"`
}

// AppliedFile is one file an apply changed.
type AppliedFile struct {
	PatchID string `json:"patch_id"`
	Path    string `json:"path"` // as in the FilePatch
	Op      Op     `json:"op"`
	// Hunks are the indexes of the hunks applied, ascending: all of them
	// when the whole file was selected.
	Hunks []int `json:"hunks"`
	// Existed, Before and Mode are the file before the apply: whether it
	// existed, its bytes and its permission bits (with setuid, setgid and
	// sticky); Mode is 0 when it did not exist.
	Existed bool        `json:"existed"`
	Before  []byte      `json:"before"`
	Mode    fs.FileMode `json:"mode"`
	// AfterHash is "sha256:<hex>" of the file right after the apply; ""
	// when the apply deleted it.
	AfterHash string `json:"after_hash"`
}

// Apply applies the part of s that sel approves to the workspace, all or
// nothing, and returns what Undo needs.
//
// Before writing anything it checks every selected file: its path is
// confined through root (escapes match engine.ErrPermissionDenied), it is
// a regular file or absent, and its current content hashes to the patch's
// BaseHash (absent for a create); otherwise it fails with *ConflictError
// (matching ErrConflict; several are joined) and writes nothing. Then it
// writes each file through a temporary file in its directory and a rename,
// keeping an existing file's mode (a new file gets 0644 less the umask and
// the directories it needs, 0755 less the umask), and removes deleted
// files. If a write fails, every file already changed is restored to its
// exact bytes and mode, directories it created are removed, and the error
// says which files were restored (or which could not be).
//
// Other errors: a selection naming a file or hunk the set lacks, or
// selecting nothing, and a corrupted set match engine.ErrInvalidRequest.
// Not safe for concurrent use on overlapping files.
func Apply(root *workspace.Root, s *Set, sel Selection) (*Applied, error) {
	picks, err := s.pick(sel)
	if err != nil {
		return nil, fmt.Errorf("apply patch set %s: %w", s.ID, err)
	}
	if len(picks) == 0 {
		return nil, fmt.Errorf("apply patch set %s: %w: the selection approves no change", s.ID, engine.ErrInvalidRequest)
	}
	targets := make([]target, len(picks))
	for i, pk := range picks {
		content, exists, err := pk.fp.result(pk.hunks)
		if err != nil {
			return nil, fmt.Errorf("apply patch set %s: %w", s.ID, err)
		}
		targets[i] = target{path: pk.fp.Path, want: pk.fp.BaseHash, exists: exists, content: content}
	}
	t, err := prepare(root, targets, false, false)
	if err != nil {
		return nil, fmt.Errorf("apply patch set %s: %w", s.ID, err)
	}
	if err := t.commit(); err != nil {
		return nil, fmt.Errorf("apply patch set %s: %w", s.ID, err)
	}
	a := &Applied{SetID: s.ID, Time: time.Now().UTC()}
	for i, it := range t.items {
		hunks := slices.Clone(picks[i].hunks)
		slices.Sort(hunks)
		af := AppliedFile{
			PatchID: picks[i].fp.ID, Path: it.path, Op: picks[i].fp.Op, Hunks: hunks,
			Existed: it.before.exists, Before: it.before.content, Mode: it.before.mode,
		}
		if it.exists {
			af.AfterHash = hashOf(it.content)
		}
		a.Files = append(a.Files, af)
	}
	for _, d := range t.dirs {
		a.Dirs = append(a.Dirs, filepath.ToSlash(d))
	}
	return a, nil
}

// Undo restores every file of a to its exact bytes, mode and existence
// before the apply, all or nothing like Apply, then removes the
// directories the apply created if they are empty. Unless force, a file
// whose content is no longer what the apply left (AfterHash) makes Undo
// fail with *ConflictError (Undo set; several are joined) before anything
// is written; with force such files are overwritten. Path errors as Apply.
func Undo(root *workspace.Root, a *Applied, force bool) error {
	targets := make([]target, len(a.Files))
	for i, f := range a.Files {
		p, err := cleanPath(f.Path)
		if err != nil {
			return fmt.Errorf("undo patch set %s: %w", a.SetID, err)
		}
		targets[i] = target{path: p, want: f.AfterHash, exists: f.Existed, content: f.Before, mode: f.Mode, setMode: f.Existed}
	}
	t, err := prepare(root, targets, force, true)
	if err != nil {
		return fmt.Errorf("undo patch set %s: %w", a.SetID, err)
	}
	if err := t.commit(); err != nil {
		return fmt.Errorf("undo patch set %s: %w", a.SetID, err)
	}
	var errs []error
	for i := len(a.Dirs) - 1; i >= 0; i-- {
		d, err := cleanPath(a.Dirs[i])
		if err == nil {
			err = removeEmptyDir(root, filepath.FromSlash(d))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("remove directory %s: %w", a.Dirs[i], err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("undo patch set %s: the files are restored, but: %w", a.SetID, errors.Join(errs...))
	}
	return nil
}

// testHookBeforeWrite, when set by a test, runs before each file write of
// a commit (not before the writes of a rollback), with the file's path.
var testHookBeforeWrite func(path string)

// target is one file's wanted state.
type target struct {
	path    string // slash-separated, as the patch names it
	want    string // hash the file must have now ("" = absent), unless forced
	exists  bool   // whether the file exists afterwards
	content []byte
	mode    fs.FileMode // with setMode, the mode to give it
	setMode bool        // otherwise an existing file keeps its mode, a new one gets 0644
}

// fileState is a file as found.
type fileState struct {
	exists  bool
	content []byte
	mode    fs.FileMode
}

// hash is the state's content hash, "" when absent.
func (s fileState) hash() string {
	if !s.exists {
		return ""
	}
	return hashOf(s.content)
}

// txn writes a list of targets all or nothing.
type txn struct {
	root  *workspace.Root
	items []item
	dirs  []string // directories created, OS form, relative, in creation order
}

// item is a target with its resolved path and its state before.
type item struct {
	target
	rel    string // OS form, relative to the root, symlinks resolved
	before fileState
}

// prepare resolves and reads every target and, unless force, checks its
// hash. undo selects the wording of conflicts.
func prepare(root *workspace.Root, targets []target, force, undo bool) (*txn, error) {
	t := &txn{root: root}
	seen := make(map[string]string, len(targets))
	var conflicts []error
	for _, tg := range targets {
		rel, err := root.Real(filepath.FromSlash(tg.path))
		if err != nil {
			return nil, err
		}
		if rel == "." {
			return nil, fmt.Errorf("%w: %s is the workspace root", engine.ErrInvalidRequest, tg.path)
		}
		if other, ok := seen[rel]; ok {
			return nil, fmt.Errorf("%w: %s and %s are the same file", engine.ErrInvalidRequest, other, tg.path)
		}
		seen[rel] = tg.path
		st, err := readState(root, rel, tg.path)
		if err != nil {
			return nil, err
		}
		if got := st.hash(); !force && got != tg.want {
			conflicts = append(conflicts, &ConflictError{Path: tg.path, Want: tg.want, Got: got, Undo: undo})
		}
		t.items = append(t.items, item{target: tg, rel: rel, before: st})
	}
	if len(conflicts) > 0 {
		return nil, errors.Join(conflicts...)
	}
	return t, nil
}

// readState reads the file at rel (shown as p): absent, or a regular file.
func readState(root *workspace.Root, rel, p string) (fileState, error) {
	fi, err := root.FS().Lstat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fileState{}, nil
	case err != nil:
		return fileState{}, fmt.Errorf("stat %s: %w", p, root.FSError(p, err))
	case fi.IsDir():
		return fileState{}, fmt.Errorf("%w: %s is a directory", engine.ErrInvalidRequest, p)
	case !fi.Mode().IsRegular():
		return fileState{}, fmt.Errorf("%w: %s is not a regular file (%s)", engine.ErrInvalidRequest, p, fi.Mode().Type())
	}
	content, err := root.FS().ReadFile(rel)
	if err != nil {
		return fileState{}, fmt.Errorf("read %s: %w", p, root.FSError(p, err))
	}
	return fileState{exists: true, content: content, mode: fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)}, nil
}

// commit writes every item in order; on failure it rolls back.
func (t *txn) commit() error {
	for i := range t.items {
		it := &t.items[i]
		if testHookBeforeWrite != nil {
			testHookBeforeWrite(it.path)
		}
		if err := t.write(it); err != nil {
			return t.rollback(i, fmt.Errorf("write %s: %w", it.path, err))
		}
	}
	return nil
}

// write brings one file to its target state.
func (t *txn) write(it *item) error {
	r := t.root.FS()
	if !it.exists {
		if !it.before.exists {
			return nil
		}
		return t.root.FSError(it.path, r.Remove(it.rel))
	}
	if err := t.mkdirs(filepath.Dir(it.rel), it.path); err != nil {
		return err
	}
	mode, fresh := it.mode, false
	if !it.setMode {
		if it.before.exists {
			mode = it.before.mode
		} else {
			fresh = true
		}
	}
	return t.root.FSError(it.path, writeAtomic(r, it.rel, it.content, mode, fresh))
}

// mkdirs creates the missing directories of dir (OS form, relative),
// recording them.
func (t *txn) mkdirs(dir, p string) error {
	if dir == "." {
		return nil
	}
	r := t.root.FS()
	cur := ""
	for _, c := range strings.Split(dir, string(filepath.Separator)) {
		cur = filepath.Join(cur, c)
		fi, err := r.Lstat(cur)
		switch {
		case err == nil && fi.IsDir():
			continue
		case err == nil:
			return fmt.Errorf("%s is not a directory: %w", filepath.ToSlash(cur), syscall.ENOTDIR)
		case !errors.Is(err, fs.ErrNotExist):
			return t.root.FSError(p, err)
		}
		if err := r.Mkdir(cur, 0o755); err != nil {
			return t.root.FSError(p, err)
		}
		t.dirs = append(t.dirs, cur)
	}
	return nil
}

// writeAtomic replaces rel with content through a temporary file in the
// same directory and a rename. A fresh file is created 0644 less the
// umask; otherwise the file gets exactly mode.
func writeAtomic(r *os.Root, rel string, content []byte, mode fs.FileMode, fresh bool) error {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(filepath.Dir(rel), ".plexus-"+hex.EncodeToString(rnd[:])+".tmp")
	perm := fs.FileMode(0o600)
	if fresh {
		perm = 0o644
	}
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(content)
	if err == nil && !fresh {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = r.Rename(tmp, rel)
	}
	if err != nil {
		_ = r.Remove(tmp) // the temporary file is ours; the error that matters is err
		return err
	}
	return nil
}

// rollback restores the items before failed to their state before,
// removes the directories the commit created, and returns cause with what
// it did. The failed item itself is unchanged: a write changes its file
// only by its last step, the rename (or the remove).
func (t *txn) rollback(failed int, cause error) error {
	var restored, lost []string
	for j := failed - 1; j >= 0; j-- {
		it := &t.items[j]
		changed, err := t.restore(it)
		switch {
		case err != nil:
			lost = append(lost, fmt.Sprintf("%s (%v)", it.path, err))
		case changed:
			restored = append(restored, it.path)
		}
	}
	for i := len(t.dirs) - 1; i >= 0; i-- {
		if err := removeEmptyDir(t.root, t.dirs[i]); err != nil {
			lost = append(lost, fmt.Sprintf("directory %s (%v)", filepath.ToSlash(t.dirs[i]), err))
		}
	}
	t.dirs = nil
	slices.Reverse(restored)
	var msg string
	switch {
	case len(restored) > 0:
		msg = "restored " + strings.Join(restored, ", ") + " to their content before"
	default:
		msg = "no file had been changed"
	}
	if len(lost) > 0 {
		msg += "; could not restore " + strings.Join(lost, ", ")
	}
	return fmt.Errorf("%w; %s", cause, msg)
}

// restore brings an item back to its state before, reporting whether it
// had to change anything.
func (t *txn) restore(it *item) (bool, error) {
	now, err := readState(t.root, it.rel, it.path)
	if err == nil && now.exists == it.before.exists && bytes.Equal(now.content, it.before.content) && now.mode == it.before.mode {
		return false, nil
	}
	r := t.root.FS()
	if !it.before.exists {
		if err := r.Remove(it.rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return true, err
		}
		return true, nil
	}
	if err := t.mkdirs(filepath.Dir(it.rel), it.path); err != nil {
		return true, err
	}
	return true, writeAtomic(r, it.rel, it.before.content, it.before.mode, false)
}

// removeEmptyDir removes the directory rel (OS form) if it is still an
// empty directory; a missing, non-empty or replaced one is left alone.
func removeEmptyDir(root *workspace.Root, rel string) error {
	fi, err := root.FS().Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return root.FSError(rel, err)
	}
	if !fi.IsDir() {
		return nil
	}
	err = root.FS().Remove(rel)
	if err == nil || errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return root.FSError(rel, err)
}

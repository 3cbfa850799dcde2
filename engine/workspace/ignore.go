package workspace

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// Names of the files ignore rules come from.
const (
	gitDirName     = ".git"
	gitignoreName  = ".gitignore"
	infoExcludeRel = ".git/info/exclude"
)

// maxIgnoreFileBytes caps one ignore file; git itself has no limit, but a
// rules file this large is a mistake or an attack, and reading it would
// stall every walk.
const maxIgnoreFileBytes = 8 << 20

// parseIgnore parses the lines of a gitignore-format file whose patterns
// apply to the directory domain (its components below the root) and below.
// Comments, blank lines, a UTF-8 BOM and CR line endings are handled here;
// negation, anchoring, dir-only and ** by gitignore.ParsePattern.
func parseIgnore(data []byte, domain []string) []gitignore.Pattern {
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	var ps []gitignore.Pattern
	for line := range strings.SplitSeq(string(data), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		ps = append(ps, gitignore.ParsePattern(rewriteTrailingGlobstar(line), domain))
	}
	return ps
}

// rewriteTrailingGlobstar turns "dir/**" into the equivalent "dir/**/*".
// In git, "dir/**" matches everything inside dir but not dir itself, so a
// later "!dir/keep" can re-include dir/keep; go-git's matcher also matches
// dir itself, which would prune the whole directory. "dir/**/*" means the
// same to git and matches the same way in go-git.
func rewriteTrailingGlobstar(line string) string {
	trimmed := strings.TrimRight(line, " ")
	if strings.HasSuffix(trimmed, "\\") { // an escaped trailing space: leave it alone
		return line
	}
	if strings.HasSuffix(trimmed, "/**") {
		return trimmed + "/*"
	}
	return line
}

// readRuleFile reads an ignore file (a slash path relative to the root)
// through the os.Root. A file that does not exist, or whose directory does
// not (a .git that is a file, as in a worktree), gives no data and no
// error.
func (r *Root) readRuleFile(name string) ([]byte, error) {
	f, err := r.root.Open(filepath.FromSlash(name))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil, nil
		}
		return nil, fmt.Errorf("read ignore file %s: %w", name, r.FSError(name, err))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxIgnoreFileBytes+1))
	if err != nil {
		if errors.Is(err, syscall.EISDIR) {
			return nil, nil // a directory named .gitignore: git ignores it too
		}
		return nil, fmt.Errorf("read ignore file %s: %w", name, err)
	}
	if len(data) > maxIgnoreFileBytes {
		return nil, fmt.Errorf("ignore file %s is larger than %d MiB; shorten it", name, maxIgnoreFileBytes>>20)
	}
	return data, nil
}

// dirRules returns base plus the rules of the directory with components
// parts: its repository's .git/info/exclude when it holds a .git
// directory, then its .gitignore (later rules win). hasGit and
// hasGitignore say whether those entries exist, so that a walk, which has
// already listed the directory, needs no extra lookups.
func (r *Root) dirRules(parts []string, base []gitignore.Pattern, hasGit, hasGitignore bool) ([]gitignore.Pattern, error) {
	ps := base[:len(base):len(base)] // never write into the parent's array
	dir := joinOrDot(parts)
	if hasGit {
		data, err := r.readRuleFile(path.Join(dir, infoExcludeRel))
		if err != nil {
			return base, err
		}
		ps = append(ps, parseIgnore(data, parts)...)
	}
	if hasGitignore {
		data, err := r.readRuleFile(path.Join(dir, gitignoreName))
		if err != nil {
			return base, err
		}
		ps = append(ps, parseIgnore(data, parts)...)
	}
	return ps, nil
}

// exists reports whether name (a slash path relative to the root) exists
// and whether it is a directory, without following a final symlink.
func (r *Root) exists(name string) (exists, isDir bool) {
	fi, err := r.root.Lstat(filepath.FromSlash(name))
	if err != nil {
		return false, false
	}
	return true, fi.IsDir()
}

// rulesDown walks down from the root to the entry with real components
// parts (lastIsDir says whether it is a directory) and returns the rules
// of every directory above it, and whether it is ignored: because it or a
// directory above it is matched or named .git. Once a directory is
// ignored nothing below it can be re-included, so the walk stops there.
// The root itself is never ignored.
func (r *Root) rulesDown(parts []string, lastIsDir bool) ([]gitignore.Pattern, bool, error) {
	var ps []gitignore.Pattern
	for i := range parts {
		dir := joinOrDot(parts[:i])
		_, gitIsDir := r.exists(path.Join(dir, gitDirName))
		hasIgnore, _ := r.exists(path.Join(dir, gitignoreName))
		var err error
		if ps, err = r.dirRules(parts[:i], ps, gitIsDir, hasIgnore); err != nil {
			return nil, false, err
		}
		isDir := i < len(parts)-1 || lastIsDir
		if parts[i] == gitDirName || gitignore.NewMatcher(ps).Match(parts[:i+1], isDir) {
			return ps, true, nil
		}
	}
	return ps, false, nil
}

// Ignored reports whether Walk would leave path out by default: because
// an ignore rule excludes it or a directory above it, or because it is in
// .git. path is resolved as Real does (so the rules that apply are those
// of where it really is); a path that does not exist is judged as a file.
// The workspace root is never ignored. Errors: those of Resolve, and a
// failure to read an ignore file.
func (r *Root) Ignored(path string) (bool, error) {
	real, err := r.Real(path)
	if err != nil {
		return false, err
	}
	_, isDir := r.exists(filepath.ToSlash(real))
	_, ignored, err := r.rulesDown(splitPath(filepath.ToSlash(real)), isDir)
	return ignored, err
}

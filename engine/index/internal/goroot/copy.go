package goroot

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// CopyTree copies the directory tree src to dst (which must not exist):
// directories, regular files and symbolic links, skipping .git. A file
// whose slash-separated relative path is a key of edit gets what edit
// returns for its bytes instead.
func CopyTree(src, dst string, edit map[string]func([]byte) ([]byte, error)) error {
	done := 0
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return os.Mkdir(to, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case !d.Type().IsRegular():
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if fn := edit[filepath.ToSlash(rel)]; fn != nil {
			if data, err = fn(data); err != nil {
				return fmt.Errorf("edit %s: %w", rel, err)
			}
			done++
		}
		return os.WriteFile(to, data, 0o644)
	})
	if err == nil && done != len(edit) {
		err = fmt.Errorf("copy %s: %d of %d files to edit were found", src, done, len(edit))
	}
	return err
}

// StripDocs returns src without the lines of the doc comments of decls
// (which must have DocOwnLines).
func StripDocs(src []byte, decls []Decl) ([]byte, error) {
	decls = slices.Clone(decls)
	slices.SortFunc(decls, func(a, b Decl) int { return b.DocStart - a.DocStart })
	out := slices.Clone(src)
	for _, d := range decls {
		if d.Doc == "" || !d.DocOwnLines {
			return nil, fmt.Errorf("%s has no doc comment on lines of its own", d.Name)
		}
		lo, hi := lineBounds(out, d.DocStart, d.DocEnd)
		out = slices.Delete(out, lo, hi)
	}
	return out, nil
}

package acp

import (
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// cleanRel is a workspace-relative path as the engine keys it: slash
// separated, cleaned, without a leading "./".
func cleanRel(p string) string {
	return path.Clean(strings.TrimPrefix(filepath.ToSlash(p), "./"))
}

// realRel is p (workspace-relative or absolute) with symlinks resolved,
// relative to root; "" when it does not exist or leads outside root.
func realRel(root, p string) string {
	full := p
	if !filepath.IsAbs(full) {
		full = filepath.Join(root, filepath.FromSlash(p))
	}
	real, err := filepath.EvalSymlinks(full)
	if err != nil {
		return ""
	}
	rel, err := filepath.Rel(root, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return ""
	}
	return filepath.ToSlash(rel)
}

// inside reports whether the absolute path p lies in root (lexically).
func inside(root, p string) bool {
	rel, err := filepath.Rel(root, filepath.Clean(p))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// fileURIPath is the local path of a file:// URI; ok is false for other
// schemes and for a URI that is not absolute.
func fileURIPath(uri string) (string, bool) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "file" || (u.Host != "" && u.Host != "localhost") {
		return "", false
	}
	p := filepath.FromSlash(u.Path)
	if !filepath.IsAbs(p) {
		return "", false
	}
	return filepath.Clean(p), true
}

// workspaceDir resolves a session's cwd: an absolute path of an existing
// directory, symlinks resolved.
func workspaceDir(cwd string) (string, error) {
	if cwd == "" || !filepath.IsAbs(cwd) {
		return "", fmt.Errorf("cwd %q must be an absolute path", cwd)
	}
	real, err := filepath.EvalSymlinks(cwd)
	if err != nil {
		return "", fmt.Errorf("cwd %s: %w", cwd, unwrapPathError(err))
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("cwd %s: %w", cwd, unwrapPathError(err))
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("cwd %s is not a directory", cwd)
	}
	return real, nil
}

func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

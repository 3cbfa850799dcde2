package fs

import (
	"path"
	"strings"
)

// glob is a file name pattern of list_files' pattern and search_text's
// include: *, ?, [...] as in path.Match, and ** as a whole segment for
// any number of directories (zero included). A pattern without a slash is
// matched against the base name; one with a slash against the
// workspace-relative path, or the path relative to the directory the call
// named.
type glob struct {
	segs     []string // pattern split at slashes, consecutive ** merged
	hasSlash bool
}

// maxGlobSegments bounds the work of one match (** backtracks).
const maxGlobSegments = 64

// newGlob parses pattern; field names the argument in errors, which are
// *engine.ToolError with code invalid_input.
func newGlob(tool, field, pattern string) (*glob, error) {
	p := strings.TrimPrefix(strings.TrimPrefix(pattern, "./"), "/")
	if p == "" {
		return nil, invalid(tool, field, "is empty; leave it out to match every file")
	}
	g := &glob{hasSlash: strings.Contains(p, "/")}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "" {
			continue // "a//b", a trailing slash
		}
		if seg == "**" && len(g.segs) > 0 && g.segs[len(g.segs)-1] == "**" {
			continue
		}
		if _, err := path.Match(seg, ""); err != nil {
			return nil, invalid(tool, field, "is not a valid glob: %q has unbalanced brackets or a trailing backslash", seg)
		}
		g.segs = append(g.segs, seg)
	}
	if len(g.segs) > maxGlobSegments {
		return nil, invalid(tool, field, "has more than %d path segments", maxGlobSegments)
	}
	return g, nil
}

// match reports whether the entry at rel (workspace-relative, slashes;
// base is rel relative to the directory the call named) matches. A nil
// glob matches everything.
func (g *glob) match(rel, base string) bool {
	if g == nil {
		return true
	}
	if !g.hasSlash {
		ok, _ := path.Match(g.segs[0], path.Base(rel))
		return ok
	}
	return matchSegs(g.segs, strings.Split(rel, "/")) || base != rel && matchSegs(g.segs, strings.Split(base, "/"))
}

// matchSegs matches path segments against pattern segments. It runs in
// time proportional to len(pat) * len(segs) whatever the pattern (a
// backtracking match of many ** would be exponential).
func matchSegs(pat, segs []string) bool {
	// prev[j]: the pattern segments so far match segs[:j].
	prev := make([]bool, len(segs)+1)
	cur := make([]bool, len(segs)+1)
	prev[0] = true
	for _, p := range pat {
		if p == "**" {
			seen := false
			for j := range cur {
				seen = seen || prev[j]
				cur[j] = seen
			}
		} else {
			cur[0] = false
			for j := 1; j < len(cur); j++ {
				cur[j] = false
				if prev[j-1] {
					cur[j], _ = path.Match(p, segs[j-1])
				}
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(segs)]
}

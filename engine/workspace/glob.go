package workspace

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// Glob is a file name pattern: *, ?, [...] as in path.Match, and ** as a
// whole segment for any number of directories (zero included). A pattern
// without a slash matches the base name; one with a slash matches the
// workspace-relative path. A nil *Glob matches everything.
type Glob struct {
	segs     []string // pattern split at slashes, consecutive ** merged
	hasSlash bool
}

// maxGlobSegments bounds the work of one match.
const maxGlobSegments = 64

// ErrBadGlob is matched (errors.Is) by ParseGlob's errors.
var ErrBadGlob = errors.New("invalid glob")

// ParseGlob parses pattern. Errors wrap ErrBadGlob and say what is wrong
// (empty, unbalanced brackets, too many segments).
func ParseGlob(pattern string) (*Glob, error) {
	p := strings.TrimPrefix(strings.TrimPrefix(pattern, "./"), "/")
	if p == "" {
		return nil, fmt.Errorf("%w: it is empty; leave it out to match every file", ErrBadGlob)
	}
	g := &Glob{hasSlash: strings.Contains(p, "/")}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "" {
			continue // "a//b", a trailing slash
		}
		if seg == "**" && len(g.segs) > 0 && g.segs[len(g.segs)-1] == "**" {
			continue
		}
		if _, err := path.Match(seg, ""); err != nil {
			return nil, fmt.Errorf("%w: %q has unbalanced brackets or a trailing backslash", ErrBadGlob, seg)
		}
		g.segs = append(g.segs, seg)
	}
	if len(g.segs) > maxGlobSegments {
		return nil, fmt.Errorf("%w: more than %d path segments", ErrBadGlob, maxGlobSegments)
	}
	return g, nil
}

// Match reports whether rel (slash-separated) matches.
func (g *Glob) Match(rel string) bool { return g.MatchUnder(rel, rel) }

// MatchUnder reports whether the entry at rel (workspace-relative) matches,
// where base is rel relative to a directory a search was confined to: a
// pattern with a slash may match either.
func (g *Glob) MatchUnder(rel, base string) bool {
	if g == nil {
		return true
	}
	if !g.hasSlash {
		ok, _ := path.Match(g.segs[0], path.Base(rel))
		return ok
	}
	return matchSegs(g.segs, strings.Split(rel, "/")) || base != rel && matchSegs(g.segs, strings.Split(base, "/"))
}

// matchSegs matches path segments against pattern segments in time
// proportional to len(pat)*len(segs) whatever the pattern (a backtracking
// match of many ** would be exponential).
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

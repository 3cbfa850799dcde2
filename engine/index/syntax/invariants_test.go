package syntax

import (
	"fmt"
	"slices"
	"strings"
)

// checkAnalysis verifies what every Analysis promises; it returns a
// description of the first broken promise, or "".
func checkAnalysis(src []byte, a *Analysis, opts Options) string {
	opts = opts.normalized()
	li := newLineIndex(src)
	n := li.count()

	// Chunks: ordered, non-overlapping, non-blank bounds, at most
	// MaxChunkLines, covering every non-blank line exactly once.
	prevEnd := 0
	for i, c := range a.Chunks {
		switch {
		case c.StartLine < 1 || c.EndLine > n || c.StartLine > c.EndLine:
			return fmt.Sprintf("chunk %d %+v: bad range for %d lines", i, c, n)
		case c.StartLine <= prevEnd:
			return fmt.Sprintf("chunk %d %+v: overlaps or precedes the previous one ending at %d", i, c, prevEnd)
		case c.EndLine-c.StartLine+1 > opts.MaxChunkLines:
			return fmt.Sprintf("chunk %d %+v: longer than %d lines", i, c, opts.MaxChunkLines)
		case li.isBlank(c.StartLine) || li.isBlank(c.EndLine):
			return fmt.Sprintf("chunk %d %+v: starts or ends on a blank line", i, c)
		case (c.Kind == "") != (c.Name == ""):
			return fmt.Sprintf("chunk %d %+v: kind and name disagree", i, c)
		case c.Part < 0 || (c.Kind == "" && c.Part != 0):
			return fmt.Sprintf("chunk %d %+v: bad part", i, c)
		}
		for l := prevEnd + 1; l < c.StartLine; l++ {
			if !li.isBlank(l) {
				return fmt.Sprintf("line %d is not blank but in no chunk", l)
			}
		}
		prevEnd = c.EndLine
	}
	for l := prevEnd + 1; l <= n; l++ {
		if !li.isBlank(l) {
			return fmt.Sprintf("line %d is not blank but in no chunk", l)
		}
	}

	// Symbols: sane ranges, in source order, names present.
	for i, s := range a.Symbols {
		switch {
		case s.Name == "" || s.Kind == "":
			return fmt.Sprintf("symbol %d %+v: empty name or kind", i, s)
		case s.Line < 1 || s.EndLine > n || s.Line > s.EndLine:
			return fmt.Sprintf("symbol %d %+v: bad range for %d lines", i, s, n)
		case s.NameLine < s.Line || s.NameLine > s.EndLine || s.Column < 1:
			return fmt.Sprintf("symbol %d %+v: name outside the definition", i, s)
		}
		if i > 0 {
			p := a.Symbols[i-1]
			if p.Line > s.Line || (p.Line == s.Line && (p.NameLine > s.NameLine || (p.NameLine == s.NameLine && p.Column > s.Column))) {
				return fmt.Sprintf("symbols %d and %d out of order", i-1, i)
			}
		}
		// The name is at NameLine:Column.
		start := int(li.starts[s.NameLine-1]) + s.Column - 1
		if start >= len(src) || !strings.Contains(string(src[start:min(len(src), start+len(s.Name)+2)]), s.Name) {
			return fmt.Sprintf("symbol %d %+v: name not found at its position", i, s)
		}
	}

	// Refs: sorted unique names, ascending unique lines inside the file.
	for i, r := range a.Refs {
		if r.Name == "" || len(r.Lines) == 0 {
			return fmt.Sprintf("ref %d %+v: empty", i, r)
		}
		if i > 0 && a.Refs[i-1].Name >= r.Name {
			return fmt.Sprintf("refs %q and %q out of order", a.Refs[i-1].Name, r.Name)
		}
		for j, l := range r.Lines {
			if l < 1 || int(l) > n {
				return fmt.Sprintf("ref %q: line %d outside the file", r.Name, l)
			}
			if j > 0 && r.Lines[j-1] >= l {
				return fmt.Sprintf("ref %q: lines %v not ascending and unique", r.Name, r.Lines)
			}
		}
	}
	if !slices.IsSortedFunc(a.Refs, func(x, y Ref) int { return strings.Compare(x.Name, y.Name) }) {
		return "refs not sorted"
	}
	return ""
}

package patch

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/aymanbagabas/go-udiff/lcs"
	"github.com/aymanbagabas/go-udiff/myers"
)

// contextLines is how many unchanged lines surround each change in a hunk,
// git's default.
const contextLines = 3

// lcsExact is the number of changed lines up to which go-udiff's bounded
// two-sided search (lcs.DiffLines, D limit 50 in each direction) is known to
// have finished, so its answer is minimal.
const lcsExact = 100

// myersBudget bounds the memory of one exact Myers run: myers.ComputeEdits
// keeps a copy of its 2(n+m)+1-word frontier for every edit step, so a
// region of n+m lines with at most D changed lines costs (D+1)(2(n+m)+1)
// words.
const myersBudget = 64 << 20 // bytes

// lineDiff is one changed region: old lines [a0,a1) become new lines
// [b0,b1) (0-based, half-open).
type lineDiff struct{ a0, a1, b0, b1 int }

// splitLines splits text into lines, each with its "\n" (and "\r" before
// it, if any); the last line lacks "\n" when the text does not end in one.
// Empty text has no lines.
func splitLines(text string) []string {
	if text == "" {
		return nil
	}
	lines := strings.SplitAfter(text, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// diffLines computes a minimal line diff of a and b (see the package doc
// for the limits), as ordered, non-adjacent regions.
func diffLines(a, b []string) ([]lineDiff, error) {
	var out []lineDiff
	refine(a, b, 0, 0, &out)
	if err := checkDiff(a, b, out); err != nil {
		return nil, err
	}
	return out, nil
}

// refine appends the diff of a and b, which start at old line aoff and new
// line boff, to out.
func refine(a, b []string, aoff, boff int, out *[]lineDiff) {
	ds := lcs.DiffLines(a, b)
	changed := 0
	for _, d := range ds {
		changed += d.End - d.Start + d.ReplEnd - d.ReplStart
	}
	n := len(a) + len(b)
	switch {
	case changed <= lcsExact:
		for _, d := range ds {
			appendDiff(out, lineDiff{aoff + d.Start, aoff + d.End, boff + d.ReplStart, boff + d.ReplEnd})
		}
	case (changed+1)*(2*n+1)*8 <= myersBudget:
		for _, d := range exactLines(a, b) {
			appendDiff(out, lineDiff{aoff + d.a0, aoff + d.a1, boff + d.b0, boff + d.b1})
		}
	case len(ds) == 1 && ds[0].Start == 0 && ds[0].End == len(a) && ds[0].ReplStart == 0 && ds[0].ReplEnd == len(b):
		// The bounded search found nothing in common and the region is too
		// big for the exact one: replace it whole.
		appendDiff(out, lineDiff{aoff, aoff + len(a), boff, boff + len(b)})
	default:
		// Each region the bounded search left is smaller than this one;
		// diff them again.
		for _, d := range ds {
			refine(a[d.Start:d.End], b[d.ReplStart:d.ReplEnd], aoff+d.Start, boff+d.ReplStart, out)
		}
	}
}

// appendDiff appends d to out, merging it into the last region when they
// touch.
func appendDiff(out *[]lineDiff, d lineDiff) {
	if d.a0 == d.a1 && d.b0 == d.b1 {
		return
	}
	if k := len(*out); k > 0 {
		last := &(*out)[k-1]
		if last.a1 == d.a0 && last.b1 == d.b0 {
			last.a1, last.b1 = d.a1, d.b1
			return
		}
	}
	*out = append(*out, d)
}

// exactLines runs go-udiff's exact Myers diff on a and b and turns its
// byte-offset edits back into line regions.
func exactLines(a, b []string) []lineDiff {
	edits := myers.ComputeEdits(strings.Join(a, ""), strings.Join(b, ""))
	starts := make([]int, len(a)+1) // byte offset of each old line; the end last
	for i, l := range a {
		starts[i+1] = starts[i] + len(l)
	}
	line := func(off int) int { return sort.SearchInts(starts, off) }
	var out []lineDiff
	shift := 0 // new line index minus old line index after the edits so far
	for _, e := range edits {
		s, t := line(e.Start), line(e.End)
		k := len(splitLines(e.New))
		appendDiff(&out, lineDiff{s, t, s + shift, s + shift + k})
		shift += k - (t - s)
	}
	return out
}

// checkDiff verifies that ds turns a into b: the regions are ordered and
// in range and the lines between them are equal. It guards Propose against
// a diff library bug producing a patch that does not reproduce the edit.
func checkDiff(a, b []string, ds []lineDiff) error {
	pa, pb := 0, 0
	for _, d := range ds {
		if d.a0 < pa || d.a1 < d.a0 || d.a1 > len(a) || d.b0 < pb || d.b1 < d.b0 || d.b1 > len(b) || d.a0-pa != d.b0-pb {
			return fmt.Errorf("internal error: the line diff is inconsistent at old line %d", d.a0+1)
		}
		for i := range d.a0 - pa {
			if a[pa+i] != b[pb+i] {
				return fmt.Errorf("internal error: the line diff loses old line %d", pa+i+1)
			}
		}
		pa, pb = d.a1, d.b1
	}
	if len(a)-pa != len(b)-pb {
		return fmt.Errorf("internal error: the line diff does not cover the file")
	}
	for i := range len(a) - pa {
		if a[pa+i] != b[pb+i] {
			return fmt.Errorf("internal error: the line diff loses old line %d", pa+i+1)
		}
	}
	return nil
}

// buildHunks groups ds into hunks with contextLines lines of context, as
// git does: changes at most 2·contextLines unchanged lines apart share a
// hunk. Headers carry git's default function name (see funcName).
func buildHunks(a, b []string, ds []lineDiff) []Hunk {
	var hunks []Hunk
	funcPrev, fn := -1, ""
	for i := 0; i < len(ds); {
		j := i
		for j+1 < len(ds) && ds[j+1].a0-ds[j].a1 <= 2*contextLines {
			j++
		}
		first, last := ds[i], ds[j]
		s1 := max(first.a0-contextLines, 0)
		s2 := first.b0 - (first.a0 - s1)
		trail := min(contextLines, len(a)-last.a1)
		e1, e2 := last.a1+trail, last.b1+trail

		// git looks for the function line above the hunk, back to where
		// the previous hunk's search began, and keeps the previous name
		// when it finds none.
		for l := s1 - 1; l > funcPrev && l >= 0; l-- {
			if name, ok := funcName(a[l]); ok {
				fn = name
				break
			}
		}
		funcPrev = s1 - 1

		h := Hunk{
			OldStart: rangeStart(s1, e1-s1), OldLines: e1 - s1,
			NewStart: rangeStart(s2, e2-s2), NewLines: e2 - s2,
		}
		var sb strings.Builder
		sb.WriteString("@@ -")
		writeRange(&sb, h.OldStart, h.OldLines)
		sb.WriteString(" +")
		writeRange(&sb, h.NewStart, h.NewLines)
		sb.WriteString(" @@")
		if fn != "" {
			sb.WriteByte(' ')
			sb.WriteString(fn)
		}
		sb.WriteByte('\n')
		at := s1
		for _, d := range ds[i : j+1] {
			writeLines(&sb, ' ', a[at:d.a0])
			writeLines(&sb, '-', a[d.a0:d.a1])
			writeLines(&sb, '+', b[d.b0:d.b1])
			at = d.a1
		}
		writeLines(&sb, ' ', a[at:e1])
		h.Content = sb.String()
		hunks = append(hunks, h)
		i = j + 1
	}
	return hunks
}

// rangeStart is the start git writes for a hunk side beginning at 0-based
// line s with n lines: s+1, or s (the line before) when the side is empty.
func rangeStart(s, n int) int {
	if n == 0 {
		return s
	}
	return s + 1
}

// writeRange writes "start" or "start,count" (count omitted when it is 1).
func writeRange(sb *strings.Builder, start, n int) {
	sb.WriteString(strconv.Itoa(start))
	if n != 1 {
		sb.WriteByte(',')
		sb.WriteString(strconv.Itoa(n))
	}
}

// writeLines writes each line with the prefix, marking a last line without
// a newline as git does.
func writeLines(sb *strings.Builder, prefix byte, lines []string) {
	for _, l := range lines {
		sb.WriteByte(prefix)
		sb.WriteString(l)
		if !strings.HasSuffix(l, "\n") {
			sb.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

// funcName is git's default hunk-header function line (xdiff's def_ff):
// a line starting with an ASCII letter, '_' or '$', cut to 80 bytes, with
// trailing spaces, tabs, CRs and LFs removed.
func funcName(line string) (string, bool) {
	if line == "" {
		return "", false
	}
	c := line[0]
	if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || c == '$') {
		return "", false
	}
	if len(line) > 80 {
		line = line[:80]
	}
	return strings.TrimRight(line, " \t\r\n"), true
}

// fileHeader is the git diff header of a file patch, without the index
// line: "diff --git", the mode line of a created or deleted file, and the
// ---/+++ lines (left out, as git does, when there are no hunks).
func fileHeader(p string, op Op, hasHunks bool) string {
	a, b := quoteName("a/"+p), quoteName("b/"+p)
	var sb strings.Builder
	fmt.Fprintf(&sb, "diff --git %s %s\n", a, b)
	switch op {
	case OpCreate:
		sb.WriteString("new file mode 100644\n")
		a = "/dev/null"
	case OpDelete:
		sb.WriteString("deleted file mode 100644\n")
		b = "/dev/null"
	}
	if hasHunks {
		fmt.Fprintf(&sb, "--- %s%s\n+++ %s%s\n", a, nameTab(a), b, nameTab(b))
	}
	return sb.String()
}

// nameTab is the tab git appends to a ---/+++ name containing a space, so
// that the name's end is unambiguous.
func nameTab(name string) string {
	if strings.Contains(name, " ") {
		return "\t"
	}
	return ""
}

// quoteName quotes a name the way git does with core.quotePath on (its
// default): in double quotes, with C escapes for control characters, '"'
// and '\\' and octal escapes for bytes 0x7f and above, when any occurs.
func quoteName(name string) string {
	needs := false
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			needs = true
			break
		}
	}
	if !needs {
		return name
	}
	var sb strings.Builder
	sb.WriteByte('"')
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch c {
		case '\a':
			sb.WriteString(`\a`)
		case '\b':
			sb.WriteString(`\b`)
		case '\t':
			sb.WriteString(`\t`)
		case '\n':
			sb.WriteString(`\n`)
		case '\v':
			sb.WriteString(`\v`)
		case '\f':
			sb.WriteString(`\f`)
		case '\r':
			sb.WriteString(`\r`)
		case '"':
			sb.WriteString(`\"`)
		case '\\':
			sb.WriteString(`\\`)
		default:
			if c < 0x20 || c >= 0x7f {
				fmt.Fprintf(&sb, `\%03o`, c)
			} else {
				sb.WriteByte(c)
			}
		}
	}
	sb.WriteByte('"')
	return sb.String()
}

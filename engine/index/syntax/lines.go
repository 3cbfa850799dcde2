package syntax

import "bytes"

// lineIndex maps byte offsets to lines and knows which lines are blank.
type lineIndex struct {
	// starts[i] is the byte offset where line i+1 starts.
	starts []int32
	// blank[i] reports whether line i+1 holds only spaces, tabs, '\r',
	// '\f' or '\v'.
	blank []bool
	size  int
	// hint is the 0-based line lineOf found last; lookups mostly move
	// forward, so it saves the binary search.
	hint int
}

func newLineIndex(src []byte) *lineIndex {
	n := bytes.Count(src, []byte{'\n'})
	if len(src) > 0 && src[len(src)-1] != '\n' {
		n++
	}
	li := &lineIndex{starts: make([]int32, 0, n), blank: make([]bool, 0, n), size: len(src)}
	for off := 0; off < len(src); {
		li.starts = append(li.starts, int32(off))
		end := bytes.IndexByte(src[off:], '\n')
		if end < 0 {
			end = len(src)
		} else {
			end += off
		}
		i := off
		for i < end && isSpace(src[i]) {
			i++
		}
		li.blank = append(li.blank, i == end)
		off = end + 1
	}
	return li
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'
}

// count returns the number of lines.
func (li *lineIndex) count() int { return len(li.starts) }

// isBlank reports whether 1-based line is blank; lines outside the file
// count as blank.
func (li *lineIndex) isBlank(line int) bool {
	if line < 1 || line > len(li.blank) {
		return true
	}
	return li.blank[line-1]
}

// lineOf returns the 1-based line holding byte offset off, clamped to
// [1, count()] (1 for an empty file). It is not safe for concurrent use.
func (li *lineIndex) lineOf(off int) int {
	n := len(li.starts)
	if n == 0 || off <= 0 {
		return 1
	}
	h := li.hint
	if int(li.starts[h]) <= off {
		// Forward scan a little before falling back to binary search.
		for k := 0; k < 8; k++ {
			if h+1 >= n || int(li.starts[h+1]) > off {
				li.hint = h
				return h + 1
			}
			h++
		}
	}
	lo, hi := 0, n-1 // invariant: the answer is in [lo, hi]
	for lo < hi {
		mid := int(uint(lo+hi+1) >> 1)
		if int(li.starts[mid]) <= off {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	li.hint = lo
	return lo + 1
}

// clampLine clamps a 1-based line to the file.
func (li *lineIndex) clampLine(line int) int {
	if line > len(li.starts) {
		line = len(li.starts)
	}
	if line < 1 {
		line = 1
	}
	return line
}

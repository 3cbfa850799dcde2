package syntax

import (
	"cmp"
	"slices"
)

// Chunking, in three steps:
//
//  1. Units: the symbols worth a chunk of their own — every kind but field
//     and enum_member, at least MinChunkLines long — nested by line range
//     (a method inside its class). A unit that starts inside another but
//     ends after it is dropped; its lines go to the code around it.
//  2. Pieces: a unit that fits MaxChunkLines is one piece. A longer unit
//     with nested units (and a module or namespace with nested units,
//     whatever its length) becomes its nested units' pieces plus the code
//     around them, labelled with the unit; a longer unit without nested
//     units is cut into parts. Code outside units (and around nested
//     units) shorter than MinChunkLines is split into its paragraphs;
//     longer code is packed into pieces of at most MaxChunkLines. Cuts
//     fall before a line that follows a blank line (or, in Markdown,
//     before a heading) when there is one in reach, else after
//     MaxChunkLines lines.
//  3. Merging: a piece of code around units shorter than MinChunkLines
//     joins the previous chunk when it touches only that one (no blank
//     line between), else the next, else the previous, as long as the
//     result fits MaxChunkLines; code inside a unit only joins chunks
//     inside that unit. Unlabelled chunks then take the first
//     chunkable definition that starts in them.

// unit is a symbol that gets chunks of its own.
type unit struct {
	start, end int
	kind       Kind
	name       string
	children   []*unit
	split      bool // cut into parts (longer than MaxChunkLines, or a module)
	parts      int  // parts numbered so far
}

// piece is a chunk under construction.
type piece struct {
	start, end int
	u          *unit // nil for code between symbols
	// filler marks code around units, which may merge into a neighbour.
	filler bool
}

type chunker struct {
	lines    *lineIndex
	src      []byte
	opts     Options
	markdown bool
	pieces   []piece
}

// chunkable reports whether a symbol of kind k may get its own chunk.
func chunkable(k Kind) bool {
	return k != KindField && k != KindEnumMember
}

func qualified(s *Symbol) string {
	if s.Container == "" {
		return s.Name
	}
	return s.Container + "." + s.Name
}

func chunkFile(lines *lineIndex, src []byte, syms []Symbol, lang Lang, opts Options) []Chunk {
	n := lines.count()
	if n == 0 {
		return nil
	}
	c := &chunker{lines: lines, src: src, opts: opts, markdown: lang == LangMarkdown}
	roots := c.units(syms)
	c.region(1, n, nil, roots)
	pieces := c.merge(c.pieces)

	chunks := make([]Chunk, 0, len(pieces))
	si := 0
	for _, p := range pieces {
		ch := Chunk{StartLine: p.start, EndLine: p.end}
		if p.u != nil {
			ch.Kind, ch.Name = p.u.kind, p.u.name
			if p.u.split {
				p.u.parts++
				ch.Part = p.u.parts
			}
		} else {
			for si < len(syms) && syms[si].Line < p.start {
				si++
			}
			for j := si; j < len(syms) && syms[j].Line <= p.end; j++ {
				if chunkable(syms[j].Kind) {
					ch.Kind, ch.Name = syms[j].Kind, qualified(&syms[j])
					break
				}
			}
		}
		chunks = append(chunks, ch)
	}
	return chunks
}

// units builds the forest of units from syms.
func (c *chunker) units(syms []Symbol) []*unit {
	var cands []*unit
	for i := range syms {
		s := &syms[i]
		if !chunkable(s.Kind) {
			continue
		}
		start, end := c.lines.clampLine(s.Line), c.lines.clampLine(s.EndLine)
		start, end = c.trim(start, end)
		if start > end || end-start+1 < c.opts.MinChunkLines {
			continue
		}
		cands = append(cands, &unit{start: start, end: end, kind: s.Kind, name: qualified(s)})
	}
	slices.SortStableFunc(cands, func(a, b *unit) int {
		if a.start != b.start {
			return cmp.Compare(a.start, b.start)
		}
		return cmp.Compare(b.end, a.end)
	})
	var roots []*unit
	var stack []*unit
	for _, u := range cands {
		for len(stack) > 0 && stack[len(stack)-1].end < u.start {
			stack = stack[:len(stack)-1]
		}
		if len(stack) == 0 {
			roots = append(roots, u)
			stack = append(stack, u)
			continue
		}
		top := stack[len(stack)-1]
		if u.end > top.end {
			continue // overlaps top without nesting in it
		}
		top.children = append(top.children, u)
		stack = append(stack, u)
	}
	return roots
}

// trim narrows [start, end] to its first and last non-blank lines; the
// result is empty (start > end) when all are blank.
func (c *chunker) trim(start, end int) (int, int) {
	for start <= end && c.lines.isBlank(start) {
		start++
	}
	for end >= start && c.lines.isBlank(end) {
		end--
	}
	return start, end
}

// region emits pieces for lines [start, end] holding units kids (in
// order, inside the range); the code around them is labelled u.
func (c *chunker) region(start, end int, u *unit, kids []*unit) {
	cur := start
	for _, k := range kids {
		c.gap(cur, k.start-1, u)
		c.unit(k)
		cur = k.end + 1
	}
	c.gap(cur, end, u)
}

func (c *chunker) unit(u *unit) {
	// A module or namespace with units inside is always cut around them:
	// it is a scope, not a unit of code.
	if u.end-u.start+1 <= c.opts.MaxChunkLines && (u.kind != KindModule || len(u.children) == 0) {
		c.pieces = append(c.pieces, piece{start: u.start, end: u.end, u: u})
		return
	}
	u.split = true
	if len(u.children) > 0 {
		c.region(u.start, u.end, u, u.children)
		return
	}
	c.pack(u.start, u.end, u, false)
}

// gap emits filler pieces for code around units.
func (c *chunker) gap(start, end int, u *unit) {
	start, end = c.trim(start, end)
	if start > end {
		return
	}
	if end-start+1 >= c.opts.MinChunkLines {
		c.pack(start, end, u, true)
		return
	}
	// A short gap goes paragraph by paragraph, so that each paragraph can
	// join the neighbour it belongs to.
	for l := start; l <= end; {
		e := l
		for e < end && !c.lines.isBlank(e+1) {
			e++
		}
		c.pieces = append(c.pieces, piece{start: l, end: e, u: u, filler: true})
		l = e + 1
		for l <= end && c.lines.isBlank(l) {
			l++
		}
	}
}

// pack cuts non-blank-bounded lines [start, end] into pieces of at most
// MaxChunkLines lines.
func (c *chunker) pack(start, end int, u *unit, filler bool) {
	max := c.opts.MaxChunkLines
	for start <= end {
		if end-start+1 <= max {
			c.pieces = append(c.pieces, piece{start: start, end: end, u: u, filler: filler})
			return
		}
		next := 0
		for l := start + max; l > start; l-- {
			if c.cutBefore(l) {
				next = l
				break
			}
		}
		if next == 0 {
			next = start + max
		}
		_, e := c.trim(start, next-1)
		c.pieces = append(c.pieces, piece{start: start, end: e, u: u, filler: filler})
		start, _ = c.trim(next, end)
	}
}

// cutBefore reports whether a piece may start at line l: l is non-blank
// and follows a blank line, or is a Markdown heading.
func (c *chunker) cutBefore(l int) bool {
	if c.lines.isBlank(l) {
		return false
	}
	if c.lines.isBlank(l - 1) {
		return true
	}
	if c.markdown {
		o := int(c.lines.starts[l-1])
		return o < len(c.src) && c.src[o] == '#'
	}
	return false
}

// merge joins short filler pieces to a neighbour.
func (c *chunker) merge(ps []piece) []piece {
	min, max := c.opts.MinChunkLines, c.opts.MaxChunkLines
	out := make([]piece, 0, len(ps))
	for i := 0; i < len(ps); i++ {
		p := ps[i]
		if p.filler && p.end-p.start+1 < min {
			// Code inside a unit stays with chunks inside that unit.
			hasPrev := len(out) > 0 && (p.u == nil || out[len(out)-1].start >= p.u.start)
			hasNext := i+1 < len(ps) && (p.u == nil || ps[i+1].end <= p.u.end)
			prevOK := hasPrev && p.end-out[len(out)-1].start+1 <= max
			nextOK := hasNext && ps[i+1].end-p.start+1 <= max
			touchPrev := hasPrev && out[len(out)-1].end+1 == p.start
			touchNext := hasNext && p.end+1 == ps[i+1].start
			switch {
			case touchPrev && !touchNext && prevOK:
				out[len(out)-1].end = p.end
				continue
			case nextOK:
				ps[i+1].start = p.start
				continue
			case prevOK:
				out[len(out)-1].end = p.end
				continue
			}
		}
		out = append(out, p)
	}
	return out
}

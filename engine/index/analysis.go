package index

import (
	"fmt"

	"github.com/plexus-agent/plexus/engine/index/syntax"
)

// storedAnalysis is what the contents table keeps of one content's syntax
// analysis, so an unchanged content is never parsed again: its
// definitions, references and chunks.
type storedAnalysis struct {
	symbols []docSymbol
	refs    []syntax.Ref
	chunks  []docChunk
}

// docSymbol is a definition; lines are 1-based inclusive.
type docSymbol struct {
	name, kind, container string
	line, end, col        int32
}

// docChunk is a chunk; terms and hash are filled when the text is
// tokenised.
type docChunk struct {
	start, end int32
	kind, name string
	part       uint16
	terms      uint32
	hash       [32]byte
}

func fromSyntax(a *syntax.Analysis) storedAnalysis {
	var s storedAnalysis
	for _, sy := range a.Symbols {
		s.symbols = append(s.symbols, docSymbol{
			name: sy.Name, kind: string(sy.Kind), container: sy.Container,
			line: int32(sy.Line), end: int32(sy.EndLine), col: int32(sy.Column),
		})
	}
	s.refs = a.Refs
	for _, c := range a.Chunks {
		s.chunks = append(s.chunks, docChunk{start: int32(c.StartLine), end: int32(c.EndLine), kind: string(c.Kind), name: c.Name, part: uint16(c.Part)})
	}
	return s
}

// analysisMagic starts an encoded analysis; the digit is the format.
const analysisMagic = "PXA1"

// encode serialises the analysis with a local string table.
func (a storedAnalysis) encode() []byte {
	ids := map[string]uint64{}
	var strs []string
	id := func(s string) uint64 {
		if v, ok := ids[s]; ok {
			return v
		}
		v := uint64(len(strs))
		ids[s] = v
		strs = append(strs, s)
		return v
	}
	var body encoder
	body.uint(uint64(len(a.symbols)))
	for _, s := range a.symbols {
		body.uint(id(s.name))
		body.uint(id(s.kind))
		body.uint(id(s.container))
		body.uint(uint64(s.line))
		body.uint(uint64(s.end - s.line))
		body.uint(uint64(s.col))
	}
	body.uint(uint64(len(a.refs)))
	for _, r := range a.refs {
		body.uint(id(r.Name))
		body.uint(uint64(len(r.Lines)))
		prev := int32(0)
		for _, l := range r.Lines {
			body.uint(uint64(l - prev))
			prev = l
		}
	}
	body.uint(uint64(len(a.chunks)))
	prev := int32(0)
	for _, c := range a.chunks {
		body.uint(uint64(c.start - prev))
		body.uint(uint64(c.end - c.start))
		body.uint(id(c.kind))
		body.uint(id(c.name))
		body.uint(uint64(c.part))
		prev = c.start
	}
	var w encoder
	w.buf = append(w.buf, analysisMagic...)
	w.uint(uint64(len(strs)))
	for _, s := range strs {
		w.str(s)
	}
	w.buf = append(w.buf, body.buf...)
	return w.buf
}

// decodeAnalysis parses what encode wrote. With withRefs false the
// references are skipped rather than kept (most reads need only symbols
// and chunks).
func decodeAnalysis(data []byte, withRefs bool) (storedAnalysis, error) {
	var a storedAnalysis
	if len(data) < len(analysisMagic) || string(data[:len(analysisMagic)]) != analysisMagic {
		return a, fmt.Errorf("%w: bad analysis header", errCorrupt)
	}
	r := decoder{buf: data[len(analysisMagic):]}
	strs := make([]string, r.count(1))
	for i := range strs {
		strs[i] = r.str()
	}
	s := func() string {
		if id := r.strID(len(strs)); int(id) < len(strs) {
			return strs[id]
		}
		return "" // r.err is set
	}
	a.symbols = make([]docSymbol, r.count(6))
	for i := range a.symbols {
		sy := &a.symbols[i]
		sy.name, sy.kind, sy.container = s(), s(), s()
		sy.line = int32(r.uint())
		sy.end = sy.line + int32(r.uint())
		sy.col = int32(r.uint())
	}
	nrefs := r.count(2)
	if withRefs {
		a.refs = make([]syntax.Ref, nrefs)
	}
	for i := 0; i < nrefs; i++ {
		name := s()
		lines := make([]int32, r.count(1))
		prev := int32(0)
		for j := range lines {
			prev += int32(r.uint())
			lines[j] = prev
		}
		if withRefs {
			a.refs[i] = syntax.Ref{Name: name, Lines: lines}
		}
	}
	a.chunks = make([]docChunk, r.count(5))
	prev := int32(0)
	for i := range a.chunks {
		c := &a.chunks[i]
		c.start = prev + int32(r.uint())
		c.end = c.start + int32(r.uint())
		c.kind, c.name = s(), s()
		c.part = uint16(r.uint())
		prev = c.start
	}
	return a, r.err
}

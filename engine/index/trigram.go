package index

import (
	"bytes"
	"encoding/binary"
	"slices"
)

// A trigram is three consecutive bytes of a file, ASCII letters folded to
// lower case, packed as b0<<16 | b1<<8 | b2. Folding lets one index answer
// case-sensitive and case-insensitive queries; candidates are then verified
// against the file. This is the scheme of Russ Cox's "Regular Expression
// Matching with a Trigram Index" (2012) and Google Code Search.
type trigram = uint32

// fold lower-cases an ASCII letter.
func fold(b byte) byte {
	if 'A' <= b && b <= 'Z' {
		return b + 'a' - 'A'
	}
	return b
}

// trigramSet collects the distinct trigrams of byte strings. It keeps a
// 2^24-bit bitmap (2 MiB) so that deduplication is one bit test per byte;
// reuse one set per goroutine.
type trigramSet struct {
	seen []uint64
	list []trigram
}

func newTrigramSet() *trigramSet { return &trigramSet{seen: make([]uint64, 1<<24/64)} }

// The two non-ASCII runes whose Unicode case folding reaches an ASCII
// letter: K (U+212A KELVIN SIGN, UTF-8 E2 84 AA) folds to k, ſ (U+017F
// LATIN SMALL LETTER LONG S, UTF-8 C5 BF) to s. A case-insensitive query
// with k or s must also consider files holding them. The Kelvin sign is a
// trigram of its own; for the long s the index records the marker trigram
// C5 BF 00, which no text can produce (indexed files hold no NUL byte).
const (
	kelvinTrigram trigram = 0xE284AA
	longSTrigram  trigram = 0xC5BF00
)

// add records every trigram of data, and the long-s marker.
func (s *trigramSet) add(data []byte) {
	if len(data) < 2 {
		return
	}
	s.mark(longSTrigram, bytes.Contains(data, []byte{0xC5, 0xBF}))
	t := uint32(fold(data[0]))<<8 | uint32(fold(data[1]))
	for _, b := range data[2:] {
		t = (t<<8 | uint32(fold(b))) & 0xFFFFFF
		s.mark(t, true)
	}
}

func (s *trigramSet) mark(t trigram, ok bool) {
	w, bit := t>>6, uint64(1)<<(t&63)
	if ok && s.seen[w]&bit == 0 {
		s.seen[w] |= bit
		s.list = append(s.list, t)
	}
}

// take returns the collected trigrams, in no particular order, and
// resets the set.
func (s *trigramSet) take() []trigram {
	out := slices.Clone(s.list)
	for _, t := range s.list {
		s.seen[t>>6] = 0
	}
	s.list = s.list[:0]
	return out
}

// trigramsOf returns the distinct trigrams of a literal, folded, in no
// particular order.
func trigramsOf(lit string) []trigram {
	if len(lit) < 3 {
		return nil
	}
	var out []trigram
	for i := 0; i+3 <= len(lit); i++ {
		t := uint32(fold(lit[i]))<<16 | uint32(fold(lit[i+1]))<<8 | uint32(fold(lit[i+2]))
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// A posting list is a sorted list of document numbers, stored as a
// uvarint count followed by uvarint deltas (the first delta is from -1).
// postingWriter appends to one in increasing document order.
type postingWriter struct {
	buf  []byte
	last uint32
	n    uint32
}

func (w *postingWriter) add(doc uint32) {
	delta := doc - w.last
	if w.n == 0 {
		delta = doc + 1
	}
	w.buf = binary.AppendUvarint(w.buf, uint64(delta))
	w.last = doc
	w.n++
}

// encode returns the count-prefixed list.
func (w *postingWriter) encode() []byte {
	out := binary.AppendUvarint(make([]byte, 0, len(w.buf)+5), uint64(w.n))
	return append(out, w.buf...)
}

// decodePostings appends the document numbers of an encoded list to dst.
func decodePostings(dst []uint32, data []byte) []uint32 {
	n, k := binary.Uvarint(data)
	if k <= 0 {
		return dst
	}
	data = data[k:]
	dst = slices.Grow(dst, int(n))
	doc := int64(-1)
	for i := uint64(0); i < n; i++ {
		d, k := binary.Uvarint(data)
		if k <= 0 {
			break
		}
		data = data[k:]
		doc += int64(d)
		dst = append(dst, uint32(doc))
	}
	return dst
}

// postingCount returns the length of an encoded list without decoding it.
func postingCount(data []byte) int {
	n, k := binary.Uvarint(data)
	if k <= 0 {
		return 0
	}
	return int(n)
}

// intersect returns the documents in both sorted lists, reusing a.
func intersect(a, b []uint32) []uint32 {
	out := a[:0]
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

// union returns the documents in either sorted list.
func union(a, b []uint32) []uint32 {
	out := make([]uint32, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i] < b[j]):
			out = append(out, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

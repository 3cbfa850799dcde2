package index

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// A segment is an immutable search structure over a set of file contents
// (documents): trigram posting lists for text search, term posting lists
// for BM25, and each document's chunks and symbols. A workspace has a base
// segment, built by a full index and stored in the database, and a small
// delta segment, rebuilt in memory from the contents that changed since.
// Documents are contents, not paths: two paths with the same content share
// one document, and the live catalog maps documents back to paths.
type segment struct {
	strs []string // string table: languages, kinds, names
	docs []docInfo
	// byContent maps a content id to its document number.
	byContent map[int64]uint32

	triKeys []trigram // sorted
	triOff  []uint32  // len(triKeys)+1 offsets into triData
	triData []byte

	termKeys []string // sorted
	termOff  []uint32
	termData []byte

	chunks    int   // chunks in all documents
	termTotal int64 // terms in all chunks, for BM25's average length
}

// docInfo is what a segment knows of one content.
type docInfo struct {
	content int64
	lang    uint32 // string id
	chunks  []chunkInfo
	symbols []symbolInfo
}

// chunkInfo is one chunk of a document. Lines are 1-based inclusive.
type chunkInfo struct {
	start, end int32
	kind, name uint32 // string ids; 0 is ""
	part       uint16
	terms      uint32   // number of terms, BM25's document length
	hash       [32]byte // SHA-256 of the chunk's text: its embedding key
}

// symbolInfo is one definition of a document.
type symbolInfo struct {
	name, kind, container uint32 // string ids
	line, end, col        int32
}

func (s *segment) str(id uint32) string { return s.strs[id] }

// trigramDocs appends the documents containing t to dst.
func (s *segment) trigramDocs(dst []uint32, t trigram) []uint32 {
	i, ok := slices.BinarySearch(s.triKeys, t)
	if !ok {
		return dst
	}
	return decodePostings(dst, s.triData[s.triOff[i]:s.triOff[i+1]])
}

func (s *segment) trigramCount(t trigram) int {
	i, ok := slices.BinarySearch(s.triKeys, t)
	if !ok {
		return 0
	}
	return postingCount(s.triData[s.triOff[i]:s.triOff[i+1]])
}

// termList returns the encoded (doc, chunk, tf) list of a term, or nil.
func (s *segment) termList(term string) []byte {
	i, ok := slices.BinarySearch(s.termKeys, term)
	if !ok {
		return nil
	}
	return s.termData[s.termOff[i]:s.termOff[i+1]]
}

// termEntry is one (document, chunk, term frequency) posting.
type termEntry struct {
	doc   uint32
	chunk uint32
	tf    uint32
}

// decodeTermList decodes a term's postings: a uvarint count, then per
// entry uvarint doc delta (from -1 for the first), chunk and tf.
func decodeTermList(data []byte, fn func(termEntry)) {
	n, k := binary.Uvarint(data)
	if k <= 0 {
		return
	}
	data = data[k:]
	doc := int64(-1)
	for i := uint64(0); i < n; i++ {
		var v [3]uint64
		for j := range v {
			x, k := binary.Uvarint(data)
			if k <= 0 {
				return
			}
			v[j], data = x, data[k:]
		}
		doc += int64(v[0])
		fn(termEntry{doc: uint32(doc), chunk: uint32(v[1]), tf: uint32(v[2])})
	}
}

// segmentBuilder accumulates documents in increasing document order. The
// posting lists are split into shards by trigram and term hash, each
// owned by one goroutine, so that accumulating postings (a map update per
// posting, the build's hottest loop) runs in parallel with itself and
// with the workers that tokenise files. Callers pre-split each document's
// trigrams and terms with shardOf.
type segmentBuilder struct {
	strIDs map[string]uint32
	strs   []string
	docs   []docInfo
	byC    map[int64]uint32

	shards []*builderShard
	wg     sync.WaitGroup

	chunks    int
	termTotal int64
}

// builderShard owns the posting lists of its part of the key space.
type builderShard struct {
	in    chan shardDoc
	tri   map[trigram]*postingWriter
	terms map[string]*termWriter
}

// shardDoc is one document's keys for one shard.
type shardDoc struct {
	doc   uint32
	tris  []trigram
	terms []chunkTerm
}

type termWriter struct {
	buf     []byte
	lastDoc uint32
	n       uint32
}

// numShards is how many posting shards builders use.
var numShards = max(2, runtime.GOMAXPROCS(0))

// triShard and termShard choose a key's shard.
func triShard(t trigram, n int) int { return int((t * 2654435761) >> 16 % uint32(n)) }

func termShard(term string, n int) int {
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(term); i++ {
		h = (h ^ uint32(term[i])) * 16777619
	}
	return int(h % uint32(n))
}

// splitShards splits a document's trigrams and terms by shard, into one
// buffer each (a counting sort: no per-shard slice growth, which was a
// large share of a build's allocations).
func (d *docData) splitShards(n int) {
	triShards := make([]int, len(d.tris))
	triCount := make([]int, n+1)
	for i, t := range d.tris {
		triShards[i] = triShard(t, n)
		triCount[triShards[i]+1]++
	}
	tris := make([]trigram, len(d.tris))
	d.shardTris = make([][]trigram, n)
	for i := 0; i < n; i++ {
		triCount[i+1] += triCount[i]
		d.shardTris[i] = tris[triCount[i]:triCount[i]:triCount[i+1]]
	}
	for i, t := range d.tris {
		sh := triShards[i]
		d.shardTris[sh] = append(d.shardTris[sh], t)
	}
	termShards := make([]int, len(d.terms))
	termCount := make([]int, n+1)
	for i, ct := range d.terms {
		termShards[i] = termShard(ct.term, n)
		termCount[termShards[i]+1]++
	}
	terms := make([]chunkTerm, len(d.terms))
	d.shardTerms = make([][]chunkTerm, n)
	for i := 0; i < n; i++ {
		termCount[i+1] += termCount[i]
		d.shardTerms[i] = terms[termCount[i]:termCount[i]:termCount[i+1]]
	}
	for i, ct := range d.terms {
		sh := termShards[i]
		d.shardTerms[sh] = append(d.shardTerms[sh], ct)
	}
	d.tris, d.terms = nil, nil
}

func newSegmentBuilder() *segmentBuilder {
	b := &segmentBuilder{strIDs: map[string]uint32{"": 0}, strs: []string{""}, byC: map[int64]uint32{}}
	for i := 0; i < numShards; i++ {
		sh := &builderShard{in: make(chan shardDoc, 256), tri: map[trigram]*postingWriter{}, terms: map[string]*termWriter{}}
		b.shards = append(b.shards, sh)
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			for d := range sh.in {
				sh.add(d)
			}
		}()
	}
	return b
}

func (sh *builderShard) add(d shardDoc) {
	for _, t := range d.tris {
		w := sh.tri[t]
		if w == nil {
			w = &postingWriter{}
			sh.tri[t] = w
		}
		w.add(d.doc)
	}
	for _, ct := range d.terms {
		w := sh.terms[ct.term]
		if w == nil {
			w = &termWriter{}
			sh.terms[ct.term] = w
		}
		delta := d.doc - w.lastDoc
		if w.n == 0 {
			delta = d.doc + 1
		}
		w.buf = binary.AppendUvarint(w.buf, uint64(delta))
		w.buf = binary.AppendUvarint(w.buf, uint64(ct.chunk))
		w.buf = binary.AppendUvarint(w.buf, uint64(ct.tf))
		w.lastDoc = d.doc
		w.n++
	}
}

func (b *segmentBuilder) intern(s string) uint32 {
	if id, ok := b.strIDs[s]; ok {
		return id
	}
	id := uint32(len(b.strs))
	b.strIDs[s] = id
	b.strs = append(b.strs, s)
	return id
}

// has reports whether the content is already a document.
func (b *segmentBuilder) has(content int64) bool {
	_, ok := b.byC[content]
	return ok
}

// add appends one document. d must have been split with splitShards into
// len(b.shards) shards.
func (b *segmentBuilder) add(d *docData) {
	if len(d.shardTris) != len(b.shards) {
		d.splitShards(len(b.shards))
	}
	doc := uint32(len(b.docs))
	b.byC[d.content] = doc
	info := docInfo{content: d.content, lang: b.intern(d.lang)}
	for _, c := range d.chunks {
		info.chunks = append(info.chunks, chunkInfo{
			start: c.start, end: c.end, kind: b.intern(c.kind), name: b.intern(c.name), part: c.part, terms: c.terms, hash: c.hash,
		})
		b.termTotal += int64(c.terms)
	}
	b.chunks += len(d.chunks)
	for _, s := range d.symbols {
		info.symbols = append(info.symbols, symbolInfo{
			name: b.intern(s.name), kind: b.intern(s.kind), container: b.intern(s.container),
			line: s.line, end: s.end, col: s.col,
		})
	}
	b.docs = append(b.docs, info)
	for i, sh := range b.shards {
		if len(d.shardTris[i]) > 0 || len(d.shardTerms[i]) > 0 {
			sh.in <- shardDoc{doc: doc, tris: d.shardTris[i], terms: d.shardTerms[i]}
		}
	}
}

// finish returns the segment. The builder must not be used afterwards.
func (b *segmentBuilder) finish() *segment {
	for _, sh := range b.shards {
		close(sh.in)
	}
	b.wg.Wait()
	s := &segment{strs: b.strs, docs: b.docs, byContent: b.byC, chunks: b.chunks, termTotal: b.termTotal}

	type triKey struct {
		t trigram
		w *postingWriter
	}
	var tris []triKey
	size := 0
	for _, sh := range b.shards {
		for t, w := range sh.tri {
			tris = append(tris, triKey{t, w})
			size += len(w.buf) + 5
		}
	}
	slices.SortFunc(tris, func(a, b triKey) int { return cmp.Compare(a.t, b.t) })
	s.triKeys = make([]trigram, len(tris))
	s.triOff = make([]uint32, 0, len(tris)+1)
	s.triData = make([]byte, 0, size)
	for i, k := range tris {
		s.triKeys[i] = k.t
		s.triOff = append(s.triOff, uint32(len(s.triData)))
		s.triData = binary.AppendUvarint(s.triData, uint64(k.w.n))
		s.triData = append(s.triData, k.w.buf...)
	}
	s.triOff = append(s.triOff, uint32(len(s.triData)))

	type termKey struct {
		t string
		w *termWriter
	}
	var terms []termKey
	size = 0
	for _, sh := range b.shards {
		for t, w := range sh.terms {
			terms = append(terms, termKey{t, w})
			size += len(w.buf) + 5
		}
	}
	slices.SortFunc(terms, func(a, b termKey) int { return strings.Compare(a.t, b.t) })
	s.termKeys = make([]string, len(terms))
	s.termOff = make([]uint32, 0, len(terms)+1)
	s.termData = make([]byte, 0, size)
	for i, k := range terms {
		s.termKeys[i] = k.t
		s.termOff = append(s.termOff, uint32(len(s.termData)))
		s.termData = binary.AppendUvarint(s.termData, uint64(k.w.n))
		s.termData = append(s.termData, k.w.buf...)
	}
	s.termOff = append(s.termOff, uint32(len(s.termData)))
	return s
}

// segmentMagic starts every encoded segment; the digit is the format
// version.
const segmentMagic = "PXSEG3\n"

// encode serialises the segment: strings, documents (chunks, symbols),
// trigram directory and postings, term directory and postings, all as
// uvarints and length-prefixed bytes.
func (s *segment) encode() []byte {
	var w encoder
	w.buf = append(w.buf, segmentMagic...)
	w.uint(uint64(len(s.strs)))
	for _, str := range s.strs {
		w.str(str)
	}
	w.uint(uint64(len(s.docs)))
	for _, d := range s.docs {
		w.uint(uint64(d.content))
		w.uint(uint64(d.lang))
		w.uint(uint64(len(d.chunks)))
		prev := int32(0)
		for _, c := range d.chunks {
			w.uint(uint64(c.start - prev))
			w.uint(uint64(c.end - c.start))
			w.uint(uint64(c.kind))
			w.uint(uint64(c.name))
			w.uint(uint64(c.part))
			w.uint(uint64(c.terms))
			w.buf = append(w.buf, c.hash[:]...)
			prev = c.start
		}
		w.uint(uint64(len(d.symbols)))
		for _, sy := range d.symbols {
			w.uint(uint64(sy.name))
			w.uint(uint64(sy.kind))
			w.uint(uint64(sy.container))
			w.uint(uint64(sy.line))
			w.uint(uint64(sy.end - sy.line))
			w.uint(uint64(sy.col))
		}
	}
	w.uint(uint64(len(s.triKeys)))
	prev := trigram(0)
	for i, t := range s.triKeys {
		w.uint(uint64(t - prev))
		w.uint(uint64(s.triOff[i+1] - s.triOff[i]))
		prev = t
	}
	w.bytes(s.triData)
	w.uint(uint64(len(s.termKeys)))
	last := ""
	for i, t := range s.termKeys {
		// Front coding: length shared with the previous term, then the rest.
		p := commonPrefix(last, t)
		w.uint(uint64(p))
		w.str(t[p:])
		w.uint(uint64(s.termOff[i+1] - s.termOff[i]))
		last = t
	}
	w.bytes(s.termData)
	w.uint(uint64(s.chunks))
	w.uint(uint64(s.termTotal))
	return w.buf
}

func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// errCorrupt reports a segment that does not decode.
var errCorrupt = errors.New("index segment is corrupt")

// decodeSegment parses an encoded segment. The segment keeps references
// into data.
func decodeSegment(data []byte) (*segment, error) {
	if !strings.HasPrefix(string(data[:min(len(data), len(segmentMagic))]), segmentMagic) {
		return nil, fmt.Errorf("%w: bad header", errCorrupt)
	}
	r := decoder{buf: data[len(segmentMagic):]}
	s := &segment{}
	s.strs = make([]string, r.count(1))
	for i := range s.strs {
		s.strs[i] = r.str()
	}
	ndocs := r.count(3)
	s.docs = make([]docInfo, ndocs)
	s.byContent = make(map[int64]uint32, ndocs)
	for i := range s.docs {
		d := &s.docs[i]
		d.content = int64(r.uint())
		d.lang = r.strID(len(s.strs))
		d.chunks = make([]chunkInfo, r.count(38))
		prev := int32(0)
		for j := range d.chunks {
			c := &d.chunks[j]
			c.start = prev + int32(r.uint())
			c.end = c.start + int32(r.uint())
			c.kind = r.strID(len(s.strs))
			c.name = r.strID(len(s.strs))
			c.part = uint16(r.uint())
			c.terms = uint32(r.uint())
			copy(c.hash[:], r.raw(32))
			prev = c.start
		}
		d.symbols = make([]symbolInfo, r.count(6))
		for j := range d.symbols {
			sy := &d.symbols[j]
			sy.name = r.strID(len(s.strs))
			sy.kind = r.strID(len(s.strs))
			sy.container = r.strID(len(s.strs))
			sy.line = int32(r.uint())
			sy.end = sy.line + int32(r.uint())
			sy.col = int32(r.uint())
		}
		s.byContent[d.content] = uint32(i)
	}
	ntri := r.count(2)
	s.triKeys = make([]trigram, ntri)
	s.triOff = make([]uint32, ntri+1)
	t := trigram(0)
	for i := 0; i < ntri; i++ {
		t += trigram(r.uint())
		s.triKeys[i] = t
		s.triOff[i+1] = s.triOff[i] + uint32(r.uint())
	}
	s.triData = r.bytes()
	nterm := r.count(3)
	s.termKeys = make([]string, nterm)
	s.termOff = make([]uint32, nterm+1)
	last := ""
	for i := 0; i < nterm; i++ {
		p := int(r.uint())
		if p > len(last) {
			r.err = errCorrupt
			break
		}
		last = last[:p] + r.str()
		s.termKeys[i] = last
		s.termOff[i+1] = s.termOff[i] + uint32(r.uint())
	}
	s.termData = r.bytes()
	s.chunks = int(r.uint())
	s.termTotal = int64(r.uint())
	if r.err != nil {
		return nil, r.err
	}
	if int(s.triOff[ntri]) != len(s.triData) || int(s.termOff[nterm]) != len(s.termData) {
		return nil, fmt.Errorf("%w: posting sizes disagree", errCorrupt)
	}
	return s, nil
}

// encoder appends uvarints and length-prefixed bytes.
type encoder struct{ buf []byte }

func (w *encoder) uint(v uint64)  { w.buf = binary.AppendUvarint(w.buf, v) }
func (w *encoder) str(s string)   { w.uint(uint64(len(s))); w.buf = append(w.buf, s...) }
func (w *encoder) bytes(b []byte) { w.uint(uint64(len(b))); w.buf = append(w.buf, b...) }
func (w *encoder) int(v int64)    { w.buf = binary.AppendVarint(w.buf, v) }

// decoder reads what encoder wrote; the first error sticks and later reads
// return zero values.
type decoder struct {
	buf []byte
	err error
}

func (r *decoder) uint() uint64 {
	if r.err != nil {
		return 0
	}
	v, k := binary.Uvarint(r.buf)
	if k <= 0 {
		r.err = fmt.Errorf("%w: truncated", errCorrupt)
		return 0
	}
	r.buf = r.buf[k:]
	return v
}

func (r *decoder) int() int64 {
	if r.err != nil {
		return 0
	}
	v, k := binary.Varint(r.buf)
	if k <= 0 {
		r.err = fmt.Errorf("%w: truncated", errCorrupt)
		return 0
	}
	r.buf = r.buf[k:]
	return v
}

// count reads a length and checks that at least minBytes per element
// remain, so corrupt input cannot make us allocate wildly.
func (r *decoder) count(minBytes int) int {
	n := r.uint()
	if r.err == nil && n > uint64(len(r.buf)/max(minBytes, 1)+1) {
		r.err = fmt.Errorf("%w: count %d exceeds the data", errCorrupt, n)
		return 0
	}
	return int(n)
}

func (r *decoder) bytes() []byte {
	n := r.uint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.buf)) {
		r.err = fmt.Errorf("%w: truncated", errCorrupt)
		return nil
	}
	b := r.buf[:n]
	r.buf = r.buf[n:]
	return b
}

func (r *decoder) str() string { return string(r.bytes()) }

// raw reads n bytes.
func (r *decoder) raw(n int) []byte {
	if r.err != nil {
		return make([]byte, n)
	}
	if len(r.buf) < n {
		r.err = fmt.Errorf("%w: truncated", errCorrupt)
		return make([]byte, n)
	}
	b := r.buf[:n]
	r.buf = r.buf[n:]
	return b
}

// strID reads a string id and checks it against the table size.
func (r *decoder) strID(n int) uint32 {
	v := r.uint()
	if v >= uint64(n) {
		if r.err == nil {
			r.err = fmt.Errorf("%w: string id out of range", errCorrupt)
		}
		return 0
	}
	return uint32(v)
}

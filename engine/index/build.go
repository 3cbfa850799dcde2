package index

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/plexus-agent/plexus/engine/index/syntax"
)

// Progress reports a build: Phase is "scanning" (walking the workspace;
// Total not known yet), "indexing" (Done of Total files processed, Bytes
// read so far), "writing" (storing the segment) or "done".
type Progress struct {
	Phase string `json:"phase"`
	Done  int    `json:"done"`
	Total int    `json:"total"`
	Bytes int64  `json:"bytes"`
}

// BuildOptions control Index.Build.
type BuildOptions struct {
	// Rebuild re-reads every file and rebuilds the search segment even
	// when only a few files changed. Analyses of unchanged contents are
	// still reused.
	Rebuild bool
	// Progress, when set, is called from the building goroutine as work
	// advances (at most every 50 ms, plus each phase change).
	Progress func(Progress)
}

// BuildStats summarise a build.
type BuildStats struct {
	// Files is the number of files in the catalog afterwards.
	Files int `json:"files"`
	// Read counts files read and hashed; Changed those whose content
	// changed or that are new; Removed those gone from the workspace.
	Read    int `json:"read"`
	Changed int `json:"changed"`
	Removed int `json:"removed"`
	// Analyzed counts contents parsed now; Reused contents whose stored
	// analysis was used.
	Analyzed int `json:"analyzed"`
	Reused   int `json:"reused"`
	// Skipped counts files left out: binary or over the size cap. Build
	// counts every such file of the workspace, whether read now or
	// remembered from an earlier build, so a refresh reports what the
	// build did; ApplyChanges counts those of its changes.
	Skipped int   `json:"skipped"`
	Bytes   int64 `json:"bytes"`
	// Full is true when the search segment was rebuilt.
	Full     bool          `json:"full"`
	Duration time.Duration `json:"duration_ns"`
}

// docData is everything indexing learns of one content for a segment.
type docData struct {
	content int64
	lang    string
	chunks  []docChunk
	symbols []docSymbol
	tris    []trigram
	terms   []chunkTerm
	// shardTris and shardTerms are tris and terms split by builder
	// shard (splitShards), done by the workers.
	shardTris  [][]trigram
	shardTerms [][]chunkTerm
}

// chunkTerm is one term's frequency in one chunk.
type chunkTerm struct {
	term  string
	chunk uint32
	tf    uint32
}

// fileWork is one file to process.
type fileWork struct {
	path        string
	size, mtime int64
}

// fileResult is a processed file.
type fileResult struct {
	fileWork
	hash    [32]byte
	skipped string // why the file was left out ("binary"), or ""
	err     error
	known   *contentRow // the stored content, when the hash was known
	lang    string
	blob    []byte   // the new analysis to store, when analysed now
	doc     *docData // nil when the segment needs nothing from this file
	bytes   int64
}

// contentRow is a contents row.
type contentRow struct {
	id       int64
	analyzer int
	lang     string
}

// maxBinaryProbe is how much of a file is checked for NUL bytes.
const maxBinaryProbe = 8000

// processFile reads, hashes and (as needed) analyses one file. needDoc
// says whether the segment needs the document when the content is already
// stored.
func (ix *Index) processFile(ctx context.Context, w fileWork, known func([32]byte) (contentRow, bool), needDoc func(id int64) bool, ts *trigramSet) fileResult {
	r := fileResult{fileWork: w}
	data, err := ix.fsroot.FS().ReadFile(w.path)
	if err != nil {
		r.err = err
		return r
	}
	r.bytes = int64(len(data))
	r.size = int64(len(data))
	if int64(len(data)) > ix.svc.opts.MaxFileSize {
		r.skipped = "too large"
		return r
	}
	if bytes.IndexByte(data[:min(len(data), maxBinaryProbe)], 0) >= 0 {
		r.skipped = "binary"
		return r
	}
	r.hash = sha256.Sum256(data)
	var an storedAnalysis
	if row, ok := known(r.hash); ok && row.analyzer == analyzerVersion {
		r.known = &row
		r.lang = row.lang
		if !needDoc(row.id) {
			return r
		}
		blob, err := ix.svc.analysisBlob(ctx, row.id)
		if err == nil {
			an, err = decodeAnalysis(blob, false)
		}
		if err != nil {
			r.err = fmt.Errorf("stored analysis of %s: %w", w.path, err)
			return r
		}
	} else {
		r.lang = string(syntax.Detect(w.path, data[:min(len(data), 4096)]))
		a, err := syntax.Analyze(syntax.Lang(r.lang), data, ix.svc.opts.Syntax)
		if err != nil {
			r.err = fmt.Errorf("analyse %s: %w", w.path, err)
			return r
		}
		if a.Fallback != nil {
			ix.svc.log.Info("index: indexed as text", "path", w.path, "lang", r.lang, "reason", a.Fallback)
		}
		an = fromSyntax(a)
		r.blob = an.encode()
	}
	r.doc = makeDoc(data, r.lang, an, ts)
	r.doc.splitShards(numShards)
	return r
}

// makeDoc tokenises a content into a document: trigrams of the whole text
// and BM25 terms per chunk.
func makeDoc(data []byte, lang string, an storedAnalysis, ts *trigramSet) *docData {
	d := &docData{lang: lang, symbols: an.symbols, chunks: slices.Clone(an.chunks)}
	ts.add(data)
	d.tris = ts.take()
	lines := lineStarts(data)
	counts := map[string]uint32{}
	terms := termCache{}
	for i := range d.chunks {
		c := &d.chunks[i]
		text := lineRange(data, lines, int(c.start), int(c.end))
		c.hash = sha256.Sum256(text)
		clear(counts)
		n := uint32(0)
		terms.forEachTerm(text, func(t string) {
			counts[t]++
			n++
		})
		c.terms = n
		for t, tf := range counts {
			d.terms = append(d.terms, chunkTerm{term: t, chunk: uint32(i), tf: tf})
		}
	}
	return d
}

// lineStarts returns the byte offset of each line's start.
func lineStarts(data []byte) []int {
	starts := make([]int, 1, bytes.Count(data, []byte{'\n'})+2)
	for i, b := range data {
		if b == '\n' {
			starts = append(starts, i+1)
		}
	}
	return starts
}

// lineRange returns lines start..end (1-based, inclusive) of data.
func lineRange(data []byte, starts []int, start, end int) []byte {
	if start < 1 {
		start = 1
	}
	if start > len(starts) {
		return nil
	}
	to := len(data)
	if end < len(starts) {
		to = starts[end]
	}
	return data[starts[start-1]:to]
}

// Build brings the index up to date with the workspace: it walks the
// workspace (gitignore-aware, files over MaxFileSize left out), re-reads
// files whose size or modification time changed, analyses contents it has
// not seen (an unchanged content is never analysed twice, whatever its
// path or branch), and updates the search structures. When many contents
// changed, or with Rebuild, it rebuilds the base segment (reading every
// file, which is cheap next to parsing); otherwise changes go to the delta.
// Work is committed in batches: an interrupted build resumes without
// analysing finished files again. One build or update runs at a time per
// workspace; searches run meanwhile on the previous state.
func (ix *Index) Build(ctx context.Context, opts BuildOptions) (BuildStats, error) {
	ix.buildMu.Lock()
	defer ix.buildMu.Unlock()
	start := time.Now()
	report := ix.reporter(opts.Progress)
	report(Progress{Phase: "scanning"}, true)

	var walked []fileWork
	skipped := 0
	err := ix.fsroot.Walk(ctx, ".", walkOptions(), func(rel string, d fs.DirEntry) error {
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil // vanished meanwhile
		}
		if info.Size() > ix.svc.opts.MaxFileSize {
			skipped++
			return nil
		}
		walked = append(walked, fileWork{path: rel, size: info.Size(), mtime: info.ModTime().UnixNano()})
		if len(walked)%1000 == 0 {
			report(Progress{Phase: "scanning", Done: len(walked)}, false)
		}
		return nil
	})
	if err != nil {
		return BuildStats{}, fmt.Errorf("scan %s: %w", ix.root, err)
	}

	ix.mu.RLock()
	files, base, deltaDocs := ix.files, ix.base, ix.deltaDocs
	ix.mu.RUnlock()

	present := make(map[string]bool, len(walked))
	var changed []fileWork
	var uncovered []fileWork // unchanged files whose content no segment holds
	for _, w := range walked {
		present[w.path] = true
		old, ok := files[w.path]
		switch {
		case !ok || old.size != w.size || old.mtime != w.mtime:
			changed = append(changed, w)
		case old.content != 0 && (base == nil || !base.has(old.content)) && deltaDocs[old.content] == nil:
			uncovered = append(uncovered, w)
		}
	}
	var removed []string
	for p := range files {
		if !present[p] {
			removed = append(removed, p)
		}
	}
	full := opts.Rebuild || base == nil || len(changed)+len(uncovered) > max(1000, len(walked)/5)
	work := append(changed, uncovered...)
	if full {
		work = walked
	}
	stats, err := ix.apply(ctx, work, removed, full, report)
	// Left out: the files over the size cap (never in the catalog) and
	// the catalog's binary files, read now or remembered.
	ix.mu.RLock()
	stats.Skipped = skipped + len(ix.files) - countIndexed(ix.files)
	ix.mu.RUnlock()
	stats.Duration = time.Since(start)
	if err != nil {
		return stats, err
	}
	report(Progress{Phase: "done", Done: stats.Read, Total: stats.Read, Bytes: stats.Bytes}, true)
	ix.svc.log.Info("index updated", "workspace", ix.root, "files", stats.Files, "read", stats.Read,
		"changed", stats.Changed, "analyzed", stats.Analyzed, "full", stats.Full, "took", stats.Duration)
	return stats, nil
}

// apply processes work (reading each file), removes removed paths, and
// updates the catalog and the segments: with full, a new base segment of
// every live content; otherwise new contents join the delta.
func (ix *Index) apply(ctx context.Context, work []fileWork, removed []string, full bool, report func(Progress, bool)) (BuildStats, error) {
	stats := BuildStats{Full: full, Removed: len(removed)}
	svc := ix.svc
	// A full build looks every content up, so it loads them all at once;
	// an update looks up the few it reads.
	known := svc.lookupContent
	if full {
		all, err := svc.knownContents(ctx)
		if err != nil {
			return stats, err
		}
		known = func(h [32]byte) (contentRow, bool) {
			r, ok := all[h]
			return r, ok
		}
	}
	ix.mu.RLock()
	oldFiles, base, oldDelta := ix.files, ix.base, ix.deltaDocs
	ix.mu.RUnlock()

	var builder *segmentBuilder
	needDoc := func(id int64) bool { return true }
	if full {
		builder = newSegmentBuilder()
	} else {
		needDoc = func(id int64) bool { return (base == nil || !base.has(id)) && oldDelta[id] == nil }
	}

	// Workers process files; this goroutine collects in order of
	// completion, assigning document numbers and writing batches.
	jobs := make(chan fileWork)
	results := make(chan fileResult, 64)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < svc.opts.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts := newTrigramSet()
			for w := range jobs {
				results <- ix.processFile(wctx, w, known, needDoc, ts)
			}
		}()
	}
	go func() {
		defer close(jobs)
		for _, w := range work {
			select {
			case jobs <- w:
			case <-wctx.Done():
				return
			}
		}
	}()
	go func() {
		wg.Wait()
		close(results)
	}()

	batch := svc.newBatch(ix.id)
	newFiles := make(map[string]fileEntry, len(oldFiles))
	for p, e := range oldFiles {
		newFiles[p] = e
	}
	for _, p := range removed {
		delete(newFiles, p)
		batch.deleteFile(p)
	}
	newDelta := map[int64]*docData{}
	if !full {
		for id, d := range oldDelta {
			newDelta[id] = d
		}
	}
	// known is read by the workers; contents stored during this build
	// are recorded here instead.
	added := map[[32]byte]int64{}
	total := len(work)
	report(Progress{Phase: "indexing", Total: total}, true)
	var firstErr error
	for r := range results {
		stats.Read++
		stats.Bytes += r.bytes
		report(Progress{Phase: "indexing", Done: stats.Read, Total: total, Bytes: stats.Bytes}, false)
		switch {
		case r.err != nil:
			if errors.Is(r.err, fs.ErrNotExist) {
				delete(newFiles, r.path) // deleted while we worked
				batch.deleteFile(r.path)
				continue
			}
			if firstErr == nil && ctx.Err() == nil {
				svc.log.Warn("index: file left out", "path", r.path, "error", r.err)
			}
			continue
		case r.skipped != "":
			// Remembered with content 0, so an unchanged binary file is
			// not read again.
			stats.Skipped++
			entry := fileEntry{content: 0, size: r.size, mtime: r.mtime}
			newFiles[r.path] = entry
			if err := batch.putFile(ctx, r.path, entry); err != nil && firstErr == nil {
				firstErr = err
				cancel()
			}
			continue
		}
		var id int64
		switch {
		case r.known != nil:
			id = r.known.id
			if r.doc != nil {
				stats.Reused++
			}
		case added[r.hash] != 0:
			// Identical new content at two paths, both analysed by
			// workers before either was stored.
			id = added[r.hash]
		default:
			var err error
			id, err = batch.putContent(ctx, r.hash, r.size, r.lang, r.blob)
			if err != nil {
				firstErr = err
				cancel()
				continue
			}
			added[r.hash] = id
			stats.Analyzed++
		}
		old, had := oldFiles[r.path]
		if !had || old.content != id {
			stats.Changed++
		}
		entry := fileEntry{content: id, size: r.size, mtime: r.mtime}
		newFiles[r.path] = entry
		if err := batch.putFile(ctx, r.path, entry); err != nil && firstErr == nil {
			firstErr = err
			cancel()
		}
		if r.doc != nil {
			r.doc.content = id
			if full {
				if !builder.has(id) {
					builder.add(r.doc)
				}
			} else {
				newDelta[id] = r.doc
			}
		}
	}
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	if firstErr != nil {
		// Keep what was finished: the next build resumes from it.
		if err := batch.commit(); err != nil {
			svc.log.Warn("index: saving partial progress failed", "error", err)
		}
		return stats, firstErr
	}
	stats.Files = countIndexed(newFiles)
	newPaths := pathsByContent(newFiles)

	var seg, delta *segment
	gen := ix.gen
	if full {
		report(Progress{Phase: "writing", Done: total, Total: total, Bytes: stats.Bytes}, true)
		seg = builder.finish()
		var err error
		if gen, err = batch.putSegment(ctx, gen, seg.encode()); err != nil {
			return stats, err
		}
	} else {
		// Contents no path holds any more (earlier versions of edited
		// files) leave the delta, so it does not grow with every edit.
		for id := range newDelta {
			if len(newPaths[id]) == 0 {
				delete(newDelta, id)
			}
		}
		seg = base
		delta = buildDelta(newDelta)
	}
	stamp := ix.stamp
	if full || len(work) > 0 || len(removed) > 0 {
		var err error
		if stamp, err = batch.stamp(ctx); err != nil {
			return stats, err
		}
	}
	if err := batch.commit(); err != nil {
		return stats, err
	}
	if full {
		newDelta = map[int64]*docData{}
	}
	ix.mu.Lock()
	ix.files, ix.paths = newFiles, newPaths
	ix.base, ix.gen, ix.delta, ix.deltaDocs = seg, gen, delta, newDelta
	ix.updated = time.Now()
	ix.stamp = stamp
	ix.mu.Unlock()
	ix.warmSymbols()
	ix.kickEmbedding()
	return stats, nil
}

// buildDelta builds the delta segment of the contents that changed since
// the base segment, in content-id order.
func buildDelta(docs map[int64]*docData) *segment {
	if len(docs) == 0 {
		return nil
	}
	ids := make([]int64, 0, len(docs))
	for id := range docs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	b := newSegmentBuilder()
	for _, id := range ids {
		b.add(docs[id])
	}
	return b.finish()
}

// pathsByContent inverts the catalog: content id → its paths, sorted.
// Files left out (content 0) have none.
func pathsByContent(files map[string]fileEntry) map[int64][]string {
	out := make(map[int64][]string, len(files))
	for p, e := range files {
		if e.content != 0 {
			out[e.content] = append(out[e.content], p)
		}
	}
	for _, ps := range out {
		sort.Strings(ps)
	}
	return out
}

// countIndexed counts catalog entries that are indexed (not left out).
func countIndexed(files map[string]fileEntry) int {
	n := 0
	for _, e := range files {
		if e.content != 0 {
			n++
		}
	}
	return n
}

// has reports whether the segment holds the content.
func (s *segment) has(content int64) bool {
	if s == nil {
		return false
	}
	_, ok := s.byContent[content]
	return ok
}

// reporter throttles progress callbacks and records the latest progress
// for Status.
func (ix *Index) reporter(fn func(Progress)) func(p Progress, force bool) {
	var last time.Time
	return func(p Progress, force bool) {
		ix.progress.Store(&p)
		if fn == nil {
			return
		}
		if force || time.Since(last) >= 50*time.Millisecond {
			last = time.Now()
			fn(p)
		}
	}
}

func defaultWorkers() int { return max(1, runtime.GOMAXPROCS(0)) }

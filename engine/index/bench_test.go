package index_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/index"
	"github.com/plexus-agent/plexus/engine/index/internal/goroot"
)

// Benchmarks on the Go source tree, $(go env GOROOT)/src; each skips when
// it is missing. Timings are reported, never asserted. Every benchmark
// builds what it needs (10 to 20 s on two cores) before its loop.
//
//	go test -run '^$' -bench . -benchtime 20x -v ./engine/index/        # about 4 minutes
//	go test -run '^$' -bench Queries -benchtime 100x -v ./engine/index/ # each query once
//
// BenchmarkQueries runs one query per iteration, round-robin over a set
// of 100 per kind in random order, so -benchtime 100x asks each query
// once and 20x a sample of 20; p50 and p99 come from those per-query
// durations. -v shows the logged tables (comparison with rg, slowest
// queries); without it, go test prints only the metrics.

// Query-set seeds, fixed like the evaluation's.
const (
	benchSymbolSeed  = 1
	benchLiteralSeed = 2
	benchRegexSeed   = 3
	benchChunkSeed   = 4
	benchQueries     = 100
)

// envBuildChild makes TestGorootBuildChild build the index of the Go
// source tree into the database it names.
const envBuildChild = "PLEXUS_INDEX_BUILD_CHILD"

func gorootSrc(tb testing.TB) string {
	tb.Helper()
	src, err := goroot.Src()
	if err != nil {
		tb.Skipf("no Go source tree: %v", err)
	}
	return src
}

// buildIndex opens a service on a new database under dir and builds the
// index of root.
func buildIndex(tb testing.TB, dir, root string) (*index.Service, *index.Index, index.BuildStats) {
	tb.Helper()
	ctx := context.Background()
	svc, err := index.Open(ctx, index.Options{Path: filepath.Join(dir, "index.db")})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { svc.Close() })
	ix, err := svc.Workspace(ctx, root)
	if err != nil {
		tb.Fatal(err)
	}
	st, err := ix.Build(ctx, index.BuildOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	return svc, ix, st
}

// dbSize is the size of a database file and its write-ahead log.
func dbSize(path string) int64 {
	var n int64
	for _, suffix := range []string{"", "-wal"} {
		if fi, err := os.Stat(path + suffix); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// BenchmarkBuildGoroot builds the index (catalog, symbols, text; no
// vectors) of the Go source tree into a fresh database each iteration.
// Besides MB/s of files read it reports the database's size after closing
// (disk-MB) and its ratio to the bytes read (disk-ratio), and the peak RSS
// of one build in a process of its own (peak-rss-MB; see
// TestGorootBuildChild).
func BenchmarkBuildGoroot(b *testing.B) {
	src := gorootSrc(b)
	ctx := context.Background()
	dir := b.TempDir()
	rss, childStats, err := buildInChild(filepath.Join(dir, "child.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("child build: %d files, %.0f MB in %v, peak RSS %.0f MB", childStats.Files, float64(childStats.Bytes)/1e6, childStats.Duration.Round(time.Millisecond), float64(rss)/1e6)
	var disk, read int64
	i := 0
	for b.Loop() {
		path := filepath.Join(dir, fmt.Sprintf("build%d.db", i))
		i++
		svc, err := index.Open(ctx, index.Options{Path: path})
		if err != nil {
			b.Fatal(err)
		}
		ix, err := svc.Workspace(ctx, src)
		if err != nil {
			b.Fatal(err)
		}
		st, err := ix.Build(ctx, index.BuildOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := svc.Close(); err != nil {
			b.Fatal(err)
		}
		disk, read = dbSize(path), st.Bytes
		b.SetBytes(st.Bytes)
		for _, suffix := range []string{"", "-wal", "-shm"} {
			os.Remove(path + suffix)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(disk)/1e6, "disk-MB")
	b.ReportMetric(float64(disk)/float64(read), "disk-ratio")
	if rss > 0 {
		b.ReportMetric(float64(rss)/1e6, "peak-rss-MB")
	}
}

// buildInChild runs TestGorootBuildChild in a new process of this test
// binary and returns its peak RSS (0 where the platform does not say) and
// its build's stats.
func buildInChild(db string) (int64, index.BuildStats, error) {
	var st index.BuildStats
	cmd := exec.Command(os.Args[0], "-test.run=^TestGorootBuildChild$", "-test.count=1", "-test.v")
	// The child runs as the plexus command does: with its default soft
	// memory limit unless GOMEMLIMIT says otherwise.
	cmd.Env = append(os.Environ(), envBuildChild+"="+db)
	if os.Getenv("GOMEMLIMIT") == "" {
		cmd.Env = append(cmd.Env, fmt.Sprintf("GOMEMLIMIT=%d", index.SuggestedMemoryLimit))
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, st, fmt.Errorf("build child: %w\n%s", err, out)
	}
	_, line, ok := bytes.Cut(out, []byte("BUILDSTATS "))
	if !ok {
		return 0, st, fmt.Errorf("build child printed no stats:\n%s", out)
	}
	line, _, _ = bytes.Cut(line, []byte("\n"))
	if err := json.Unmarshal(line, &st); err != nil {
		return 0, st, fmt.Errorf("build child stats: %w", err)
	}
	rss, _ := goroot.MaxRSS(cmd.ProcessState)
	return rss, st, nil
}

// TestGorootBuildChild is BenchmarkBuildGoroot's helper: with
// PLEXUS_INDEX_BUILD_CHILD set to a database path it builds the index of
// the Go source tree there and prints the stats, so that the parent can
// read the peak RSS of a process that did nothing else. Otherwise it
// skips.
func TestGorootBuildChild(t *testing.T) {
	db := os.Getenv(envBuildChild)
	if db == "" {
		t.Skip("helper process of BenchmarkBuildGoroot")
	}
	src := gorootSrc(t)
	ctx := context.Background()
	svc, err := index.Open(ctx, index.Options{Path: db})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	ix, err := svc.Workspace(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	st, err := ix.Build(ctx, index.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("BUILDSTATS %s\n", data)
}

// BenchmarkReindexOneFile measures how soon an edit is searchable: each
// iteration rewrites one file of a copy of the Go source tree with a
// function renamed (a new name each time), applies the change
// (ApplyChanges) and searches the new name once: the search must return
// it in that file. ns/op is the time from the end of the write to the
// search's answer (untimed: the write).
// "text" searches with SearchText, "symbol" with SearchSymbols (whose
// delta segment's table is rebuilt after every change). Each
// sub-benchmark starts from a fresh base segment (a rebuild that reuses
// the stored analyses) and its symbol table, and reports first-ms and
// last-ms, the first and last iterations' times, and delta-contents at
// the end: every version of the file stays in the delta segment, so the
// cost can grow with the number of edits.
func BenchmarkReindexOneFile(b *testing.B) {
	src := gorootSrc(b)
	ctx := context.Background()
	dir := filepath.Join(b.TempDir(), "src")
	if err := goroot.CopyTree(src, dir, nil); err != nil {
		b.Fatal(err)
	}
	_, ix, _ := buildIndex(b, b.TempDir(), dir)
	serial := 0
	for _, tc := range []struct{ kind, file string }{
		{"text", "bytes/buffer.go"},
		{"text", "net/http/server.go"},
		{"symbol", "bytes/buffer.go"},
	} {
		b.Run(tc.kind+"/"+filepath.Base(tc.file), func(b *testing.B) {
			if _, err := ix.Build(ctx, index.BuildOptions{Rebuild: true}); err != nil {
				b.Fatal(err)
			}
			path := filepath.Join(dir, filepath.FromSlash(tc.file))
			orig, err := os.ReadFile(path)
			if err != nil {
				b.Fatal(err)
			}
			defer func() {
				os.WriteFile(path, orig, 0o644)
				ix.ApplyChanges(ctx, []index.FileChange{{Type: "modified", Path: tc.file}})
			}()
			name, err := renameTarget(orig)
			if err != nil {
				b.Fatal(err)
			}
			// Build the base segment's symbol table now (the first symbol
			// search after a rebuild does), so that the loop times edits.
			if _, err := ix.SearchSymbols(ctx, engine.SymbolQuery{Query: name}); err != nil {
				b.Fatal(err)
			}
			re := regexp.MustCompile(`\b` + name + `\b`)
			var total, apply []time.Duration
			for b.Loop() {
				b.StopTimer()
				serial++
				newName := fmt.Sprintf("%sPlexus%d", name, serial)
				if err := os.WriteFile(path, re.ReplaceAll(orig, []byte(newName)), 0o644); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				if _, err := ix.ApplyChanges(ctx, []index.FileChange{{Type: "modified", Path: tc.file}}); err != nil {
					b.Fatal(err)
				}
				apply = append(apply, time.Since(start))
				var found bool
				if tc.kind == "text" {
					res, err := ix.SearchText(ctx, engine.TextQuery{Pattern: newName}, nil)
					if err != nil {
						b.Fatal(err)
					}
					found = len(res.Matches) > 0 && res.Matches[0].Path == tc.file
				} else {
					hits, err := ix.SearchSymbols(ctx, engine.SymbolQuery{Query: newName, Limit: 5})
					if err != nil {
						b.Fatal(err)
					}
					found = len(hits) > 0 && hits[0].Name == newName && hits[0].Path == tc.file
				}
				total = append(total, time.Since(start))
				if !found {
					b.Fatalf("%s not found by %s search after the change", newName, tc.kind)
				}
			}
			reportPercentiles(b, total)
			b.ReportMetric(ms(percentile(apply, 50)), "apply-p50-ms")
			b.ReportMetric(ms(total[0]), "first-ms")
			b.ReportMetric(ms(total[len(total)-1]), "last-ms")
			b.ReportMetric(float64(ix.Status().DeltaContents), "delta-contents")
		})
	}
}

// renameTarget picks the function to rename in a file: the first exported
// function or method whose name has six bytes or more.
func renameTarget(src []byte) (string, error) {
	decls, err := goroot.ParseDecls(src, nil)
	if err != nil {
		return "", err
	}
	for _, d := range decls {
		if (d.Kind == goroot.Func || d.Kind == goroot.Method) && d.Exported() && len(d.Name) >= 6 {
			return d.Name, nil
		}
	}
	return "", errors.New("no function to rename")
}

// engineRun runs one query and returns how many results it gave and
// whether a limit cut them.
type engineRun func(q string) (n int, truncated bool, err error)

// queryEngine is one way of answering a kind of query.
type queryEngine struct {
	name string
	run  engineRun
}

// queryStats are a sub-benchmark's figures, for the summary table.
type queryStats struct {
	p50, p99 time.Duration
	counts   map[string]int
	// truncated lists the queries the limit cut.
	truncated map[string]bool
	// slowest are the slowest queries, slowest first.
	slowest []timedQuery
}

type timedQuery struct {
	q string
	d time.Duration
}

// BenchmarkQueries measures searches of the Go source tree, side by side
// with ripgrep on the same queries in the same run. Kinds:
//
//   - symbol: names of functions, methods and types (half exported);
//     plexus runs SearchSymbols (exact, prefix and fuzzy tiers, default
//     limit 20); rg's peer is a regular expression for the definition,
//     `^func (\([^)]*\) )?NAME[\[(]|^type NAME[ \[]`: what one would grep
//     for (without \b, which makes rg several times slower).
//   - literal: a mix of names, receivers, qualified calls and common
//     identifiers (goroot.Corpus.Literals); rg -F.
//   - regex: expressions with a literal part (goroot.Corpus.Regexps).
//   - chunks: SearchChunks (BM25, default limit 10) with the first
//     sentences of doc comments (goroot.Corpus.DocFuncs); rg has no peer.
//
// rg runs with --max-filesize 1M, the index's default cap, so that both
// search the same files. For text, "plexus-all" asks for every match
// (Limit 10000, the index's maximum), as rg prints them all;
// "plexus-limit100" uses the default limit of 100 matches. Each sub-benchmark reports p50-ms and p99-ms over
// its queries; the parent logs a comparison table, with the number of
// queries where plexus-all and rg count different matching lines. rg runs
// first in each kind, so that the plexus sub-benchmarks can report
// speedup-vs-rg (rg's p50 over theirs) and, for plexus-all,
// count-diff-vs-rg (queries whose number of matching lines differs).
func BenchmarkQueries(b *testing.B) {
	src := gorootSrc(b)
	rg, err := exec.LookPath("rg")
	if err != nil {
		b.Logf("rg not found: ripgrep columns left out (%v)", err)
	}
	ctx := context.Background()
	corpus, err := goroot.Load(src, maxFileSize)
	if err != nil {
		b.Fatal(err)
	}
	sets := map[string][]string{
		"symbol":  corpus.SymbolNames(benchQueries, benchSymbolSeed),
		"literal": corpus.Literals(benchQueries, benchLiteralSeed),
		"regex":   corpus.Regexps(benchQueries, benchRegexSeed),
	}
	for _, d := range corpus.DocFuncs(benchQueries, evalDocWords, benchChunkSeed) {
		sets["chunks"] = append(sets["chunks"], d.Sentence)
	}
	_, ix, st := buildIndex(b, b.TempDir(), src)
	b.Logf("index of %s: %d files in %v", src, st.Files, st.Duration.Round(time.Millisecond))
	// The first symbol search builds the symbol table; time it apart.
	start := time.Now()
	if _, err := ix.SearchSymbols(ctx, engine.SymbolQuery{Query: "ReadFile"}); err != nil {
		b.Fatal(err)
	}
	b.Logf("first symbol search (builds the symbol table): %v", time.Since(start).Round(time.Microsecond))

	text := func(regex bool, limit int) engineRun {
		return func(q string) (int, bool, error) {
			res, err := ix.SearchText(ctx, engine.TextQuery{Pattern: q, Regex: regex, Limit: limit}, nil)
			return len(res.Matches), res.Truncated, err
		}
	}
	ripgrep := func(args ...string) engineRun {
		return func(q string) (int, bool, error) {
			cmd := exec.Command(rg, append(args, "--max-filesize", "1M", "--", q)...)
			cmd.Dir = src
			out, err := cmd.Output()
			var exit *exec.ExitError
			if errors.As(err, &exit) && exit.ExitCode() == 1 {
				return 0, false, nil // no match
			}
			return bytes.Count(out, []byte{'\n'}), false, err
		}
	}
	engines := map[string][]queryEngine{
		"symbol": {
			{"rg", func(q string) (int, bool, error) {
				n := regexp.QuoteMeta(q)
				return ripgrep("--no-heading", "-n")(`^func (\([^)]*\) )?` + n + `[\[(]|^type ` + n + `[ \[]`)
			}},
			{"plexus", func(q string) (int, bool, error) {
				hits, err := ix.SearchSymbols(ctx, engine.SymbolQuery{Query: q})
				return len(hits), false, err
			}},
		},
		"literal": {{"rg", ripgrep("--no-heading", "-n", "-F")}, {"plexus-all", text(false, 10000)}, {"plexus-limit100", text(false, 0)}},
		"regex":   {{"rg", ripgrep("--no-heading", "-n")}, {"plexus-all", text(true, 10000)}, {"plexus-limit100", text(true, 0)}},
		"chunks": {{"plexus", func(q string) (int, bool, error) {
			hits, err := ix.SearchChunks(ctx, engine.ChunkQuery{Query: q})
			return len(hits), false, err
		}}},
	}
	results := map[string]*queryStats{}
	kinds := []string{"symbol", "literal", "regex", "chunks"}
	for _, kind := range kinds {
		for _, e := range engines[kind] {
			if e.name == "rg" && rg == "" {
				continue
			}
			b.Run(kind+"/"+e.name, func(b *testing.B) {
				r := runQueries(b, sets[kind], e.run)
				results[kind+"/"+e.name] = r
				if rg := results[kind+"/rg"]; rg != nil && e.name != "rg" {
					b.ReportMetric(float64(rg.p50)/float64(r.p50), "speedup-vs-rg")
					if e.name == "plexus-all" {
						b.ReportMetric(float64(len(countDiffs(r, rg))), "count-diff-vs-rg")
					}
				}
			})
		}
	}
	b.Log(queryTable(kinds, engines, results))
}

// runQueries runs one query per iteration, round-robin, and reports the
// p50 and p99 of their durations.
func runQueries(b *testing.B, queries []string, run engineRun) *queryStats {
	st := &queryStats{counts: map[string]int{}, truncated: map[string]bool{}}
	var durs []time.Duration
	matches := 0
	for i := 0; b.Loop(); i++ {
		q := queries[i%len(queries)]
		start := time.Now()
		n, trunc, err := run(q)
		d := time.Since(start)
		durs = append(durs, d)
		if err != nil {
			b.Fatalf("%q: %v", q, err)
		}
		matches += n
		if trunc {
			st.truncated[q] = true
		}
		st.counts[q] = n
		st.slowest = append(st.slowest, timedQuery{q, d})
	}
	slices.SortFunc(st.slowest, func(a, b timedQuery) int { return int(b.d - a.d) })
	st.slowest = st.slowest[:min(3, len(st.slowest))]
	st.p50, st.p99 = percentile(durs, 50), percentile(durs, 99)
	reportPercentiles(b, durs)
	b.ReportMetric(float64(matches)/float64(len(durs)), "matches/op")
	if len(st.truncated) > 0 {
		b.ReportMetric(float64(len(st.truncated)), "truncated-queries")
	}
	return st
}

// queryTable compares the engines of each kind: p50, p99, rg's p50 over
// the engine's, and for plexus-all the queries whose match count differs
// from rg's.
func queryTable(kinds []string, engines map[string][]queryEngine, results map[string]*queryStats) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n%-24s %10s %10s %14s %s\n", "kind/engine", "p50-ms", "p99-ms", "rg/this (p50)", "notes")
	for _, kind := range kinds {
		rg := results[kind+"/rg"]
		for _, e := range engines[kind] {
			r := results[kind+"/"+e.name]
			if r == nil {
				continue
			}
			speed, notes := "", ""
			if rg != nil && e.name != "rg" {
				speed = fmt.Sprintf("%.1f×", float64(rg.p50)/float64(r.p50))
				if e.name == "plexus-all" {
					diff := countDiffs(r, rg)
					notes = fmt.Sprintf("%d queries with other counts than rg %v", len(diff), diff[:min(5, len(diff))])
				}
			}
			if len(r.truncated) > 0 {
				notes += fmt.Sprintf("; %d truncated at the limit", len(r.truncated))
			}
			fmt.Fprintf(&sb, "%-24s %10.2f %10.2f %14s %s\n", kind+"/"+e.name, ms(r.p50), ms(r.p99), speed, notes)
			for _, s := range r.slowest {
				fmt.Fprintf(&sb, "%24s %10.2f  %q (%d matches)\n", "slow:", ms(s.d), s.q, r.counts[s.q])
			}
		}
	}
	return sb.String()
}

// countDiffs lists the queries for which r and rg count different
// matching lines, leaving out those r's limit cut.
func countDiffs(r, rg *queryStats) []string {
	var diff []string
	for q, n := range r.counts {
		if m, ok := rg.counts[q]; ok && m != n && !r.truncated[q] {
			diff = append(diff, fmt.Sprintf("%q plexus %d rg %d", q, n, m))
		}
	}
	slices.Sort(diff)
	return diff
}

// percentile returns the p-th percentile of durs (nearest rank).
func percentile(durs []time.Duration, p int) time.Duration {
	if len(durs) == 0 {
		return 0
	}
	s := slices.Clone(durs)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1
	return s[min(max(i, 0), len(s)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func reportPercentiles(b *testing.B, durs []time.Duration) {
	b.ReportMetric(ms(percentile(durs, 50)), "p50-ms")
	b.ReportMetric(ms(percentile(durs, 99)), "p99-ms")
}

// Package index is the workspace code index: symbol, text, BM25 and
// vector search over the files of a workspace, for the engine's retrieval
// stage, the search tools, the front-ends' search endpoints and plexus
// search. A Service holds the index of every workspace in one SQLite
// database (db.go); it implements engine.Searcher and engine.Retriever.
//
// # What is stored
//
// contents: one row per distinct file content (SHA-256), with its
// analysis (chunks, symbols, references; engine/index/syntax), shared by
// every path, workspace and branch that holds it, so a content is parsed
// once. files: each workspace's catalog (path, content, size, mtime; a
// content of 0 marks a file left out, binary or over Options.MaxFileSize).
// segment_blocks: each workspace's base segment (segment.go), the
// trigram and term posting lists, chunks and symbols of the contents it
// held when built. Contents that changed since live in an in-memory delta
// segment rebuilt from their analyses. Builds write in batches, so an
// interrupted build resumes.
//
// # Freshness
//
// Build refreshes from the files (a stat walk; changed files read),
// ApplyChanges takes a list of changes, Watch follows file-system events
// (new and moved-in directories included). Every write stamps the
// workspace row; a search first compares the stamp (one query) and takes
// in what another process committed. A Service opened with Options.Watch
// (the per-user search server of plexus search) watches each workspace it
// opens and makes searches wait for the first refresh.
//
// # Text search
//
// SearchText answers line by line, as grep does, with every match when
// asked (engine.NoLimit; a limit sets Truncated exactly when it cut
// matches). The trigram index (ASCII case folded; Russ Cox's Code Search
// scheme) picks the candidate files; each is verified against its content
// (kept in a byte-bounded cache) by the workers in parallel, and matches
// stream in path order. Within a file, the best piece every match must
// contain is searched first: a literal, an ASCII-folded literal, or the
// case variants of a non-ASCII piece (-i é searches é and É byte for
// byte). A regular expression of bounded match length runs only on the
// bytes around occurrences of that piece whose preceding bytes can end
// the single-character elements before it (\pN{3}x looks at an x after
// three digits or non-ASCII bytes), so a pattern the trigram plan cannot
// narrow is still a fast scan of the cached contents.
//
// # Symbol search
//
// SearchSymbols ranks exact, then prefix, then fuzzy (camelCase and
// snake_case aware) name matches; within a tier by importance: exported,
// top level, outside tests, test data, vendored and internal code, and
// referred to as Package.Name by many files. Qualified queries
// (os.ReadFile, Buffer.Write, pkg.Type.Method) keep the definitions whose
// package directory or container fit.
//
// # Figures
//
// engine/index/internal/searchbench measures plexus search as users reach
// it beside ripgrep; BenchmarkQueries and BenchmarkBuildGoroot measure
// the library in-process; TestSymbolMRR measures symbol ranking on a
// corpus named by PLEXUS_EVAL_CORPUS and TestQualityGoroot retrieval on
// Go's source tree.
package index

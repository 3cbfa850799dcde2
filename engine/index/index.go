package index

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/index/syntax"
	"github.com/plexus-agent/plexus/engine/index/vector"
	"github.com/plexus-agent/plexus/engine/workspace"
)

// SuggestedMemoryLimit is the soft memory limit (runtime/debug.SetMemoryLimit,
// bytes) a process indexing large trees should run with: the garbage
// collector then works harder instead of letting a build of Go's source
// tree (90 MB) pass ~500 MB of resident memory; about 10% more build time.
// It is soft: a larger live heap is still allowed. The plexus command uses
// it unless GOMEMLIMIT is set.
const SuggestedMemoryLimit = 384 << 20

// Options configure a Service. Zero values mean defaults.
type Options struct {
	// Path is the SQLite database file (created if missing).
	Path string
	// MaxFileSize leaves out larger files, in bytes (default 1 MiB).
	MaxFileSize int64
	// Workers is how many files are processed at once (default
	// GOMAXPROCS).
	Workers int
	// CacheBytes bounds the in-memory cache of file contents that text
	// search verifies candidates against (default 256 MiB; negative
	// disables it).
	CacheBytes int64
	// Logger receives index logs; nil discards them.
	Logger *slog.Logger
	// Syntax configures chunking.
	Syntax syntax.Options
	// Embedder computes chunk embeddings for vector search, in the
	// background after each update; nil disables the vector stage.
	Embedder engine.Model
	// EmbedModel is the model name passed to Embedder; EmbedLabel names
	// it for people (PROVIDER:MODEL).
	EmbedModel, EmbedLabel string
	// VectorPrecision is how vectors are held in memory (float32
	// default, or int8).
	VectorPrecision vector.Precision
	// Reranker, when set, reorders the leading retrieval candidates after
	// the feature-based rerank, through a chat call of model RerankModel
	// (RerankLabel names it for people).
	Reranker                 engine.Model
	RerankModel, RerankLabel string
	// Background is for long-running servers: after each load and update
	// the index embeds new chunks and builds its symbol tables in the
	// background. Without it (short-lived commands), vectors come only
	// from Index.Embed and earlier runs, and symbol tables are built on
	// first use.
	Background bool
	// Watch keeps every workspace the service opens current: each is
	// watched (Index.Watch) until Close, and searches wait for the
	// watcher's first refresh, so a long-running server never answers
	// from an index older than the files. Where watching cannot start
	// (the inotify watch limit), each search refreshes first, at most
	// once a second.
	Watch bool
}

// Service is the code index of every workspace, in one database. It
// implements engine.Searcher. Safe for concurrent use.
type Service struct {
	db   *sql.DB
	opts Options
	log  *slog.Logger

	vectors *vector.Store
	cache   *contentCache
	// bg is cancelled by Close; background embedding runs under it.
	bg       context.Context
	bgCancel context.CancelFunc
	bgWG     sync.WaitGroup

	mu      sync.Mutex
	indexes map[string]*Index // by root
}

var _ engine.Searcher = (*Service)(nil)

// Open opens (creating) the index database.
func Open(ctx context.Context, opts Options) (*Service, error) {
	if opts.Path == "" {
		return nil, fmt.Errorf("%w: index: no database path", engine.ErrInvalidRequest)
	}
	if opts.MaxFileSize <= 0 {
		opts.MaxFileSize = 1 << 20
	}
	if opts.Workers <= 0 {
		opts.Workers = defaultWorkers()
	}
	if opts.CacheBytes == 0 {
		opts.CacheBytes = 256 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	db, err := openDB(ctx, opts.Path)
	if err != nil {
		return nil, err
	}
	store, err := vector.NewStore(ctx, db)
	if err != nil {
		db.Close()
		return nil, err
	}
	bg, cancel := context.WithCancel(context.Background())
	return &Service{db: db, opts: opts, log: opts.Logger, vectors: store, cache: newContentCache(opts.CacheBytes), bg: bg, bgCancel: cancel, indexes: map[string]*Index{}}, nil
}

// Close closes the database. Indexes must not be used afterwards.
func (s *Service) Close() error {
	s.bgCancel()
	s.bgWG.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ix := range s.indexes {
		ix.fsroot.Close()
	}
	s.indexes = map[string]*Index{}
	return s.db.Close()
}

// Checkpoint copies the write-ahead log into the database file and
// truncates the log (SQLite's wal_checkpoint(TRUNCATE)), so that the file
// alone holds the index. Readers of other processes may hold the log
// back; then it is left as it is and no error is returned.
func (s *Service) Checkpoint(ctx context.Context) error {
	var busy, logged, done int
	if err := s.db.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logged, &done); err != nil {
		return fmt.Errorf("index database checkpoint: %w", err)
	}
	return nil
}

// DBPath is the database file.
func (s *Service) DBPath() string { return s.opts.Path }

// Index is one workspace's index: its catalog, its base and delta
// segments, and the symbol table built from them. Searches read a
// consistent snapshot while builds and updates prepare the next one.
type Index struct {
	svc    *Service
	id     string
	root   string
	fsroot *workspace.Root

	buildMu sync.Mutex // one build or update at a time

	mu        sync.RWMutex
	files     map[string]fileEntry // the catalog, by path
	paths     map[int64][]string   // content → its paths
	base      *segment             // nil until the first full build
	gen       int64
	delta     *segment           // contents changed since base; may be nil
	deltaDocs map[int64]*docData // what delta is built from
	updated   time.Time
	// stamp is the workspace's updated_ns as of the state held: another
	// process that writes the index changes it (see Index.sync).
	stamp int64

	// hashMap locates live chunks by text hash for vector hits, cached
	// for the segments it was built from.
	hashMap                   map[[32]byte][]chunkKey
	hashMapBase, hashMapDelta *segment

	vec vectorState

	// Symbol tables of the base and delta segments, built lazily for the
	// segments they name.
	symMu                     sync.Mutex
	baseSyms, deltaSyms       *symbolTable
	baseSymsFor, deltaSymsFor *segment

	progress atomic.Pointer[Progress]

	// watchReady is closed after the watcher's first refresh (nil when
	// the service does not watch); unwatched is set when watching failed.
	watchReady chan struct{}
	unwatched  atomic.Bool
	// refreshed is when the last refresh before a search ran (unwatched).
	refreshMu sync.Mutex
	refreshed time.Time
}

// fileEntry is a catalog row. Content 0 marks a file left out (binary or
// too large), remembered so that it is not read again while unchanged.
type fileEntry struct {
	content     int64
	size, mtime int64
}

// Workspace opens the index of the workspace at root (an existing
// directory), loading what the database holds. It does not build: call
// Build (or search, which builds a never-built workspace first).
func (s *Service) Workspace(ctx context.Context, root string) (*Index, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("%w: workspace %s: %v", engine.ErrNotFound, root, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ix, ok := s.indexes[real]; ok {
		return ix, nil
	}
	fsroot, err := workspace.Open(real)
	if err != nil {
		return nil, err
	}
	ix := &Index{svc: s, id: engine.WorkspaceID(real), root: real, fsroot: fsroot, deltaDocs: map[int64]*docData{}}
	if err := ix.load(ctx); err != nil {
		fsroot.Close()
		return nil, err
	}
	ix.warmSymbols()
	s.indexes[real] = ix
	if s.opts.Watch {
		ix.startWatch()
	}
	return ix, nil
}

// startWatch runs Watch in the background until the service closes.
func (ix *Index) startWatch() {
	svc := ix.svc
	ix.watchReady = make(chan struct{})
	var once sync.Once
	ready := func() { once.Do(func() { close(ix.watchReady) }) }
	svc.bgWG.Add(1)
	go func() {
		defer svc.bgWG.Done()
		defer ready()
		err := ix.Watch(svc.bg, func(st BuildStats, err error) {
			if err != nil {
				svc.log.Warn("index update failed", "workspace", ix.root, "error", err)
			}
			ready()
		})
		if err != nil && svc.bg.Err() == nil {
			ix.unwatched.Store(true)
			svc.log.Warn("not watching the workspace; searches refresh the index first", "workspace", ix.root, "error", err)
		}
	}()
}

// Root is the workspace directory.
func (ix *Index) Root() string { return ix.root }

// load reads the catalog and the base segment, then brings the contents
// the base does not hold into the delta (reading those files), unless
// there are so many that only a build makes sense.
func (ix *Index) load(ctx context.Context) error {
	db := ix.svc.db
	if _, err := db.ExecContext(ctx, `INSERT INTO workspaces(id, root) VALUES(?, ?) ON CONFLICT(id) DO NOTHING`, ix.id, ix.root); err != nil {
		return fmt.Errorf("index database: %w", err)
	}
	var updated int64
	if err := db.QueryRowContext(ctx, `SELECT segment_gen, updated_ns FROM workspaces WHERE id=?`, ix.id).Scan(&ix.gen, &updated); err != nil {
		return fmt.Errorf("index database: %w", err)
	}
	files, err := ix.svc.loadCatalog(ctx, ix.id)
	if err != nil {
		return err
	}
	base, err := ix.svc.loadSegment(ctx, ix.id, ix.gen)
	if err != nil {
		ix.svc.log.Warn("index segment unreadable; the next build rebuilds it", "workspace", ix.root, "error", err)
		base = nil
	}
	ix.files, ix.paths, ix.base = files, pathsByContent(files), base
	ix.stamp = updated
	if updated > 0 {
		ix.updated = time.Unix(0, updated)
	}
	if base == nil {
		return nil
	}
	var work []fileWork
	for p, e := range files {
		if e.content != 0 && !base.has(e.content) {
			work = append(work, fileWork{path: p, size: e.size, mtime: e.mtime})
		}
	}
	if len(work) == 0 || len(work) > max(1000, len(files)/5) {
		return nil
	}
	ix.buildMu.Lock()
	defer ix.buildMu.Unlock()
	_, err = ix.apply(ctx, work, nil, false, ix.reporter(nil))
	return err
}

// Built reports whether the workspace has a search segment.
func (ix *Index) Built() bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.base != nil
}

// Status is a snapshot of an index.
type Status struct {
	Root        string `json:"root"`
	WorkspaceID string `json:"workspace_id"`
	// Files in the catalog; Contents distinct among them.
	Files    int `json:"files"`
	Contents int `json:"contents"`
	Chunks   int `json:"chunks"`
	Symbols  int `json:"symbols"`
	// DeltaContents changed since the base segment was built.
	DeltaContents int       `json:"delta_contents"`
	LastUpdate    time.Time `json:"last_update"`
	// Building is true while a build runs; Progress is its last report.
	Building bool      `json:"building"`
	Progress *Progress `json:"progress,omitempty"`
	// DatabaseBytes is the size of the database file (all workspaces)
	// and of its write-ahead log; after Service.Checkpoint the log is
	// empty and this is what the index takes on disk.
	DatabaseBytes int64 `json:"database_bytes"`
	// Vectors reports the embeddings.
	Vectors VectorStatus `json:"vectors"`
}

// Status returns a snapshot. Chunks and Symbols count live contents only.
func (ix *Index) Status() Status {
	ix.mu.RLock()
	st := Status{Root: ix.root, WorkspaceID: ix.id, Files: countIndexed(ix.files), Contents: len(ix.paths), LastUpdate: ix.updated}
	for _, seg := range []*segment{ix.base, ix.delta} {
		if seg == nil {
			continue
		}
		for _, d := range seg.docs {
			if len(ix.paths[d.content]) > 0 && (seg == ix.delta || ix.delta == nil || !ix.delta.has(d.content)) {
				st.Chunks += len(d.chunks)
				st.Symbols += len(d.symbols)
			}
		}
	}
	st.DeltaContents = len(ix.deltaDocs)
	ix.mu.RUnlock()
	if ix.buildMu.TryLock() {
		ix.buildMu.Unlock()
	} else {
		st.Building = true
		st.Progress = ix.progress.Load()
	}
	st.Vectors = ix.vectorStatus()
	for _, suffix := range []string{"", "-wal"} {
		if fi, err := os.Stat(ix.svc.opts.Path + suffix); err == nil {
			st.DatabaseBytes += fi.Size()
		}
	}
	return st
}

// walkOptions are the options of the build's workspace walk.
func walkOptions() workspace.WalkOptions {
	return workspace.WalkOptions{OnError: func(rel string, err error) error { return nil }}
}

package index

import (
	"context"
	"fmt"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

// ready returns the open index of root, building it first if it never
// was (a first search on a new workspace waits for the build).
func (s *Service) ready(ctx context.Context, root string) (*Index, error) {
	ix, err := s.Workspace(ctx, root)
	if err != nil {
		return nil, err
	}
	if ix.watchReady != nil {
		select {
		case <-ix.watchReady:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if ix.unwatched.Load() {
			if err := ix.refreshAtMost(ctx, time.Second); err != nil {
				return nil, err
			}
		}
	}
	if err := ix.sync(ctx); err != nil {
		return nil, err
	}
	if !ix.Built() {
		if _, err := ix.Build(ctx, BuildOptions{}); err != nil {
			return nil, err
		}
	}
	return ix, nil
}

// sync takes in what another process committed to the index since this
// one last read or wrote it (the workspace's stamp tells): the catalog, a
// new base segment, and the contents the base lacks, read from the files
// as load does. When nothing changed it costs one query.
func (ix *Index) sync(ctx context.Context) error {
	stamp := func() (gen, stamp int64, err error) {
		err = ix.svc.db.QueryRowContext(ctx, `SELECT segment_gen, updated_ns FROM workspaces WHERE id=?`, ix.id).Scan(&gen, &stamp)
		if err != nil {
			err = fmt.Errorf("index database: %w", err)
		}
		return gen, stamp, err
	}
	_, st, err := stamp()
	if err != nil {
		return err
	}
	ix.mu.RLock()
	same := st == ix.stamp
	ix.mu.RUnlock()
	if same {
		return nil
	}
	ix.buildMu.Lock()
	defer ix.buildMu.Unlock()
	gen, st, err := stamp()
	if err != nil {
		return err
	}
	ix.mu.RLock()
	base, oldGen, oldDelta, same := ix.base, ix.gen, ix.deltaDocs, st == ix.stamp
	ix.mu.RUnlock()
	if same {
		return nil // this process's own write, or one already taken in
	}
	files, err := ix.svc.loadCatalog(ctx, ix.id)
	if err != nil {
		return err
	}
	if gen != oldGen || base == nil {
		if base, err = ix.svc.loadSegment(ctx, ix.id, gen); err != nil {
			ix.svc.log.Warn("index segment unreadable; the next build rebuilds it", "workspace", ix.root, "error", err)
			base = nil
		}
	}
	paths := pathsByContent(files)
	delta := map[int64]*docData{}
	var work []fileWork
	if base != nil {
		for id, d := range oldDelta {
			if !base.has(id) && len(paths[id]) > 0 {
				delta[id] = d
			}
		}
		for p, e := range files {
			if e.content != 0 && !base.has(e.content) && delta[e.content] == nil {
				work = append(work, fileWork{path: p, size: e.size, mtime: e.mtime})
			}
		}
	}
	ix.mu.Lock()
	ix.files, ix.paths, ix.base, ix.gen = files, paths, base, gen
	ix.deltaDocs, ix.delta = delta, buildDelta(delta)
	ix.stamp, ix.updated = st, time.Unix(0, st)
	ix.mu.Unlock()
	ix.warmSymbols()
	if len(work) == 0 || len(work) > max(1000, len(files)/5) {
		return nil
	}
	_, err = ix.apply(ctx, work, nil, false, ix.reporter(nil))
	return err
}

// refreshAtMost brings the index up to date (Build: a stat walk, and the
// changed files read) unless that was done less than every ago.
func (ix *Index) refreshAtMost(ctx context.Context, every time.Duration) error {
	ix.refreshMu.Lock()
	defer ix.refreshMu.Unlock()
	if time.Since(ix.refreshed) < every {
		return nil
	}
	if _, err := ix.Build(ctx, BuildOptions{}); err != nil {
		return err
	}
	ix.refreshed = time.Now()
	return nil
}

// SearchSymbols implements engine.Searcher.
func (s *Service) SearchSymbols(ctx context.Context, root string, q engine.SymbolQuery) ([]engine.SymbolHit, error) {
	ix, err := s.ready(ctx, root)
	if err != nil {
		return nil, err
	}
	return ix.SearchSymbols(ctx, q)
}

// SearchText implements engine.Searcher.
func (s *Service) SearchText(ctx context.Context, root string, q engine.TextQuery, onMatch func(engine.TextMatch)) (engine.TextResult, error) {
	ix, err := s.ready(ctx, root)
	if err != nil {
		return engine.TextResult{}, err
	}
	return ix.SearchText(ctx, q, onMatch)
}

// SearchChunks implements engine.Searcher.
func (s *Service) SearchChunks(ctx context.Context, root string, q engine.ChunkQuery) ([]engine.ChunkHit, error) {
	ix, err := s.ready(ctx, root)
	if err != nil {
		return nil, err
	}
	return ix.SearchChunks(ctx, q)
}

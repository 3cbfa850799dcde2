package index

import (
	"context"
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
	if !ix.Built() {
		if _, err := ix.Build(ctx, BuildOptions{}); err != nil {
			return nil, err
		}
	}
	return ix, nil
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

package index

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// batchSize is how many writes a batch commits at once; an interrupted
// build loses at most this much finished work.
const batchSize = 500

// batch writes a build's results in transactions of batchSize writes.
type batch struct {
	svc *Service
	ws  string
	tx  *sql.Tx
	n   int
	err error
}

func (s *Service) newBatch(ws string) *batch { return &batch{svc: s, ws: ws} }

func (b *batch) begin(ctx context.Context) error {
	if b.err != nil {
		return b.err
	}
	if b.tx == nil {
		// Writes must land even when ctx is cancelled mid-batch: use a
		// context that only bounds the wait for the write lock.
		tx, err := b.svc.db.BeginTx(context.WithoutCancel(ctx), nil)
		if err != nil {
			b.err = fmt.Errorf("index database: %w", err)
			return b.err
		}
		b.tx = tx
	}
	return nil
}

func (b *batch) wrote(ctx context.Context) error {
	b.n++
	if b.n%batchSize == 0 {
		return b.commit()
	}
	return nil
}

// putContent stores a new content with its analysis and returns its id.
func (b *batch) putContent(ctx context.Context, hash [32]byte, size int64, lang string, blob []byte) (int64, error) {
	if err := b.begin(ctx); err != nil {
		return 0, err
	}
	var id int64
	err := b.tx.QueryRow(`INSERT INTO contents(hash, size, lang, analyzer, analysis) VALUES(?, ?, ?, ?, ?)
		ON CONFLICT(hash) DO UPDATE SET lang=excluded.lang, analyzer=excluded.analyzer, analysis=excluded.analysis
		RETURNING id`, hash[:], size, lang, analyzerVersion, blob).Scan(&id)
	if err != nil {
		b.err = fmt.Errorf("store content: %w", err)
		return 0, b.err
	}
	return id, b.wrote(ctx)
}

func (b *batch) putFile(ctx context.Context, path string, e fileEntry) error {
	if err := b.begin(ctx); err != nil {
		return err
	}
	_, err := b.tx.Exec(`INSERT INTO files(workspace, path, content, size, mtime_ns) VALUES(?, ?, ?, ?, ?)
		ON CONFLICT(workspace, path) DO UPDATE SET content=excluded.content, size=excluded.size, mtime_ns=excluded.mtime_ns`,
		b.ws, path, e.content, e.size, e.mtime)
	if err != nil {
		b.err = fmt.Errorf("store catalog entry %s: %w", path, err)
		return b.err
	}
	return b.wrote(ctx)
}

func (b *batch) deleteFile(path string) {
	if b.begin(context.Background()) != nil {
		return
	}
	if _, err := b.tx.Exec(`DELETE FROM files WHERE workspace=? AND path=?`, b.ws, path); err != nil {
		b.err = fmt.Errorf("remove catalog entry %s: %w", path, err)
		return
	}
	b.wrote(context.Background())
}

// segmentBlock is the size of one stored block of a segment.
const segmentBlock = 1 << 20

// putSegment stores a segment as the generation after gen (or after the
// database's, if another process stored a later one), makes it current
// and drops older generations, in the batch's final transaction. It
// returns the generation stored.
func (b *batch) putSegment(ctx context.Context, gen int64, data []byte) (int64, error) {
	if err := b.begin(ctx); err != nil {
		return 0, err
	}
	var current int64
	if err := b.tx.QueryRow(`SELECT segment_gen FROM workspaces WHERE id=?`, b.ws).Scan(&current); err != nil {
		b.err = fmt.Errorf("store segment: %w", err)
		return 0, b.err
	}
	gen = max(gen, current) + 1
	return gen, b.putSegmentGen(gen, data)
}

func (b *batch) putSegmentGen(gen int64, data []byte) error {
	for seq := 0; seq*segmentBlock < len(data); seq++ {
		block := data[seq*segmentBlock : min(len(data), (seq+1)*segmentBlock)]
		if _, err := b.tx.Exec(`INSERT INTO segment_blocks(workspace, gen, seq, data) VALUES(?, ?, ?, ?)`, b.ws, gen, seq, block); err != nil {
			b.err = fmt.Errorf("store segment: %w", err)
			return b.err
		}
	}
	if _, err := b.tx.Exec(`UPDATE workspaces SET segment_gen=? WHERE id=?`, gen, b.ws); err != nil {
		b.err = fmt.Errorf("store segment: %w", err)
		return b.err
	}
	if _, err := b.tx.Exec(`DELETE FROM segment_blocks WHERE workspace=? AND gen<>?`, b.ws, gen); err != nil {
		b.err = fmt.Errorf("store segment: %w", err)
		return b.err
	}
	return nil
}

// stamp marks the workspace as changed, in the batch's final
// transaction: processes with the index open compare the stamp before
// searching and reload what another one wrote. It returns the stamp.
func (b *batch) stamp(ctx context.Context) (int64, error) {
	if err := b.begin(ctx); err != nil {
		return 0, err
	}
	ns := time.Now().UnixNano()
	if _, err := b.tx.Exec(`UPDATE workspaces SET updated_ns=max(updated_ns+1, ?) WHERE id=?`, ns, b.ws); err != nil {
		b.err = fmt.Errorf("index database: %w", err)
		return 0, b.err
	}
	if err := b.tx.QueryRow(`SELECT updated_ns FROM workspaces WHERE id=?`, b.ws).Scan(&ns); err != nil {
		b.err = fmt.Errorf("index database: %w", err)
		return 0, b.err
	}
	return ns, nil
}

// commit ends the current transaction, if any.
func (b *batch) commit() error {
	if b.tx == nil {
		return b.err
	}
	tx := b.tx
	b.tx = nil
	if b.err != nil {
		tx.Rollback()
		return b.err
	}
	if err := tx.Commit(); err != nil {
		b.err = fmt.Errorf("index database: %w", err)
	}
	return b.err
}

// knownContents loads every stored content's hash, id, analyzer version
// and language.
func (s *Service) knownContents(ctx context.Context) (map[[32]byte]contentRow, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT hash, id, analyzer, lang FROM contents`)
	if err != nil {
		return nil, fmt.Errorf("index database: %w", err)
	}
	defer rows.Close()
	out := map[[32]byte]contentRow{}
	for rows.Next() {
		var h []byte
		var r contentRow
		if err := rows.Scan(&h, &r.id, &r.analyzer, &r.lang); err != nil {
			return nil, fmt.Errorf("index database: %w", err)
		}
		var k [32]byte
		copy(k[:], h)
		out[k] = r
	}
	return out, rows.Err()
}

// lookupContent finds one stored content by hash.
func (s *Service) lookupContent(h [32]byte) (contentRow, bool) {
	var r contentRow
	err := s.db.QueryRow(`SELECT id, analyzer, lang FROM contents WHERE hash=?`, h[:]).Scan(&r.id, &r.analyzer, &r.lang)
	return r, err == nil
}

// analysisBlob reads a stored analysis.
func (s *Service) analysisBlob(ctx context.Context, id int64) ([]byte, error) {
	var blob []byte
	if err := s.db.QueryRowContext(ctx, `SELECT analysis FROM contents WHERE id=?`, id).Scan(&blob); err != nil {
		return nil, fmt.Errorf("index database: content %d: %w", id, err)
	}
	return blob, nil
}

// loadSegment reads generation gen of a workspace's segment.
func (s *Service) loadSegment(ctx context.Context, ws string, gen int64) (*segment, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT data FROM segment_blocks WHERE workspace=? AND gen=? ORDER BY seq`, ws, gen)
	if err != nil {
		return nil, fmt.Errorf("index database: %w", err)
	}
	defer rows.Close()
	var data []byte
	for rows.Next() {
		var block []byte
		if err := rows.Scan(&block); err != nil {
			return nil, fmt.Errorf("index database: %w", err)
		}
		data = append(data, block...)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("index database: %w", err)
	}
	if len(data) == 0 {
		return nil, nil
	}
	return decodeSegment(data)
}

// loadCatalog reads a workspace's catalog.
func (s *Service) loadCatalog(ctx context.Context, ws string) (map[string]fileEntry, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT path, content, size, mtime_ns FROM files WHERE workspace=?`, ws)
	if err != nil {
		return nil, fmt.Errorf("index database: %w", err)
	}
	defer rows.Close()
	out := map[string]fileEntry{}
	for rows.Next() {
		var p string
		var e fileEntry
		if err := rows.Scan(&p, &e.content, &e.size, &e.mtime); err != nil {
			return nil, fmt.Errorf("index database: %w", err)
		}
		out[p] = e
	}
	return out, rows.Err()
}

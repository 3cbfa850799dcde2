package vector

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
)

// schema creates the Store's tables. vector_models records each model's
// dimension, so that Put can refuse vectors of another length without
// scanning embeddings, and its number of vectors n, kept by Put and Delete
// in their transactions, so that Count is one row read. vector_embeddings
// holds one row per (model, chunk content hash); vec is the dim float32
// components in little-endian order (4·dim bytes), the provider's values
// unchanged: quantisation is a choice of the in-memory Matrix, and exact
// stored vectors let a Matrix of either precision be rebuilt from them.
// The table keeps its rowid because its rows (3 KiB at 768 dimensions)
// are too large for a WITHOUT ROWID table to pay.
const schema = `
CREATE TABLE IF NOT EXISTS vector_models (
	model TEXT PRIMARY KEY,
	dim   INTEGER NOT NULL CHECK (dim > 0),
	n     INTEGER NOT NULL DEFAULT 0 CHECK (n >= 0)
);
CREATE TABLE IF NOT EXISTS vector_embeddings (
	model TEXT NOT NULL,
	hash  BLOB NOT NULL CHECK (length(hash) = 32),
	dim   INTEGER NOT NULL CHECK (dim > 0),
	vec   BLOB NOT NULL CHECK (length(vec) = 4 * dim),
	PRIMARY KEY (model, hash)
);`

// lookupBatch is the number of hashes bound into one IN (...) list: far
// below SQLite's default limit of 32,766 host parameters, and large enough
// that 100,000 hashes take 200 statements.
const lookupBatch = 500

// Store keeps embeddings in a SQLite database under (model, chunk content
// hash) keys: model is the caller's name for the embedding model (Backfill
// uses its StoreKey), the hash is 32 bytes (for example SHA-256 of the
// chunk's text). Each model has one dimension, fixed by its first Put.
// Store is safe for concurrent use; every write is one transaction.
type Store struct {
	db *sql.DB
}

// NewStore creates the tables vector_models and vector_embeddings in db if
// they are missing and returns a Store over them. db is the caller's (the
// index's) database; Store never closes it. The caller should open it with
// a busy timeout so that writers of other tables wait instead of failing
// with SQLITE_BUSY.
func NewStore(ctx context.Context, db *sql.DB) (*Store, error) {
	if _, err := db.ExecContext(ctx, schema); err != nil {
		return nil, fmt.Errorf("create vector tables: %w", err)
	}
	return &Store{db: db}, nil
}

// Get returns the stored vectors of model for hashes, keyed by hash;
// hashes without a vector are absent from the map. An error names a
// corrupt row (a vector blob whose length is not 4·dim).
func (s *Store) Get(ctx context.Context, model string, hashes [][32]byte) (map[[32]byte][]float32, error) {
	out := make(map[[32]byte][]float32, len(hashes))
	err := s.lookup(ctx, model, hashes, true, func(h [32]byte, dim int, vec []byte) error {
		v, err := decodeVector(vec, dim)
		if err != nil {
			return fmt.Errorf("vector %x: %w", h[:4], err)
		}
		out[h] = v
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("get vectors of %s: %w", model, err)
	}
	return out, nil
}

// Missing returns the hashes, in their first order of appearance and
// without repeats, that have no stored vector for model. It reads only the
// (model, hash) index, not the vectors.
func (s *Store) Missing(ctx context.Context, model string, hashes [][32]byte) ([][32]byte, error) {
	have := make(map[[32]byte]bool, len(hashes))
	err := s.lookup(ctx, model, hashes, false, func(h [32]byte, _ int, _ []byte) error {
		have[h] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("find missing vectors of %s: %w", model, err)
	}
	var out [][32]byte
	for _, h := range hashes {
		if !have[h] {
			have[h] = true // report repeats once
			out = append(out, h)
		}
	}
	return out, nil
}

// Lookup strategy. Finding a hash through an IN (...) list costs about
// 3 µs (hash only) to 11 µs (with its 3 KiB vector); reading a model's
// rows in (model, hash) order costs about 0.4 µs and 6 µs a row (pure-Go
// SQLite, 100,000 rows of 768 dimensions). So when a request of at least
// scanMinHashes hashes meets a model holding at most scanFactor times as
// many rows, one range scan filtered in Go replaces the IN lists.
const (
	scanMinHashes  = lookupBatch
	scanFactorHash = 6 // Missing: 3 µs / 0.4 µs, with a margin
	scanFactorVecs = 2 // Get: 11 µs / 6 µs
)

// lookup calls emit for each stored row of model whose hash is in hashes
// (each row once), with its dim and vector blob when withVec (otherwise 0
// and nil). The blob is valid only during the call.
func (s *Store) lookup(ctx context.Context, model string, hashes [][32]byte, withVec bool, emit func(h [32]byte, dim int, vec []byte) error) error {
	cols, factor := "hash", scanFactorHash
	if withVec {
		cols, factor = "hash, dim, vec", scanFactorVecs
	}
	if len(hashes) >= scanMinHashes {
		n, err := s.Count(ctx, model)
		if err != nil {
			return err
		}
		if n <= factor*len(hashes) {
			want := make(map[[32]byte]struct{}, len(hashes))
			for _, h := range hashes {
				want[h] = struct{}{}
			}
			return s.query(ctx, "SELECT "+cols+" FROM vector_embeddings WHERE model = ?", []any{model}, withVec, func(h [32]byte, dim int, vec []byte) error {
				if _, ok := want[h]; !ok {
					return nil
				}
				return emit(h, dim, vec)
			})
		}
	}
	// Each distinct hash once, so that emit sees each row once.
	seen := make(map[[32]byte]struct{}, len(hashes))
	args := make([]any, 0, 1+lookupBatch)
	for i := 0; i < len(hashes); {
		args = append(args[:0], model)
		for ; i < len(hashes) && len(args) <= lookupBatch; i++ {
			if _, ok := seen[hashes[i]]; ok {
				continue
			}
			seen[hashes[i]] = struct{}{}
			args = append(args, hashes[i][:])
		}
		if len(args) == 1 {
			break
		}
		q := "SELECT " + cols + " FROM vector_embeddings WHERE model = ? AND hash IN (" + placeholders(len(args)-1) + ")"
		if err := s.query(ctx, q, args, withVec, emit); err != nil {
			return err
		}
	}
	return nil
}

// query runs q and calls emit for each row (hash, or hash, dim, vec when
// withVec).
func (s *Store) query(ctx context.Context, q string, args []any, withVec bool, emit func(h [32]byte, dim int, vec []byte) error) error {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	var (
		hash, vec sql.RawBytes
		dim       int
	)
	dest := []any{&hash}
	if withVec {
		dest = append(dest, &dim, &vec)
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		h, err := hashKey(hash)
		if err != nil {
			return err
		}
		if err := emit(h, dim, vec); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return rows.Close()
}

// Put stores vecs for model in one transaction, replacing the vectors of
// hashes already stored, so putting the same vectors twice changes
// nothing. Every vector must be finite and non-empty (ErrInvalidVector)
// and all must have the model's dimension: the same length within the
// call and the length recorded by the model's first Put (ErrDimMismatch).
// An empty vecs writes nothing.
func (s *Store) Put(ctx context.Context, model string, vecs map[[32]byte][]float32) error {
	if len(vecs) == 0 {
		return nil
	}
	dim := -1
	for h, v := range vecs {
		if err := checkFinite(v); err != nil {
			return fmt.Errorf("put vectors of %s: vector %x: %w", model, h[:4], err)
		}
		if dim < 0 {
			dim = len(v)
		} else if len(v) != dim {
			return fmt.Errorf("put vectors of %s: %w: lengths %d and %d in one batch", model, ErrDimMismatch, dim, len(v))
		}
	}
	if err := s.put(ctx, model, dim, vecs); err != nil {
		return fmt.Errorf("put vectors of %s: %w", model, err)
	}
	return nil
}

func (s *Store) put(ctx context.Context, model string, dim int, vecs map[[32]byte][]float32) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		// Write first, so the transaction takes SQLite's write lock
		// (waiting out other writers) before it reads anything: a deferred
		// transaction that reads and then writes fails with SQLITE_BUSY
		// when another connection wrote in between.
		if _, err := tx.ExecContext(ctx, "INSERT INTO vector_models (model, dim) VALUES (?, ?) ON CONFLICT (model) DO NOTHING", model, dim); err != nil {
			return err
		}
		var have int
		if err := tx.QueryRowContext(ctx, "SELECT dim FROM vector_models WHERE model = ?", model).Scan(&have); err != nil {
			return err
		}
		if have != dim {
			return fmt.Errorf("%w: the store holds %d-dimensional vectors for this model, the new ones have %d (the model changed; delete its vectors to re-embed)", ErrDimMismatch, have, dim)
		}
		insert, err := tx.PrepareContext(ctx, `INSERT INTO vector_embeddings (model, hash, dim, vec) VALUES (?, ?, ?, ?)
			ON CONFLICT (model, hash) DO NOTHING`)
		if err != nil {
			return err
		}
		defer insert.Close()
		update, err := tx.PrepareContext(ctx, "UPDATE vector_embeddings SET vec = ? WHERE model = ? AND hash = ?")
		if err != nil {
			return err
		}
		defer update.Close()
		buf := make([]byte, 4*dim) // reused: the driver copies bound blobs
		var added int64
		for h, v := range vecs {
			encodeVector(buf, v)
			res, err := insert.ExecContext(ctx, model, h[:], dim, buf)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			if n == 1 {
				added++
				continue
			}
			if _, err := update.ExecContext(ctx, buf, model, h[:]); err != nil {
				return err
			}
		}
		_, err = tx.ExecContext(ctx, "UPDATE vector_models SET n = n + ? WHERE model = ?", added, model)
		return err
	})
}

// Delete removes model's vectors for hashes in one transaction (hashes
// without a vector are ignored). When no vector of model remains, its
// recorded dimension goes too, so the next Put may use another.
func (s *Store) Delete(ctx context.Context, model string, hashes [][32]byte) error {
	if len(hashes) == 0 {
		return nil
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var removed int64
		args := make([]any, 0, 1+lookupBatch)
		for start := 0; start < len(hashes); start += lookupBatch {
			batch := hashes[start:min(start+lookupBatch, len(hashes))]
			args = append(args[:0], model)
			for i := range batch {
				args = append(args, batch[i][:])
			}
			res, err := tx.ExecContext(ctx, "DELETE FROM vector_embeddings WHERE model = ? AND hash IN ("+placeholders(len(batch))+")", args...)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			removed += n
		}
		if removed == 0 {
			return nil
		}
		if _, err := tx.ExecContext(ctx, "UPDATE vector_models SET n = n - ? WHERE model = ?", removed, model); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "DELETE FROM vector_models WHERE model = ? AND n = 0", model)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete vectors of %s: %w", model, err)
	}
	return nil
}

// DeleteModel removes every vector of model and its recorded dimension,
// for example after the provider's model changed.
func (s *Store) DeleteModel(ctx context.Context, model string) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "DELETE FROM vector_embeddings WHERE model = ?", model); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "DELETE FROM vector_models WHERE model = ?", model)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete model %s: %w", model, err)
	}
	return nil
}

// Count returns the number of vectors stored for model, from the count
// Put and Delete keep (one row read, not a scan).
func (s *Store) Count(ctx context.Context, model string) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, "SELECT n FROM vector_models WHERE model = ?", model).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("count vectors of %s: %w", model, err)
	}
	return n, nil
}

// Dim returns the dimension of model's stored vectors, 0 when the store
// holds none.
func (s *Store) Dim(ctx context.Context, model string) (int, error) {
	var dim int
	err := s.db.QueryRowContext(ctx, "SELECT dim FROM vector_models WHERE model = ?", model).Scan(&dim)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("dimension of %s: %w", model, err)
	}
	return dim, nil
}

// inTx runs f in a transaction, committing when f returns nil.
func (s *Store) inTx(ctx context.Context, f func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		// f's error is the one to report; a failed rollback leaves
		// nothing committed either.
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// placeholders returns "?, ?, ..." with n marks.
func placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?, ", n-1) + "?"
}

// hashKey converts a stored hash blob to a key.
func hashKey(b []byte) ([32]byte, error) {
	var h [32]byte
	if len(b) != len(h) {
		return h, fmt.Errorf("stored hash has %d bytes, want 32", len(b))
	}
	copy(h[:], b)
	return h, nil
}

// encodeVector writes v to dst (4·len(v) bytes) as little-endian float32.
func encodeVector(dst []byte, v []float32) {
	for i, x := range v {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(x))
	}
}

// decodeVector reads dim little-endian float32 values from b.
func decodeVector(b []byte, dim int) ([]float32, error) {
	if dim <= 0 || len(b) != 4*dim {
		return nil, fmt.Errorf("stored vector has %d bytes for dimension %d", len(b), dim)
	}
	v := make([]float32, dim)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v, nil
}

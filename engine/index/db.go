package index

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite" // pure-Go SQLite driver "sqlite"
)

// schemaVersion changes when the tables change incompatibly; a database of
// another version is rebuilt (an index is derived data).
const schemaVersion = "3"

// analyzerVersion changes when the syntax layer's output changes; contents
// analysed by another version are analysed again.
const analyzerVersion = 1

const schema = `
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
-- One row per distinct file content (SHA-256), shared by every workspace,
-- path and branch that holds it: a content is analysed once.
CREATE TABLE IF NOT EXISTS contents(
	id INTEGER PRIMARY KEY,
	hash BLOB NOT NULL UNIQUE,
	size INTEGER NOT NULL,
	lang TEXT NOT NULL,
	analyzer INTEGER NOT NULL,
	analysis BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS workspaces(
	id TEXT PRIMARY KEY,
	root TEXT NOT NULL UNIQUE,
	segment_gen INTEGER NOT NULL DEFAULT 0,
	updated_ns INTEGER NOT NULL DEFAULT 0
);
-- The catalog: one row per indexed path of a workspace.
CREATE TABLE IF NOT EXISTS files(
	workspace TEXT NOT NULL,
	path TEXT NOT NULL,
	content INTEGER NOT NULL,
	size INTEGER NOT NULL,
	mtime_ns INTEGER NOT NULL,
	PRIMARY KEY(workspace, path)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS files_content ON files(content);
-- A workspace's search segment (postings, chunks, symbols of the contents
-- it held when built), one byte stream cut into blocks.
CREATE TABLE IF NOT EXISTS segment_blocks(
	workspace TEXT NOT NULL,
	gen INTEGER NOT NULL,
	seq INTEGER NOT NULL,
	data BLOB NOT NULL,
	PRIMARY KEY(workspace, gen, seq)
) WITHOUT ROWID;
`

// openDB opens (creating) the SQLite database at path in WAL mode, so
// searches read while indexing writes. A database with another schema
// version is moved aside and recreated.
func openDB(ctx context.Context, path string) (*sql.DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("index database: %w", err)
	}
	for attempt := 0; ; attempt++ {
		db, err := sql.Open("sqlite", dsn(path))
		if err != nil {
			return nil, fmt.Errorf("open index database %s: %w", path, err)
		}
		if _, err := db.ExecContext(ctx, schema); err != nil {
			db.Close()
			return nil, fmt.Errorf("open index database %s: %w", path, err)
		}
		var v string
		err = db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key='schema'`).Scan(&v)
		switch {
		case err == sql.ErrNoRows:
			_, err = db.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES('schema', ?)`, schemaVersion)
			if err != nil {
				db.Close()
				return nil, fmt.Errorf("index database %s: %w", path, err)
			}
			return db, nil
		case err != nil:
			db.Close()
			return nil, fmt.Errorf("index database %s: %w", path, err)
		case v == schemaVersion:
			return db, nil
		}
		db.Close()
		if attempt > 0 {
			return nil, fmt.Errorf("index database %s has schema %s and could not be recreated", path, v)
		}
		old := fmt.Sprintf("%s.schema%s.old", path, v)
		for _, suffix := range []string{"", "-wal", "-shm"} {
			os.Rename(path+suffix, old+suffix)
		}
	}
}

// dsn is the connection string: WAL journaling, a busy timeout for the
// moments two processes write, and NORMAL sync (safe in WAL mode).
func dsn(path string) string {
	q := url.Values{}
	for _, p := range []string{"journal_mode(WAL)", "busy_timeout(10000)", "synchronous(NORMAL)", "foreign_keys(OFF)"} {
		q.Add("_pragma", p)
	}
	return "file:" + path + "?" + q.Encode()
}

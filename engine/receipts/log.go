package receipts

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/gofrs/flock"
)

// lockRetry is how often a blocked Append retries the log's file lock.
const lockRetry = time.Millisecond

// Options configures a Log. The zero value is an unsigned log (hash chain
// only) on the system clock that logs nothing.
type Options struct {
	// Key signs every receipt (see LoadOrCreateKey); nil for none. Open
	// adds its public key to the log's receipts.pub.
	Key ed25519.PrivateKey
	// Logger receives a warning when Append repairs a torn last line; nil
	// discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now. Tests set it.
	Now func() time.Time
}

// Log appends receipts to the log directory dir laid out as
// dir/yyyy/mm/receipts.jsonl (see the package documentation). A Log is safe
// for concurrent use by many goroutines, and any number of processes may
// append to the same directory at once: every Append holds an exclusive
// flock(2) on dir/receipts.lock while it reads the chain head and writes.
type Log struct {
	dir    string
	key    ed25519.PrivateKey
	keyID  string
	logger *slog.Logger
	now    func() time.Time
	lock   *flock.Flock

	// sem serialises the goroutines of this process (a flock is held per
	// open file, and gofrs/flock shares one file among its callers); it
	// guards everything below.
	sem    chan struct{}
	closed bool
	head   head
}

// head is the cached end of the chain: the last receipt's hash and time and
// the file (and its size) it was read from. It is re-checked under the file
// lock before each append, since another process may have appended.
type head struct {
	valid bool
	file  string      // month file holding the last receipt; "" for an empty log
	info  fs.FileInfo // that file as it was when the head was read
	hash  string
	time  time.Time
	count int // receipts in the chain
}

// Open returns a Log for dir, creating dir (mode 0700) if needed, and
// syncing the parent of every directory it creates, so that a receipt
// appended later is reachable after a crash. With
// opts.Key set it first adds the key's public key to dir/receipts.pub,
// waiting for the log's lock to do so. It does not read the log; the first
// Append does. The error wraps ErrInvalidKey for a key that is not 64
// bytes.
func Open(dir string, opts Options) (*Log, error) {
	if err := mkdirDurable(dir); err != nil {
		return nil, fmt.Errorf("open receipt log: %w", err)
	}
	l := &Log{
		dir:    dir,
		key:    opts.Key,
		logger: opts.Logger,
		now:    opts.Now,
		lock:   flock.New(filepath.Join(dir, LockFile)),
		sem:    make(chan struct{}, 1),
	}
	if l.logger == nil {
		l.logger = slog.New(slog.DiscardHandler)
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.key != nil {
		if len(l.key) != ed25519.PrivateKeySize {
			return nil, fmt.Errorf("open receipt log: %w: private key has %d bytes", ErrInvalidKey, len(l.key))
		}
		pub := l.key.Public().(ed25519.PublicKey)
		l.keyID = KeyID(pub)
		if err := publishKey(dir, pub); err != nil {
			return nil, fmt.Errorf("open receipt log: %w", err)
		}
	}
	return l, nil
}

// Dir returns the log directory.
func (l *Log) Dir() string { return l.dir }

// Path returns the month file r is (or will be) stored in:
// MonthOf(r.Time).File(l.Dir()). The task front-end returns it as
// receiptPath.
func (l *Log) Path(r Receipt) string { return MonthOf(r.Time).File(l.dir) }

// Close makes later Appends fail with ErrClosed. The Log holds no file open
// between Appends, so there is nothing else to release. It waits for an
// Append in progress.
func (l *Log) Close() error {
	l.sem <- struct{}{}
	l.closed = true
	<-l.sem
	return nil
}

// Append completes r and appends it to the log, and returns it as written.
// The caller sets Kind (one of the Kind constants), Actor and what applies
// of Workspace, Session, Turn, Tool, ArgsDigest, DiffHash, ExitCode, Reason
// and Data (a JSON object, stored canonicalised). Append sets Version, ID
// (when empty), Time, Prev, Hash and, when the log has a key, KeyID and
// Sig, replacing what the caller put there.
//
// Under the exclusive file lock Append reads the chain head (the last line
// of the newest non-empty month file, checked against its own hash), takes
// Time from the clock (or the head's time, if the clock reads earlier, so
// times never decrease and month files stay in chain order), and writes the
// line to the file of Time's UTC month with one write(2) on a file opened
// O_APPEND, then fsyncs the file and, if the file (or its month or year
// directory) is new, the directories above it. When Append returns nil the
// receipt is durable.
//
// A last line without its newline is what a crash during an earlier Append
// leaves; that Append never returned, so its receipt was never promised to
// anyone. Append repairs it: it copies the torn bytes to
// receipts.jsonl.torn beside the month file, truncates the month file to
// its last whole line, logs a warning, and continues the chain from that
// line. A last line that is whole but does not decode or does not match its
// hash is not a crash artefact: Append refuses to extend the chain and
// returns a *LineError (ErrMalformed or ErrHashMismatch) until someone
// looks at the log.
//
// Errors: ErrInvalidReceipt for a receipt it cannot write, ErrClosed after
// Close, ctx.Err() when ctx ends while waiting for the lock, an error when
// the clock reads a year outside 0000..9999, and I/O errors.
// An I/O error after the write began may leave a torn line, which the next
// Append repairs; an error from fsync leaves the receipt's durability
// unknown.
//
// Every error reads "append receipt: ...", once: callers add no prefix of
// their own.
func (l *Log) Append(ctx context.Context, r Receipt) (Receipt, error) {
	r, err := l.append(ctx, r)
	if err != nil {
		return Receipt{}, fmt.Errorf("append receipt: %w", err)
	}
	return r, nil
}

func (l *Log) append(ctx context.Context, r Receipt) (Receipt, error) {
	if err := r.validate(); err != nil {
		return Receipt{}, err
	}
	select {
	case l.sem <- struct{}{}:
	case <-ctx.Done():
		return Receipt{}, ctx.Err()
	}
	defer func() { <-l.sem }()
	if l.closed {
		return Receipt{}, ErrClosed
	}
	if _, err := l.lock.TryLockContext(ctx, lockRetry); err != nil {
		if ctx.Err() != nil {
			return Receipt{}, ctx.Err()
		}
		return Receipt{}, fmt.Errorf("lock %s: %w", l.lock.Path(), err)
	}
	defer l.lock.Unlock()

	h, err := l.currentHead()
	if err != nil {
		l.head = head{}
		return Receipt{}, err
	}
	t := l.now().UTC()
	if t.Before(h.time) {
		t = h.time
	}
	if t.Year() < 0 || t.Year() > 9999 {
		return Receipt{}, fmt.Errorf("clock reads %v, outside the years 0000 to 9999 the layout can name", t)
	}
	r.Version, r.Time, r.Prev = Version, t, h.hash
	if r.ID == "" {
		r.ID = rand.Text()
	}
	line, err := r.seal(l.key, l.keyID)
	if err != nil {
		return Receipt{}, err
	}
	if len(line) > MaxLineSize {
		return Receipt{}, fmt.Errorf("%w: line of %d bytes is longer than %d", ErrInvalidReceipt, len(line), MaxLineSize)
	}
	path := l.Path(r)
	info, err := l.write(path, line)
	if err != nil {
		l.head = head{}
		return Receipt{}, err
	}
	l.head = head{valid: true, file: path, info: info, hash: r.Hash, time: r.Time, count: h.count + 1}
	// The receipt is durable now; the signed head follows it. A crash (or
	// a failure) here leaves the head one receipt behind, which Verify
	// accepts and the next Append or Repair corrects.
	if err := l.writeHead(l.head); err != nil {
		l.logger.Warn("receipts: the signed head could not be updated; removal of the last receipts would go unnoticed until the next append",
			"dir", l.dir, "error", err)
	}
	return r, nil
}

// writeHead writes the signed head for the chain end h.
func (l *Log) writeHead(h head) error {
	_, line, err := sealHead(h.count, h.hash, h.time, l.key, l.keyID)
	if err != nil {
		return err
	}
	return writeHeadFile(l.dir, line)
}

// currentHead returns the chain head, from the cache when the newest
// non-empty month file is the one the cache was read from and its size and
// modification time have not changed (another process's append changes the
// size), otherwise by reading that file's last line.
func (l *Log) currentHead() (head, error) {
	files, err := listMonthFiles(l.dir)
	if err != nil {
		return head{}, err
	}
	for i := len(files) - 1; i >= 0; i-- {
		f := files[i]
		if f.info.Size() == 0 {
			continue // created by an Append that crashed before writing
		}
		if c := l.head; c.valid && c.file == f.path && os.SameFile(c.info, f.info) &&
			c.info.Size() == f.info.Size() && c.info.ModTime().Equal(f.info.ModTime()) {
			return l.head, nil
		}
		h, err := l.readHead(f.path)
		if err != nil {
			return head{}, err
		}
		if h.file == "" {
			continue // the repair emptied the file
		}
		if h.count, err = l.chainLength(h.hash); err != nil {
			return head{}, err
		}
		l.head = h
		return h, nil
	}
	// An empty log: it must not have had receipts (see chainLength).
	if _, err := l.chainLength(""); err != nil {
		return head{}, err
	}
	l.head = head{valid: true}
	return l.head, nil
}

// chainLength returns the number of receipts of a log whose last receipt
// has hash last, checking the chain against the signed head: the head's
// count when the head names last (the usual case: every Append writes
// it), else the count of lines, after making sure the head's receipt is
// in the chain at its place (the head lags when an Append stopped between
// its line and its head). A log that ends before its head's receipt, or
// holds another receipt there, has lost or changed receipts: Append
// refuses to extend it (ErrMissingReceipts, ErrHeadMismatch), as it does a
// damaged last line, since a new head would hide the damage. A head file
// that does not decode is ErrBadHead; a log without one (written before
// heads existed) gets one with the next Append.
func (l *Log) chainLength(last string) (int, error) {
	data, err := readHeadFile(l.dir)
	if err != nil {
		return 0, err
	}
	var hd Head
	if data != nil {
		if hd, err = decodeHead(data); err != nil {
			return 0, fmt.Errorf("%w; not appending until it is looked at (plexus receipts verify, then plexus receipts repair)", err)
		}
		if hd.Last == last {
			return hd.Count, nil
		}
	}
	files, err := listMonthFiles(l.dir) // sizes after any repair
	if err != nil {
		return 0, err
	}
	n, err := countReceipts(files)
	if err != nil || data == nil || hd.Count == 0 {
		return n, err
	}
	if n < hd.Count {
		return 0, fmt.Errorf("%w: the log holds %d receipts, its signed head records %d (the last with hash %s); not appending to it (plexus receipts verify says more)",
			ErrMissingReceipts, n, hd.Count, hd.Last)
	}
	at, err := hashAt(files, hd.Count)
	if err != nil {
		return 0, err
	}
	if at != hd.Last {
		return 0, fmt.Errorf("%w: receipt %d has hash %s, the signed head says %s; not appending to it (plexus receipts verify says more)",
			ErrHeadMismatch, hd.Count, at, hd.Last)
	}
	return n, nil
}

// hashAt returns the hash member of receipt n (1-based) of the month
// files.
func hashAt(files []monthFile, n int) (string, error) {
	errFound := errors.New("found")
	var hash string
	seen := 0
	for _, f := range files {
		err := scanFile(context.Background(), f, func(_ int, line []byte) error {
			if seen++; seen < n {
				return nil
			}
			d, err := decodeLine(line)
			if err != nil {
				return err
			}
			hash = d.receipt.Hash
			return errFound
		})
		if errors.Is(err, errFound) {
			return hash, nil
		}
		if err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("%w: the log holds %d receipts, fewer than %d", ErrMissingReceipts, seen, n)
}

// readHead reads the last line of the month file path, repairing a torn
// last line first. It returns a head with file "" when the file holds no
// whole line.
func (l *Log) readHead(path string) (head, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return head{}, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return head{}, err
	}
	size := info.Size()
	last, start, err := lastLine(f, size)
	if err != nil {
		return head{}, err
	}
	if end := start + int64(len(last)); end < size {
		// Bytes after the last newline: a torn line. Even a whole receipt
		// without its newline was never acknowledged (Append returns after
		// the newline is written), so it goes aside too.
		if err := l.repair(f, path, end, size); err != nil {
			return head{}, err
		}
		return l.readHead(path)
	}
	if len(last) == 0 {
		return head{}, nil // empty
	}
	d, err := decodeLine(last[:len(last)-1])
	if err == nil && d.hash != d.receipt.Hash {
		err = fmt.Errorf("%w: content hashes to %s, line says %s", ErrHashMismatch, d.hash, d.receipt.Hash)
	}
	if err != nil {
		n, cerr := countLines(f, start)
		if cerr != nil {
			return head{}, cerr
		}
		return head{}, &LineError{File: path, Line: n + 1, Err: fmt.Errorf("last receipt: %w; not appending to a damaged log (run Verify)", err)}
	}
	return head{valid: true, file: path, info: info, hash: d.receipt.Hash, time: d.receipt.Time}, nil
}

// lastLine returns the last newline-terminated line of the first size bytes
// of f and its offset. If the data does not end with a newline, the line
// returned is the last whole one, and start+len(line) is where the torn
// bytes begin; a file without any newline gives an empty line at 0.
func lastLine(f *os.File, size int64) (line []byte, start int64, err error) {
	const chunk = 64 << 10
	var buf []byte
	// Find the last '\n': it ends the last whole line.
	nlEnd := int64(-1)
	for pos := size; pos > 0 && nlEnd < 0; {
		from := max(pos-chunk, 0)
		buf = make([]byte, pos-from)
		if _, err := f.ReadAt(buf, from); err != nil {
			return nil, 0, err
		}
		if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
			nlEnd = from + int64(i)
		}
		pos = from
	}
	if nlEnd < 0 {
		return nil, 0, nil
	}
	// Find the '\n' before it: the line starts after that.
	start = 0
	for pos := nlEnd; pos > 0; {
		from := max(pos-chunk, 0)
		buf = make([]byte, pos-from)
		if _, err := f.ReadAt(buf, from); err != nil {
			return nil, 0, err
		}
		if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
			start = from + int64(i) + 1
			break
		}
		pos = from
	}
	line = make([]byte, nlEnd+1-start)
	if _, err := f.ReadAt(line, start); err != nil {
		return nil, 0, err
	}
	return line, start, nil
}

// countLines counts the newlines in the first n bytes of f.
func countLines(f *os.File, n int64) (int, error) {
	count := 0
	buf := make([]byte, 64<<10)
	r := io.NewSectionReader(f, 0, n)
	for {
		k, err := r.Read(buf)
		count += bytes.Count(buf[:k], []byte{'\n'})
		if err == io.EOF {
			return count, nil
		}
		if err != nil {
			return 0, err
		}
	}
}

// repair moves the bytes f[cut:size] after the last newline of the month
// file path (a torn line) to path+".torn", appended with a newline (at most
// MaxLineSize of them), and truncates f to cut.
func (l *Log) repair(f *os.File, path string, cut, size int64) error {
	keep := min(size-cut, MaxLineSize)
	torn := make([]byte, keep, keep+1)
	if _, err := f.ReadAt(torn, cut); err != nil {
		return fmt.Errorf("repair %s: %w", path, err)
	}
	aside := path + ".torn"
	t, err := os.OpenFile(aside, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("repair %s: %w", path, err)
	}
	_, err = t.Write(append(torn, '\n'))
	if err == nil {
		err = t.Sync()
	}
	if cerr := t.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err == nil {
		err = f.Truncate(cut)
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		return fmt.Errorf("repair %s: %w", path, err)
	}
	l.logger.Warn("receipts: removed a torn last line (an append was interrupted)",
		"file", path, "offset", cut, "bytes", size-cut, "saved_to", aside, "saved_bytes", keep)
	return nil
}

// write appends line to the month file path with one write and fsyncs it,
// creating the file and its directories as needed and fsyncing each
// directory that gained an entry. It returns the file's state afterwards.
func (l *Log) write(path string, line []byte) (fs.FileInfo, error) {
	monthDir := filepath.Dir(path)
	yearDir := filepath.Dir(monthDir)
	var syncDirs []string // parents of new entries, deepest first
	for _, d := range []string{yearDir, monthDir} {
		err := os.Mkdir(d, 0o700)
		if err == nil {
			syncDirs = append([]string{filepath.Dir(d)}, syncDirs...)
		} else if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		syncDirs = append([]string{monthDir}, syncDirs...)
	} else if errors.Is(err, fs.ErrExist) {
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	}
	if err != nil {
		return nil, err
	}
	n, err := f.Write(line)
	if err == nil && n != len(line) {
		err = io.ErrShortWrite
	}
	if err == nil {
		err = f.Sync()
	}
	var info fs.FileInfo
	if err == nil {
		info, err = f.Stat()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	for _, d := range syncDirs {
		if err != nil {
			break
		}
		err = syncDir(d)
	}
	if err != nil {
		return nil, err
	}
	return info, nil
}

// mkdirDurable is os.MkdirAll(dir, 0o700) that also syncs the parent of
// each directory it creates.
func mkdirDurable(dir string) error {
	dir = filepath.Clean(dir)
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, d := range missing {
		if err := syncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

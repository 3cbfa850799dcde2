package receipts

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/gofrs/flock"
)

// MaxLineSize is the longest receipt line, newline included, that Append
// writes and a Reader accepts: 16 MiB.
const MaxLineSize = 16 << 20

// Reader reads and verifies the receipt log in a directory; it is the
// ReceiptStorageReader of the receipt contract. It never writes, so it
// works on a read-only copy of a log. It is safe for concurrent use.
//
// A Reader sees a consistent prefix of the log while processes append: it
// lists the month files and their sizes under a shared flock(2) on
// dir/receipts.lock (skipped when that file does not exist, as in a copied
// log), releases it, and reads each file only up to the size it listed.
type Reader struct {
	dir string
}

// NewReader returns a Reader for the log directory dir.
func NewReader(dir string) *Reader { return &Reader{dir: dir} }

// Dir returns the log directory.
func (r *Reader) Dir() string { return r.dir }

// Entry is a receipt and where it is: File is the month file's path, Line
// its 1-based line number.
type Entry struct {
	Receipt Receipt
	File    string
	Line    int
}

// Months returns the months that have a non-empty month file, oldest first.
func (r *Reader) Months(ctx context.Context) ([]Month, error) {
	snap, err := r.snapshot(ctx, false)
	if err != nil {
		return nil, err
	}
	var months []Month
	for _, f := range snap.files {
		if f.info.Size() > 0 {
			months = append(months, f.month)
		}
	}
	return months, nil
}

// List returns the receipts of month m (all months when m is zero) in log
// order. It decodes every line but checks no hash, chain or signature (see
// Verify). At the first line that does not decode it returns the entries
// before it and a *LineError (ErrMalformed, or ErrTruncated for a last line
// without its newline).
func (r *Reader) List(ctx context.Context, m Month) ([]Entry, error) {
	snap, err := r.snapshot(ctx, false)
	if err != nil {
		return nil, err
	}
	var entries []Entry
	for _, f := range snap.files {
		if !m.IsZero() && f.month != m {
			continue
		}
		err := scanFile(ctx, f, func(n int, line []byte) error {
			d, err := decodeLine(line)
			if err != nil {
				return err
			}
			entries = append(entries, Entry{Receipt: d.receipt, File: f.path, Line: n})
			return nil
		})
		if err != nil {
			return entries, err
		}
	}
	return entries, nil
}

// VerifyOptions configures Verify. The zero value verifies signatures with
// the keys in the log's receipts.pub and accepts unsigned receipts and a
// log without a signed head.
type VerifyOptions struct {
	// PublicKeys verify signatures; nil means LoadPublicKeys(dir). Pass
	// keys kept elsewhere (for example LoadPublicKeys of the key
	// directory) to detect someone who rewrote both the log and its
	// receipts.pub.
	PublicKeys []ed25519.PublicKey
	// RequireSigned makes an unsigned receipt an error (ErrUnsigned).
	RequireSigned bool
	// RequireHead makes a log with receipts but no signed head an error
	// (ErrNoHead): without one, receipts removed from the end cannot be
	// detected.
	RequireHead bool
}

// Report is the outcome of Verify.
type Report struct {
	// Receipts is the number of receipts verified: all of them on success,
	// those before the bad line on failure.
	Receipts int
	// Signed is how many of those carried a signature that verified.
	Signed int
	// Files is the number of non-empty month files read.
	Files int
	// Head is the hash of the last verified receipt, "" for an empty log.
	Head string
	// Last is the time of the last verified receipt.
	Last time.Time
	// Anchor is the log's signed head (receipts.head) as read, nil when
	// the log has none. Verify checked that receipt Anchor.Count is the
	// one it names; AfterAnchor counts the receipts after it (appended
	// since, or 1 when an Append stopped between its line and its head).
	Anchor      *Head
	AfterAnchor int
}

// Verify reads the whole log, oldest month first, and checks that every
// line is a whole, well-formed receipt (ErrTruncated, ErrMalformed), that
// its hash matches its content (ErrHashMismatch), that its prev is the hash
// of the receipt before it, across month files, and "" for the first
// (ErrChainBroken), that it lies in the file of its time's month and its
// time is not earlier than the previous receipt's (ErrMisplaced), and that
// its signature, if any, verifies with the public key its key_id names
// (ErrUnknownKey, ErrBadSignature; ErrUnsigned for a receipt without one
// under RequireSigned). It stops at the first bad line and returns a
// *LineError naming it (file:line) with the Report of what it verified
// before.
//
// When the log has a signed head (receipts.head), Verify checks its hash
// and signature (ErrBadHead; a head anchoring a signed receipt must be
// signed too), that the receipt at the position it names is the one it
// names (ErrHeadMismatch, as a *LineError), and that the log reaches that
// position (ErrMissingReceipts: receipts were removed from the end).
// Without one, RequireHead makes a non-empty log ErrNoHead. Other errors
// are I/O errors and ctx.Err().
func (r *Reader) Verify(ctx context.Context, opts VerifyOptions) (Report, error) {
	snap, err := r.snapshot(ctx, opts.PublicKeys == nil)
	if err != nil {
		return Report{}, err
	}
	if opts.PublicKeys != nil {
		snap.keys = opts.PublicKeys
	}
	return verifyLog(ctx, snap, opts)
}

// verifyLog is Verify on a snapshot of the log.
func verifyLog(ctx context.Context, snap snapshot, opts VerifyOptions) (Report, error) {
	byID := make(map[string]ed25519.PublicKey, len(snap.keys))
	for _, k := range snap.keys {
		if len(k) == ed25519.PublicKeySize {
			byID[KeyID(k)] = k
		}
	}
	var rep Report
	var anchor *Head
	if snap.head != nil {
		h, err := decodeHead(snap.head)
		if err == nil {
			err = verifyHead(h, byID)
		}
		if err != nil {
			return rep, fmt.Errorf("%s: %w", filepath.Join(snap.dir, HeadFile), err)
		}
		anchor = &h
		rep.Anchor = anchor
	}
	for _, f := range snap.files {
		if f.info.Size() == 0 {
			continue
		}
		rep.Files++
		err := scanFile(ctx, f, func(_ int, line []byte) error {
			d, err := decodeLine(line)
			if err != nil {
				return err
			}
			rc := d.receipt
			if d.hash != rc.Hash {
				return fmt.Errorf("%w: content hashes to %s, line says %s", ErrHashMismatch, d.hash, rc.Hash)
			}
			if rc.Prev != rep.Head {
				return fmt.Errorf("%w: prev is %q, the previous receipt's hash is %q", ErrChainBroken, rc.Prev, rep.Head)
			}
			if MonthOf(rc.Time) != f.month {
				return fmt.Errorf("%w: time %s is not in month %s", ErrMisplaced, rc.Time.Format(TimeFormat), f.month)
			}
			if rc.Time.Before(rep.Last) {
				return fmt.Errorf("%w: time %s is before the previous receipt's %s", ErrMisplaced,
					rc.Time.Format(TimeFormat), rep.Last.Format(TimeFormat))
			}
			signed := false
			switch {
			case rc.KeyID != "":
				pub, ok := byID[rc.KeyID]
				if !ok {
					return fmt.Errorf("%w: key_id %s", ErrUnknownKey, rc.KeyID)
				}
				sig, _ := base64.StdEncoding.Strict().DecodeString(rc.Sig) // decodeLine checked it
				if !ed25519.Verify(pub, []byte(rc.Hash), sig) {
					return fmt.Errorf("%w: key_id %s", ErrBadSignature, rc.KeyID)
				}
				signed = true
			case opts.RequireSigned:
				return ErrUnsigned
			}
			if anchor != nil && rep.Receipts+1 == anchor.Count {
				if rc.Hash != anchor.Last {
					return fmt.Errorf("%w: this is receipt %d, with hash %s; the signed head says receipt %d has hash %s",
						ErrHeadMismatch, anchor.Count, rc.Hash, anchor.Count, anchor.Last)
				}
				if rc.KeyID != "" && anchor.KeyID == "" {
					return fmt.Errorf("%w: receipt %d is signed, the head that anchors it is not", ErrBadHead, anchor.Count)
				}
			}
			rep.Receipts++
			if signed {
				rep.Signed++
			}
			rep.Head, rep.Last = rc.Hash, rc.Time
			return nil
		})
		if err != nil {
			return rep, err
		}
	}
	switch {
	case anchor != nil && rep.Receipts < anchor.Count:
		return rep, fmt.Errorf("%w: the log ends after receipt %d (hash %s), but its signed head, written %s, records %d receipts, the last with hash %s",
			ErrMissingReceipts, rep.Receipts, orNone(rep.Head), anchor.Time.Format(TimeFormat), anchor.Count, anchor.Last)
	case anchor != nil:
		rep.AfterAnchor = rep.Receipts - anchor.Count
	case opts.RequireHead && rep.Receipts > 0:
		return rep, fmt.Errorf("%w: %s is missing, so receipts removed from the end of the log could not be detected", ErrNoHead, filepath.Join(snap.dir, HeadFile))
	}
	return rep, nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// snapshot is what a reader sees of a log at one moment: its month files
// with their sizes, its signed head's content (nil when none) and,
// when asked for, its published keys.
type snapshot struct {
	dir   string
	files []monthFile
	head  []byte
	keys  []ed25519.PublicKey
}

// snapshot lists the month files (with their sizes), reads the head and,
// if withKeys, the public keys, under a shared lock on the log.
func (r *Reader) snapshot(ctx context.Context, withKeys bool) (snapshot, error) {
	lock := flock.New(filepath.Join(r.dir, LockFile), flock.SetFlag(os.O_RDONLY))
	if _, err := lock.TryRLockContext(ctx, lockRetry); err != nil {
		if ctx.Err() != nil {
			return snapshot{}, ctx.Err()
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return snapshot{}, fmt.Errorf("read receipts: lock: %w", err)
		}
		// No lock file: no Log has ever opened this directory, or it is a
		// copy. Read without a lock.
	}
	defer lock.Unlock()
	return readSnapshot(r.dir, withKeys)
}

// readSnapshot reads the snapshot of the log in dir; the caller holds the
// log's lock (or knows nobody writes).
func readSnapshot(dir string, withKeys bool) (snapshot, error) {
	snap := snapshot{dir: dir}
	var err error
	if snap.files, err = listMonthFiles(dir); err != nil {
		return snapshot{}, fmt.Errorf("read receipts: %w", err)
	}
	if snap.head, err = readHeadFile(dir); err != nil {
		return snapshot{}, fmt.Errorf("read receipts: %w", err)
	}
	if withKeys {
		if snap.keys, err = LoadPublicKeys(dir); err != nil {
			return snapshot{}, err
		}
	}
	return snap, nil
}

// scanFile calls fn with each line (without its newline) of the first
// f.info.Size() bytes of the month file, numbered from 1, and turns an
// error from fn into a *LineError. A last line without a newline is
// reported as ErrTruncated, a line longer than MaxLineSize as ErrMalformed.
func scanFile(ctx context.Context, f monthFile, fn func(n int, line []byte) error) error {
	file, err := os.Open(f.path)
	if err != nil {
		return fmt.Errorf("read receipts: %w", err)
	}
	defer file.Close()
	br := bufio.NewReaderSize(io.LimitReader(file, f.info.Size()), 64<<10)
	for n := 1; ; n++ {
		if n%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		line, err := readLine(br)
		switch {
		case err == io.EOF && len(line) == 0:
			return nil
		case err == io.EOF:
			return &LineError{File: f.path, Line: n, Err: fmt.Errorf("%w: %d bytes without a newline at the end of the file", ErrTruncated, len(line))}
		case errors.Is(err, ErrMalformed):
			return &LineError{File: f.path, Line: n, Err: err}
		case err != nil:
			return fmt.Errorf("read receipts: %s: %w", f.path, err)
		}
		if err := fn(n, line[:len(line)-1]); err != nil {
			return &LineError{File: f.path, Line: n, Err: err}
		}
	}
}

// readLine returns the next line including its newline; at the end of the
// input it returns what is left (no newline) and io.EOF. A line longer than
// MaxLineSize gives an error wrapping ErrMalformed.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > MaxLineSize {
			return nil, fmt.Errorf("%w: line longer than %d bytes", ErrMalformed, MaxLineSize)
		}
		if err == bufio.ErrBufferFull {
			line = append(line, chunk...)
			continue
		}
		if line == nil {
			line = append([]byte(nil), chunk...)
		} else {
			line = append(line, chunk...)
		}
		return line, err
	}
}

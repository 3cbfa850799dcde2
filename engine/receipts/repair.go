package receipts

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"os"
)

// TornTail is a torn last line that Repair moved aside.
type TornTail struct {
	// File is the month file; Line the line number the torn bytes would
	// have been, Offset where they began and Bytes how many there were.
	File   string
	Line   int
	Offset int64
	Bytes  int64
	// SavedTo is where they went: File + ".torn" (at most MaxLineSize of
	// them, with a newline).
	SavedTo string
}

// RepairReport says what Repair found and did.
type RepairReport struct {
	// Torn lists the torn lines moved aside.
	Torn []TornTail
	// HeadWritten is true when the log had no signed head, or its head
	// was behind the chain, and Repair wrote one for the chain's end.
	HeadWritten bool
	// Report is the verification of the log after the repair.
	Report Report
}

// Repair brings a log back to the state the next Append would leave it
// in, and says what it changed. Under the log's exclusive lock it moves
// the bytes after the last newline of each month file (a torn line: what
// an Append that never returned had written, so its receipt was never
// acknowledged) to receipts.jsonl.torn beside the file; then it verifies
// the whole log with the public keys of the log's receipts.pub and the
// Log's own key; then, when the log has no signed head or its head is
// behind the chain (an Append stopped between its line and its head),
// it writes the head for the chain's end.
//
// It repairs nothing else: a damaged whole line, a broken chain, receipts
// missing from the end, or a head that does not verify are returned as
// Verify returns them (a *LineError, ErrMissingReceipts, ErrBadHead),
// with what Repair did before, because only a person (or a backup) can
// say what they should be. A signed log's head needs the signing key:
// without Options.Key Repair leaves such a head alone and says so.
// Errors also: ErrClosed, ctx.Err() while waiting for the lock, I/O
// errors.
func (l *Log) Repair(ctx context.Context) (RepairReport, error) {
	select {
	case l.sem <- struct{}{}:
	case <-ctx.Done():
		return RepairReport{}, ctx.Err()
	}
	defer func() { <-l.sem }()
	if l.closed {
		return RepairReport{}, ErrClosed
	}
	if _, err := l.lock.TryLockContext(ctx, lockRetry); err != nil {
		if ctx.Err() != nil {
			return RepairReport{}, ctx.Err()
		}
		return RepairReport{}, fmt.Errorf("repair receipts: lock %s: %w", l.lock.Path(), err)
	}
	defer l.lock.Unlock()
	l.head = head{} // whatever happens, the next Append reads the log again

	var out RepairReport
	files, err := listMonthFiles(l.dir)
	if err != nil {
		return out, fmt.Errorf("repair receipts: %w", err)
	}
	for _, mf := range files {
		if mf.info.Size() == 0 {
			continue
		}
		torn, err := l.repairTail(mf.path)
		if err != nil {
			return out, err
		}
		if torn != nil {
			out.Torn = append(out.Torn, *torn)
		}
	}

	snap, err := readSnapshot(l.dir, true)
	if err != nil {
		return out, err
	}
	if l.key != nil {
		snap.keys = append(snap.keys, l.key.Public().(ed25519.PublicKey))
	}
	rep, err := verifyLog(ctx, snap, VerifyOptions{})
	out.Report = rep
	if err != nil {
		return out, err
	}
	behind := rep.Anchor == nil && rep.Receipts > 0 || rep.Anchor != nil && rep.AfterAnchor > 0
	if !behind {
		return out, nil
	}
	if l.key == nil && rep.Signed > 0 {
		return out, fmt.Errorf("%w: the log's receipts are signed, so its head must be too; run the repair with the signing key", ErrNoHead)
	}
	h, line, err := sealHead(rep.Receipts, rep.Head, rep.Last, l.key, l.keyID)
	if err != nil {
		return out, err
	}
	if err := writeHeadFile(l.dir, line); err != nil {
		return out, fmt.Errorf("repair receipts: write the head: %w", err)
	}
	out.HeadWritten = true
	out.Report.Anchor, out.Report.AfterAnchor = &h, 0
	return out, nil
}

// repairTail moves a torn last line of the month file path aside (see
// repair) and describes it; nil when the file ends with a newline.
func (l *Log) repairTail(path string) (*TornTail, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("repair receipts: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("repair receipts: %w", err)
	}
	size := info.Size()
	last, start, err := lastLine(f, size)
	if err != nil {
		return nil, fmt.Errorf("repair receipts: %w", err)
	}
	end := start + int64(len(last))
	if end == size {
		return nil, nil
	}
	n, err := countLines(f, end)
	if err != nil {
		return nil, fmt.Errorf("repair receipts: %w", err)
	}
	if err := l.repair(f, path, end, size); err != nil {
		return nil, err
	}
	return &TornTail{File: path, Line: n + 1, Offset: end, Bytes: size - end, SavedTo: path + ".torn"}, nil
}

package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
)

// Contention settings (see the package documentation).
const (
	// lockWait bounds how long one transaction keeps trying to take the
	// write lock while other processes hold it.
	lockWait = 10 * time.Second
	// retryBase and retryCap shape the pause after failed attempt n: a
	// random duration in [0, min(retryCap, retryBase·2^(n-1))) ("full
	// jitter"). The writer's connection has no busy_timeout: SQLite's
	// busy handler sleeps ever longer and lets a busy process starve the
	// others, while short random pauses keep taking turns.
	retryBase = 500 * time.Microsecond
	retryCap  = 5 * time.Millisecond
	// readBusyTimeout is the readers' busy_timeout: in WAL mode they wait
	// only while another connection recovers the log after a crash.
	readBusyTimeout = 5 * time.Second
	// maxBatch bounds the writes committed in one transaction.
	maxBatch = 512
	// batchTimeout bounds one attempt of one transaction once the writer
	// holds the lock.
	batchTimeout = 30 * time.Second
	// queueLen is how many writes may wait for the writer before callers
	// block.
	queueLen = 1024
	// maxReaders bounds the reading connections; more readers wait for
	// one.
	maxReaders = 16
)

// Errors of the store itself.
var (
	// ErrBusy: another process held the database's write lock through
	// every attempt of a write; the write was not made.
	ErrBusy = errors.New("the state database stayed locked by another process")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("the state database is closed")
)

// dbtx is what a write runs its statements on: the writer's connection,
// inside its transaction.
type dbtx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// States of a writeOp.
const (
	opQueued int32 = iota
	opTaken
	opDropped
)

// writeOp is one write waiting for the writer.
type writeOp struct {
	// fn runs the write's statements inside the writer's transaction; its
	// error fails this write alone.
	fn    func(ctx context.Context, tx dbtx) error
	state atomic.Int32
	done  chan error // buffered: the writer never waits for the caller
}

// write hands fn to the writer and waits for its outcome: nil once the
// transaction holding it has committed (durably), else fn's error, the
// commit's error, or an error wrapping ErrBusy. When ctx ends before the
// writer took the write, write returns the context's error and the write
// is never made; once taken, write waits for the outcome whatever ctx
// does (the writer bounds it with batchTimeout and the retries).
func (s *Store) write(ctx context.Context, fn func(ctx context.Context, tx dbtx) error) error {
	if ctx.Err() != nil { // select picks at random when both are ready
		return context.Cause(ctx)
	}
	op := &writeOp{fn: fn, done: make(chan error, 1)}
	s.wmu.RLock()
	if s.closed {
		s.wmu.RUnlock()
		return ErrClosed
	}
	select {
	case s.queue <- op:
	case <-ctx.Done():
		s.wmu.RUnlock()
		return context.Cause(ctx)
	}
	s.wmu.RUnlock()
	select {
	case err := <-op.done:
		return err
	case <-ctx.Done():
		if op.state.CompareAndSwap(opQueued, opDropped) {
			return context.Cause(ctx)
		}
		return <-op.done
	}
}

// run is the writer: it commits the queued writes in batches until the
// queue is closed and empty.
func (s *Store) run() {
	defer close(s.exited)
	for op := range s.queue {
		batch := []*writeOp{op}
	collect:
		for len(batch) < maxBatch {
			select {
			case op, ok := <-s.queue:
				if !ok {
					break collect
				}
				batch = append(batch, op)
			default:
				break collect
			}
		}
		s.commit(batch)
	}
}

// commit makes the writes of batch that are still wanted in one
// transaction, trying again while another process holds the lock, and
// tells each its outcome.
func (s *Store) commit(batch []*writeOp) {
	live := batch[:0]
	for _, op := range batch {
		if op.state.CompareAndSwap(opQueued, opTaken) {
			live = append(live, op)
		}
	}
	if len(live) == 0 {
		return
	}
	errs := make([]error, len(live))
	var err error
	start := time.Now()
	holding := false // this writer holds the turnstile
	for attempt := 1; ; attempt++ {
		if !holding {
			s.waitTurnstile(start)
		}
		err = s.tryCommit(live, errs)
		if err == nil || !isBusy(err) {
			break
		}
		waited := time.Since(start)
		if !holding && waited > starveAfter {
			holding = s.takeTurnstile(start)
			continue
		}
		pause := retryPause(attempt)
		if waited+pause > lockWait {
			err = fmt.Errorf("%w: %d attempts in %v: %v", ErrBusy, attempt, waited.Round(time.Millisecond), err)
			break
		}
		time.Sleep(pause)
	}
	if holding {
		s.turnstile.Unlock()
	}
	for i, op := range live {
		if err != nil {
			op.done <- err
		} else {
			op.done <- errs[i]
		}
	}
}

// The turnstile keeps one busy process from starving another: SQLite's
// write lock has no queue, so a process that commits back to back can
// take it again before a waiting one's next attempt, however often that
// one tries. A writer that has waited starveAfter takes the turnstile (an
// exclusive flock(2) on the database's path + "-turnstile") and holds it
// until its transaction ends; every writer checks, before each attempt,
// that nobody else holds it, and waits while someone does. So a writer
// that waited long gets the lock at the holder's next commit.
const starveAfter = 20 * time.Millisecond

// waitTurnstile waits (up to lockWait after start) while another writer
// holds the turnstile.
func (s *Store) waitTurnstile(start time.Time) {
	for attempt := 1; ; attempt++ {
		ok, err := s.turnstile.TryRLock()
		if err != nil || ok {
			if ok {
				s.turnstile.Unlock()
			}
			return
		}
		if time.Since(start) > lockWait {
			return
		}
		time.Sleep(retryPause(attempt))
	}
}

// takeTurnstile takes the turnstile, waiting (up to lockWait after start)
// for another starving writer to release it; false when it could not.
func (s *Store) takeTurnstile(start time.Time) bool {
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(lockWait))
	defer cancel()
	ok, err := s.turnstile.TryLockContext(ctx, retryBase)
	return ok && err == nil
}

// retryPause is the pause after failed attempt n (1-based): uniform in
// [0, min(retryCap, retryBase·2^(n-1))).
func retryPause(n int) time.Duration {
	c := min(retryCap, retryBase<<min(n-1, 16))
	return rand.N(c)
}

// tryCommit runs live in one BEGIN IMMEDIATE transaction, each write in
// its own savepoint when there are several, and commits. errs receives
// each write's own error. The returned error is the transaction's (begin
// or commit); a busy error from a write is returned too, so the whole
// batch is tried again.
func (s *Store) tryCommit(live []*writeOp, errs []error) (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	conn, err := s.wdb.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			// Leaves the connection outside any transaction whatever
			// failed (SQLite keeps a transaction open after a failed
			// COMMIT); "no transaction is active" is fine.
			conn.ExecContext(context.Background(), "ROLLBACK")
		}
	}()
	ok := 0
	for i, op := range live {
		if len(live) == 1 {
			errs[i] = op.fn(ctx, conn)
		} else {
			errs[i], err = savepoint(ctx, conn, op.fn)
			if err != nil {
				return err
			}
		}
		if errs[i] != nil && isBusy(errs[i]) {
			return errs[i]
		}
		if errs[i] == nil {
			ok++
		}
	}
	if ok == 0 {
		_, err = conn.ExecContext(ctx, "ROLLBACK") // errs say why
		return err
	}
	_, err = conn.ExecContext(ctx, "COMMIT")
	return err
}

// savepoint runs fn inside a savepoint of the open transaction, rolling
// back to it when fn fails. werr is fn's error; err is the savepoint's
// own.
func savepoint(ctx context.Context, conn *sql.Conn, fn func(context.Context, dbtx) error) (werr, err error) {
	if _, err := conn.ExecContext(ctx, "SAVEPOINT w"); err != nil {
		return nil, err
	}
	werr = fn(ctx, conn)
	if werr != nil {
		if _, err := conn.ExecContext(ctx, "ROLLBACK TO w"); err != nil {
			return werr, err
		}
	}
	if _, err := conn.ExecContext(ctx, "RELEASE w"); err != nil {
		return werr, err
	}
	return werr, nil
}

// isBusy reports whether err is SQLite's SQLITE_BUSY or SQLITE_LOCKED
// (with any extended code): another connection holds a lock.
func isBusy(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
		return true
	}
	return false
}

// read runs fn, trying again (as writes do) while SQLite reports a lock
// that outlasted readBusyTimeout.
func (s *Store) read(ctx context.Context, fn func() error) error {
	start := time.Now()
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || !isBusy(err) {
			return err
		}
		pause := retryPause(attempt)
		if waited := time.Since(start); waited+pause > lockWait || ctx.Err() != nil {
			return fmt.Errorf("%w: %v", ErrBusy, err)
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

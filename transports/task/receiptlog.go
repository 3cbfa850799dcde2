package task

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/plexus-agent/plexus/engine/receipts"
)

// receiptActor is the actor of every task receipt.
const receiptActor = "plexus-task"

// receiptTimeout bounds one receipt append (waiting for the log's lock
// included). It does not end with the request: a task whose client left
// still gets its receipt.
const receiptTimeout = 10 * time.Second

// receiptLogs holds one open receipts.Log per repoId. Safe for concurrent
// use. Logs are opened outside the mutex, once per repo, so a repo whose
// log waits for a lock another process holds does not hold up the others.
type receiptLogs struct {
	root   string // ZU_ROOT, absolute
	key    ed25519.PrivateKey
	logger *slog.Logger

	mu     sync.Mutex
	logs   map[string]*repoLog
	closed bool
}

// repoLog is one repo's log, opened on first use.
type repoLog struct {
	once sync.Once
	log  *receipts.Log
	err  error
}

// openReceiptLogs loads (or creates) the signing key in
// {root}/ide/keys.
func openReceiptLogs(root string, logger *slog.Logger) (*receiptLogs, error) {
	key, err := receipts.LoadOrCreateKey(KeyDir(root))
	if err != nil {
		return nil, err
	}
	return &receiptLogs{root: root, key: key, logger: logger, logs: map[string]*repoLog{}}, nil
}

// get returns the log of repoID, opening it on first use (which publishes
// the public key into its directory). A failed open is tried again by the
// next task.
func (r *receiptLogs) get(repoID string) (*receipts.Log, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, receipts.ErrClosed
	}
	rl, ok := r.logs[repoID]
	if !ok {
		rl = &repoLog{}
		r.logs[repoID] = rl
	}
	r.mu.Unlock()
	rl.once.Do(func() {
		var l *receipts.Log
		dir, err := ReceiptsDir(r.root, repoID)
		if err == nil {
			l, err = receipts.Open(dir, receipts.Options{Key: r.key, Logger: r.logger})
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if err == nil && r.closed {
			l.Close()
			l, err = nil, receipts.ErrClosed
		}
		rl.log, rl.err = l, err
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case rl.err != nil:
		if r.logs[repoID] == rl {
			delete(r.logs, repoID) // the next task tries again
		}
		return nil, rl.err
	case r.closed:
		return nil, receipts.ErrClosed
	}
	return rl.log, nil
}

// close closes every log; later gets fail with receipts.ErrClosed, and a
// log still being opened is closed as soon as it is.
func (r *receiptLogs) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	var errs []error
	for _, rl := range r.logs {
		if rl.log != nil {
			errs = append(errs, rl.log.Close())
		}
	}
	return errors.Join(errs...)
}

// failureData is the data of a failed task's receipt.
type failureData struct {
	TaskID   string `json:"taskId"`
	Success  bool   `json:"success"`
	Error    string `json:"error"`
	Attempts int    `json:"attempts"`
}

// appendReceipt appends the one receipt of a task that was accepted for
// processing and returns the month file it went to. data is the Result
// (success) or a failureData; reason is "" on success.
func (s *Server) appendReceipt(ctx context.Context, log *receipts.Log, d *decoded, out outcome, reason string, data any) (string, error) {
	digest, err := receipts.ArgsDigest(d.taskJSON)
	if err != nil {
		return "", fmt.Errorf("receipt of task %s: digest of the task: %w", d.Task.ID, err)
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return "", fmt.Errorf("receipt of task %s: %w", d.Task.ID, err)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), receiptTimeout)
	defer cancel()
	rc, err := log.Append(ctx, receipts.Receipt{
		Kind: receipts.KindTask, Actor: receiptActor, Workspace: s.opts.Workspace.ID,
		Session: out.session, Turn: out.turn, Tool: d.Task.Type, ArgsDigest: digest,
		Reason: reason, Data: raw,
	})
	if err != nil {
		return "", err // it reads "append receipt: ..."
	}
	return log.Path(rc), nil
}

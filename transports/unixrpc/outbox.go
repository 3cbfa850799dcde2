package unixrpc

import (
	"sync"
)

// Batching limits: one stream.tokens carries at most maxBatchTokens
// tokens and about maxBatchBytes bytes of token text.
const (
	maxBatchTokens = 1024
	maxBatchBytes  = 1 << 20
)

// outItem is one notification waiting to be written. A token (tok set)
// may be merged with the tokens of the same query queued beside it.
type outItem struct {
	method string
	params any
	tok    *tokenItem
	size   int // estimated encoded size, for the queue bound
	// written, when set, marks a barrier: it is closed once everything
	// queued before it is written (nothing is sent for it).
	written chan struct{}
}

// tokenItem is one stream.token before it is written.
type tokenItem struct {
	queryID string
	token   string
	index   int
}

// outbox is a connection's queue of notifications and the goroutine that
// writes them. The engine hands events over synchronously, so pushing
// never blocks: when the client reads slower than events arrive the queue
// grows, and the tokens waiting in it side by side go out as one
// stream.tokens. A queue over max bytes means the client stopped reading:
// push reports false and the connection is dropped.
type outbox struct {
	max    int
	notify func(method string, params any) error

	mu       sync.Mutex
	items    []outItem
	bytes    int
	wake     chan struct{}
	closed   bool // no more pushes; the writer ends when the queue is empty
	dropped  bool // the queue was thrown away
	done     chan struct{}
	overflow bool
}

func newOutbox(max int, notify func(string, any) error) *outbox {
	o := &outbox{max: max, notify: notify, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go o.run()
	return o
}

// push queues a notification. It reports false when the queue is closed
// or over its bound (the item is then dropped).
func (o *outbox) push(it outItem) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return false
	}
	if o.bytes+it.size > o.max {
		o.overflow = true
		return false
	}
	o.items = append(o.items, it)
	o.bytes += it.size
	select {
	case o.wake <- struct{}{}:
	default:
	}
	return true
}

// run writes queued notifications until the outbox is closed and empty
// (or dropped, or a write fails).
func (o *outbox) run() {
	defer close(o.done)
	for {
		o.mu.Lock()
		for len(o.items) == 0 && !o.closed {
			o.mu.Unlock()
			<-o.wake
			o.mu.Lock()
		}
		items := o.items
		o.items, o.bytes = nil, 0
		stop := o.closed && len(items) == 0
		o.mu.Unlock()
		if stop {
			return
		}
		if err := o.write(items); err != nil {
			o.drop()
			return
		}
	}
}

// write sends a batch taken from the queue; runs of adjacent tokens of
// one query become stream.tokens.
func (o *outbox) write(items []outItem) error {
	for i := 0; i < len(items); {
		it := items[i]
		if it.written != nil {
			close(it.written)
			i++
			continue
		}
		if it.tok == nil {
			if err := o.notify(it.method, it.params); err != nil {
				return err
			}
			i++
			continue
		}
		j, size := i+1, len(it.tok.token)
		for j < len(items) && items[j].tok != nil && items[j].tok.queryID == it.tok.queryID &&
			j-i < maxBatchTokens && size < maxBatchBytes {
			size += len(items[j].tok.token)
			j++
		}
		var err error
		if j == i+1 {
			err = o.notify(methodToken, tokenParams{QueryID: it.tok.queryID, Token: it.tok.token, Index: it.tok.index, Metadata: tokenMeta{Type: "text"}})
		} else {
			batch := tokensParams{QueryID: it.tok.queryID, Tokens: make([]batchedToken, 0, j-i)}
			for _, t := range items[i:j] {
				batch.Tokens = append(batch.Tokens, batchedToken{Token: t.tok.token, Index: t.tok.index})
			}
			err = o.notify(methodTokens, batch)
		}
		if err != nil {
			return err
		}
		i = j
	}
	return nil
}

// close stops pushes; what is queued is still written. Wait on o.done for
// the writer to finish.
func (o *outbox) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// drop stops pushes and throws the queue away.
func (o *outbox) drop() {
	o.mu.Lock()
	o.closed, o.dropped = true, true
	o.items, o.bytes = nil, 0
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// overflowed reports whether a push was refused for the queue bound.
func (o *outbox) overflowed() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.overflow
}

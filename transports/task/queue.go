package task

import (
	"container/heap"
	"context"
	"fmt"
	"sync"

	"github.com/plexus-agent/plexus/engine"
)

// job is one accepted task waiting for, or held by, a worker.
type job struct {
	ctx  context.Context // the task's context: its deadline, the client, shutdown
	task *decoded
	in   engine.TurnInput
	seq  uint64 // arrival order
	// index is the job's position in the heap, -1 once it has left it.
	index int
	// done receives the outcome once a worker has processed the job.
	done chan outcome
}

// jobHeap orders jobs by priority rank, then arrival.
type jobHeap []*job

func (h jobHeap) Len() int { return len(h) }
func (h jobHeap) Less(i, j int) bool {
	if h[i].task.rank != h[j].task.rank {
		return h[i].task.rank < h[j].task.rank
	}
	return h[i].seq < h[j].seq
}
func (h jobHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *jobHeap) Push(x any) {
	j := x.(*job)
	j.index = len(*h)
	*h = append(*h, j)
}
func (h *jobHeap) Pop() any {
	old := *h
	j := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	j.index = -1
	return j
}

// queue is the priority queue between handlers and workers. Safe for
// concurrent use.
type queue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	h      jobHeap
	seq    uint64
	max    int
	closed bool
}

func newQueue(max int) *queue {
	q := &queue{max: max}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// push adds j. It fails when the queue is closed (errShutdown) or full.
func (q *queue) push(j *job) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return errShutdown
	}
	if len(q.h) >= q.max {
		return fmt.Errorf("the task queue is full (%d tasks waiting); try again later", q.max)
	}
	q.seq++
	j.seq = q.seq
	heap.Push(&q.h, j)
	q.cond.Signal()
	return nil
}

// pop waits for the most urgent job and removes it; ok is false once the
// queue is closed.
func (q *queue) pop() (j *job, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.h) == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return nil, false
	}
	return heap.Pop(&q.h).(*job), true
}

// remove takes j out of the queue if it is still waiting there and
// reports whether it was; false means a worker has it.
func (q *queue) remove(j *job) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if j.index < 0 {
		return false
	}
	heap.Remove(&q.h, j.index)
	return true
}

// len is the number of waiting jobs.
func (q *queue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.h)
}

// close wakes every worker and makes them stop; jobs still waiting stay
// unprocessed (their handlers have given up on them by then).
func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

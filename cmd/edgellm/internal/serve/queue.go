package serve

import (
	"context"
	"sync"
)

// jobQueue is the bounded queue of jobs waiting for the engine. Unlike a
// channel, a job can leave it from the middle: a client that hangs up (or
// times out) while queued frees its slot at once, not when the worker
// would have reached it.
type jobQueue struct {
	mu    sync.Mutex
	jobs  []*job
	cap   int
	ready chan struct{} // signalled (non-blocking, capacity 1) on push
}

func newJobQueue(capacity int) *jobQueue {
	return &jobQueue{cap: capacity, ready: make(chan struct{}, 1)}
}

// push queues j; false when the queue is full.
func (q *jobQueue) push(j *job) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.jobs) >= q.cap {
		return false
	}
	q.jobs = append(q.jobs, j)
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return true
}

// remove takes j out of the queue; false if it is not there (the worker
// took it).
func (q *jobQueue) remove(j *job) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, x := range q.jobs {
		if x == j {
			q.jobs = append(q.jobs[:i], q.jobs[i+1:]...)
			return true
		}
	}
	return false
}

// pop waits for the oldest job and takes it (closing its started channel
// under the lock, so remove and pop never both claim a job); nil when ctx
// ends first.
func (q *jobQueue) pop(ctx context.Context) *job {
	for {
		q.mu.Lock()
		if len(q.jobs) > 0 {
			j := q.jobs[0]
			q.jobs[0] = nil
			q.jobs = q.jobs[1:]
			close(j.started)
			q.mu.Unlock()
			return j
		}
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil
		case <-q.ready:
		}
	}
}

// len is the number of waiting jobs.
func (q *jobQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.jobs)
}

package kernels

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// partRunner is a piece of work split into numbered parts that may run
// concurrently. Jobs are pointer types, so passing one as a partRunner does
// not allocate.
type partRunner interface {
	runPart(part int)
}

// run is one dispatch of a partRunner: the parts are handed out through an
// atomic counter, so a core that finishes early (or that the OS gave to
// someone else for a while) simply takes fewer parts.
type run struct {
	job   partRunner
	parts int64
	next  atomic.Int64
	done  sync.WaitGroup
}

// drain runs parts until none are left.
func (r *run) drain() {
	for {
		p := r.next.Add(1) - 1
		if p >= r.parts {
			return
		}
		r.job.runPart(int(p))
	}
}

// workers are long-lived goroutines, so a parallel call costs a channel
// hand-off instead of goroutine and closure allocations.
var workers struct {
	mu      sync.Mutex
	started atomic.Int64
	wake    chan *run // unbuffered: a send succeeds only if a worker is idle
}

// freeRuns recycles runs (a channel, not a sync.Pool, so that a garbage
// collection does not make the next call allocate).
var freeRuns = make(chan *run, 64)

// ensureWorkers starts workers until n are running.
func ensureWorkers(n int) {
	workers.mu.Lock()
	defer workers.mu.Unlock()
	if workers.wake == nil {
		workers.wake = make(chan *run)
	}
	for workers.started.Load() < int64(n) {
		workers.started.Add(1)
		go func() {
			for r := range workers.wake {
				r.drain()
				r.done.Done()
			}
		}()
	}
}

// maxThreads is how many goroutines a parallel kernel may use: one per
// processor the Go scheduler runs on.
func maxThreads() int { return runtime.GOMAXPROCS(0) }

// parallelFor runs job.runPart(0..parts-1) using the calling goroutine and
// up to threads-1 idle workers, and returns when all parts are done.
//
// Only idle workers are woken (non-blocking send on an unbuffered channel),
// so a parallel kernel called from inside another one (a GEMM inside a
// batch of attention heads) cannot deadlock: if everybody is busy the
// caller runs all parts itself.
func parallelFor(parts, threads int, job partRunner) {
	if parts <= 0 {
		return
	}
	threads = min(threads, parts)
	if threads <= 1 {
		for p := range parts {
			job.runPart(p)
		}
		return
	}
	if workers.started.Load() < int64(threads-1) {
		ensureWorkers(threads - 1)
	}
	var r *run
	select {
	case r = <-freeRuns:
	default:
		r = new(run)
	}
	r.job, r.parts = job, int64(parts)
	r.next.Store(0)
	for range threads - 1 {
		r.done.Add(1)
		select {
		case workers.wake <- r:
		default:
			r.done.Done()
		}
	}
	r.drain()
	r.done.Wait()
	r.job = nil
	select {
	case freeRuns <- r:
	default:
	}
}

package kernels

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
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
//
// Helpers join a run by taking one of its seats and leave it when no part
// is left. Seats and helpers inside share one word, so that the caller can
// close the run (no seat left) and learn whether a helper is still inside
// in one atomic step: after that no helper can join, and the run may be
// recycled once the last one has left.
type run struct {
	job   partRunner
	parts int64
	next  atomic.Int64
	state atomic.Uint64 // seats | inside<<insideShift | waiting
	// left receives a value when the last helper leaves while the caller
	// is waiting (the waiting bit is set).
	left chan struct{}
}

const (
	seatsMask   = 1<<16 - 1
	insideShift = 16
	insideOne   = 1 << insideShift
	insideMask  = seatsMask << insideShift
	waitingBit  = 1 << 40
)

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

// join takes a seat of r, if one is left.
func (r *run) join() bool {
	for {
		s := r.state.Load()
		if s&seatsMask == 0 {
			return false
		}
		if r.state.CompareAndSwap(s, s-1+insideOne) {
			return true
		}
	}
}

// leave marks the end of a helper's work on r, waking the caller if it
// waits for this helper.
func (r *run) leave() {
	s := r.state.Add(^uint64(insideOne - 1)) // minus insideOne
	if s&insideMask == 0 && s&waitingBit != 0 {
		r.left <- struct{}{}
	}
}

// finish closes r to helpers and returns when every helper that joined has
// left. Helpers run the last parts, which the caller did not wait for, so
// it spins a little (waitSpin) before going to sleep. drained is how long
// the caller took for its own parts: a helper's last part takes at most
// about as long, so a wait much longer than that means the helper was not
// running, and the machine is marked busy.
func (r *run) finish(drained time.Duration) {
	var since time.Time
	defer func() {
		if !since.IsZero() {
			if now := time.Now(); now.Sub(since) > drained+descheduled {
				markBusy(now)
			}
		}
	}()
	for i := 0; ; i++ {
		s := r.state.Load()
		closed := s &^ seatsMask
		if s&insideMask == 0 {
			if r.state.CompareAndSwap(s, closed) {
				return
			}
			continue
		}
		if s&seatsMask != 0 {
			r.state.CompareAndSwap(s, closed) // no new helpers; retried if it failed
			continue
		}
		if i%64 != 63 || !spunFor(&since, waitSpin) {
			spinPause()
			continue
		}
		if r.state.CompareAndSwap(s, closed|waitingBit) {
			<-r.left
			r.state.Store(0)
			return
		}
	}
}

// waitSpin is how long finish spins before it sleeps. A short product's
// parts take a few to some tens of microseconds, so the helper's last one
// is usually done within it; after a longer part, the wake-up that
// sleeping costs (a few microseconds) is small next to it; and when the
// helper is not running at all (a busy machine), a spinning caller would
// only take a core from it.
const waitSpin = 20 * time.Microsecond

// spunFor reports whether d has passed since *since, which the first call
// sets to the current time.
func spunFor(since *time.Time, d time.Duration) bool {
	now := time.Now()
	if since.IsZero() {
		*since = now
		return false
	}
	return now.Sub(*since) > d
}

// workers are long-lived goroutines, so a parallel call costs a hand-off
// instead of goroutine and closure allocations. A worker that finishes a
// run spins for up to spinTime looking for the next offered run before it
// parks: products come in quick succession in a forward pass, and waking
// a parked goroutine (a futex, and on a virtual machine an interrupt to an
// idle core) costs more than a short product takes. Measured on the
// 2-core virtual machine of docs/performance.md, busy with other jobs, a
// second thread joined a run after a median of 1 µs when it was spinning
// and of 70 to 80 µs when it had to be woken.
var workers struct {
	mu      sync.Mutex
	started atomic.Int64
	wake    chan *run // unbuffered: a send succeeds only if a worker is parked
	// offered is the latest run with seats for helpers; spinning workers
	// watch it.
	offered  atomic.Pointer[run]
	spinning atomic.Int64 // workers spinning
}

// spinTime is how long, in nanoseconds, an idle worker watches for
// offered runs before it parks. A variable so tests can cover both ways
// of joining a run (atomic: workers read it while tests set it).
var spinTime atomic.Int64

// defaultSpinTime is spinTime's value.
const defaultSpinTime = 100 * time.Microsecond

func init() { spinTime.Store(int64(defaultSpinTime)) }

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
		go work()
	}
}

// work is a worker's life: woken with a run, it helps with it, then with
// every run it finds while spinning, and parks again.
func work() {
	for r := range workers.wake {
		if r.join() {
			r.drain()
			r.leave()
		}
		for {
			r := spin()
			if r == nil {
				break
			}
			r.drain()
			r.leave()
		}
	}
}

// spin watches for an offered run with a free seat for up to spinTime and
// returns it joined, or nil. It yields the processor now and then, so that
// a spinning worker does not hold up other goroutines, and it stops early
// when it finds it was not running for a while: the machine has more
// work than cores, and a spinning thread would take a core from a thread
// with work to do (ours, for one); a parked one, woken, is scheduled
// sooner than one that used its time spinning.
func spin() *run {
	workers.spinning.Add(1)
	defer workers.spinning.Add(-1)
	var start, last time.Time
	for i := 0; ; i++ {
		if r := workers.offered.Load(); r != nil && r.join() {
			return r
		}
		spinPause()
		if i%64 != 63 {
			continue
		}
		now := time.Now()
		switch {
		case start.IsZero():
			if machineBusy(now) {
				return nil
			}
			start = now
		case now.Sub(last) > descheduled:
			markBusy(now)
			return nil
		case now.Sub(start) > time.Duration(spinTime.Load()):
			return nil
		}
		last = now
		runtime.Gosched()
	}
}

// descheduled is a gap between two looks of a spinning worker (64 pauses
// and a yield apart, a few microseconds) that means it was not running.
// It is well above the short interruptions a quiet machine has too (a
// timer tick, a kernel thread, the Go runtime's own), which at 50 µs put
// a quiet 2-core machine in busy mode often enough to make the d=768
// model at (1, 1) 1.4× slower (0.14 against 0.10 ms, attnrun bench);
// a thread the OS took off its core for another process misses a time
// slice, milliseconds.
const descheduled = 500 * time.Microsecond

// busyUntil is the time (time.Time.UnixNano) until which the machine
// counts as busy: a thread of ours was found not running while it had a
// core to spin on or a part to finish, which means that the OS has more
// runnable threads than cores. Then a helper that takes a part may be
// taken off its core with it for a whole time slice (milliseconds), and
// a spinning one gets its core back later than a parked one that is woken
// (the OS favours threads that slept). So while busy, workers park at
// once and products split across threads only from the bounds that held
// when every helper had to be woken (busyShortMinFlops). Measured on the
// busy machine of docs/performance.md, the spinning workers without this
// made a pass of the d=768 model at (1, 1) take 0.45 to 2.3 ms where one
// core takes 0.14.
var busyUntil atomic.Int64

// busyHold is how long the machine counts as busy after a thread of ours
// was found not running.
const busyHold = 100 * time.Millisecond

// markBusy records that a thread of ours was found not running at now.
func markBusy(now time.Time) { busyUntil.Store(now.Add(busyHold).UnixNano()) }

// machineBusy reports whether the machine counts as busy at now.
func machineBusy(now time.Time) bool { return now.UnixNano() < busyUntil.Load() }

// maxThreads is how many goroutines a parallel kernel may use: one per
// processor the Go scheduler runs on.
func maxThreads() int { return runtime.GOMAXPROCS(0) }

// parallelFor runs job.runPart(0..parts-1) using the calling goroutine and
// up to threads-1 idle workers, and returns when all parts are done.
//
// Only idle workers help (spinning ones take a seat, parked ones are woken
// by a non-blocking send on an unbuffered channel), so a parallel kernel
// called from inside another one (a GEMM inside a batch of attention
// heads) cannot deadlock: if everybody is busy the caller runs all parts
// itself.
func parallelFor(parts, threads int, job partRunner) {
	if parts <= 0 {
		return
	}
	threads = min(threads, parts, seatsMask+1)
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
		r = &run{left: make(chan struct{}, 1)}
	}
	r.job, r.parts = job, int64(parts)
	r.next.Store(0)
	r.state.Store(uint64(threads - 1))
	workers.offered.Store(r)
	for range int64(threads-1) - workers.spinning.Load() {
		select {
		case workers.wake <- r:
		default:
		}
	}
	start := time.Now()
	r.drain()
	workers.offered.CompareAndSwap(r, nil)
	r.finish(time.Since(start))
	r.job = nil
	select {
	case freeRuns <- r:
	default:
	}
}

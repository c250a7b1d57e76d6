package kernels

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// countJob counts how often each part runs; nested, when set, runs a
// parallelFor of its own inside every part, as a GEMM inside a batch of
// attention heads does.
type countJob struct {
	runs   []atomic.Int32
	nested *countJob
}

func (j *countJob) runPart(p int) {
	if j.nested != nil {
		parallelFor(len(j.nested.runs), 2, j.nested)
	}
	j.runs[p].Add(1) // last: a parallelFor that returned early misses it
}

// TestParallelForRunsEveryPartOnce checks that every part runs exactly
// once, whether the workers are spinning (they join runs on their own) or
// parked (woken with the run; always so while the machine counts as
// busy), for single, nested and concurrent callers, many times over so
// that runs are recycled while workers still look at them.
func TestParallelForRunsEveryPartOnce(t *testing.T) {
	for _, c := range []struct {
		spin time.Duration
		busy bool
	}{{0, false}, {defaultSpinTime, false}, {time.Millisecond, false}, {defaultSpinTime, true}} {
		t.Run(fmt.Sprintf("spin=%v/busy=%v", c.spin, c.busy), func(t *testing.T) {
			saved := spinTime.Load()
			spinTime.Store(int64(c.spin))
			defer spinTime.Store(saved)
			if c.busy {
				busyUntil.Store(math.MaxInt64) // workers park at once
			}
			defer busyUntil.Store(0)
			var wg sync.WaitGroup
			for caller := range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 300 {
						parts := 1 + (i+caller)%9
						inner := &countJob{runs: make([]atomic.Int32, 1+i%5)}
						j := &countJob{runs: make([]atomic.Int32, parts)}
						if i%3 == 0 {
							j.nested = inner
						}
						parallelFor(parts, 2+i%3, j)
						for p := range j.runs {
							if got := j.runs[p].Load(); got != 1 {
								t.Errorf("caller %d, call %d: part %d of %d ran %d times", caller, i, p, parts, got)
								return
							}
						}
						if j.nested != nil {
							for p := range inner.runs {
								require.Equal(t, int32(parts), inner.runs[p].Load(), "nested part %d", p)
							}
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}

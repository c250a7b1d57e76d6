package kernels

import (
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// mallocsPerCall returns the average number of heap allocations per call
// of f over n calls, after warm-up calls, at the current GOMAXPROCS.
// (testing.AllocsPerRun would set GOMAXPROCS to 1 and so never exercise
// the parallel paths.) Allocations by other goroutines count too, and so
// do the runtime's: when a goroutine blocks on a channel or WaitGroup the
// runtime takes a wait-queue entry (a sudog) from a per-P cache and
// allocates one if that cache is empty, which happens now and then as
// goroutines move between Ps and after each garbage collection. Those are
// a fraction of an allocation per call and bounded; an allocation made by
// a kernel on every call shows up as 1 or more.
func mallocsPerCall(n int, f func()) float64 {
	for range 3 {
		f()
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		f()
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / float64(n)
}

// TestSteadyStateAllocations checks that, once their buffers have grown,
// the kernels allocate nothing per call, serial or parallel, whatever the
// size: the forward pass must not feed the garbage collector.
func TestSteadyStateAllocations(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	const n = 300 // big enough for the parallel GEMM and attention paths
	a, b, c := randSlice(rng, n*n), randSlice(rng, n*n), make([]float32, n*n)
	head := func(tq, tk int) Head {
		return Head{Tq: tq, Tk: tk, D: 64, Dv: 64, LdQ: 64, LdK: 64, LdV: 64, LdOut: 64,
			Q: randSlice(rng, tq*64), K: randSlice(rng, tk*64), V: randSlice(rng, tk*64), Out: make([]float32, tq*64)}
	}
	small, large := head(33, 33), head(n, n)
	heads := []Head{head(65, 65), head(65, 65), head(65, 65), head(65, 65)}
	weights := make([]float32, n*n)
	opt := AttentionOptions{Scale: 0.125, Causal: true}
	calls := map[string]func(){
		"Gemm small":   func() { Gemm(false, false, 7, 9, 11, 1, a, 11, b, 9, 0, c, 9) },
		"Gemm large":   func() { Gemm(false, true, n, n, n, 1, a, n, b, n, 0.5, c, n) },
		"Gemm dots":    func() { Gemm(false, true, 3, n, n, 1, a, n, b, n, 0, c, n) },
		"GemmStrided":  func() { GemmStrided(8, false, false, 32, 32, 32, 1, a, 32, 1024, b, 32, 1024, 0, c, 32, 1024) },
		"Attend small": func() { Attend(small, opt) },
		"Attend large": func() { Attend(large, opt) },
		"Attend weights": func() {
			o := opt
			o.Weights = weights
			Attend(large, o)
		},
		"AttendBatch": func() { AttendBatch(heads, opt) },
		"SoftmaxRows": func() { SoftmaxRows(c, n, n) },
		"GeluErf32":   func() { GeluErf32(c, a, 1.4142135, 1, 0.5) },
		"Erf32":       func() { Erf32(c, a) },
		"LayerNorm32": func() { LayerNorm32(c, a, b, a[:n], b[:n], n, 1e-12) },
	}
	forEachISA(t, func(t *testing.T) {
		for name, f := range calls {
			require.Zero(t, testing.AllocsPerRun(20, f), "%s, one thread", name)
			require.Less(t, mallocsPerCall(50, f), 1.0, "%s, all threads", name)
		}
	})
}

// TestAttendMemoryGrowsWithT checks that fused attention needs memory
// proportional to T, not T²: a causal head with T = 16384 (T² floats would
// be 1 GiB) may allocate only the packed K and per-thread tiles, a few MiB.
// With the portable Go kernels T is 4096, to keep the test short.
func TestAttendMemoryGrowsWithT(t *testing.T) {
	const d = 64
	tt := 16384
	if currentISA() == goISA {
		tt = 4096
	}
	rng := rand.New(rand.NewPCG(5, 5))
	h := Head{Tq: tt, Tk: tt, D: d, Dv: d, LdQ: d, LdK: d, LdV: d, LdOut: d,
		Q: randSlice(rng, tt*d), K: randSlice(rng, tt*d), V: randSlice(rng, tt*d), Out: make([]float32, tt*d)}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	Attend(h, AttentionOptions{Scale: 0.125, Causal: true})
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	limit := uint64(4*tt*d*4) + 8<<20 // a few copies of one operand, plus tiles
	require.Less(t, allocated, limit, "Attend with T=%d allocated %d MiB", tt, allocated>>20)
	// And the result is right: spot-check the last query against the
	// reference, which sees every key.
	last := h
	last.Q, last.Tq, last.Out = h.Q[(tt-1)*d:], 1, make([]float32, d)
	outTol, _ := attendRef(last, AttentionOptions{Scale: 0.125, Causal: true})
	requireWithin(t, last.Out, h.Out[(tt-1)*d:], outTol, "last query")
}

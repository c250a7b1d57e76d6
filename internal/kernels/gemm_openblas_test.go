//go:build openblas && cgo

package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestGemmOpenBLASMatchesReference runs Gemm's cases (odd sizes, padded
// strides, every transpose, alpha and beta, NaN in C with beta 0) through
// OpenBLAS, so that a comparison of speeds is a comparison of the same
// results.
func TestGemmOpenBLASMatchesReference(t *testing.T) {
	t.Log(OpenBLASConfig())
	for _, tc := range gemmCases() {
		for _, tr := range transposes {
			checkGemm(t, tc.name(tr), GemmOpenBLAS, 11, tc, tr[0], tr[1])
		}
	}
}

// TestGemmOpenBLASOneRowStride checks the stride CBLAS is given for a
// single row whose stride Gemm ignores (and CBLAS would reject as too
// small), and the empty products that never reach OpenBLAS.
func TestGemmOpenBLASOneRowStride(t *testing.T) {
	a := []float32{1, 2, 3}
	b := []float32{1, 0, 0, 1, 1, 1} // 3×2
	c := []float32{9, 9}
	GemmOpenBLAS(false, false, 1, 2, 3, 1, a, 1, b, 2, 0, c, 1)
	require.Equal(t, []float32{4, 5}, c)

	GemmOpenBLAS(false, false, 0, 2, 3, 1, nil, 3, b, 2, 0, nil, 2)
	GemmOpenBLAS(false, false, 1, 2, 0, 1, nil, 1, nil, 2, 0.5, c, 2)
	require.Equal(t, []float32{2, 2.5}, c, "k = 0 scales C by beta")
}

// TestGemmOpenBLASChecks checks that a slice too short for the sizes panics
// with Gemm's message before OpenBLAS can read or write past it.
func TestGemmOpenBLASChecks(t *testing.T) {
	a, b, c := make([]float32, 6), make([]float32, 6), make([]float32, 3)
	require.PanicsWithValue(t,
		"kernels: GemmOpenBLAS: C holds 3 floats, 2×2 with row stride 2 (batch 1, stride 0) needs 4",
		func() { GemmOpenBLAS(false, false, 2, 2, 3, 1, a, 3, b, 2, 0, c, 2) })
}

// BenchmarkGemmVsOpenBLAS times n×n×n products with attnrun's Gemm (the
// instruction set in use) and with OpenBLAS in alternating rounds, so that
// both see the same load on a shared machine, and reports each one's
// GFLOP/s and go/openblas, the pure-Go speed as a fraction of OpenBLAS's.
// Both use GOMAXPROCS threads (-cpu 2 for two). Each round is a few
// products of one kind, after a pause outside the timing: OpenBLAS's
// threads spin for a while after a call, which would slow whatever runs
// next.
func BenchmarkGemmVsOpenBLAS(b *testing.B) {
	b.Log(ISA(), " vs ", OpenBLASConfig())
	for _, n := range []int{256, 512, 1024, 2048} {
		rng := rand.New(rand.NewPCG(1, 2))
		x, y, z := randSlice(rng, n*n), randSlice(rng, n*n), make([]float32, n*n)
		flops := 2 * float64(n) * float64(n) * float64(n)
		reps := max(2, (1<<33)/int(flops)) // some 30 ms of work per round
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			gemms := [2]func(){
				func() { GemmGo(false, false, n, n, n, 1, x, n, y, n, 0, z, n) },
				func() { GemmOpenBLAS(false, false, n, n, n, 1, x, n, y, n, 0, z, n) },
			}
			var elapsed, cpu [2]time.Duration
			for _, f := range gemms {
				f() // grow buffers and start threads outside the timing
			}
			for i := 0; i < b.N; i++ {
				for which, f := range gemms {
					b.StopTimer()
					time.Sleep(100 * time.Millisecond)
					b.StartTimer()
					t0, c0 := time.Now(), cpuTime()
					for range reps {
						f()
					}
					elapsed[which] += time.Since(t0)
					cpu[which] += cpuTime() - c0
				}
			}
			work := flops * float64(reps*b.N) / 1e9
			goRate, blasRate := work/elapsed[0].Seconds(), work/elapsed[1].Seconds()
			b.ReportMetric(goRate, "go-GFLOP/s")
			b.ReportMetric(blasRate, "openblas-GFLOP/s")
			b.ReportMetric(goRate/blasRate, "go/openblas")
			// Per CPU-second, the ratio moves less with the machine's load.
			b.ReportMetric(cpu[1].Seconds()/cpu[0].Seconds(), "go/openblas-cpu")
		})
	}
}

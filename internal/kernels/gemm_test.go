package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// forEachISA runs f once per instruction set this machine supports (the
// assembly kernels and the portable Go ones), with that set active.
func forEachISA(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	saved := currentISA()
	defer active.Store(saved)
	for _, set := range availableISAs() {
		active.Store(set)
		t.Run(set.name, f)
	}
}

// withParallelThreshold runs f with parallelMinFlops set to v, so that
// small products take the parallel path.
func withParallelThreshold(v int, f func()) {
	saved := parallelMinFlops
	parallelMinFlops = v
	defer func() { parallelMinFlops = saved }()
	f()
}

// requireClose checks got against want element by element. An element may
// be off by 1e-5 relative plus 1e-6·√k times its magnitude (the sum of the
// absolute values of the terms that make it, from the reference): float32
// rounding (u = 6e-8) of a k-term dot product grows like u·√k·Σ|terms| for
// any summation order (Higham, "Accuracy and Stability", §3 and §4.2, the
// probabilistic bound), and 1e-6 leaves a factor of ~16 for the extra
// rounding of alpha, beta and the exponentials. A wrong term changes an
// element by about |term|, far above this.
func requireClose(t *testing.T, want, got []float32, mag []float64, k int, what string) {
	t.Helper()
	tol := make([]float64, len(want))
	for i := range want {
		tol[i] = 1e-5*math.Abs(float64(want[i])) + 1e-6*math.Sqrt(float64(max(k, 1)))*mag[i]
	}
	requireWithin(t, want, got, tol, what)
}

// requireWithin checks that got[i] is within tol[i] of want[i]; where
// want[i] is NaN or ±Inf, got[i] must be the same (any NaN matches NaN).
func requireWithin(t *testing.T, want, got []float32, tol []float64, what string) {
	t.Helper()
	require.Equal(t, len(want), len(got), what)
	for i := range want {
		w, g := float64(want[i]), float64(got[i])
		if !isFinite(want[i]) || !isFinite(got[i]) {
			if !(w == g || math.IsNaN(w) && math.IsNaN(g)) {
				require.Failf(t, "mismatch", "%s: element %d: got %g, want %g", what, i, got[i], want[i])
			}
			continue
		}
		d := math.Abs(g - w)
		tol := tol[i]
		if !(d <= tol) {
			require.Failf(t, "mismatch", "%s: element %d: got %g, want %g (diff %.3g, tol %.3g)", what, i, got[i], want[i], d, tol)
		}
	}
}

type gemmCase struct {
	m, n, k          int
	alpha, beta      float32
	padA, padB, padC int // extra row stride beyond the row width
}

func gemmCases() []gemmCase {
	sizes := [][3]int{
		{1, 1, 1}, {7, 7, 7}, {1, 33, 7}, {33, 1, 33}, {33, 33, 33},
		{6, 16, 1}, {12, 32, 257}, {5, 15, 300}, {7, 17, 513}, {513, 7, 3},
		{3, 513, 9}, {65, 129, 70}, {100, 37, 260}, {130, 100, 600},
	}
	scalars := [][2]float32{{1, 0}, {-0.5, 1}, {2, -1.5}, {0, 0.5}, {0.75, 0}}
	var cases []gemmCase
	for i, s := range sizes {
		ab := scalars[i%len(scalars)]
		pad := i % 3 * 5 // 0, 5 or 10
		cases = append(cases, gemmCase{s[0], s[1], s[2], ab[0], ab[1], pad, 2 * pad, pad + 1})
	}
	return cases
}

func TestGemmMatchesReference(t *testing.T) {
	forEachISA(t, func(t *testing.T) {
		for _, threshold := range []int{parallelMinFlops, 0} {
			withParallelThreshold(threshold, func() {
				for _, tc := range gemmCases() {
					for _, tr := range transposes {
						name := fmt.Sprintf("%s/par=%v", tc.name(tr), threshold == 0)
						checkGemm(t, name, Gemm, 7, tc, tr[0], tr[1])
					}
				}
			})
		}
	})
}

// transposes are the four combinations of transA and transB.
var transposes = [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}}

// name names the case with the transposes tr, for subtests and failures.
func (tc gemmCase) name(tr [2]bool) string {
	return fmt.Sprintf("%dx%dx%d/tA=%v/tB=%v/alpha=%g/beta=%g", tc.m, tc.n, tc.k, tr[0], tr[1], tc.alpha, tc.beta)
}

// gemmFunc is Gemm's signature, which every GEMM checked against gemmRef
// has.
type gemmFunc func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int)

// checkGemm runs one case through gemm and gemmRef, on operands drawn from
// the random stream stream, and checks that the padding beyond each row of
// C is left alone.
func checkGemm(t *testing.T, name string, gemm gemmFunc, stream uint64, tc gemmCase, transA, transB bool) {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(tc.m*1000003+tc.n*1009+tc.k), stream))
	aRows, aCols := tc.m, tc.k
	if transA {
		aRows, aCols = tc.k, tc.m
	}
	bRows, bCols := tc.k, tc.n
	if transB {
		bRows, bCols = tc.n, tc.k
	}
	lda, ldb, ldc := aCols+tc.padA, bCols+tc.padB, tc.n+tc.padC
	a := randSlice(rng, (aRows-1)*lda+aCols)
	b := randSlice(rng, (bRows-1)*ldb+bCols)
	c := randSlice(rng, tc.m*ldc)
	if tc.beta == 0 {
		for i := range c {
			c[i] = float32(math.NaN()) // must be overwritten, not scaled
		}
	}
	want := append([]float32(nil), c...)
	mag := gemmRef(transA, transB, tc.m, tc.n, tc.k, tc.alpha, a, lda, b, ldb, tc.beta, want, ldc)
	got := append([]float32(nil), c...)
	gemm(transA, transB, tc.m, tc.n, tc.k, tc.alpha, a, lda, b, ldb, tc.beta, got, ldc)

	wantC, gotC := make([]float32, 0, tc.m*tc.n), make([]float32, 0, tc.m*tc.n)
	for i := range tc.m {
		wantC = append(wantC, want[i*ldc:i*ldc+tc.n]...)
		gotC = append(gotC, got[i*ldc:i*ldc+tc.n]...)
		for j := tc.n; j < ldc; j++ {
			if math.Float32bits(got[i*ldc+j]) != math.Float32bits(c[i*ldc+j]) {
				require.Failf(t, "padding written", "%s: C[%d][%d] beyond n changed", name, i, j)
			}
		}
	}
	requireClose(t, wantC, gotC, mag, tc.k, name)
}

// TestGemmStrided checks a batch of per-head products addressed in place
// inside (T, H·dh) matrices, as a multi-head layer uses it (Q·Kᵀ per head),
// against one gemmRef per head; and a stride of 0 (one shared B).
func TestGemmStrided(t *testing.T) {
	forEachISA(t, func(t *testing.T) {
		for _, tc := range []struct{ heads, tq, tk, dh int }{{1, 7, 9, 5}, {3, 33, 17, 8}, {12, 65, 65, 64}, {5, 130, 70, 33}} {
			rng := rand.New(rand.NewPCG(uint64(tc.heads), uint64(tc.tq)))
			width := tc.heads * tc.dh
			q, k := randSlice(rng, tc.tq*width), randSlice(rng, tc.tk*width)
			got := randSlice(rng, tc.heads*tc.tq*tc.tk)
			want := append([]float32(nil), got...)
			GemmStrided(tc.heads, false, true, tc.tq, tc.tk, tc.dh, 0.5, q, width, tc.dh, k, width, tc.dh, 1, got, tc.tk, tc.tq*tc.tk)
			var mag []float64
			for h := range tc.heads {
				mag = append(mag, gemmRef(false, true, tc.tq, tc.tk, tc.dh, 0.5, q[h*tc.dh:], width, k[h*tc.dh:], width, 1, want[h*tc.tq*tc.tk:], tc.tk)...)
			}
			requireClose(t, want, got, mag, tc.dh, fmt.Sprintf("%+v", tc))

			// Stride 0: every product multiplies by the same B.
			b := randSlice(rng, tc.dh*tc.tk)
			GemmStrided(tc.heads, false, false, tc.tq, tc.tk, tc.dh, 1, q, width, tc.dh, b, tc.tk, 0, 0, got, tc.tk, tc.tq*tc.tk)
			mag = mag[:0]
			for h := range tc.heads {
				mag = append(mag, gemmRef(false, false, tc.tq, tc.tk, tc.dh, 1, q[h*tc.dh:], width, b, tc.tk, 0, want[h*tc.tq*tc.tk:], tc.tk)...)
			}
			requireClose(t, want, got, mag, tc.dh, fmt.Sprintf("%+v stride 0", tc))
		}
	})
}

// TestGemmPanicsOnShortSlices checks that sizes the slices cannot hold are
// refused before any assembly runs, with a message naming the operand.
func TestGemmPanicsOnShortSlices(t *testing.T) {
	a, b, c := make([]float32, 12), make([]float32, 12), make([]float32, 12)
	require.PanicsWithValue(t, "kernels: Gemm: A holds 12 floats, 4×4 with row stride 4 (batch 1, stride 0) needs 16",
		func() { Gemm(false, false, 4, 3, 4, 1, a, 4, b, 3, 0, c, 3) })
	require.PanicsWithValue(t, "kernels: Gemm: C is 3×4 as stored, its row stride 3 is less than 4",
		func() { Gemm(false, false, 3, 4, 2, 1, a, 2, b, 4, 0, c, 3) })
	require.PanicsWithValue(t, "kernels: GemmStrided: B holds 12 floats, 2×2 with row stride 2 (batch 3, stride 5) needs 14",
		func() { GemmStrided(3, false, false, 2, 2, 2, 1, a, 2, 0, b, 2, 5, 0, make([]float32, 100), 2, 4) })
	require.NotPanics(t, func() { Gemm(false, false, 0, 5, 5, 1, nil, 5, nil, 5, 0, nil, 5) })
	// A single row needs no stride.
	require.NotPanics(t, func() { Gemm(false, false, 1, 3, 4, 1, a, 0, b, 3, 0, c, 0) })
}

// TestLinear checks y = x·Wᵀ + bias with and without bias.
func TestLinear(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 13))
	const rows, in, out = 37, 70, 45
	x, w, bias := randSlice(rng, rows*in), randSlice(rng, out*in), randSlice(rng, out)
	for _, withBias := range []bool{false, true} {
		want := make([]float32, rows*out)
		mag := gemmRef(false, true, rows, out, in, 1, x, in, w, in, 0, want, out)
		var bb []float32
		if withBias {
			bb = bias
			for r := range rows {
				for j := range out {
					want[r*out+j] += bias[j]
					mag[r*out+j] += math.Abs(float64(bias[j]))
				}
			}
		}
		got := make([]float32, rows*out)
		Linear(got, x, w, bb, rows, in, out)
		requireClose(t, want, got, mag, in, fmt.Sprintf("bias=%v", withBias))
	}
}

// TestGemmDeepPackingKeepsBits checks that packing several blocks of depth
// at once (microKernel.kcPack) gives the bits of packing one at a time,
// on every kernel, serial and in parallel, with ragged edges, transposes,
// alpha and beta: the sums are still rounded into C every block of depth.
func TestGemmDeepPackingKeepsBits(t *testing.T) {
	forEachISA(t, func(t *testing.T) {
		kern := currentISA().gemm
		saved := kern.kcPack
		defer func() { kern.kcPack = saved }()
		for _, threshold := range []int{parallelMinFlops, 0} {
			withParallelThreshold(threshold, func() {
				for _, s := range [][3]int{{130, 100, 600}, {257, 65, 1030}, {37, 300, 513}, {25, 40, 256}} {
					for _, tr := range transposes {
						tc := gemmCase{m: s[0], n: s[1], k: s[2], alpha: 0.5, beta: -2, padA: 3, padB: 1, padC: 2}
						name := fmt.Sprintf("%s/par=%v", tc.name(tr), threshold == 0)
						rng := rand.New(rand.NewPCG(uint64(tc.k), 21))
						lda, ldb, ldc := tc.k+tc.padA, tc.n+tc.padB, tc.n+tc.padC
						if tr[0] {
							lda = tc.m + tc.padA
						}
						if tr[1] {
							ldb = tc.k + tc.padB
						}
						a, b := randSlice(rng, max(tc.m, tc.k)*lda), randSlice(rng, max(tc.k, tc.n)*ldb)
						c := randSlice(rng, tc.m*ldc)
						want, got := append([]float32(nil), c...), append([]float32(nil), c...)
						kern.kcPack = 0 // one block of depth at a time
						Gemm(tr[0], tr[1], tc.m, tc.n, tc.k, tc.alpha, a, lda, b, ldb, tc.beta, want, ldc)
						kern.kcPack = 4 * kern.kc
						Gemm(tr[0], tr[1], tc.m, tc.n, tc.k, tc.alpha, a, lda, b, ldb, tc.beta, got, ldc)
						require.Equal(t, want, got, name)
					}
				}
			})
		}
	})
}

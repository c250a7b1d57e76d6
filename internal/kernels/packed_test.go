package kernels

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGemmPackedMatchesGemm checks that a product with B packed once gives
// the bits of Gemm's driver (which packs B on the call), on every kernel, for short products (the
// few-rows kernel, serial and split across threads) and long ones (the
// driver without its packing phase), ragged edges, both transposes, and
// alpha and beta; and that it is within float32 rounding of a float64
// reference.
func TestGemmPackedMatchesGemm(t *testing.T) {
	forEachISA(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(15, 1))
		for _, m := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 16, 17, 23, 40, 64, 65, 128, 141, 257} {
			for _, nk := range [][2]int{{1, 1}, {31, 7}, {32, 256}, {33, 257}, {100, 600}, {768, 64}} {
				for _, tr := range [][2]bool{{false, false}, {true, true}, {false, true}} {
					for _, ab := range [][2]float32{{1, 0}, {1, 1}, {0.5, -2}} {
						n, k := nk[0], nk[1]
						name := fmt.Sprintf("m=%d/n=%d/k=%d/trans=%v/alpha=%g/beta=%g", m, n, k, tr, ab[0], ab[1])
						checkPacked(t, rng, name, m, n, k, tr[0], tr[1], ab[0], ab[1])
					}
				}
			}
		}
	})
}

// TestGemmPackedParallel sends short and long products down the parallel
// paths and checks them against Gemm.
func TestGemmPackedParallel(t *testing.T) {
	savedShort := shortMinFlops
	shortMinFlops = 1
	defer func() { shortMinFlops = savedShort }()
	busyUntil.Store(0) // split even if an earlier test found the machine busy
	withParallelThreshold(1, func() {
		forEachISA(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(15, 2))
			for _, m := range []int{1, 4, 9, 16, 30, 64} {
				checkPacked(t, rng, fmt.Sprintf("m=%d", m), m, 300, 70, false, true, 1, 0)
			}
			// One to three blocks of rows read in place (AVX-512), the
			// driver's parts over every block of depth (the others).
			for _, m := range []int{128, 256, 257, 301, 600} {
				for _, transA := range []bool{false, true} {
					checkPacked(t, rng, fmt.Sprintf("m=%d/transA=%v", m, transA), m, 300, 600, transA, true, 1, 0.5)
				}
			}
		})
	})
}

// checkPacked compares GemmPacked with Gemm (bitwise) and the reference.
func checkPacked(t *testing.T, rng *rand.Rand, name string, m, n, k int, transA, transB bool, alpha, beta float32) {
	t.Helper()
	lda, ldb, ldc := k+3, n+1, n+2
	if transA {
		lda = m + 3
	}
	if transB {
		ldb = k + 1
	}
	aRows, bRows := m, k
	if transA {
		aRows = k
	}
	if transB {
		bRows = n
	}
	a, b := randSlice(rng, aRows*lda), randSlice(rng, bRows*ldb)
	c0 := randSlice(rng, m*ldc)
	want, got, ref := append([]float32(nil), c0...), append([]float32(nil), c0...), append([]float32(nil), c0...)
	saved := maxDotRows
	maxDotRows = 0 // Gemm by the driver, which packs B as PackB does
	Gemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, want, ldc)
	maxDotRows = saved
	p := PackB(transB, k, n, b, ldb)
	require.NoError(t, GemmPackedContext(context.Background(), transA, m, alpha, a, lda, p, beta, got, ldc), name)
	require.Equal(t, want, got, "%s: GemmPacked differs from Gemm", name)
	mag := gemmRef(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, ref, ldc)
	requireClose(t, dense(ref, m, n, ldc), dense(got, m, n, ldc), mag, k, name)
}

// TestGemmPackedBiasMatchesFilledC checks that GemmPackedBias gives the
// bits of GemmPacked on a C whose rows hold the bias, on every kernel,
// serial and split across threads, with ragged edges, alpha and beta; and
// that it writes nothing past the n columns of a row.
func TestGemmPackedBiasMatchesFilledC(t *testing.T) {
	forEachSplit(t, func(t *testing.T, split bool) {
		rng := rand.New(rand.NewPCG(15, 6))
		for _, m := range []int{0, 1, 5, 12, 13, 40, 257, 600} {
			for _, nk := range [][2]int{{31, 7}, {64, 256}, {100, 600}} {
				for _, ab := range [][2]float32{{1, 1}, {0.5, -2}, {1, 0}} {
					n, k := nk[0], nk[1]
					name := fmt.Sprintf("split=%v/m=%d/n=%d/k=%d/alpha=%g/beta=%g", split, m, n, k, ab[0], ab[1])
					checkPackedBias(t, rng, name, m, n, k, ab[0], ab[1])
				}
			}
		}
	})
}

// forEachSplit runs check on every kernel set, first with short products
// on one thread as the bound decides, then with every product split
// across threads.
func forEachSplit(t *testing.T, check func(t *testing.T, split bool)) {
	savedShort := shortMinFlops
	defer func() { shortMinFlops = savedShort }()
	busyUntil.Store(0)
	for _, split := range []bool{false, true} {
		shortMinFlops = savedShort
		if split {
			shortMinFlops = 1
		}
		forEachISA(t, func(t *testing.T) { check(t, split) })
	}
}

// checkPackedBias compares GemmPackedBias with GemmPacked on C filled
// with the bias, bitwise, the row stride's padding included.
func checkPackedBias(t *testing.T, rng *rand.Rand, name string, m, n, k int, alpha, beta float32) {
	t.Helper()
	ldc := n + 3
	a, b, bias := randSlice(rng, m*k), randSlice(rng, n*k), randSlice(rng, n)
	p := PackB(true, k, n, b, k)
	want, got := randSlice(rng, m*ldc), make([]float32, m*ldc)
	copy(got, want)
	FillRows(want, ldc, m, bias)
	GemmPacked(false, m, alpha, a, k, p, beta, want, ldc)
	require.NoError(t, GemmPackedBiasContext(context.Background(), false, m, alpha, a, k, p, beta, bias, got, ldc), name)
	require.Equal(t, want, got, "%s: GemmPackedBias differs from GemmPacked on the filled C", name)
}

func TestGemmPackedBiasPanicsOnShortBias(t *testing.T) {
	p := PackB(false, 2, 3, make([]float32, 6), 3)
	require.PanicsWithValue(t, "kernels: GemmPackedBiasContext: the bias has 2 values for 3 columns",
		func() {
			GemmPackedBias(false, 1, 1, make([]float32, 2), 2, p, 1, make([]float32, 2), make([]float32, 3), 3)
		})
}

// TestGemmPackedSharedMatchesSeparate checks that products run together
// on one A give each product's bits from GemmPackedBias or GemmPacked run
// alone, with and without a bias, serial and split across threads, with
// ragged panels, several blocks of depth and of columns.
func TestGemmPackedSharedMatchesSeparate(t *testing.T) {
	forEachSplit(t, func(t *testing.T, split bool) {
		rng := rand.New(rand.NewPCG(15, 7))
		for _, m := range []int{0, 1, 5, 16, 37, 300} {
			for _, k := range []int{7, 600} {
				for _, ab := range [][2]float32{{1, 1}, {0.5, -2}, {1, 0}} {
					name := fmt.Sprintf("split=%v/m=%d/k=%d/alpha=%g/beta=%g", split, m, k, ab[0], ab[1])
					widths := []int{64, 31, 96}
					if k == 7 {
						widths = append(widths, 4100) // two blocks of columns
					}
					checkShared(t, rng, name, m, k, widths, ab[0], ab[1], nil)
				}
			}
		}
	})
}

// TestGemmPackedSharedOtherKernels checks the products when one weight
// was packed for other kernels: each runs on its own path, with the same
// bits.
func TestGemmPackedSharedOtherKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 8))
	stale := PackB(false, 50, 40, randSlice(rng, 50*40), 40)
	forEachISA(t, func(t *testing.T) {
		checkShared(t, rng, "one weight packed for other kernels", 9, 50, []int{64, 33}, 1, 1, stale)
	})
}

// checkShared compares GemmPackedSharedContext on products of the widths
// (every other one with a bias, the others with beta 1 - beta; extra,
// when given, added last without one) with each product run alone, bitwise, the row strides' padding
// included.
func checkShared(t *testing.T, rng *rand.Rand, name string, m, k int, widths []int, alpha, beta float32, extra *PackedB) {
	t.Helper()
	a := randSlice(rng, m*k)
	var products []SharedProduct
	var want [][]float32
	for i, n := range widths {
		ldc := n + 2
		p := PackB(true, k, n, randSlice(rng, n*k), k)
		pr := SharedProduct{B: p, Beta: beta, C: randSlice(rng, m*ldc), Ldc: ldc}
		w := slices.Clone(pr.C)
		if i%2 == 0 {
			pr.Bias = randSlice(rng, n+1) // longer than needed: cut to n
			GemmPackedBias(false, m, alpha, a, k, p, beta, pr.Bias, w, ldc)
		} else {
			pr.Beta = 1 - beta // each product its own beta
			GemmPacked(false, m, alpha, a, k, p, pr.Beta, w, ldc)
		}
		products, want = append(products, pr), append(want, w)
	}
	if extra != nil {
		_, n := extra.Dims()
		pr := SharedProduct{B: extra, Beta: beta, C: randSlice(rng, m*n), Ldc: n}
		w := slices.Clone(pr.C)
		GemmPacked(false, m, alpha, a, k, extra, beta, w, n)
		products, want = append(products, pr), append(want, w)
	}
	require.NoError(t, GemmPackedSharedContext(context.Background(), false, m, alpha, a, k, products), name)
	for i, pr := range products {
		require.Equal(t, want[i], pr.C, "%s: product %d differs from it run alone", name, i)
	}
}

func TestGemmPackedSharedPanicsOnMismatch(t *testing.T) {
	p := PackB(false, 2, 3, make([]float32, 6), 3)
	q := PackB(false, 4, 3, make([]float32, 12), 3)
	require.PanicsWithValue(t, "kernels: GemmPackedSharedContext: product 1 has depth 4, product 0 2",
		func() {
			_ = GemmPackedSharedContext(context.Background(), false, 1, 1, make([]float32, 4), 4,
				[]SharedProduct{{B: p, C: make([]float32, 3), Ldc: 3}, {B: q, C: make([]float32, 3), Ldc: 3}})
		})
	require.PanicsWithValue(t, "kernels: GemmPackedSharedContext: product 0's bias has 2 values for 3 columns",
		func() {
			_ = GemmPackedSharedContext(context.Background(), false, 1, 1, make([]float32, 2), 2,
				[]SharedProduct{{B: p, Bias: make([]float32, 2), C: make([]float32, 3), Ldc: 3}})
		})
}

// dense returns the m×n matrix of row stride ld in c, rows adjacent.
func dense(c []float32, m, n, ld int) []float32 {
	out := make([]float32, 0, m*n)
	for i := range m {
		out = append(out, c[i*ld:i*ld+n]...)
	}
	return out
}

// TestGemmPackedOtherKernels checks that a PackedB made for one kernel
// still gives the right product after the kernels change (it falls back
// to the unpacked B).
func TestGemmPackedOtherKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 3))
	a, b := randSlice(rng, 3*50), randSlice(rng, 50*40)
	p := PackB(false, 50, 40, b, 40)
	want := make([]float32, 3*40)
	Gemm(false, false, 3, 40, 50, 1, a, 50, b, 40, 0, want, 40)
	forEachISA(t, func(t *testing.T) {
		got := make([]float32, 3*40)
		GemmPacked(false, 3, 1, a, 50, p, 0, got, 40)
		ref := make([]float32, 3*40)
		mag := gemmRef(false, false, 3, 40, 50, 1, a, 50, b, 40, 0, ref, 40)
		requireClose(t, ref, got, mag, 50, "after switching kernels")
	})
}

// TestGemmPackedAllocations checks that products on a packed B allocate
// nothing once warm, short or long, serial or parallel.
func TestGemmPackedAllocations(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 4))
	const k, n = 768, 768
	b := randSlice(rng, k*n)
	a, c := randSlice(rng, 64*k), make([]float32, 64*n)
	p := PackB(true, k, n, b, k)
	for _, m := range []int{1, 16, 64} {
		got := mallocsPerCall(50, func() { GemmPacked(false, m, 1, a, k, p, 0, c, n) })
		require.Less(t, got, 0.5, "m=%d: allocations per call", m)
	}
}

func TestPackBPanicsOnShortSlice(t *testing.T) {
	require.PanicsWithValue(t, "kernels: PackB: B holds 10 floats, 4×3 with row stride 3 (batch 1, stride 0) needs 12",
		func() { PackB(false, 4, 3, make([]float32, 10), 3) })
}

// BenchmarkGemmPacked times x·Wᵀ for a 768×768 weight (a projection of
// GPT-2 small) with m rows, on the weight packed once and, for
// comparison, on Gemm, which packs it on every call.
func BenchmarkGemmPacked(b *testing.B) {
	rng := rand.New(rand.NewPCG(15, 5))
	const k, n = 768, 768
	w := randSlice(rng, k*n)
	p := PackB(true, k, n, w, k)
	for _, m := range []int{1, 4, 16, 64, 128} {
		a, c := randSlice(rng, m*k), make([]float32, m*n)
		b.Run(fmt.Sprintf("packed/m=%d", m), func(b *testing.B) {
			for b.Loop() {
				GemmPacked(false, m, 1, a, k, p, 0, c, n)
			}
		})
		b.Run(fmt.Sprintf("gemm/m=%d", m), func(b *testing.B) {
			for b.Loop() {
				Gemm(false, true, m, n, k, 1, a, k, w, k, 0, c, n)
			}
		})
	}
}

// BenchmarkGemmPackedBias times a linear layer's x·Wᵀ + b for BERT-sized
// products (4096 rows, the feed-forward's 384→1536 and 1536→384): with
// the bias taken tile by tile, and the other way, C filled with the bias
// row by row before the product.
func BenchmarkGemmPackedBias(b *testing.B) {
	rng := rand.New(rand.NewPCG(15, 7))
	const m = 4096
	for _, kn := range [][2]int{{384, 1536}, {1536, 384}} {
		k, n := kn[0], kn[1]
		p := PackB(true, k, n, randSlice(rng, n*k), k)
		a, bias, c := randSlice(rng, m*k), randSlice(rng, n), make([]float32, m*n)
		b.Run(fmt.Sprintf("tiles/k=%d/n=%d", k, n), func(b *testing.B) {
			for b.Loop() {
				GemmPackedBias(false, m, 1, a, k, p, 1, bias, c, n)
			}
		})
		b.Run(fmt.Sprintf("filled/k=%d/n=%d", k, n), func(b *testing.B) {
			for b.Loop() {
				FillRows(c, n, m, bias)
				GemmPacked(false, m, 1, a, k, p, 1, c, n)
			}
		})
	}
}

// BenchmarkGemmPackedShared times attention's three input projections
// (MiniLM's 384 and GPT-2's 768 wide) on short inputs, one product after
// the other and together, with biases.
func BenchmarkGemmPackedShared(b *testing.B) {
	rng := rand.New(rand.NewPCG(15, 9))
	for _, d := range []int{384, 768} {
		products := make([]SharedProduct, 3)
		for i := range products {
			products[i] = SharedProduct{B: PackB(true, d, d, randSlice(rng, d*d), d), Bias: randSlice(rng, d), Beta: 1, Ldc: d}
		}
		for _, m := range []int{1, 16, 32, 128} {
			a := randSlice(rng, m*d)
			for i := range products {
				products[i].C = make([]float32, m*d)
			}
			b.Run(fmt.Sprintf("apart/d=%d/m=%d", d, m), func(b *testing.B) {
				for b.Loop() {
					for _, pr := range products {
						GemmPackedBias(false, m, 1, a, d, pr.B, 1, pr.Bias, pr.C, d)
					}
				}
			})
			b.Run(fmt.Sprintf("together/d=%d/m=%d", d, m), func(b *testing.B) {
				for b.Loop() {
					_ = GemmPackedSharedContext(context.Background(), false, m, 1, a, d, products)
				}
			})
		}
	}
}

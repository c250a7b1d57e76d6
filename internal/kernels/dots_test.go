package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestGemmDots checks the products Gemm computes as dot products (a few
// rows of A, B transposed, as a linear layer applied to one token) against
// the float64 reference, with B rows not a multiple of 4 and depths not a
// multiple of 32, alpha and beta, and row strides wider than the rows;
// serial, and split across threads (by groups of B's rows) down to the
// smallest products.
func TestGemmDots(t *testing.T) {
	saved := shortMinFlops
	defer func() { shortMinFlops = saved }()
	for _, minFlops := range []int{saved, 1} {
		shortMinFlops = minFlops
		busyUntil.Store(0) // split even if an earlier test found the machine busy
		t.Run(fmt.Sprintf("minFlops=%d", minFlops), testGemmDots)
	}
}

func testGemmDots(t *testing.T) {
	forEachISA(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(15, 9))
		for _, m := range []int{1, 2, 3, 4} {
			for _, nk := range [][2]int{{4, 32}, {7, 33}, {768, 768}, {13, 100}, {1, 64}} {
				for _, ab := range [][2]float32{{1, 0}, {1, 1}, {0.5, -2}} {
					n, k := nk[0], nk[1]
					lda, ldb, ldc := k+1, k+3, n+2
					a, b, c := randSlice(rng, m*lda), randSlice(rng, n*ldb), randSlice(rng, m*ldc)
					ref := append([]float32(nil), c...)
					Gemm(false, true, m, n, k, ab[0], a, lda, b, ldb, ab[1], c, ldc)
					mag := gemmRef(false, true, m, n, k, ab[0], a, lda, b, ldb, ab[1], ref, ldc)
					name := fmt.Sprintf("m=%d/n=%d/k=%d/alpha=%g/beta=%g", m, n, k, ab[0], ab[1])
					requireClose(t, dense(ref, m, n, ldc), dense(c, m, n, ldc), mag, k, name)
					for i := range m {
						for j := n; j < ldc; j++ {
							if c[i*ldc+j] != ref[i*ldc+j] {
								t.Fatalf("%s: C[%d][%d] beyond n changed", name, i, j)
							}
						}
					}
				}
			}
		}
	})
}

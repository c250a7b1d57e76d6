package kernels

// Dot products for the shortest products with a transposed B: a linear
// layer applied to one token, x·Wᵀ with W stored (out, in) as nn.Linear
// stores it. Each output is the dot product of a row of A with a row of
// B, both contiguous, so B is read once, in place: packing it first (the
// GEMM driver's way) would cost more than the whole product.

// maxDotRows is the most rows of A a product takes as dot products; a
// variable so tests can send products down the GEMM driver instead.
var maxDotRows = 4

// runDots computes g, whose op(B) is Bᵀ, as dot products: four rows of B
// at a time against every row of A (the four rows stay in L1 across A's
// rows), then alpha and beta as the tile kernels apply them.
func runDots(g *gemmCall, dot4 func(k32 int, x, w []float32, ldw int, out *[4]float32)) {
	k32 := g.k &^ 31
	ws := freeWorkspaces.get() // for d: through the func value, a local would escape
	defer freeWorkspaces.put(ws)
	d := &ws.dots
	for j := 0; j < g.n; j += 4 {
		w := min(4, g.n-j)
		for i := range g.m {
			x := g.a[i*g.lda : i*g.lda+g.k]
			if w == 4 {
				dot4(k32, x, g.b[j*g.ldb:], g.ldb, d)
			} else {
				*d = [4]float32{}
				for r := range w {
					d[r] = dotGo(x[:k32], g.b[(j+r)*g.ldb:])
				}
			}
			c := g.c[i*g.ldc+j : i*g.ldc+j+w]
			for r := range c {
				s := d[r] + dotGo(x[k32:], g.b[(j+r)*g.ldb+k32:])
				if g.beta == 0 {
					c[r] = g.alpha * s
				} else {
					c[r] = g.alpha*s + g.beta*c[r]
				}
			}
		}
	}
}

// dotGo returns the dot product of x with the first len(x) floats of y.
func dotGo(x, y []float32) float32 {
	y = y[:len(x)]
	var s float32
	for i, v := range x {
		s += v * y[i]
	}
	return s
}

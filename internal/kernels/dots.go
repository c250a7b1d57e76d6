package kernels

// Dot products for the shortest products with a transposed B: a linear
// layer applied to one token, x·Wᵀ with W stored (out, in) as nn.Linear
// stores it. Each output is the dot product of a row of A with a row of
// B, both contiguous, so B is read once, in place: packing it first (the
// GEMM driver's way) would cost more than the whole product.

// maxDotRows is the most rows of A a product takes as dot products; a
// variable so tests can send products down the GEMM driver instead.
var maxDotRows = 4

// runDots computes g, whose op(B) is Bᵀ, as dot products, on up to
// threads goroutines: the threads split B's rows (C's columns), so that
// each streams its share of the weight once. Products not worth
// splitting (worthSplitting, as for short products) stay on the calling
// goroutine.
func runDots(g *gemmCall, dot4 func(k32 int, x, w []float32, ldw int, out *[4]float32), threads int) {
	groups := ceilDiv(g.n, 4)
	if !worthSplitting(2 * g.m * g.n * g.k) {
		threads = 1
	}
	j := freeDotsJobs.get()
	j.g, j.dot4, j.groups, j.parts = *g, dot4, groups, 1
	if threads > 1 {
		j.parts = min(groups, partsPerThread*threads)
	}
	parallelFor(j.parts, threads, j)
	j.g, j.dot4 = gemmCall{}, nil // drop references to the caller's slices
	freeDotsJobs.put(j)
}

// partsPerThread is how many parts a short product is cut into per
// thread: more than one, so that a thread that starts late (a busy
// machine) or runs slower leaves less work for the others to wait on.
const partsPerThread = 4

// dotsJob is a product computed as dot products, its parts ranges of
// groups of four rows of B.
type dotsJob struct {
	g             gemmCall
	dot4          func(k32 int, x, w []float32, ldw int, out *[4]float32)
	groups, parts int
}

// freeDotsJobs recycles dotsJobs.
var freeDotsJobs = make(freeList[dotsJob], 16)

// runPart computes the columns of C of one range of groups: four rows of
// B at a time against every row of A (the four rows stay in L1 across
// A's rows), then alpha and beta as the tile kernels apply them.
func (j *dotsJob) runPart(part int) {
	g := &j.g
	q0, q1 := splitRange(j.groups, j.parts, part)
	k32 := g.k &^ 31
	ws := freeWorkspaces.get() // for d: through the func value, a local would escape
	defer freeWorkspaces.put(ws)
	d := &ws.dots
	for j0 := 4 * q0; j0 < min(4*q1, g.n); j0 += 4 {
		w := min(4, g.n-j0)
		for i := range g.m {
			x := g.a[i*g.lda : i*g.lda+g.k]
			if w == 4 {
				j.dot4(k32, x, g.b[j0*g.ldb:], g.ldb, d)
			} else {
				*d = [4]float32{}
				for r := range w {
					d[r] = dotGo(x[:k32], g.b[(j0+r)*g.ldb:])
				}
			}
			c := g.c[i*g.ldc+j0 : i*g.ldc+j0+w]
			for r := range c {
				s := d[r] + dotGo(x[k32:], g.b[(j0+r)*g.ldb+k32:])
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

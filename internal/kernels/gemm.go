package kernels

import "fmt"

// Gemm computes C = alpha·op(A)·op(B) + beta·C for row-major matrices, where
// op(A) is m×k and op(B) is k×n; transA and transB select the transposes.
// lda, ldb and ldc are the row strides of A, B and C as stored.
// With beta == 0, C is overwritten (NaNs in C do not propagate).
//
// Large products run on all processors (runtime.GOMAXPROCS); small ones on
// the calling goroutine. Gemm does not allocate once its buffers have grown
// to the sizes in use. It panics if a slice is too short for the sizes and
// strides given, or a stride is smaller than a row.
func Gemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	g := gemmCall{transA, transB, m, n, k, alpha, beta, a, lda, b, ldb, c, ldc}
	g.check("Gemm", 1, 0, 0, 0)
	runGemm(&g, maxThreads())
}

// GemmStrided computes batch independent products with the same shapes,
// C_i = alpha·op(A_i)·op(B_i) + beta·C_i, where A_i starts at a[i·strideA],
// B_i at b[i·strideB] and C_i at c[i·strideC]; the other arguments are as
// for Gemm. A stride of 0 reuses one operand for every product.
//
// The strides address heads inside a (T, H·dh) activation without copying:
// head h of Q is a[h·dh:] with lda = H·dh, so batch = H, strideA = dh.
// The C_i must not overlap each other: they may be computed concurrently.
// Small products run in parallel across the batch, large ones one after
// another, each in parallel.
func GemmStrided(batch int, transA, transB bool, m, n, k int, alpha float32,
	a []float32, lda, strideA int, b []float32, ldb, strideB int,
	beta float32, c []float32, ldc, strideC int) {
	if batch <= 0 {
		return
	}
	g := gemmCall{transA, transB, m, n, k, alpha, beta, a, lda, b, ldb, c, ldc}
	g.check("GemmStrided", batch, strideA, strideB, strideC)
	threads := maxThreads()
	item := 2 * m * n * k
	if batch == 1 || threads == 1 || item >= batchItemMaxFlops || batch*item < parallelMinFlops {
		for i := range batch {
			gi := g.item(i, strideA, strideB, strideC)
			runGemm(&gi, threads)
		}
		return
	}
	var s *stridedJob
	select {
	case s = <-freeStridedJobs:
	default:
		s = new(stridedJob)
	}
	*s = stridedJob{g: g, strideA: strideA, strideB: strideB, strideC: strideC}
	parallelFor(batch, threads, s)
	*s = stridedJob{}
	select {
	case freeStridedJobs <- s:
	default:
	}
}

// batchItemMaxFlops is the size from which a product of a batch is split
// across threads on its own rather than given whole to one thread.
const batchItemMaxFlops = 64 << 20

// stridedJob runs the products of a GemmStrided batch, one per part.
type stridedJob struct {
	g                         gemmCall
	strideA, strideB, strideC int
}

// freeStridedJobs recycles stridedJobs.
var freeStridedJobs = make(chan *stridedJob, 16)

// runPart computes product i of the batch on the calling goroutine.
func (s *stridedJob) runPart(i int) {
	gi := s.g.item(i, s.strideA, s.strideB, s.strideC)
	runGemm(&gi, 1)
}

// item returns product i of a strided batch.
func (g *gemmCall) item(i, strideA, strideB, strideC int) gemmCall {
	gi := *g
	gi.a = g.a[i*strideA:]
	gi.b = g.b[i*strideB:]
	gi.c = g.c[i*strideC:]
	return gi
}

// check panics with a message naming the operand if a stride or slice
// cannot hold the matrices. The assembly kernels do not bounds-check, so
// this is what keeps a wrong size from reading or writing stray memory.
func (g *gemmCall) check(fn string, batch, strideA, strideB, strideC int) {
	if g.m < 0 || g.n < 0 || g.k < 0 {
		panic(fmt.Sprintf("kernels: %s: negative size m=%d n=%d k=%d", fn, g.m, g.n, g.k))
	}
	if g.m == 0 || g.n == 0 {
		return
	}
	aRows, aCols := g.m, g.k
	if g.transA {
		aRows, aCols = g.k, g.m
	}
	bRows, bCols := g.k, g.n
	if g.transB {
		bRows, bCols = g.n, g.k
	}
	checkMatrix(fn, "A", g.a, aRows, aCols, g.lda, batch, strideA)
	checkMatrix(fn, "B", g.b, bRows, bCols, g.ldb, batch, strideB)
	checkMatrix(fn, "C", g.c, g.m, g.n, g.ldc, batch, strideC)
}

// checkMatrix panics unless s holds batch rows×cols matrices with row
// stride ld, the i-th starting at i·stride.
func checkMatrix(fn, name string, s []float32, rows, cols, ld, batch, stride int) {
	if rows == 0 || cols == 0 {
		return
	}
	if ld < cols && rows > 1 { // one row's stride is never used
		panic(fmt.Sprintf("kernels: %s: %s is %d×%d as stored, its row stride %d is less than %d", fn, name, rows, cols, ld, cols))
	}
	if stride < 0 {
		panic(fmt.Sprintf("kernels: %s: negative stride %d for %s", fn, stride, name))
	}
	need := (batch-1)*stride + (rows-1)*ld + cols
	if len(s) < need {
		panic(fmt.Sprintf("kernels: %s: %s holds %d floats, %d×%d with row stride %d (batch %d, stride %d) needs %d", fn, name, len(s), rows, cols, ld, batch, stride, need))
	}
}

// Linear computes y = x·Wᵀ + bias for rows of x, with W stored (out, in) as
// PyTorch stores nn.Linear weights. x is rows×in, y is rows×out, both dense;
// bias may be nil.
func Linear(y, x, w, bias []float32, rows, in, out int) {
	var beta float32
	if bias != nil {
		// Start from the bias and let the GEMM add to it: a row copy is a
		// memmove, much cheaper than a separate pass adding it afterwards.
		bias = bias[:out]
		for r := range rows {
			copy(y[r*out:(r+1)*out], bias)
		}
		beta = 1
	}
	Gemm(false, true, rows, out, in, 1, x, in, w, in, beta, y, out)
}

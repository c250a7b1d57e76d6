package kernels

import "context"

// GemmContext is Gemm that gives up when ctx is done. The product is
// computed in parts of at most a few milliseconds of work each; every part
// checks ctx first, so once ctx is done the remaining parts are skipped and
// GemmContext returns ctx.Err(), leaving a partial result in C. The checks
// cost nothing measurable. (With the openblas build tag the product runs
// to the end and ctx is checked after it.)
func GemmContext(ctx context.Context, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) error {
	g := gemmCall{transA, transB, m, n, k, alpha, beta, a, lda, b, ldb, c, ldc}
	g.check("GemmContext", 1, 0, 0, 0)
	runGemmContext(ctx, &g, maxThreads())
	return ctx.Err()
}

// GemmStridedContext is GemmStrided that gives up when ctx is done, as
// GemmContext does: it checks ctx before every product of the batch and
// every part of a large product.
func GemmStridedContext(ctx context.Context, batch int, transA, transB bool, m, n, k int, alpha float32,
	a []float32, lda, strideA int, b []float32, ldb, strideB int,
	beta float32, c []float32, ldc, strideC int) error {
	if batch <= 0 {
		return ctx.Err()
	}
	g := gemmCall{transA, transB, m, n, k, alpha, beta, a, lda, b, ldb, c, ldc}
	g.check("GemmStridedContext", batch, strideA, strideB, strideC)
	threads := maxThreads()
	item := 2 * m * n * k
	// The split between products and within them is GemmStrided's.
	if batch == 1 || threads == 1 || item >= batchItemMaxFlops || batch*item < parallelMinFlops {
		for i := 0; i < batch && ctx.Err() == nil; i++ {
			gi := g.item(i, strideA, strideB, strideC)
			runGemmContext(ctx, &gi, threads)
		}
		return ctx.Err()
	}
	s := &stridedContextJob{stridedJob{g: g, strideA: strideA, strideB: strideB, strideC: strideC}, ctx}
	parallelFor(batch, threads, s)
	return ctx.Err()
}

// stridedContextJob runs the products of a GemmStridedContext batch, one
// per part, each after checking the context.
type stridedContextJob struct {
	stridedJob
	ctx context.Context
}

// runPart computes product i of the batch on the calling goroutine, unless
// the context is done.
func (s *stridedContextJob) runPart(i int) {
	if s.ctx.Err() == nil {
		gi := s.g.item(i, s.strideA, s.strideB, s.strideC)
		runGemmContext(s.ctx, &gi, 1)
	}
}

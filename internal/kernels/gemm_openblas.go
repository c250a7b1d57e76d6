//go:build openblas && cgo

package kernels

// The openblas build tag links the system OpenBLAS (Debian: libopenblas-dev)
// through cgo, to compare attnrun's pure-Go GEMM with an optimized BLAS on
// the same machine in the same run:
//
//	go test -tags openblas ./internal/kernels -run OpenBLAS -bench GemmVsOpenBLAS -cpu 2
//
// The default build has no cgo and does not compile this file. The binding
// itself is in package openblas: Go does not build cgo and assembly in one
// package.

import (
	"runtime"
	"sync"

	"github.com/attnrun/attnrun/internal/kernels/openblas"
)

// OpenBLASConfig describes the linked OpenBLAS library (version, build
// options, the core it tuned itself for), for benchmark reports.
func OpenBLASConfig() string { return openblas.Config() }

// GemmOpenBLAS computes what Gemm computes, C = alpha·op(A)·op(B) + beta·C
// for row-major matrices with row strides lda, ldb and ldc, with OpenBLAS's
// cblas_sgemm on runtime.GOMAXPROCS threads. It checks its arguments as
// Gemm does and panics with the same messages, before OpenBLAS runs.
func GemmOpenBLAS(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	g := gemmCall{transA, transB, m, n, k, alpha, beta, a, lda, b, ldb, c, ldc}
	g.check("GemmOpenBLAS", 1, 0, 0, 0)
	sgemmOpenBLAS(g)
}

// GemmGo computes what Gemm computes with attnrun's own Go kernels, even in
// the openblas build where Gemm itself goes to OpenBLAS: the comparison.
func GemmGo(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	g := gemmCall{transA, transB, m, n, k, alpha, beta, a, lda, b, ldb, c, ldc}
	g.check("GemmGo", 1, 0, 0, 0)
	runGemmGo(&g, maxThreads())
}

// In this build every Gemm, GemmStrided and Linear goes to OpenBLAS.
func init() { gemmBackend = sgemmOpenBLAS }

// sgemmOpenBLAS runs one checked product on cblas_sgemm.
func sgemmOpenBLAS(g gemmCall) {
	transA, transB, m, n, k, alpha, beta := g.transA, g.transB, g.m, g.n, g.k, g.alpha, g.beta
	a, lda, b, ldb, c, ldc := g.a, g.lda, g.b, g.ldb, g.c, g.ldc
	if m == 0 || n == 0 {
		return
	}
	setOpenBLASThreads(runtime.GOMAXPROCS(0))
	aRows, aCols := m, k
	if transA {
		aRows, aCols = k, m
	}
	bRows, bCols := k, n
	if transB {
		bRows, bCols = n, k
	}
	openblas.Sgemm(transA, transB, m, n, k, alpha,
		a, blasLd(lda, aRows, aCols), b, blasLd(ldb, bRows, bCols), beta, c, blasLd(ldc, m, n))
}

// blasLd is the leading dimension to give CBLAS for a rows×cols operand
// stored with row stride ld. CBLAS requires ld ≥ max(1, cols) even where
// Gemm accepts less (a single row, whose stride is never used), so the
// stride is raised there; for one row that addresses the same memory.
func blasLd(ld, rows, cols int) int {
	if rows <= 1 {
		ld = max(ld, cols)
	}
	return max(ld, 1)
}

// openBLASThreads is the thread count last given to OpenBLAS; setting it
// is not free, so it is set only when GOMAXPROCS changes.
var openBLASThreads struct {
	sync.Mutex
	n int
}

// setOpenBLASThreads makes OpenBLAS use n threads.
func setOpenBLASThreads(n int) {
	openBLASThreads.Lock()
	defer openBLASThreads.Unlock()
	if openBLASThreads.n != n {
		openblas.SetThreads(n)
		openBLASThreads.n = n
	}
}

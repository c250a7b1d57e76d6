//go:build openblas && cgo

package openblas

/*
#cgo LDFLAGS: -lopenblas
#include <cblas.h>
*/
import "C"

import "unsafe"

// Sgemm calls cblas_sgemm for row-major matrices: C = alpha·op(A)·op(B) +
// beta·C, op(A) m×k, op(B) k×n, with leading dimensions lda, ldb and ldc.
// It trusts its caller: the slices must hold the matrices and the leading
// dimensions must satisfy CBLAS (at least the stored row width, and 1).
// An empty slice is passed as a null pointer, which OpenBLAS does not
// read when the sizes make the operand empty.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	C.cblas_sgemm(C.CblasRowMajor, trans(transA), trans(transB),
		C.blasint(m), C.blasint(n), C.blasint(k), C.float(alpha),
		ptr(a), C.blasint(lda), ptr(b), C.blasint(ldb),
		C.float(beta), ptr(c), C.blasint(ldc))
}

// SetThreads makes OpenBLAS use n threads for the following calls.
func SetThreads(n int) { C.openblas_set_num_threads(C.int(n)) }

// Config describes the linked library: its version and build options, and
// the core it tuned itself for.
func Config() string {
	return C.GoString(C.openblas_get_config()) + " core=" + C.GoString(C.openblas_get_corename())
}

// trans is the CBLAS transpose flag for t.
func trans(t bool) C.enum_CBLAS_TRANSPOSE {
	if t {
		return C.CblasTrans
	}
	return C.CblasNoTrans
}

// ptr is the address of the first element of s, or nil if s is empty.
func ptr(s []float32) *C.float {
	if len(s) == 0 {
		return nil
	}
	return (*C.float)(unsafe.Pointer(&s[0]))
}

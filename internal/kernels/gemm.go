package kernels

// Gemm computes C = alpha·op(A)·op(B) + beta·C for row-major matrices, where
// op(A) is m×k and op(B) is k×n; transA and transB select the transposes.
// lda, ldb and ldc are the row strides of A, B and C as stored.
// With beta == 0, C is overwritten (NaNs in C do not propagate).
func Gemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	for i := 0; i < m; i++ {
		crow := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(crow)
		} else if beta != 1 {
			for j := range crow {
				crow[j] *= beta
			}
		}
		for p := 0; p < k; p++ {
			var aip float32
			if transA {
				aip = a[p*lda+i]
			} else {
				aip = a[i*lda+p]
			}
			aip *= alpha
			if aip == 0 {
				continue
			}
			if transB {
				for j := range crow {
					crow[j] += aip * b[j*ldb+p]
				}
			} else {
				brow := b[p*ldb : p*ldb+n]
				for j, bv := range brow {
					crow[j] += aip * bv
				}
			}
		}
	}
}

// Linear computes y = x·Wᵀ + bias for rows of x, with W stored (out, in) as
// PyTorch stores nn.Linear weights. x is rows×in, y is rows×out, both dense;
// bias may be nil.
func Linear(y, x, w, bias []float32, rows, in, out int) {
	Gemm(false, true, rows, out, in, 1, x, in, w, in, 0, y, out)
	if bias != nil {
		for r := 0; r < rows; r++ {
			yr := y[r*out : r*out+out]
			for j := range yr {
				yr[j] += bias[j]
			}
		}
	}
}

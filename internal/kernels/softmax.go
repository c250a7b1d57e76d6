package kernels

import "math"

// SoftmaxRows replaces each of the rows of x (n wide, dense) by its softmax.
// A row that is entirely -Inf becomes all zeros rather than NaN.
func SoftmaxRows(x []float32, rows, n int) {
	set := currentISA()
	_ = x[:rows*n]
	for r := range rows {
		softmaxRow(set, x[r*n:r*n+n])
	}
}

// softmaxRow replaces row by its softmax, or by zeros if it is all −Inf
// (or empty).
func softmaxRow(set *isa, row []float32) {
	m := set.maxOf(row)
	if math.IsInf(float64(m), -1) {
		clear(row)
		return
	}
	sum := set.expShift(row, m)
	set.scale(row, 1/sum)
}

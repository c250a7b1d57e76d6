package kernels

import "math"

// SoftmaxRows replaces each of the rows of x (n wide, dense) by its softmax.
// A row that is entirely -Inf becomes all zeros rather than NaN.
func SoftmaxRows(x []float32, rows, n int) {
	for r := 0; r < rows; r++ {
		softmax(x[r*n : r*n+n])
	}
}

func softmax(row []float32) {
	maxv := float32(math.Inf(-1))
	for _, v := range row {
		if v > maxv {
			maxv = v
		}
	}
	if math.IsInf(float64(maxv), -1) {
		clear(row)
		return
	}
	var sum float32
	for i, v := range row {
		e := float32(math.Exp(float64(v - maxv)))
		row[i] = e
		sum += e
	}
	inv := 1 / sum
	for i := range row {
		row[i] *= inv
	}
}

package layers

import "math"

// rmsNormHeads normalizes every head of rows of x in place: x holds rows of
// heads·headDim values, and each head's headDim values become
// weight · x / √(mean(x²) + eps), the mean accumulated in float64 (as
// norm.rms; Qwen3's q_norm and k_norm accumulate in float32).
func rmsNormHeads(x []float32, rows, heads, headDim int, weight []float32, eps float64) {
	rmsRows(x, headDim, headDim, rows*heads, weight, eps)
}

// rmsRows normalizes the first n values of each of rows rows of x (ld
// apart) by their root mean square and multiplies them by weight, as
// DeepseekV3RMSNorm does; the mean is accumulated in float64.
func rmsRows(x []float32, ld, n, rows int, weight []float32, eps float64) {
	for r := range rows {
		v := x[r*ld : r*ld+n]
		var ss float64
		for _, e := range v {
			ss += float64(e) * float64(e)
		}
		inv := 1 / math.Sqrt(ss/float64(n)+eps)
		for i, e := range v {
			v[i] = weight[i] * float32(float64(e)*inv)
		}
	}
}

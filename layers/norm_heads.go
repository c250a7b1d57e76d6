package layers

import "math"

// rmsNormHeads normalizes every head of rows of x in place: x holds rows of
// heads·headDim values, and each head's headDim values become
// weight · x / √(mean(x²) + eps), the mean accumulated in float64 (as
// norm.rms; Qwen3's q_norm and k_norm accumulate in float32).
func rmsNormHeads(x []float32, rows, heads, headDim int, weight []float32, eps float64) {
	for r := range rows * heads {
		v := x[r*headDim : (r+1)*headDim]
		var ss float64
		for _, a := range v {
			ss += float64(a) * float64(a)
		}
		inv := 1 / math.Sqrt(ss/float64(headDim)+eps)
		for j, a := range v {
			v[j] = float32(float64(a)*inv) * weight[j]
		}
	}
}

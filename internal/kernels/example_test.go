package kernels_test

import (
	"fmt"
	"math"

	"github.com/attnrun/attnrun/internal/kernels"
)

// Multi-head attention on a (T, H·dh) projection: each head is addressed
// in place through the row strides, and AttendBatch spreads the heads over
// the processors.
func ExampleAttendBatch() {
	const t, nh, dh = 3, 2, 2
	const width = nh * dh
	// One query, key and value row per position, heads side by side.
	q := []float32{1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 1, 1}
	k := []float32{1, 0, 1, 0, 0, 1, 0, 1, 1, 1, 1, 1}
	v := []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	out := make([]float32, t*width)

	var heads []kernels.Head
	for h := range nh {
		heads = append(heads, kernels.Head{
			Q: q[h*dh:], LdQ: width, K: k[h*dh:], LdK: width, V: v[h*dh:], LdV: width,
			Out: out[h*dh:], LdOut: width, Tq: t, Tk: t, D: dh, Dv: dh,
		})
	}
	kernels.AttendBatch(heads, kernels.AttentionOptions{Scale: float32(1 / math.Sqrt(dh)), Causal: true})
	for i := range t {
		fmt.Printf("%.3f\n", out[i*width:(i+1)*width])
	}
	// Output:
	// [1.000 2.000 3.000 4.000]
	// [3.679 4.679 4.321 5.321]
	// [6.021 7.021 8.021 9.021]
}

// Gemm multiplies row-major matrices in place; here C = A·Bᵀ, as a layer
// computes x·Wᵀ with W stored (out, in).
func ExampleGemm() {
	a := []float32{1, 2, 3, 4, 5, 6} // 2×3
	w := []float32{1, 0, 1, 0, 1, 0} // 2×3, used transposed
	c := make([]float32, 4)          // 2×2
	kernels.Gemm(false, true, 2, 2, 3, 1, a, 3, w, 3, 0, c, 2)
	fmt.Println(c)
	// Output: [4 2 10 5]
}

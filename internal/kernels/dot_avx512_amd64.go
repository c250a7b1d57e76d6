package kernels

import "unsafe"

// dot4AVX512 sets out[r] to the dot product of x[0:k32] with row r of w
// (w[r·ldw:], r < 4), for k32 a multiple of 32, in two partial sums of 16
// lanes each per row (dot_avx512_amd64.s).
//
//go:noescape
func dot4AVX512(k32 int, x *float32, w *float32, ldw int, out *float32)

// dot4AVX512Go checks the slices and calls dot4AVX512.
func dot4AVX512Go(k32 int, x, w []float32, ldw int, out *[4]float32) {
	if k32%32 != 0 {
		panic("kernels: dot4AVX512: k not a multiple of 32")
	}
	if k32 > 0 {
		_ = x[k32-1]
		_ = w[3*ldw+k32-1]
	}
	dot4AVX512(k32, unsafe.SliceData(x), unsafe.SliceData(w), ldw, &out[0])
}

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

// dotRowsAVX512 sets out[r] = scale·(x·row r of w) for the 4·groups rows
// of w (ldw apart), x and the rows k32 floats long, k32 a multiple of 32:
// dot4AVX512 over consecutive groups of four rows in one call.
//
//go:noescape
func dotRowsAVX512(groups int, k32 int, x *float32, w *float32, ldw int, scale float32, out *float32)

// dotRowsAVX512Go checks the slices and calls dotRowsAVX512.
func dotRowsAVX512Go(groups, k32 int, x, w []float32, ldw int, scale float32, out []float32) {
	if k32%32 != 0 {
		panic("kernels: dotRowsAVX512: k not a multiple of 32")
	}
	if groups <= 0 {
		return
	}
	_ = out[4*groups-1]
	if k32 > 0 {
		_ = x[k32-1]
		_ = w[(4*groups-1)*ldw+k32-1]
	}
	dotRowsAVX512(groups, k32, unsafe.SliceData(x), unsafe.SliceData(w), ldw, scale, unsafe.SliceData(out))
}

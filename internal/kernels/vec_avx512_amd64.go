package kernels

import "unsafe"

// expShiftAVX512 sets x[i] = exp(x[i] − shift) for n floats and returns
// their sum, with the same algorithm as exp32. The last n%16 are handled
// with masked loads and stores, which read and write nothing beyond them.
//
//go:noescape
func expShiftAVX512(x *float32, n int, shift float32) (sum float32)

// maxOfAVX512 returns the largest of n floats: NaN if one is
// NaN, −Inf if n is 0.
//
//go:noescape
func maxOfAVX512(x *float32, n int) float32

// scaleAVX512 multiplies n floats by alpha.
//
//go:noescape
func scaleAVX512(x *float32, n int, alpha float32)

// expShift512 is isa.expShift with AVX-512.
func expShift512(x []float32, shift float32) float32 {
	return expShiftAVX512(unsafe.SliceData(x), len(x), shift)
}

// maxOf512 is isa.maxOf with AVX-512.
func maxOf512(x []float32) float32 {
	return maxOfAVX512(unsafe.SliceData(x), len(x))
}

// scale512 is isa.scale with AVX-512.
func scale512(x []float32, alpha float32) {
	scaleAVX512(unsafe.SliceData(x), len(x), alpha)
}

// addAVX512 sets x[i] += y[i] for i < n.
//
//go:noescape
func addAVX512(x, y *float32, n int)

// add512 is isa.add with AVX-512.
func add512(x, y []float32) {
	_ = y[:len(x)]
	addAVX512(unsafe.SliceData(x), unsafe.SliceData(y), len(x))
}

package kernels

import "unsafe"

// expShiftAVX512 sets x[i] = exp(x[i] − shift) for n floats (a multiple
// of 16) and returns their sum, with the same algorithm as exp32.
//
//go:noescape
func expShiftAVX512(x *float32, n int, shift float32) (sum float32)

// maxOfAVX512 returns the largest of n floats, n a positive multiple of 32.
//
//go:noescape
func maxOfAVX512(x *float32, n int) float32

// scaleAVX512 multiplies n floats (a multiple of 16) by alpha.
//
//go:noescape
func scaleAVX512(x *float32, n int, alpha float32)

// expShift512 is isa.expShift with AVX-512: vectors of 16, the rest with
// AVX2 and Go.
func expShift512(x []float32, shift float32) float32 {
	n := len(x) &^ 15
	var sum float32
	if n > 0 {
		sum = expShiftAVX512(unsafe.SliceData(x), n, shift)
	}
	return sum + expShiftVec(x[n:], shift)
}

// maxOf512 is isa.maxOf with AVX-512: vectors of 32, the rest with AVX2
// and Go.
func maxOf512(x []float32) float32 {
	n := len(x) &^ 31
	m := maxOfVec(x[n:])
	if n > 0 {
		m = max(m, maxOfAVX512(unsafe.SliceData(x), n))
	}
	return m
}

// scale512 is isa.scale with AVX-512: vectors of 16, the rest with AVX2
// and Go.
func scale512(x []float32, alpha float32) {
	n := len(x) &^ 15
	if n > 0 {
		scaleAVX512(unsafe.SliceData(x), n, alpha)
	}
	scaleVec(x[n:], alpha)
}

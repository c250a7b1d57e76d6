package kernels

import "unsafe"

// expShiftAVX2 sets x[i] = exp(x[i] − shift) for n floats (a multiple of
// 8) and returns their sum, with the same algorithm as exp32.
//
//go:noescape
func expShiftAVX2(x *float32, n int, shift float32) (sum float32)

// maxOfAVX2 returns the largest of n floats, n a positive multiple of 16.
//
//go:noescape
func maxOfAVX2(x *float32, n int) float32

// scaleAVX2 multiplies n floats (a multiple of 8) by alpha.
//
//go:noescape
func scaleAVX2(x *float32, n int, alpha float32)

// expShiftVec is isa.expShift with AVX2: vectors of 8, the rest in Go.
func expShiftVec(x []float32, shift float32) float32 {
	n := len(x) &^ 7
	var sum float32
	if n > 0 {
		sum = expShiftAVX2(unsafe.SliceData(x), n, shift)
	}
	return sum + expShiftGo(x[n:], shift)
}

// maxOfVec is isa.maxOf with AVX2: vectors of 16, the rest in Go.
func maxOfVec(x []float32) float32 {
	n := len(x) &^ 15
	m := maxOfGo(x[n:])
	if n > 0 {
		m = max(m, maxOfAVX2(unsafe.SliceData(x), n))
	}
	return m
}

// scaleVec is isa.scale with AVX2: vectors of 8, the rest in Go.
func scaleVec(x []float32, alpha float32) {
	n := len(x) &^ 7
	if n > 0 {
		scaleAVX2(unsafe.SliceData(x), n, alpha)
	}
	scaleGo(x[n:], alpha)
}

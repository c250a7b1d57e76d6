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

// interleave4AVX2 sets dst[p·ldd + r] = src[r·lds + p] for r < 4 and
// p < n, n a multiple of 8.
//
//go:noescape
func interleave4AVX2(dst *float32, ldd int, src *float32, lds int, n int)

// interleave2AVX2 is interleave4AVX2 for 2 rows.
//
//go:noescape
func interleave2AVX2(dst *float32, ldd int, src *float32, lds int, n int)

// interleaveVec is isa.interleave with AVX2: groups of 4 (then 2) rows by
// 8 columns in assembly, the ragged rest in Go.
func interleaveVec(dst []float32, ldd int, src []float32, lds, rows, n int) {
	if rows == 0 || n == 0 {
		return
	}
	// The assembly does not bounds-check: make sure the last element each
	// call touches exists.
	_ = dst[(n-1)*ldd+rows-1]
	_ = src[(rows-1)*lds+n-1]
	n8 := n &^ 7
	r := 0
	if n8 > 0 {
		for ; r+4 <= rows; r += 4 {
			interleave4AVX2(&dst[r], ldd, &src[r*lds], lds, n8)
		}
		if r+2 <= rows {
			interleave2AVX2(&dst[r], ldd, &src[r*lds], lds, n8)
			r += 2
		}
	}
	if r < rows {
		interleaveGo(dst[r:], ldd, src[r*lds:], lds, rows-r, n8)
	}
	if n8 < n {
		interleaveGo(dst[n8*ldd:], ldd, src[n8:], lds, rows, n-n8)
	}
}

package kernels

import "unsafe"

// erfAVX512 sets dst[i] = erf32(src[i]) for the first n - n%16 values;
// table is erfTable.
//
//go:noescape
func erfAVX512(dst, src *float32, n int, table *float32)

// geluAVX512 is geluRange on the first n - n%16 values; table is erfTable.
//
//go:noescape
func geluAVX512(dst, src *float32, n int, table *float32, c, a, s float32)

// erfVector computes the leading multiple of 16 of erfRange's values with
// the vector unit and returns how many it did (0 without AVX-512).
func erfVector(dst, src []float32) int {
	n := len(src) &^ 15
	if !cpu.avx512 || n == 0 {
		return 0
	}
	_ = dst[n-1]
	erfAVX512(unsafe.SliceData(dst), unsafe.SliceData(src), n, &erfTable[0][0])
	return n
}

// geluVector is erfVector for geluRange.
func geluVector(dst, src []float32, c, a, s float32) int {
	n := len(src) &^ 15
	if !cpu.avx512 || n == 0 {
		return 0
	}
	_ = dst[n-1]
	geluAVX512(unsafe.SliceData(dst), unsafe.SliceData(src), n, &erfTable[0][0], c, a, s)
	return n
}

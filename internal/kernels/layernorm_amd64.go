package kernels

import "unsafe"

// layerNormRowAVX512 normalizes one row of n > 0 values as
// layerNormJob.rows does, with the statistics summed eight float64 lanes
// at a time. res and bias may be nil.
//
//go:noescape
func layerNormRowAVX512(dst, x, res *float32, n int, scale, bias *float32, eps float64)

// layerNormRowVector normalizes the row x (plus res, if not nil) into dst
// with the vector unit, and reports false without AVX-512. The slices
// have one length, scale and bias (nil or not) as well.
func layerNormRowVector(dst, x, res, scale, bias []float32, eps float64) bool {
	if !cpu.avx512 || len(x) == 0 {
		return false
	}
	_, _ = dst[len(x)-1], scale[len(x)-1]
	var r, b *float32
	if res != nil {
		r = unsafe.SliceData(res[:len(x)])
	}
	if bias != nil {
		b = unsafe.SliceData(bias[:len(x)])
	}
	layerNormRowAVX512(unsafe.SliceData(dst), unsafe.SliceData(x), r, len(x), unsafe.SliceData(scale), b, eps)
	return true
}

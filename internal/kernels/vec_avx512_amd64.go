package kernels

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

// addAVX512 sets x[i] += y[i] for i < n.
//
//go:noescape
func addAVX512(x, y *float32, n int)

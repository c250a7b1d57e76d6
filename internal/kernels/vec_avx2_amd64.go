package kernels

// expShiftAVX2 sets x[i] = exp(x[i] − shift) for n floats and returns
// their sum, with the same algorithm as exp32. The last n%8 are handled
// with masked loads and stores, which touch nothing beyond them.
//
//go:noescape
func expShiftAVX2(x *float32, n int, shift float32) (sum float32)

// maxOfAVX2 returns the largest of n floats: NaN if one is
// NaN, −Inf if n is 0.
//
//go:noescape
func maxOfAVX2(x *float32, n int) float32

// scaleAVX2 multiplies n floats by alpha.
//
//go:noescape
func scaleAVX2(x *float32, n int, alpha float32)

// interleave4AVX2 sets dst[p·ldd + r] = src[r·lds + p] for r < 4 and
// p < n, n a multiple of 8.
//
//go:noescape
func interleave4AVX2(dst *float32, ldd int, src *float32, lds int, n int)

// interleave2AVX2 is interleave4AVX2 for 2 rows.
//
//go:noescape
func interleave2AVX2(dst *float32, ldd int, src *float32, lds int, n int)

// interleave256 is isa.interleave with AVX2: groups of 4 (then 2) rows by
// 8 columns in assembly, the ragged rest in Go.
func interleave256(dst []float32, ldd int, src []float32, lds, rows, n int) {
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

// addAVX2 sets x[i] += y[i] for i < n.
//
//go:noescape
func addAVX2(x, y *float32, n int)

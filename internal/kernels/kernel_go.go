package kernels

import "math"

// goKernel is the portable micro-kernel: a 4×4 tile keeps 16 accumulators,
// which fit the register file of every 64-bit target Go supports (arm64 has
// 32 FP registers; amd64 spills a few, which only matters on the fallback
// path there).
var goKernel = microKernel{
	name: "go4x4",
	mr:   4, nr: 4,
	kc: 256, mc: 128, nc: 2048,
	tile: tileGo4x4,
}

// tileGo4x4 is goKernel's tile function.
func tileGo4x4(kc int, a []float32, aRow, aCol int, b []float32, bRow int, c []float32, ldc int, alpha, beta float32) {
	var c00, c01, c02, c03 float32
	var c10, c11, c12, c13 float32
	var c20, c21, c22, c23 float32
	var c30, c31, c32, c33 float32
	ia, ib := 0, 0
	for range kc {
		a0, a1, a2, a3 := a[ia], a[ia+aRow], a[ia+2*aRow], a[ia+3*aRow]
		bp := b[ib : ib+4 : ib+4]
		b0, b1, b2, b3 := bp[0], bp[1], bp[2], bp[3]
		c00 += a0 * b0
		c01 += a0 * b1
		c02 += a0 * b2
		c03 += a0 * b3
		c10 += a1 * b0
		c11 += a1 * b1
		c12 += a1 * b2
		c13 += a1 * b3
		c20 += a2 * b0
		c21 += a2 * b1
		c22 += a2 * b2
		c23 += a2 * b3
		c30 += a3 * b0
		c31 += a3 * b1
		c32 += a3 * b2
		c33 += a3 * b3
		ia += aCol
		ib += bRow
	}
	storeRow4(c[0*ldc:], alpha, beta, c00, c01, c02, c03)
	storeRow4(c[1*ldc:], alpha, beta, c10, c11, c12, c13)
	storeRow4(c[2*ldc:], alpha, beta, c20, c21, c22, c23)
	storeRow4(c[3*ldc:], alpha, beta, c30, c31, c32, c33)
}

// storeRow4 writes alpha·v + beta·c into the first four elements of c,
// without reading c when beta is 0.
func storeRow4(c []float32, alpha, beta, v0, v1, v2, v3 float32) {
	c = c[:4]
	if beta == 0 {
		c[0], c[1], c[2], c[3] = alpha*v0, alpha*v1, alpha*v2, alpha*v3
		return
	}
	c[0] = alpha*v0 + beta*c[0]
	c[1] = alpha*v1 + beta*c[1]
	c[2] = alpha*v2 + beta*c[2]
	c[3] = alpha*v3 + beta*c[3]
}

// maxOfGo returns the largest element of x, or −Inf if x is empty.
func maxOfGo(x []float32) float32 {
	m := float32(math.Inf(-1))
	for _, v := range x {
		if v > m {
			m = v
		}
	}
	return m
}

// scaleGo multiplies x by alpha in place.
func scaleGo(x []float32, alpha float32) {
	for i := range x {
		x[i] *= alpha
	}
}

// expShiftGo sets x[i] = exp(x[i] − shift) and returns their sum.
func expShiftGo(x []float32, shift float32) float32 {
	var sum float32
	for i, v := range x {
		e := exp32(v - shift)
		x[i] = e
		sum += e
	}
	return sum
}

// interleaveGo sets dst[p·ldd + r] = src[r·lds + p] for r < rows, p < n:
// it transposes rows of src into groups of ldd, as packing needs.
func interleaveGo(dst []float32, ldd int, src []float32, lds, rows, n int) {
	for r := range rows {
		row := src[r*lds : r*lds+n]
		for p, v := range row {
			dst[p*ldd+r] = v
		}
	}
}

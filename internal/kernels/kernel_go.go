package kernels

import "math"

// goKernel is the portable micro-kernel, a 4×4 tile computed as two 4×2
// halves: each half keeps 8 accumulators, 4 values of A and 2 of B live,
// which fits the 15 float registers Go has on amd64 (a whole 4×4 tile
// would spill to the stack on every step) and leaves arm64's 32 plenty.
// The second half reads the A panel again, from L1.
var goKernel = microKernel{
	name: "go4x4",
	mr:   4, nr: 4,
	kc: 256, mc: 128, nc: 2048,
	tile: tileGo4x4,
}

// tileGo4x4 is goKernel's tile function.
func tileGo4x4(kc int, a []float32, aRow, aCol int, b []float32, bRow int, c []float32, ldc int, alpha, beta float32) {
	for half := 0; half < 4; half += 2 {
		c00, c01, c10, c11, c20, c21, c30, c31 := tileGo4x2(kc, a, aRow, aCol, b[half:], bRow)
		storeRow2(c[0*ldc+half:], alpha, beta, c00, c01)
		storeRow2(c[1*ldc+half:], alpha, beta, c10, c11)
		storeRow2(c[2*ldc+half:], alpha, beta, c20, c21)
		storeRow2(c[3*ldc+half:], alpha, beta, c30, c31)
	}
}

// tileGo4x2 returns the 4×2 product of A (4×kc, A(r, p) = a[r·aRow +
// p·aCol]) and two columns of B (B(p, j) = b[p·bRow + j]).
func tileGo4x2(kc int, a []float32, aRow, aCol int, b []float32, bRow int) (c00, c01, c10, c11, c20, c21, c30, c31 float32) {
	if kc == 0 {
		return
	}
	_ = a[3*aRow+(kc-1)*aCol]
	_ = b[(kc-1)*bRow+1]
	ia, ib := 0, 0
	for range kc {
		a0, a1, a2, a3 := a[ia], a[ia+aRow], a[ia+2*aRow], a[ia+3*aRow]
		b0, b1 := b[ib], b[ib+1]
		c00 += a0 * b0
		c01 += a0 * b1
		c10 += a1 * b0
		c11 += a1 * b1
		c20 += a2 * b0
		c21 += a2 * b1
		c30 += a3 * b0
		c31 += a3 * b1
		ia += aCol
		ib += bRow
	}
	return
}

// storeRow2 writes alpha·v + beta·c into the first two elements of c,
// without reading c when beta is 0.
func storeRow2(c []float32, alpha, beta, v0, v1 float32) {
	c = c[:2]
	if beta == 0 {
		c[0], c[1] = alpha*v0, alpha*v1
		return
	}
	c[0] = alpha*v0 + beta*c[0]
	c[1] = alpha*v1 + beta*c[1]
}

// maxOfGo returns the largest element of x, NaN if x holds a NaN, or −Inf
// if x is empty.
func maxOfGo(x []float32) float32 {
	m := float32(math.Inf(-1))
	for _, v := range x {
		m = max(m, v) // NaN if either is NaN
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

// addGo adds y to x element by element (len(y) ≥ len(x)).
func addGo(x, y []float32) {
	y = y[:len(x)]
	for i, v := range y {
		x[i] += v
	}
}

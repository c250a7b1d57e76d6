package torchrand

import "math"

// This file reproduces, one float32 lane at a time, the vectorized log and
// sincos that PyTorch's AVX2 normal_ kernel uses (avx_mathfun.h: Julien
// Pommier's SSE/AVX port of the Cephes single-precision functions). To match
// bit for bit it must round exactly where the compiled kernel rounds: GCC
// builds that file with -mfma and contracts every multiply whose only use is
// an addition into a fused multiply-add (fma32); a multiply used by another
// multiply, a square root or a conversion stays a separate rounding (mul32).
// The choices below were confirmed against PyTorch on millions of draws.

// Coefficients of Cephes' logf: log(1+x) ≈ x - x²/2 + x³·P(x) on
// [sqrt(1/2)-1, sqrt(2)-1], with log 2 split in two for accuracy.
const (
	logSqrtHalf = 0.707106781186547524
	logLn2Lo    = -2.12194440e-4
	logLn2Hi    = 0.693359375
)

// logP is P, highest degree first.
var logP = []float32{
	7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
	-1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1,
}

// log8 is the natural logarithm of one lane of log256_ps, for the positive
// normal floats the Box–Muller step passes it.
func log8(x float32) float32 {
	// Split x = m·2^e with m in [0.5, 1).
	bits := math.Float32bits(x)
	e := float32(int32(bits>>23)-127) + 1
	m := math.Float32frombits(bits&^0x7f800000 | math.Float32bits(0.5))
	// Move m to [sqrt(1/2), sqrt(2)) and take f = m-1.
	var f float32
	if m < logSqrtHalf {
		e--
		f = m - 1 + m
	} else {
		f = m - 1
	}

	z := mul32(f, f)
	y := mul32(horner32(f, logP), f)
	y = fma32(y, z, mul32(e, logLn2Lo))
	y = fma32(-z, 0.5, y)
	return fma32(e, logLn2Hi, f+y)
}

// Coefficients of Cephes' sinf and cosf on [-π/4, π/4], with π/4 split in
// three parts for the argument reduction.
const (
	fourOverPi = 1.27323954473516
	minusDP1   = -0.78515625
	minusDP2   = -2.4187564849853515625e-4
	minusDP3   = -3.77489497744594108e-8
)

// sinP and cosP are the sine's and cosine's polynomials, highest degree
// first.
var (
	sinP = []float32{-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1}
	cosP = []float32{2.443315711809948e-005, -1.388731625493765e-003, 4.166664568298827e-002}
)

// sincos8 is one lane of sincos256_ps: the sine and cosine of x, evaluated
// by reducing x to [-π/4, π/4] around the nearest even multiple j of π/4 and
// choosing between the sine and cosine polynomials by octant.
func sincos8(x float32) (sin, cos float32) {
	signSin := math.Float32bits(x) & 0x80000000
	x = math.Float32frombits(math.Float32bits(x) &^ 0x80000000)

	j := int32(mul32(x, fourOverPi)) // truncation, as cvttps2dq
	j = (j + 1) &^ 1
	y := float32(j)
	signSin ^= uint32(j&4) << 29
	signCos := uint32(^(j-2)&4) << 29
	sinFromSinPoly := j&2 == 0 // else the octant swaps the two polynomials

	x = fma32(y, minusDP1, x)
	x = fma32(y, minusDP2, x)
	x = fma32(y, minusDP3, x)

	z := mul32(x, x)
	c := mul32(horner32(z, cosP), z)
	c = fma32(c, z, -mul32(z, 0.5))
	c = c + 1

	s := mul32(horner32(z, sinP), z)
	s = fma32(s, x, x)

	// The kernel selects with masks and adds a zero: 0+v turns -0 into +0.
	sinPoly, cosPoly := s, c
	if !sinFromSinPoly {
		sinPoly, cosPoly = c, s
	}
	sin = math.Float32frombits(math.Float32bits(0+sinPoly) ^ signSin)
	cos = math.Float32frombits(math.Float32bits(cosPoly+0) ^ signCos)
	return sin, cos
}

// horner32 evaluates the polynomial with coefficients p (highest degree
// first) at x by Horner's rule, each step one fused multiply-add.
func horner32(x float32, p []float32) float32 {
	y := p[0]
	for _, c := range p[1:] {
		y = fma32(y, x, c)
	}
	return y
}

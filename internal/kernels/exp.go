package kernels

import "math"

// Constants of the float32 exponential shared by the Go and assembly
// versions (Cephes' expf): exp(x) = 2ⁿ·exp(r) with n = round(x·log₂e) and
// r = x − n·ln2 in [−ln2/2, ln2/2], where exp(r) is a degree-7 polynomial.
// ln2 is split in two so that n·ln2Hi is exact in float32 and r keeps its
// low bits. The relative error is below 2 ulp.
const (
	expLog2e = 1.44269504088896341
	expLn2Hi = 0.693359375
	expLn2Lo = -2.12194440e-4
	expP0    = 1.9875691500e-4
	expP1    = 1.3981999507e-3
	expP2    = 8.3334519073e-3
	expP3    = 4.1665795894e-2
	expP4    = 1.6666665459e-1
	expP5    = 5.0000001201e-1
	// expMin is the smallest argument whose result is a normal float32;
	// below it (and for −Inf) the result is 0, which is what a softmax
	// weight that small is worth next to the row maximum's 1.
	expMin = -87.33654
	// expMax keeps n ≤ 127 so that 2ⁿ is a finite float32.
	expMax = 88.0
	// roundMagic rounds a float32 to the nearest integer when added and
	// subtracted again (1.5·2²³: the sum's ulp is 1).
	roundMagic = 12582912
)

// exp32 returns e^x in float32 precision (2 ulp). Arguments above 88 give
// e^88; arguments below −87.34, −Inf included, give 0.
func exp32(x float32) float32 {
	if !(x >= expMin) {
		if x != x { // NaN
			return x
		}
		return 0
	}
	x = min(x, expMax)
	n := (x*expLog2e + roundMagic) - roundMagic
	r := x - n*expLn2Hi
	r -= n * expLn2Lo
	p := float32(expP0)
	p = p*r + expP1
	p = p*r + expP2
	p = p*r + expP3
	p = p*r + expP4
	p = p*r + expP5
	y := p*r*r + r + 1
	return y * math.Float32frombits(uint32(int32(n)+127)<<23)
}

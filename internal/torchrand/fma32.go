package torchrand

import "math"

// fma32 returns a*b+c rounded once to float32, as the FMA instructions
// PyTorch's AVX2 kernels are compiled to. float32(math.FMA(...)) would round
// twice (to float64, then to float32), which is wrong in rare halfway cases.
//
// The product of two float32 values is exact in float64. The sum with c is
// rounded to float64 and then nudged to an odd last bit when inexact
// ("round to odd"); a value rounded to odd with at least two spare bits
// rounds correctly to the narrower format.
func fma32(a, b, c float32) float32 {
	p := float64(a) * float64(b) // exact: 24+24 significant bits fit in 53
	cc := float64(c)
	s := p + cc
	// Knuth's TwoSum: the exact error of the rounded sum.
	bv := s - p
	errSum := (p - (s - bv)) + (cc - bv)
	if errSum != 0 && !math.IsInf(s, 0) {
		bits := math.Float64bits(s)
		if bits&1 == 0 {
			// Step one ulp toward the exact value: up in magnitude if the
			// error has the sign of s, down otherwise.
			if (errSum > 0) == (s > 0) {
				bits++
			} else {
				bits--
			}
			s = math.Float64frombits(bits)
		}
	}
	return float32(s)
}

// mul32 returns a*b rounded to float32. The explicit conversion stops the Go
// compiler from fusing the product into a following addition (it may do so
// on arm64 and other targets), which would change the rounding.
func mul32(a, b float32) float32 { return float32(a * b) }

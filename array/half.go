package array

import "math"

// Float16FromBits widens an IEEE 754 binary16 value to float32. Every
// binary16 value, subnormals, infinities and NaN payloads included, is a
// float32 value, so the conversion is exact.
func Float16FromBits(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // infinity or NaN: keep the payload
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0: // normal: rebias the exponent from 15 to 127
		return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
	}
	// Zero or subnormal: mant·2^-24, a float32 product without rounding.
	return math.Float32frombits(sign | math.Float32bits(float32(mant)*0x1p-24))
}

// Float16Bits returns the binary16 value nearest to x, ties to even, as
// NumPy's astype(np.float16) and PyTorch's .half() round: magnitudes from
// 65520 up become infinities, NaN stays NaN (keeping the top of its
// payload, and quiet).
func Float16Bits(x float32) uint16 {
	b := math.Float32bits(x)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	switch {
	case exp == 0xff: // infinity or NaN
		if mant == 0 {
			return sign | 0x7c00
		}
		return sign | 0x7e00 | uint16(mant>>13)
	case exp-127 > 15: // beyond binary16's exponents
		return sign | 0x7c00
	case exp-127 >= -14: // normal in binary16: drop 13 mantissa bits
		h := uint32(exp-127+15)<<10 | mant>>13
		// Adding the rounding increment may carry into the exponent,
		// which is right: it rounds up to the next binade, or to Inf.
		return sign | uint16(roundShifted(h, mant, 13))
	case exp-127 >= -25: // subnormal in binary16 (or rounds to its smallest)
		full := mant | 0x800000 // the implicit bit
		shift := uint(-14-(exp-127)) + 13
		return sign | uint16(roundShifted(full>>shift, full, shift))
	}
	return sign // underflows to a signed zero
}

// roundShifted rounds a value that was shifted right by shift bits (kept
// holds the result of the shift, full the bits before it) to nearest,
// ties to even.
func roundShifted(kept, full uint32, shift uint) uint32 {
	half := uint32(1) << (shift - 1)
	rest := full & (1<<shift - 1)
	if rest > half || rest == half && kept&1 == 1 {
		kept++
	}
	return kept
}

// BFloat16FromBits widens a bfloat16 value, the upper half of a float32,
// exactly.
func BFloat16FromBits(b uint16) float32 {
	return math.Float32frombits(uint32(b) << 16)
}

// BFloat16Bits returns the bfloat16 value nearest to x, ties to even, as
// PyTorch's .bfloat16() rounds; NaN stays a quiet NaN.
func BFloat16Bits(x float32) uint16 {
	b := math.Float32bits(x)
	if b&0x7fffffff > 0x7f800000 { // NaN: keep the sign and top payload, quiet
		return uint16(b>>16) | 0x40
	}
	return uint16(roundShifted(b>>16, b, 16) & 0xffff)
}

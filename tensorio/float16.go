package tensorio

import "math"

// float16To32 converts an IEEE 754 half-precision value to float32 exactly
// (every half value is a float32 value), including subnormals, infinities
// and NaN payloads.
func float16To32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // infinity or NaN
		return math.Float32frombits(sign | 0x7f800000 | frac<<13)
	case exp != 0: // normal: rebias the exponent from 15 to 127
		return math.Float32frombits(sign | (exp+127-15)<<23 | frac<<13)
	case frac == 0: // signed zero
		return math.Float32frombits(sign)
	}
	// Subnormal: frac·2^-24 is a normal float32; the product is exact.
	v := float32(frac) * 0x1p-24
	if sign != 0 {
		v = -v
	}
	return v
}

// bfloat16To32 converts a bfloat16 value, the upper half of a float32, to
// float32.
func bfloat16To32(b uint16) float32 {
	return math.Float32frombits(uint32(b) << 16)
}

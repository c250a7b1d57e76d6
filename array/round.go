package array

import "math"

// Largest finite values of the 16-bit floats.
const (
	maxFloat16  = 65504
	maxBFloat16 = 0x1.fep127
)

// RoundFloat returns the value of floating-point type dt nearest to x,
// ties to even, as the float32 that holds it exactly. For float16 and
// bfloat16, magnitudes beyond the range become infinities (as NumPy and
// PyTorch convert). For the float8 and float4 types the rules are ONNX's
// Cast: x is first rounded to float32, and out of range saturate gives
// the largest finite value of x's sign, otherwise an infinity where the
// type has them (float8e5m2) or NaN; float4e2m1, which has neither,
// always saturates, and takes NaN to -0 (code 0x8) as ONNX's reference
// does. float8e8m0 rounds up to a power of two (RoundE8M0 takes the other
// modes). For float32, and for the types that are not narrow floats, it
// is float32(x).
func RoundFloat(dt DType, x float64, saturate bool) float32 {
	switch dt {
	case Float32:
		return float32(x)
	case Float16:
		if float64(float32(x)) != x && !math.IsNaN(x) {
			return roundWide(x, 10, -14, maxFloat16)
		}
		return Float16FromBits(Float16Bits(float32(x)))
	case BFloat16:
		if float64(float32(x)) != x && !math.IsNaN(x) {
			return roundWide(x, 7, -126, maxBFloat16)
		}
		return BFloat16FromBits(BFloat16Bits(float32(x)))
	case Float8E8M0:
		return RoundE8M0(x, saturate, RoundUp)
	}
	if f, ok := miniFloats[dt]; ok {
		return f.round(x, saturate)
	}
	return float32(x)
}

// roundWide rounds a float64 that float32 cannot hold to an IEEE format
// of mant mantissa bits in one step, so that it is not rounded twice.
func roundWide(x float64, mant, minExp int, maxFinite float64) float32 {
	r := roundToMantissa(math.Abs(x), mant, minExp)
	if r > maxFinite {
		r = math.Inf(1)
	}
	return float32(math.Copysign(r, x))
}

// RoundE8M0 returns the float8e8m0 value (a power of two from 2^-127 to
// 2^127, or NaN) that x converts to under mode; see RoundFloat.
func RoundE8M0(x float64, saturate bool, mode RoundMode) float32 {
	return e8m0Decode(e8m0Code(x, saturate, mode))
}

// RoundSlice rounds every element of data to dt in place, as storing it
// in a tensor of type dt would: values of dt (infinities included, where
// dt has them) stay, others round as RoundFloat with saturate set, the
// ONNX default. It does nothing for float32.
func RoundSlice(dt DType, data []float32) {
	switch dt {
	case Float32:
	case Float16:
		for i, x := range data {
			data[i] = Float16FromBits(Float16Bits(x))
		}
	case BFloat16:
		for i, x := range data {
			data[i] = BFloat16FromBits(BFloat16Bits(x))
		}
	default:
		for i, x := range data {
			if !IsValue(dt, x) {
				data[i] = RoundFloat(dt, float64(x), true)
			}
		}
	}
}

// IsValue reports whether x is a value of the floating-point type dt:
// one it holds exactly (NaN where dt has a NaN, infinities where it has
// them).
func IsValue(dt DType, x float32) bool {
	r := RoundFloat(dt, float64(x), false)
	return r == x || r != r && x != x
}

// FloatBits returns the code of v, a value of the narrow float type dt
// (as RoundFloat returns; other values are rounded first, saturating):
// 16 bits for float16 and bfloat16, 8 for the float8 types, the low 4
// for float4e2m1. It is 0 for the types that are not narrow floats.
func FloatBits(dt DType, v float32) uint16 {
	switch dt {
	case Float16:
		return Float16Bits(v)
	case BFloat16:
		return BFloat16Bits(v)
	case Float8E8M0:
		return uint16(e8m0Encode(v))
	}
	if f, ok := miniFloats[dt]; ok {
		return uint16(f.encode(v))
	}
	return 0
}

// FloatFromBits widens the code of a narrow float type dt to float32,
// exactly: the inverse of FloatBits. It is NaN for the types that are not
// narrow floats.
func FloatFromBits(dt DType, code uint16) float32 {
	switch dt {
	case Float16:
		return Float16FromBits(code)
	case BFloat16:
		return BFloat16FromBits(code)
	case Float8E8M0:
		return e8m0Decode(uint8(code))
	}
	if f, ok := miniFloats[dt]; ok {
		return f.decode(uint8(code) & (1<<(1+f.exp+f.mant) - 1))
	}
	return float32(math.NaN())
}

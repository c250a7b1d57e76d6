package array

import "math"

// miniFloat describes a float8 or float4 format of ONNX (see the "Float
// stored in 8 bits" and "Float stored in 4 bits" pages of the ONNX docs):
// a sign bit, exp exponent bits with the given bias, mant mantissa bits,
// subnormals, and its own way of holding NaN and infinities.
type miniFloat struct {
	exp, mant, bias int
	special         specials
	max             float64 // the largest finite value
}

// specials is how a format holds NaN and infinities.
type specials int

const (
	ieeeSpecials specials = iota // all-ones exponent: ±Inf (mantissa 0) and NaN (float8e5m2)
	onesNaN                      // S.1111.111 is NaN; no infinities (float8e4m3fn)
	fnuz                         // 1.0000.000 (negative zero's code) is the one NaN; no -0, no infinities
	finiteOnly                   // neither NaN nor infinities (float4e2m1)
)

var miniFloats = map[DType]miniFloat{
	Float8E4M3FN:   {4, 3, 7, onesNaN, 448},
	Float8E4M3FNUZ: {4, 3, 8, fnuz, 240},
	Float8E5M2:     {5, 2, 15, ieeeSpecials, 57344},
	Float8E5M2FNUZ: {5, 2, 16, fnuz, 57344},
	Float4E2M1:     {2, 1, 1, finiteOnly, 6},
}

// decode widens a code of the format to float32, exactly.
func (f miniFloat) decode(code uint8) float32 {
	signBit := uint8(1) << (f.exp + f.mant)
	neg := code&signBit != 0
	e := int(code>>f.mant) & (1<<f.exp - 1)
	m := int(code) & (1<<f.mant - 1)
	allOnes := e == 1<<f.exp-1
	switch {
	case f.special == fnuz && code == signBit,
		f.special == onesNaN && allOnes && m == 1<<f.mant-1,
		f.special == ieeeSpecials && allOnes && m != 0:
		// Keep the sign and the payload in float32's top mantissa bits,
		// so that encode gives the same code back.
		b := uint32(0x7f800000) | uint32(m)<<(23-f.mant)
		if m == 0 || f.special != ieeeSpecials {
			b = 0x7fc00000 // a quiet NaN: the one NaN of the format
		}
		if neg {
			b |= 1 << 31
		}
		return math.Float32frombits(b)
	case f.special == ieeeSpecials && allOnes:
		return float32(math.Inf(sign(neg)))
	}
	v := math.Ldexp(float64(m), 1-f.bias-f.mant) // subnormal
	if e != 0 {
		v = math.Ldexp(float64(1<<f.mant|m), e-f.bias-f.mant)
	}
	if neg {
		v = -v
	}
	return float32(v)
}

func sign(neg bool) int {
	if neg {
		return -1
	}
	return 1
}

// round returns the value of the format nearest to x, ties to even, as
// ONNX's reference implementation (onnx.numpy_helper) and ONNX Runtime
// compute it: x is first rounded to float32. Out of range, saturate gives
// the largest finite value of x's sign; otherwise the result is an
// infinity where the format has them, NaN elsewhere.
func (f miniFloat) round(x float64, saturate bool) float32 {
	x = float64(float32(x))
	switch {
	case math.IsNaN(x):
		if f.special == finiteOnly {
			// ONNX's reference gives float4e2m1's code 0x8 for NaN.
			return float32(math.Copysign(0, -1))
		}
		return float32(math.NaN())
	case math.IsInf(x, 0):
		return f.overflow(x, saturate)
	}
	a := math.Abs(x)
	r := roundToMantissa(a, f.mant, 1-f.bias)
	if f.special == onesNaN && a >= 480 && a < 496 && f.mant == 3 {
		// The reference truncates 480 <= |x| < 496 to the NaN code's
		// mantissa, then clears its last bit instead of rounding: 448.
		r = f.max
	}
	if r > f.max {
		return f.overflow(x, saturate)
	}
	if r == 0 && f.special == fnuz {
		return 0 // no negative zero
	}
	return float32(math.Copysign(r, x))
}

// overflow is the result for x beyond the format's range.
func (f miniFloat) overflow(x float64, saturate bool) float32 {
	switch {
	case saturate || f.special == finiteOnly:
		return float32(math.Copysign(f.max, x))
	case f.special == ieeeSpecials:
		return float32(math.Inf(sign(x < 0)))
	}
	return float32(math.NaN())
}

// roundToMantissa rounds a ≥ 0 to mant bits after the binary point of
// its exponent, ties to even, with exponents below minExp treated as
// minExp (the subnormal range). The exponent may exceed the format's: the
// caller checks the range.
func roundToMantissa(a float64, mant, minExp int) float64 {
	if a == 0 {
		return 0
	}
	_, e := math.Frexp(a) // a = frac·2^e, frac in [0.5, 1)
	quantum := math.Ldexp(1, max(e-1, minExp)-mant)
	return math.RoundToEven(a/quantum) * quantum
}

// encode returns the code of v, a value of the format (as round returns).
func (f miniFloat) encode(v float32) uint8 {
	signBit := uint8(1) << (f.exp + f.mant)
	x := float64(v)
	switch {
	case math.IsNaN(x):
		if f.special == fnuz {
			return signBit
		}
		code := signBit - 1 // all ones but the sign (float4e2m1 has no NaN: round saturates it)
		if m := uint8(math.Float32bits(v)>>(23-f.mant)) & (1<<f.mant - 1); f.special == ieeeSpecials && m != 0 {
			code = code&^(1<<f.mant-1) | m // the payload decode kept
		}
		if math.Signbit(x) {
			code |= signBit
		}
		return code
	case math.IsInf(x, 0):
		if f.special != ieeeSpecials {
			return f.encode(f.overflow(x, true))
		}
		code := uint8(1<<f.exp-1) << f.mant
		if x < 0 {
			code |= signBit
		}
		return code
	}
	var code uint8
	if math.Signbit(x) && !(x == 0 && f.special == fnuz) {
		code = signBit
	}
	a := math.Abs(float64(f.round(x, true)))
	if a == 0 {
		return code
	}
	_, e := math.Frexp(a)
	exp := e - 1 + f.bias
	if exp <= 0 { // subnormal
		return code | uint8(math.Ldexp(a, f.bias-1+f.mant))
	}
	m := int(math.Ldexp(a, f.mant-(e-1))) - 1<<f.mant
	return code | uint8(exp)<<f.mant | uint8(m)
}

// e8m0 is float8e8m0: an unsigned power of two 2^(code-127), code 0 to
// 254; 255 is NaN. It has no zero, no sign and no infinities.
const e8m0NaN = 0xff

// e8m0Encode returns the code of v, a float8e8m0 value; other values
// are rounded to the nearest power of two first.
func e8m0Encode(v float32) uint8 {
	frac, e := math.Frexp(math.Abs(float64(v)))
	if math.IsNaN(float64(v)) || frac != 0.5 || e-1 < -127 || e-1 > 127 {
		return e8m0Code(float64(v), true, RoundNearest)
	}
	return uint8(e - 1 + 127)
}

// e8m0Decode widens a float8e8m0 code to float32, exactly.
func e8m0Decode(code uint8) float32 {
	if code == e8m0NaN {
		return float32(math.NaN())
	}
	return float32(math.Ldexp(1, int(code)-127))
}

// RoundMode is how a value converts to float8e8m0, which holds only
// powers of two (the round_mode attribute of Cast).
type RoundMode int

const (
	RoundUp      RoundMode = iota // to the power of two at or above |x| (Cast's default)
	RoundDown                     // to the power of two at or below |x|
	RoundNearest                  // to the nearer power of two, ties up
)

// e8m0Code returns the float8e8m0 code of x as ONNX's reference
// computes it from x's float32 bits: the exponent field, plus one when
// mode rounds the mantissa up (RoundUp: any mantissa bit set;
// RoundNearest: its top bit set, so ties go up). The sign is ignored.
// Infinities, and values that round beyond 2^127, give 2^127 when
// saturate is set and NaN otherwise; NaN gives NaN.
func e8m0Code(x float64, saturate bool, mode RoundMode) uint8 {
	b := math.Float32bits(float32(x))
	exp := b >> 23 & 0xff
	mant := b & 0x7fffff
	switch {
	case exp == 0xff && mant != 0:
		return e8m0NaN
	case exp == 0xff:
		exp = 0x100 // an infinity overflows like a value rounding past 2^127
	case mode == RoundUp && mant != 0, mode == RoundNearest && mant&0x400000 != 0:
		exp++
	}
	if exp >= e8m0NaN {
		if saturate {
			return e8m0NaN - 1
		}
		return e8m0NaN
	}
	return uint8(exp)
}

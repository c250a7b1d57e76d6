package exec

import (
	"errors"
	"fmt"
	"math"
)

// Elementwise math beyond the arithmetic of ops_elementwise.go: Mod,
// rounding, sign, trigonometric and hyperbolic functions, IsInf, bitwise
// ops, the variadic Sum and Mean, and CastLike.
func init() {
	ops["Mod"] = &opSpec{since: 10, minIn: 2, maxIn: 2, minOut: 1, maxOut: 1, run: modOp,
		attrs: map[string]attrKind{"fmod": attrInt}}
	ops["Sign"] = unarySpec(9, kindOp(numKinds, "a numeric type", numKind.sign))
	ops["Floor"] = unarySpec(6, floatOp(math.Floor))
	ops["Ceil"] = unarySpec(6, floatOp(math.Ceil))
	ops["Round"] = unarySpec(11, floatOp(math.RoundToEven))
	for name, f := range map[string]func(float64) float64{
		"Tan": math.Tan, "Asin": math.Asin, "Acos": math.Acos, "Atan": math.Atan,
	} {
		ops[name] = unarySpec(7, floatOp(f))
	}
	for name, f := range map[string]func(float64) float64{
		"Sinh": math.Sinh, "Cosh": math.Cosh, "Asinh": math.Asinh, "Acosh": math.Acosh, "Atanh": math.Atanh,
	} {
		ops[name] = unarySpec(9, floatOp(f))
	}
	ops["IsInf"] = &opSpec{since: 10, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, run: isInfOp,
		attrs: map[string]attrKind{"detect_negative": attrInt, "detect_positive": attrInt}}
	ops["BitShift"] = &opSpec{since: 11, minIn: 2, maxIn: 2, minOut: 1, maxOut: 1, run: bitShiftOp,
		attrs: map[string]attrKind{"direction": attrString}}
	ops["BitwiseAnd"] = binarySpec(18, bitwiseOp(func(x, y uint64) uint64 { return x & y }))
	ops["BitwiseOr"] = binarySpec(18, bitwiseOp(func(x, y uint64) uint64 { return x | y }))
	ops["BitwiseXor"] = binarySpec(18, bitwiseOp(func(x, y uint64) uint64 { return x ^ y }))
	ops["BitwiseNot"] = unarySpec(18, kindOp(intKinds, "an integer type", intKind.bitwiseNot))
	ops["Sum"] = &opSpec{since: 8, minIn: 1, maxIn: -1, minOut: 1, maxOut: 1, run: sumOp(false)}
	ops["Mean"] = &opSpec{since: 8, minIn: 1, maxIn: -1, minOut: 1, maxOut: 1, run: sumOp(true)}
	ops["CastLike"] = &opSpec{since: 15, minIn: 2, maxIn: 2, minOut: 1, maxOut: 1, run: castLikeOp,
		attrs: map[string]attrKind{"saturate": attrInt, "round_mode": attrString}}
}

// modOp is the kernel of Mod. With fmod 0 (integers only) the remainder
// takes the divisor's sign, as Python's % and numpy's mod; with fmod 1 it
// takes the dividend's, as C's fmod. Floats require fmod 1.
func modOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	a, b := in[0], in[1]
	if err := sameDType(in); err != nil {
		return nil, err
	}
	fmod := n.attrInt("fmod", 0)
	if fmod != 0 && fmod != 1 {
		return nil, fmt.Errorf("fmod is %d, want 0 or 1", fmod)
	}
	if a.dtype.IsFloat() {
		if fmod != 1 {
			return nil, errors.New("fmod must be 1 for floating-point inputs")
		}
		if a.dtype == Float32 {
			return oneOrErr(binaryMap(rc, n, a, b, a.dtype, func(x, y float32) float32 { return float32(math.Mod(float64(x), float64(y))) }))
		}
		return oneOrErr(binaryMap(rc, n, a, b, a.dtype, math.Mod))
	}
	if !a.dtype.isNumeric() {
		return nil, errDType(a, "a numeric type")
	}
	if hasZero(b) {
		return nil, errors.New("integer modulo by zero")
	}
	floored := fmod == 0
	return oneOrErr(zipIntegers(rc, n, a, b, intMod[int64](floored), intMod[uint64](floored)))
}

// intMod returns the integer remainder: Go's % (the dividend's sign), or
// with floored the divisor's sign. The divisor is never zero.
func intMod[T integer](floored bool) func(T, T) T {
	return func(x, y T) T {
		r := x % y
		if floored && r != 0 && (r < 0) != (y < 0) {
			r += y
		}
		return r
	}
}

// sign is the kernel of Sign for type T: -1, 0 or 1; NaN stays NaN.
func (numOf[T]) sign(rc *runCtx, n *node, x *value) (*value, error) {
	return unaryMap(rc, n, x, x.dtype, sign[T])
}

// sign is -1, 0 or 1; NaN (neither above nor below 0) maps to itself.
func sign[T number](x T) T {
	switch {
	case x > 0:
		return 1
	case x < 0:
		var unit T = 1
		return 0 - unit // only reached for signed types
	}
	return x
}

// isInfOp is the kernel of IsInf; detect_negative and detect_positive
// (default 1) select which infinities count.
func isInfOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	neg, pos := n.attrInt("detect_negative", 1) != 0, n.attrInt("detect_positive", 1) != 0
	test := func(x float64) bool { return neg && math.IsInf(x, -1) || pos && math.IsInf(x, 1) }
	switch x := in[0]; x.dtype {
	case Float32:
		return oneOrErr(unaryMap(rc, n, x, Bool, func(e float32) bool { return test(float64(e)) }))
	case Float64:
		return oneOrErr(unaryMap(rc, n, x, Bool, test))
	}
	return nil, errDType(in[0], "float32 or float64")
}

// bitShiftOp is the kernel of BitShift on unsigned integers; direction is
// "LEFT" or "RIGHT". Shifting by the width or more gives 0.
func bitShiftOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x, y := in[0], in[1]
	if err := sameDType(in); err != nil {
		return nil, err
	}
	var left bool
	switch d := n.attrs["direction"].s; d {
	case "LEFT":
		left = true
	case "RIGHT":
	default:
		return nil, fmt.Errorf("direction %q is not LEFT or RIGHT", d)
	}
	switch x.dtype {
	case Uint64, Uint32, Uint16, Uint8:
		return oneOrErr(zipIntegers(rc, n, x, y, nil, shift[uint64](left))) // no signed kernel: only unsigned types reach it
	}
	return nil, errDType(x, "uint8, uint16, uint32 or uint64")
}

// shift returns x shifted left or right by y bits.
func shift[T integer](left bool) func(T, T) T {
	if left {
		return func(x, y T) T { return x << y }
	}
	return func(x, y T) T { return x >> y }
}

// bitwiseOp is the kernel of BitwiseAnd, BitwiseOr and BitwiseXor on any
// integer type: f works on the two's complement bits widened to 64.
func bitwiseOp(f func(x, y uint64) uint64) opFunc {
	return func(rc *runCtx, n *node, in []*value) ([]*value, error) {
		a, b := in[0], in[1]
		if err := sameDType(in); err != nil {
			return nil, err
		}
		return oneOrErr(zipIntegers(rc, n, a, b, widened[int64](f), f))
	}
}

// zipIntegers applies a kernel to two operands of one integer type in its
// 64-bit form: signed types widen to int64 for s, unsigned ones to uint64
// for u, and the result narrows back to the type. That is exact for
// kernels whose result fits the type whenever the operands do: remainders,
// shifts and bit operations.
func zipIntegers(rc *runCtx, n *node, a, b *value, s func(x, y int64) int64, u func(x, y uint64) uint64) (*value, error) {
	k, err := intKindOf(a)
	if err != nil {
		return nil, err
	}
	return k.zip64(rc, n, a, b, s, u)
}

// zip64 is zipIntegers for type T.
func (k intOf[T]) zip64(rc *runCtx, n *node, a, b *value, s func(x, y int64) int64, u func(x, y uint64) uint64) (*value, error) {
	if k.lowest < 0 {
		return binaryMap(rc, n, a, b, a.dtype, widened[T](s))
	}
	return binaryMap(rc, n, a, b, a.dtype, widened[T](u))
}

// widened runs a kernel of 64-bit integers on type T: sign or zero
// extension, then truncation back, which keeps the low bits exact.
func widened[T integer, W int64 | uint64](f func(x, y W) W) func(T, T) T {
	return func(x, y T) T { return T(f(W(x), W(y))) }
}

// bitwiseNot is the kernel of BitwiseNot for type T.
func (intOf[T]) bitwiseNot(rc *runCtx, n *node, x *value) (*value, error) {
	return unaryMap(rc, n, x, x.dtype, func(e T) T { return ^e })
}

// sumOp is the kernel of Sum and (with mean) Mean: the elementwise sum of
// all inputs under numpy broadcasting, in float64, divided by their
// number for Mean, rounded once to the inputs' float type.
func sumOp(mean bool) opFunc {
	return func(rc *runCtx, n *node, in []*value) ([]*value, error) {
		if err := sameDType(in); err != nil {
			return nil, err
		}
		if !in[0].dtype.IsFloat() {
			return nil, errDType(in[0], "float32 or float64")
		}
		acc := castValue(in[0], Float64)
		for _, v := range in[1:] {
			var err error
			if acc, err = binaryMap(rc, n, acc, castValue(v, Float64), Float64, func(x, y float64) float64 { return x + y }); err != nil {
				return nil, err
			}
		}
		if mean {
			k := float64(len(in))
			var err error
			if acc, err = unaryMap(rc, n, acc, Float64, func(x float64) float64 { return x / k }); err != nil {
				return nil, err
			}
		}
		return one(castValue(acc, in[0].dtype))
	}
}

// castLikeOp is the kernel of CastLike: Cast to the element type of the
// second input, with Cast's saturate and round_mode.
func castLikeOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	return oneOrErr(cast(rc, n, in[0], in[1].dtype))
}

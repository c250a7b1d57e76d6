package exec

import (
	"errors"
	"math"
)

// arith names a binary arithmetic op of the Add family.
type arith int

const (
	opAdd arith = iota
	opSub
	opMul
	opDiv
	opMax
	opMin
)

// arithFunc returns the element function of op for type T. Integer
// division truncates toward zero, as ONNX Runtime and the reference do;
// Max and Min propagate NaN, as numpy's maximum and minimum do.
func arithFunc[T number](op arith) func(T, T) T {
	switch op {
	case opAdd:
		return func(x, y T) T { return x + y }
	case opSub:
		return func(x, y T) T { return x - y }
	case opMul:
		return func(x, y T) T { return x * y }
	case opDiv:
		return func(x, y T) T { return x / y }
	case opMax:
		return func(x, y T) T { return max(x, y) }
	default:
		return func(x, y T) T { return min(x, y) }
	}
}

// arithPair applies op to two broadcast operands of one numeric type.
func arithPair(op arith, a, b *value) (*value, error) {
	if err := sameDType([]*value{a, b}); err != nil {
		return nil, err
	}
	if op == opDiv && !a.dtype.IsFloat() && hasZero(b) {
		return nil, errors.New("integer division by zero")
	}
	if v, ok := fastFloat32(op, a, b); ok {
		return v, nil
	}
	switch a.dtype {
	case Float32:
		return binaryMap(a, b, a.dtype, arithFunc[float32](op))
	case Float64:
		return binaryMap(a, b, a.dtype, arithFunc[float64](op))
	case Int64:
		return binaryMap(a, b, a.dtype, arithFunc[int64](op))
	case Int32:
		return binaryMap(a, b, a.dtype, arithFunc[int32](op))
	case Int16:
		return binaryMap(a, b, a.dtype, arithFunc[int16](op))
	case Int8:
		return binaryMap(a, b, a.dtype, arithFunc[int8](op))
	case Uint64:
		return binaryMap(a, b, a.dtype, arithFunc[uint64](op))
	case Uint32:
		return binaryMap(a, b, a.dtype, arithFunc[uint32](op))
	case Uint16:
		return binaryMap(a, b, a.dtype, arithFunc[uint16](op))
	case Uint8:
		return binaryMap(a, b, a.dtype, arithFunc[uint8](op))
	}
	return nil, errDType(a, "a numeric type")
}

// fastFloat32 computes float32 arithmetic of equal shapes, or by a
// scalar, without the per-element function call of binaryMap: the scale,
// residual and bias steps of attention graphs.
func fastFloat32(op arith, a, b *value) (*value, bool) {
	if a.dtype != Float32 || op > opDiv {
		return nil, false
	}
	x, y := a.data.([]float32), b.data.([]float32)
	if !equalShapes(a.shape, b.shape) && (len(y) != 1 || len(b.shape) > len(a.shape)) {
		return nil, false
	}
	o := make([]float32, len(x))
	if len(y) == 1 {
		s := y[0]
		switch op {
		case opAdd:
			for i, v := range x {
				o[i] = v + s
			}
		case opSub:
			for i, v := range x {
				o[i] = v - s
			}
		case opMul:
			for i, v := range x {
				o[i] = v * s
			}
		case opDiv:
			for i, v := range x {
				o[i] = v / s
			}
		}
	} else {
		y = y[:len(x)]
		switch op {
		case opAdd:
			for i, v := range x {
				o[i] = v + y[i]
			}
		case opSub:
			for i, v := range x {
				o[i] = v - y[i]
			}
		case opMul:
			for i, v := range x {
				o[i] = v * y[i]
			}
		case opDiv:
			for i, v := range x {
				o[i] = v / y[i]
			}
		}
	}
	return &value{dtype: Float32, shape: a.shape, data: o}, true
}

// equalShapes reports whether two shapes are identical.
func equalShapes(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// hasZero reports whether any element of a numeric value is zero.
func hasZero(v *value) bool {
	for _, x := range castData(v.data, Float64).([]float64) {
		if x == 0 {
			return true
		}
	}
	return false
}

// arithOp is the kernel of Add, Sub, Mul, Div and of the variadic Max and
// Min, which fold their inputs left to right.
func arithOp(op arith) opFunc {
	return func(n *node, in []*value) ([]*value, error) {
		acc := in[0]
		for _, v := range in[1:] {
			var err error
			if acc, err = arithPair(op, acc, v); err != nil {
				return nil, err
			}
		}
		return one(acc)
	}
}

// compare names a comparison op.
type compare int

const (
	opEqual compare = iota
	opLess
	opGreater
	opLessOrEqual
	opGreaterOrEqual
)

// compareFunc returns the element predicate of op for type T.
func compareFunc[T number](op compare) func(T, T) bool {
	switch op {
	case opEqual:
		return func(x, y T) bool { return x == y }
	case opLess:
		return func(x, y T) bool { return x < y }
	case opGreater:
		return func(x, y T) bool { return x > y }
	case opLessOrEqual:
		return func(x, y T) bool { return x <= y }
	default:
		return func(x, y T) bool { return x >= y }
	}
}

// compareOp is the kernel of Equal, Less, Greater, LessOrEqual and
// GreaterOrEqual: broadcast operands of one type in, bool out.
func compareOp(op compare) opFunc {
	return func(n *node, in []*value) ([]*value, error) {
		a, b := in[0], in[1]
		if err := sameDType(in); err != nil {
			return nil, err
		}
		switch a.dtype {
		case Bool:
			if op == opEqual {
				return oneOrErr(binaryMap(a, b, Bool, func(x, y bool) bool { return x == y }))
			}
		case Float32:
			return oneOrErr(binaryMap(a, b, Bool, compareFunc[float32](op)))
		case Float64:
			return oneOrErr(binaryMap(a, b, Bool, compareFunc[float64](op)))
		case Int64:
			return oneOrErr(binaryMap(a, b, Bool, compareFunc[int64](op)))
		case Int32:
			return oneOrErr(binaryMap(a, b, Bool, compareFunc[int32](op)))
		case Int16:
			return oneOrErr(binaryMap(a, b, Bool, compareFunc[int16](op)))
		case Int8:
			return oneOrErr(binaryMap(a, b, Bool, compareFunc[int8](op)))
		case Uint64:
			return oneOrErr(binaryMap(a, b, Bool, compareFunc[uint64](op)))
		case Uint32:
			return oneOrErr(binaryMap(a, b, Bool, compareFunc[uint32](op)))
		case Uint16:
			return oneOrErr(binaryMap(a, b, Bool, compareFunc[uint16](op)))
		case Uint8:
			return oneOrErr(binaryMap(a, b, Bool, compareFunc[uint8](op)))
		}
		return nil, errDType(a, "a numeric type")
	}
}

// logicalOp is the kernel of And, Or and Xor on bool tensors.
func logicalOp(f func(x, y bool) bool) opFunc {
	return func(n *node, in []*value) ([]*value, error) {
		for _, v := range in {
			if v.dtype != Bool {
				return nil, errDType(v, "bool")
			}
		}
		return oneOrErr(binaryMap(in[0], in[1], Bool, f))
	}
}

// notOp is the kernel of Not.
func notOp(n *node, in []*value) ([]*value, error) {
	if in[0].dtype != Bool {
		return nil, errDType(in[0], "bool")
	}
	return one(unaryMap(in[0], Bool, func(x bool) bool { return !x }))
}

// floatOp is the kernel of a float-only elementwise function such as Exp
// or Erf. float32 inputs are computed in float64 and rounded once, as the
// numpy reference does for Erf and as close as one rounding gets for the
// others.
func floatOp(g func(float64) float64) opFunc {
	return func(n *node, in []*value) ([]*value, error) {
		switch x := in[0]; x.dtype {
		case Float32:
			return one(unaryMap(x, Float32, func(e float32) float32 { return float32(g(float64(e))) }))
		case Float64:
			return one(unaryMap(x, Float64, g))
		}
		return nil, errDType(in[0], "float32 or float64")
	}
}

// sigmoid is 1/(1+e^-x); for very negative x, e^-x overflows to +Inf and
// the result is the correct 0.
func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// reciprocal is 1/x.
func reciprocal(x float64) float64 { return 1 / x }

// isNaNOp is the kernel of IsNaN.
func isNaNOp(n *node, in []*value) ([]*value, error) {
	switch x := in[0]; x.dtype {
	case Float32:
		return one(unaryMap(x, Bool, func(e float32) bool { return e != e }))
	case Float64:
		return one(unaryMap(x, Bool, math.IsNaN))
	}
	return nil, errDType(in[0], "float32 or float64")
}

// signed names an elementwise op on any numeric type.
type signed int

const (
	opAbs signed = iota
	opNeg
	opRelu
)

// signedFunc returns the element function of op for type T. Abs computes
// 0-x for x <= 0 so that Abs(-0) is +0, as math.Abs gives.
func signedFunc[T number](op signed) func(T) T {
	switch op {
	case opAbs:
		return func(x T) T {
			if x <= 0 {
				return 0 - x
			}
			return x
		}
	case opNeg:
		return func(x T) T { return -x }
	default:
		return func(x T) T { return max(x, 0) }
	}
}

// signedOp is the kernel of Abs, Neg and Relu.
func signedOp(op signed) opFunc {
	return func(n *node, in []*value) ([]*value, error) {
		switch x := in[0]; x.dtype {
		case Float32:
			return one(unaryMap(x, x.dtype, signedFunc[float32](op)))
		case Float64:
			return one(unaryMap(x, x.dtype, signedFunc[float64](op)))
		case Int64:
			return one(unaryMap(x, x.dtype, signedFunc[int64](op)))
		case Int32:
			return one(unaryMap(x, x.dtype, signedFunc[int32](op)))
		case Int16:
			return one(unaryMap(x, x.dtype, signedFunc[int16](op)))
		case Int8:
			return one(unaryMap(x, x.dtype, signedFunc[int8](op)))
		case Uint64:
			return one(unaryMap(x, x.dtype, signedFunc[uint64](op)))
		case Uint32:
			return one(unaryMap(x, x.dtype, signedFunc[uint32](op)))
		case Uint16:
			return one(unaryMap(x, x.dtype, signedFunc[uint16](op)))
		case Uint8:
			return one(unaryMap(x, x.dtype, signedFunc[uint8](op)))
		}
		return nil, errDType(in[0], "a numeric type")
	}
}

// powOp is the kernel of Pow. The result has the base's type. With a
// float on either side it is math.Pow in float64, which handles a negative
// base with an integral exponent (-2^3 = -8) and converts back to the base
// type (truncating for integer bases, as numpy's astype does); integer
// powers of integers are exact.
func powOp(n *node, in []*value) ([]*value, error) {
	base, exp := in[0], in[1]
	if !base.dtype.isNumeric() {
		return nil, errDType(base, "a numeric type")
	}
	if !exp.dtype.isNumeric() {
		return nil, errDType(exp, "a numeric type")
	}
	if base.dtype.IsFloat() || exp.dtype.IsFloat() {
		e := castValue(exp, Float64)
		switch base.dtype {
		case Float32:
			return oneOrErr(powFloat[float32](base, e))
		case Float64:
			return oneOrErr(powFloat[float64](base, e))
		case Int64:
			return oneOrErr(powFloat[int64](base, e))
		case Int32:
			return oneOrErr(powFloat[int32](base, e))
		case Int16:
			return oneOrErr(powFloat[int16](base, e))
		case Int8:
			return oneOrErr(powFloat[int8](base, e))
		case Uint64:
			return oneOrErr(powFloat[uint64](base, e))
		case Uint32:
			return oneOrErr(powFloat[uint32](base, e))
		case Uint16:
			return oneOrErr(powFloat[uint16](base, e))
		case Uint8:
			return oneOrErr(powFloat[uint8](base, e))
		}
	}
	e := castValue(exp, Int64)
	switch base.dtype {
	case Int64:
		return oneOrErr(binaryMap(base, e, base.dtype, intPow[int64]))
	case Int32:
		return oneOrErr(binaryMap(base, e, base.dtype, intPow[int32]))
	case Int16:
		return oneOrErr(binaryMap(base, e, base.dtype, intPow[int16]))
	case Int8:
		return oneOrErr(binaryMap(base, e, base.dtype, intPow[int8]))
	case Uint64:
		return oneOrErr(binaryMap(base, e, base.dtype, intPow[uint64]))
	case Uint32:
		return oneOrErr(binaryMap(base, e, base.dtype, intPow[uint32]))
	case Uint16:
		return oneOrErr(binaryMap(base, e, base.dtype, intPow[uint16]))
	case Uint8:
		return oneOrErr(binaryMap(base, e, base.dtype, intPow[uint8]))
	}
	return nil, errDType(base, "a numeric type")
}

// powFloat raises base to float64 exponents.
func powFloat[T number](base, exp *value) (*value, error) {
	return binaryMap(base, exp, base.dtype, func(x T, y float64) T { return T(math.Pow(float64(x), y)) })
}

// intPow is x**y by repeated squaring; negative exponents give the
// truncated 1/x**|y| (0 unless |x| is 1).
func intPow[T integer](x T, y int64) T {
	if y < 0 {
		return T(math.Trunc(math.Pow(float64(x), float64(y))))
	}
	r := T(1)
	for y > 0 {
		if y&1 == 1 {
			r *= x
		}
		x *= x
		y >>= 1
	}
	return r
}

// clipOp is the kernel of Clip: min and max are attributes before opset 11
// (float tensors only) and optional scalar inputs from 11. The result is
// min(max(x, lo), hi), so lo > hi gives hi everywhere, as numpy's clip.
func clipOp(n *node, in []*value) ([]*value, error) {
	x := in[0]
	var lo, hi *value
	if n.opset < 11 {
		if !x.dtype.IsFloat() {
			return nil, errDType(x, "float32 or float64")
		}
		lo = castValue(scalarOf(n.attrFloat("min", -math.MaxFloat32)), x.dtype)
		hi = castValue(scalarOf(n.attrFloat("max", math.MaxFloat32)), x.dtype)
	} else {
		lo, hi = input(in, 1), input(in, 2)
	}
	var err error
	if lo != nil {
		if x, err = arithPair(opMax, x, lo); err != nil {
			return nil, err
		}
	}
	if hi != nil {
		if x, err = arithPair(opMin, x, hi); err != nil {
			return nil, err
		}
	}
	return one(x)
}

// input returns in[i], or nil when the input is omitted or absent.
func input(in []*value, i int) *value {
	if i < len(in) {
		return in[i]
	}
	return nil
}

// whereOp is the kernel of Where: elements of x where cond holds, of y
// elsewhere, all three broadcast together.
func whereOp(n *node, in []*value) ([]*value, error) {
	c, x, y := in[0], in[1], in[2]
	if c.dtype != Bool {
		return nil, errDType(c, "bool for the condition")
	}
	if err := sameDType(in[1:]); err != nil {
		return nil, err
	}
	return oneOrErr(where(c, x, y))
}

// where selects between x and y under cond; see whereOp.
func where(c, x, y *value) (*value, error) {
	switch x.dtype {
	case Float32:
		return whereT[float32](c, x, y)
	case Float64:
		return whereT[float64](c, x, y)
	case Int64:
		return whereT[int64](c, x, y)
	case Int32:
		return whereT[int32](c, x, y)
	case Int16:
		return whereT[int16](c, x, y)
	case Int8:
		return whereT[int8](c, x, y)
	case Uint64:
		return whereT[uint64](c, x, y)
	case Uint32:
		return whereT[uint32](c, x, y)
	case Uint16:
		return whereT[uint16](c, x, y)
	case Uint8:
		return whereT[uint8](c, x, y)
	case Bool:
		return whereT[bool](c, x, y)
	}
	return nil, errDType(x, "a supported type")
}

func whereT[T element](c, x, y *value) (*value, error) {
	shape, err := broadcastShapes(c.shape, x.shape, y.shape)
	if err != nil {
		return nil, err
	}
	out := newValue(x.dtype, shape)
	cs, xs, ys, o := c.data.([]bool), x.data.([]T), y.data.([]T), out.data.([]T)
	strides := [][]int{
		broadcastStrides(c.shape, shape), broadcastStrides(x.shape, shape),
		broadcastStrides(y.shape, shape), stridesOf(shape),
	}
	walk(shape, strides, func(off []int, n int, step []int) {
		ic, ix, iy := off[0], off[1], off[2]
		for i := range o[off[3] : off[3]+n] {
			if cs[ic] {
				o[off[3]+i] = xs[ix]
			} else {
				o[off[3]+i] = ys[iy]
			}
			ic += step[0]
			ix += step[1]
			iy += step[2]
		}
	})
	return out, nil
}

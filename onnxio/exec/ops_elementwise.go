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
func arithPair(rc *runCtx, n *node, op arith, a, b *value) (*value, error) {
	if err := sameDType([]*value{a, b}); err != nil {
		return nil, err
	}
	if op == opDiv && !a.dtype.IsFloat() && hasZero(b) {
		return nil, errors.New("integer division by zero")
	}
	if fastFloat32(op, a, b) {
		return arithFloat32(rc, n, op, a, b)
	}
	k, err := numKindOf(a)
	if err != nil {
		return nil, err
	}
	return k.arith(rc, n, op, a, b)
}

// arith is arithPair for type T.
func (numOf[T]) arith(rc *runCtx, n *node, op arith, a, b *value) (*value, error) {
	return binaryMap(rc, n, a, b, a.dtype, arithFunc[T](op))
}

// fastFloat32 reports whether arithFloat32 computes op on a and b: float32
// Add, Sub, Mul or Div of equal shapes, or by a one-element b of no higher
// rank than a.
func fastFloat32(op arith, a, b *value) bool {
	return a.dtype == Float32 && op <= opDiv &&
		(equalShapes(a.shape, b.shape) || b.size() == 1 && len(b.shape) <= len(a.shape))
}

// arithFloat32 computes float32 arithmetic of equal shapes, or by a
// scalar, without the per-element function call of binaryMap: the scale,
// residual and bias steps of attention graphs.
func arithFloat32(rc *runCtx, n *node, op arith, a, b *value) (*value, error) {
	out, err := rc.alloc(n, Float32, a.shape)
	if err != nil {
		return nil, err
	}
	x, y, o := a.data.([]float32), b.data.([]float32), out.data.([]float32)
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
	return out, nil
}

// hasZero reports whether any element of an integer value is zero.
func hasZero(v *value) bool { return numKindOfData(v.data).hasZero(v.data) }

// hasZero is hasZero for type T.
func (numOf[T]) hasZero(data any) bool {
	for _, x := range data.([]T) {
		if x == 0 {
			return true
		}
	}
	return false
}

// arithOp is the kernel of Add, Sub, Mul, Div and of the variadic Max and
// Min, which fold their inputs left to right.
func arithOp(op arith) opFunc {
	return func(rc *runCtx, n *node, in []*value) ([]*value, error) {
		acc := in[0]
		for _, v := range in[1:] {
			var err error
			if acc, err = arithPair(rc, n, op, acc, v); err != nil {
				return nil, err
			}
		}
		return one(acc)
	}
}

// powOp is the kernel of Pow. The result has the base's type. With a
// float on either side it is math.Pow in float64, which handles a negative
// base with an integral exponent (-2^3 = -8) and converts back to the base
// type (truncating for integer bases, as numpy's astype does); integer
// powers of integers are exact.
func powOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	base, exp := in[0], in[1]
	k, err := numKindOf(base)
	if err != nil {
		return nil, err
	}
	if !exp.dtype.isNumeric() {
		return nil, errDType(exp, "a numeric type")
	}
	if y, ok := smallPower(base, exp); ok {
		return oneOrErr(squareOrCube(rc, n, base, y))
	}
	if base.dtype.IsFloat() || exp.dtype.IsFloat() {
		e, err := cast(rc, n, exp, Float64)
		if err != nil {
			return nil, err
		}
		return oneOrErr(k.powFloat(rc, n, base, e))
	}
	e, err := cast(rc, n, exp, Int64)
	if err != nil {
		return nil, err
	}
	return oneOrErr(k.(intKind).intPow(rc, n, base, e))
}

// smallPower reports the exponent when Pow raises a float32 base to a
// single float exponent of 2 or 3 that does not broadcast it up (RMSNorm's
// x², the tanh GELU's x³), which squareOrCube computes.
func smallPower(base, exp *value) (float64, bool) {
	if base.dtype != Float32 || exp.size() != 1 || exp.rank() > base.rank() {
		return 0, false
	}
	var y float64
	switch d := exp.data.(type) {
	case []float32:
		y = float64(d[0])
	case []float64:
		y = d[0]
	default:
		return 0, false
	}
	return y, y == 2 || y == 3
}

// squareOrCube is Pow(base, y) for float32 base and y 2 or 3, with
// math.Pow's bits: both square exactly in float64 (a float32 has 24
// significant bits) and round the cube once, and so does this, without
// math.Pow's general path (a tenth of a GPT-2 decoding step went there).
func squareOrCube(rc *runCtx, n *node, base *value, y float64) (*value, error) {
	out, err := rc.allocFull(n, Float32, base.shape)
	if err != nil {
		return nil, err
	}
	src, dst := base.data.([]float32), out.data.([]float32)
	if y == 2 {
		for i, x := range src {
			v := float64(x)
			dst[i] = float32(v * v)
		}
		return out, nil
	}
	for i, x := range src {
		v := float64(x)
		dst[i] = float32(float64(v*v) * v)
	}
	return out, nil
}

// powFloat raises base, of type T, to float64 exponents.
func (numOf[T]) powFloat(rc *runCtx, n *node, base, exp *value) (*value, error) {
	return binaryMap(rc, n, base, exp, base.dtype, func(x T, y float64) T { return T(math.Pow(float64(x), y)) })
}

// intPow raises base, of type T, to int64 exponents.
func (intOf[T]) intPow(rc *runCtx, n *node, base, exp *value) (*value, error) {
	return binaryMap(rc, n, base, exp, base.dtype, intPow[T])
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
func clipOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
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
		if x, err = arithPair(rc, n, opMax, x, lo); err != nil {
			return nil, err
		}
	}
	if hi != nil {
		if x, err = arithPair(rc, n, opMin, x, hi); err != nil {
			return nil, err
		}
	}
	return one(x)
}

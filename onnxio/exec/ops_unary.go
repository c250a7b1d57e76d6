package exec

import (
	"math"

	"github.com/attnrun/attnrun/internal/kernels"
)

// floatOp is the kernel of a float-only elementwise function such as Exp
// or Erf. float32 inputs are computed in float64 and rounded once, as the
// numpy reference does for Erf and as close as one rounding gets for the
// others.
func floatOp(g func(float64) float64) opFunc {
	return floatAttrOp(func(*node) (func(float64) float64, error) { return g, nil })
}

// floatAttrOp is the kernel of a float-only elementwise op whose function
// depends on the node's attributes (Elu's alpha, Gelu's approximation).
func floatAttrOp(fn func(n *node) (func(float64) float64, error)) opFunc {
	return func(rc *runCtx, n *node, in []*value) ([]*value, error) {
		g, err := fn(n)
		if err != nil {
			return nil, err
		}
		return oneOrErr(mapFloat(rc, n, in[0], g))
	}
}

// mapFloat applies g, computed in float64, to a float32 or float64 value;
// float32 results are rounded once.
func mapFloat(rc *runCtx, n *node, x *value, g func(float64) float64) (*value, error) {
	switch x.dtype {
	case Float32:
		return unaryMap(rc, n, x, Float32, func(e float32) float32 { return float32(g(float64(e))) })
	case Float64:
		return unaryMap(rc, n, x, Float64, g)
	}
	return nil, errDType(x, "float32 or float64")
}

// erfOp is the kernel of Erf: float32 through kernels.Erf32 (the GELU of
// BERT-like models spends its time here; within one ulp of
// float32(math.Erf(x))), float64 through math.Erf.
func erfOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	src, ok := x.data.([]float32)
	if !ok || x.dtype != Float32 {
		return oneOrErr(mapFloat(rc, n, x, math.Erf))
	}
	out, err := rc.allocFull(n, Float32, x.shape)
	if err != nil {
		return nil, err
	}
	kernels.Erf32(out.data.([]float32), src)
	return one(out)
}

// sigmoid is 1/(1+e^-x); for very negative x, e^-x overflows to +Inf and
// the result is the correct 0.
func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// reciprocal is 1/x.
func reciprocal(x float64) float64 { return 1 / x }

// isNaNOp is the kernel of IsNaN.
func isNaNOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	switch x := in[0]; x.dtype {
	case Float32:
		return oneOrErr(unaryMap(rc, n, x, Bool, func(e float32) bool { return e != e }))
	case Float64:
		return oneOrErr(unaryMap(rc, n, x, Bool, math.IsNaN))
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
	return func(rc *runCtx, n *node, in []*value) ([]*value, error) {
		k, err := numKindOf(in[0])
		if err != nil {
			return nil, err
		}
		return oneOrErr(k.signed(rc, n, op, in[0]))
	}
}

// signed is signedOp for type T.
func (numOf[T]) signed(rc *runCtx, n *node, op signed, x *value) (*value, error) {
	return unaryMap(rc, n, x, x.dtype, signedFunc[T](op))
}

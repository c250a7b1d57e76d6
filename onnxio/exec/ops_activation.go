package exec

import (
	"fmt"
	"math"
)

// Activation functions: float-only elementwise ops (ONNX's float16 and
// bfloat16 variants are refused with the types), computed in float64 and
// rounded once, plus the numeric Shrink and the broadcasting PRelu. Since
// versions are the first without the legacy consumed_inputs attribute;
// later versions (Elu-22, Selu-22, ...) only added element types.
func init() {
	alpha := map[string]attrKind{"alpha": attrFloat}
	ops["Elu"] = &opSpec{since: 6, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, attrs: alpha, run: floatAttrOp(eluFunc)}
	ops["Celu"] = &opSpec{since: 12, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, attrs: alpha, run: floatAttrOp(celuFunc)}
	ops["LeakyRelu"] = &opSpec{since: 6, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, attrs: alpha, run: floatAttrOp(leakyReluFunc)}
	ops["ThresholdedRelu"] = &opSpec{since: 10, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, attrs: alpha, run: floatAttrOp(thresholdedReluFunc)}
	ops["Selu"] = &opSpec{since: 6, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, run: floatAttrOp(seluFunc),
		attrs: map[string]attrKind{"alpha": attrFloat, "gamma": attrFloat}}
	ops["HardSigmoid"] = &opSpec{since: 6, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, run: floatAttrOp(hardSigmoidFunc),
		attrs: map[string]attrKind{"alpha": attrFloat, "beta": attrFloat}}
	ops["Gelu"] = &opSpec{since: 20, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, run: floatAttrOp(geluFunc),
		attrs: map[string]attrKind{"approximate": attrString}}
	ops["Softplus"] = unarySpec(1, floatOp(softplus))
	ops["Softsign"] = unarySpec(1, floatOp(func(x float64) float64 { return x / (1 + math.Abs(x)) }))
	ops["Mish"] = unarySpec(18, floatOp(func(x float64) float64 { return x * math.Tanh(softplus(x)) }))
	ops["HardSwish"] = unarySpec(14, floatOp(func(x float64) float64 { return x * max(0, min(1, x/6+0.5)) }))
	ops["Shrink"] = &opSpec{since: 9, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, run: shrinkOp,
		attrs: map[string]attrKind{"lambd": attrFloat, "bias": attrFloat}}
	ops["PRelu"] = binarySpec(7, preluOp)
}

// eluFunc is Elu: x for x >= 0, alpha·(eˣ - 1) below.
func eluFunc(n *node) (func(float64) float64, error) {
	alpha := float64(n.attrFloat("alpha", 1))
	return func(x float64) float64 {
		if x < 0 {
			return alpha * math.Expm1(x)
		}
		return x
	}, nil
}

// celuFunc is Celu: max(0, x) + min(0, alpha·(e^(x/alpha) - 1)).
func celuFunc(n *node) (func(float64) float64, error) {
	alpha := float64(n.attrFloat("alpha", 1))
	if alpha == 0 {
		return nil, fmt.Errorf("alpha must not be 0")
	}
	return func(x float64) float64 { return max(0, x) + min(0, alpha*math.Expm1(x/alpha)) }, nil
}

// leakyReluFunc is LeakyRelu: x for x >= 0, alpha·x below (alpha 0.01).
func leakyReluFunc(n *node) (func(float64) float64, error) {
	alpha := float64(n.attrFloat("alpha", 0.01))
	return func(x float64) float64 {
		if x < 0 {
			return alpha * x
		}
		return x
	}, nil
}

// thresholdedReluFunc is ThresholdedRelu: x where x > alpha, else 0.
func thresholdedReluFunc(n *node) (func(float64) float64, error) {
	alpha := float64(n.attrFloat("alpha", 1))
	return func(x float64) float64 {
		if x > alpha {
			return x
		}
		return 0
	}, nil
}

// The defaults of Selu's attributes, as the spec gives them (float32).
const (
	seluAlpha = 1.67326319217681884765625
	seluGamma = 1.05070102214813232421875
)

// seluFunc is Selu: gamma·x for x > 0, gamma·(alpha·eˣ - alpha) otherwise.
func seluFunc(n *node) (func(float64) float64, error) {
	alpha := float64(n.attrFloat("alpha", seluAlpha))
	gamma := float64(n.attrFloat("gamma", seluGamma))
	return func(x float64) float64 {
		if x > 0 {
			return gamma * x
		}
		return gamma * alpha * math.Expm1(x)
	}, nil
}

// hardSigmoidFunc is HardSigmoid: max(0, min(1, alpha·x + beta)).
func hardSigmoidFunc(n *node) (func(float64) float64, error) {
	alpha := float64(n.attrFloat("alpha", 0.2))
	beta := float64(n.attrFloat("beta", 0.5))
	return func(x float64) float64 { return max(0, min(1, alpha*x+beta)) }, nil
}

// geluFunc is Gelu: x·Φ(x) = x/2·(1 + erf(x/√2)), or with approximate
// "tanh" x/2·(1 + tanh(√(2/π)·(x + 0.044715x³))).
func geluFunc(n *node) (func(float64) float64, error) {
	switch a := n.attrs["approximate"].s; a {
	case "", "none":
		return func(x float64) float64 { return x / 2 * (1 + math.Erf(x/math.Sqrt2)) }, nil
	case "tanh":
		c := math.Sqrt(2 / math.Pi)
		return func(x float64) float64 { return x / 2 * (1 + math.Tanh(c*(x+0.044715*x*x*x))) }, nil
	default:
		return nil, fmt.Errorf("approximate %q is not one of none, tanh", a)
	}
}

// softplus is ln(eˣ + 1), written x + ln(1 + e⁻ˣ) for positive x so that
// large inputs give x instead of overflowing to +Inf.
func softplus(x float64) float64 {
	if x > 0 {
		return x + math.Log1p(math.Exp(-x))
	}
	return math.Log1p(math.Exp(x))
}

// shrinkOp is the kernel of Shrink on any numeric type: x + bias below
// -lambd, x - bias above lambd, 0 between. Integer inputs are computed in
// float64 and converted back (truncating, as numpy's astype).
func shrinkOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	if !x.dtype.isNumeric() {
		return nil, errDType(x, "a numeric type")
	}
	lambd := float64(n.attrFloat("lambd", 0.5))
	bias := float64(n.attrFloat("bias", 0))
	g := func(v float64) float64 {
		switch {
		case v < -lambd:
			return v + bias
		case v > lambd:
			return v - bias
		}
		return 0
	}
	if x.dtype.IsFloat() {
		return oneOrErr(mapFloat(rc, n, x, g))
	}
	y, err := mapFloat(rc, n, castValue(x, Float64), g)
	if err != nil {
		return nil, err
	}
	return one(castValue(y, x.dtype))
}

// preluOp is the kernel of PRelu: x where x >= 0, slope·x below, with
// slope broadcast to x's shape (one way: the result has x's shape).
func preluOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x, slope := in[0], in[1]
	if err := sameDType(in); err != nil {
		return nil, err
	}
	if shape, err := broadcastShapes(x.shape, slope.shape); err != nil || !equalShapes(shape, x.shape) {
		return nil, fmt.Errorf("slope of shape %s does not broadcast to X's shape %s", shapeString(slope.shape), shapeString(x.shape))
	}
	switch x.dtype {
	case Float32, Float64, Int64, Int32, Uint64, Uint32:
		return oneOrErr(numKinds[x.dtype].prelu(rc, n, x, slope))
	}
	return nil, errDType(x, "float32, float64, int64, int32, uint64 or uint32")
}

// prelu is PRelu for type T.
func (numOf[T]) prelu(rc *runCtx, n *node, x, slope *value) (*value, error) {
	return binaryMap(rc, n, x, slope, x.dtype, prelu[T])
}

// prelu is x for x >= 0 and slope·x below.
func prelu[T number](x, slope T) T {
	if x < 0 {
		return slope * x
	}
	return x
}

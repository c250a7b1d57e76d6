package layers

import (
	"math"

	"github.com/attnrun/attnrun/registry"
)

var _ registry.Exporter = (*SinusoidalPosition)(nil)

// ONNX element type codes the position exports cast to.
const (
	onnxFloat  = 1
	onnxBool   = 9
	onnxDouble = 11
)

// ExportONNX adds the encoding of positions 0..T−1, computed in the graph
// from the sequence length: angle p / base^(2i/d) in float64, its sine in
// the even columns and cosine in the odd ones, rounded to float32 once, as
// Forward computes it. So the graph has no table that would bound the
// sequence length, and its numbers are attnrun's at any length (a float32
// angle would drift by about 6e-8·p).
func (p *SinusoidalPosition) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	if p.d == 0 {
		return "", errNotValidated
	}
	x, err := oneONNXInput(inputs)
	if err != nil {
		return "", err
	}
	den := make([]float64, p.d)
	even := make([]float64, p.d)
	for j := range den {
		den[j] = math.Pow(p.base, float64(j-j%2)/float64(p.d))
		even[j] = float64(1 - j%2)
	}
	angle := g.Node("Div", operands(positionsDoubleONNX(g, x, 1), constDoubleONNX(g, den, 1, int64(p.d)))) // (T, d)
	evenMask := constDoubleONNX(g, even, 1, int64(p.d))
	oddMask := constDoubleONNX(g, oneMinus(even), 1, int64(p.d))
	pe := g.Node("Add", operands(
		g.Node("Mul", operands(g.Node("Sin", operands(angle)), evenMask)),
		g.Node("Mul", operands(g.Node("Cos", operands(angle)), oddMask))))
	pe = g.Node("Cast", operands(pe), registry.IntAttr("to", onnxFloat))
	return g.Node("Add", operands(x, pe)), nil
}

// positionsDoubleONNX is the column (T, 1) of the positions 0..T−1 of the
// tokens of x (B, T, d), as float64. axis is the token axis of x.
func positionsDoubleONNX(g registry.GraphBuilder, x string, axis int64) string {
	pos := g.Node("Range", operands(g.ScalarInt64(0), dimONNX(g, x, axis), g.ScalarInt64(1)))
	pos = g.Node("Cast", operands(pos), registry.IntAttr("to", onnxDouble))
	return g.Node("Unsqueeze", operands(pos, g.ConstInt64([]int64{1})))
}

// dimONNX is dimension axis of x, as an int64 scalar.
func dimONNX(g registry.GraphBuilder, x string, axis int64) string {
	return g.Node("Gather", operands(g.Node("Shape", operands(x)), g.ScalarInt64(axis)), registry.IntAttr("axis", 0))
}

// constDoubleONNX is a float64 constant of the given shape. The builder
// writes float32 constants only, so each value is written as the sum of
// two float32s, its rounding and the rest, which float64 adds back to the
// value within a relative 2⁻⁴⁸.
func constDoubleONNX(g registry.GraphBuilder, values []float64, dims ...int64) string {
	hi := make([]float32, len(values))
	lo := make([]float32, len(values))
	exact := true
	for i, v := range values {
		hi[i] = float32(v)
		lo[i] = float32(v - float64(hi[i]))
		exact = exact && lo[i] == 0
	}
	sum := g.Node("Cast", operands(g.ConstFloat(hi, dims...)), registry.IntAttr("to", onnxDouble))
	if !exact {
		sum = g.Node("Add", operands(sum, g.Node("Cast", operands(g.ConstFloat(lo, dims...)), registry.IntAttr("to", onnxDouble))))
	}
	return sum
}

// oneMinus returns 1 − v for each value.
func oneMinus(v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = 1 - x
	}
	return out
}

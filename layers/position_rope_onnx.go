package layers

import (
	"math"

	"github.com/attnrun/attnrun/registry"
)

var _ registry.Exporter = (*RoPE)(nil)

// attentionOpset is the first opset with the Attention and RotaryEmbedding
// ops (export.AttentionOpset): from it on, the layers that map onto them
// export as those ops.
const attentionOpset = 23

// ExportONNX rotates every head of the input by its position 0..T−1. The
// cosines and sines are computed in the graph from the sequence length, in
// float64 as Forward computes them, so no table bounds the length. From
// opset 23 on the rotation is ONNX's RotaryEmbedding op on the heads
// (B, H, T, head_dim); before, it is written out with Slice, Mul, Sub, Add
// and Concat (and Reshape for the interleaved pairs).
func (r *RoPE) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	if r.rot == nil {
		return "", errNotValidated
	}
	x, err := oneONNXInput(inputs)
	if err != nil {
		return "", err
	}
	hd := int64(r.rot.headDim)
	heads := g.Node("Reshape", operands(x, g.ConstInt64([]int64{0, 0, -1, hd}))) // (B, T, H, hd)
	var y string
	if g.Opset() >= attentionOpset {
		heads = g.Node("Transpose", operands(heads), registry.IntsAttr("perm", 0, 2, 1, 3)) // (B, H, T, hd)
		cos, sin, pos := r.rot.rotaryInputsONNX(g, x)
		y = r.rot.rotaryEmbeddingONNX(g, heads, cos, sin, pos, 0)
		y = g.Node("Transpose", operands(y), registry.IntsAttr("perm", 0, 2, 1, 3))
	} else {
		cos, sin := r.rot.tablesONNX(g, x, 1)
		// Heads sit between the tokens and the features: (T, 1, half).
		unsq := g.ConstInt64([]int64{1})
		y = r.rot.rotateONNX(g, heads, g.Node("Unsqueeze", operands(cos, unsq)), g.Node("Unsqueeze", operands(sin, unsq)))
	}
	return g.Node("Reshape", operands(y, g.ConstInt64([]int64{0, 0, -1}))), nil
}

// tablesONNX computes the float32 cosines and sines of the rotation, one
// row per position 0..T−1 of the tokens of x (tokens on axis), one column
// per rotating pair: (T, dim/2). The angles p·θ_i, θ_i = base^(−2i/dim),
// are float64 as in Forward.
func (r *rotary) tablesONNX(g registry.GraphBuilder, x string, axis int64) (cos, sin string) {
	half := r.dim / 2
	theta := make([]float64, half)
	for i := range theta {
		theta[i] = math.Pow(r.base, -float64(2*i)/float64(r.dim))
	}
	angle := g.Node("Mul", operands(positionsDoubleONNX(g, x, axis), constDoubleONNX(g, theta, 1, int64(half))))
	toFloat := registry.IntAttr("to", onnxFloat)
	cos = g.Node("Cast", operands(g.Node("Cos", operands(angle))), toFloat)
	sin = g.Node("Cast", operands(g.Node("Sin", operands(angle))), toFloat)
	return cos, sin
}

// rotateONNX rotates the last axis (one head's features) of a rank-4 value
// x with cos and sin tables that broadcast against (…, dim/2): the pairs
// (i, i + dim/2) or, interleaved, (2i, 2i+1) of the first dim features,
// the rest passed through.
func (r *rotary) rotateONNX(g registry.GraphBuilder, x, cos, sin string) string {
	dim, half := int64(r.dim), int64(r.dim/2)
	last := func(v string, from, to int64) string {
		return g.Node("Slice", operands(v, g.ConstInt64([]int64{from}), g.ConstInt64([]int64{to}), g.ConstInt64([]int64{-1})))
	}
	rot := x
	if r.dim < r.headDim {
		rot = last(x, 0, dim)
	}
	var out string
	if r.interleaved {
		pairs := g.Node("Reshape", operands(rot, g.ConstInt64([]int64{0, 0, 0, half, 2}))) // (…, half, 2)
		unsq := g.ConstInt64([]int64{-1})
		c, s := g.Node("Unsqueeze", operands(cos, unsq)), g.Node("Unsqueeze", operands(sin, unsq))
		a, b := last(pairs, 0, 1), last(pairs, 1, 2)
		out = g.Node("Concat", rotatedPair(g, a, b, c, s), registry.IntAttr("axis", -1))
		out = g.Node("Reshape", operands(out, g.ConstInt64([]int64{0, 0, 0, dim})))
	} else {
		a, b := last(rot, 0, half), last(rot, half, dim)
		out = g.Node("Concat", rotatedPair(g, a, b, cos, sin), registry.IntAttr("axis", -1))
	}
	if r.dim < r.headDim {
		out = g.Node("Concat", operands(out, last(x, dim, int64(r.headDim))), registry.IntAttr("axis", -1))
	}
	return out
}

// rotatedPair is (a·cos − b·sin, b·cos + a·sin), the rotation of the pair
// (a, b), in Forward's order of operations.
func rotatedPair(g registry.GraphBuilder, a, b, cos, sin string) []string {
	mul := func(x, y string) string { return g.Node("Mul", operands(x, y)) }
	return operands(
		g.Node("Sub", operands(mul(a, cos), mul(b, sin))),
		g.Node("Add", operands(mul(b, cos), mul(a, sin))))
}

// rotaryInputsONNX computes what RotaryEmbedding reads besides the
// tensor: the cos and sin caches of tablesONNX for positions 0..T−1 of the
// tokens of x (tokens on axis 1 of a (B, T, …) value) and the position ids
// (B, T) that index them.
func (r *rotary) rotaryInputsONNX(g registry.GraphBuilder, x string) (cos, sin, pos string) {
	cos, sin = r.tablesONNX(g, x, 1)
	shape := g.Node("Shape", operands(x))
	batchAndLen := g.Node("Gather", operands(shape, g.ConstInt64([]int64{0, 1})), registry.IntAttr("axis", 0))
	pos = g.Node("Range", operands(g.ScalarInt64(0), dimONNX(g, x, 1), g.ScalarInt64(1)))
	pos = g.Node("Expand", operands(g.Node("Unsqueeze", operands(pos, g.ConstInt64([]int64{0}))), batchAndLen))
	return cos, sin, pos
}

// rotaryEmbeddingONNX applies ONNX's RotaryEmbedding (opset 23) to x,
// (B, H, T, head_dim) when heads is 0 or (B, T, heads·head_dim), with the
// inputs of rotaryInputsONNX.
func (r *rotary) rotaryEmbeddingONNX(g registry.GraphBuilder, x, cos, sin, pos string, heads int) string {
	attrs := []registry.Attr{registry.IntAttr("interleaved", boolInt(r.interleaved))}
	if r.dim < r.headDim {
		attrs = append(attrs, registry.IntAttr("rotary_embedding_dim", int64(r.dim)))
	}
	if heads > 0 {
		attrs = append(attrs, registry.IntAttr("num_heads", int64(heads)))
	}
	return g.Node("RotaryEmbedding", operands(x, cos, sin, pos), attrs...)
}

// boolInt is 1 for true and 0 for false, as ONNX's flag attributes.
func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

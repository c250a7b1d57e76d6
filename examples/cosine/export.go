package cosine

import (
	"fmt"
	"math"

	"github.com/attnrun/attnrun/registry"
)

// The interface guard: `attnrun export` writes a layer that implements
// registry.Exporter, and refuses one that does not.
var _ registry.Exporter = (*Cosine)(nil)

// ExportONNX writes the layer as standard ONNX ops on a batched input x,
// (B, T, d_in) with B and T dynamic:
//
//	q, k, v  = x W_qᵀ (+ b_q), x W_kᵀ (+ b_k), x W_vᵀ (+ b_v)   Transpose, MatMul, Add
//	q̂, k̂     = x / max(√Σx², 1e-12) on the last axis            Mul, ReduceSum, Sqrt, Max, Div
//	scores   = scale · q̂ k̂ᵀ                                     Transpose, MatMul, Mul
//	           -inf where the key comes after the query          Shape, Gather, Range, Greater, Where
//	output   = softmax(scores) v                                 Softmax, MatMul
//
// The parameters stay in PyTorch's layout under their names; the mask is
// computed from the sequence length, so no boolean tensor is stored.
func (c *Cosine) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	if c.query == nil {
		return "", errNotValidated
	}
	if len(inputs) != 1 {
		return "", fmt.Errorf("takes 1 input, got %d", len(inputs))
	}
	x := inputs[0]
	q := normalizeONNX(g, c.query.exportONNX(g, "W_query", x))
	k := normalizeONNX(g, c.key.exportONNX(g, "W_key", x))
	v := c.value.exportONNX(g, "W_value", x)

	kT := g.Node("Transpose", []string{k}, registry.IntsAttr("perm", 0, 2, 1))
	scores := g.Node("MatMul", []string{q, kT})
	scores = g.Node("Mul", []string{scores, g.ScalarFloat(float32(c.Scale))})
	if c.Causal {
		minusInf := g.ScalarFloat(float32(math.Inf(-1)))
		scores = g.Node("Where", []string{futureONNX(g, x), minusInf, scores})
	}
	weights := g.Node("Softmax", []string{scores}, registry.IntAttr("axis", -1))
	return g.Node("MatMul", []string{weights, v}), nil
}

// exportONNX is x Wᵀ (+ b) for the projection stored under name: the
// weight keeps PyTorch's (out, in) layout and a Transpose turns it into
// the (in, out) matrix MatMul wants (ONNX Runtime folds it at load).
func (l *linear) exportONNX(g registry.GraphBuilder, name, x string) string {
	wT := g.Node("Transpose", []string{g.Param(name + ".weight")}, registry.IntsAttr("perm", 1, 0))
	y := g.Node("MatMul", []string{x, wT})
	if l.bias != nil {
		y = g.Node("Add", []string{y, g.Param(name + ".bias")})
	}
	return y
}

// normalizeONNX is F.normalize(x, dim=-1): x / max(‖x‖₂, 1e-12), the norm
// kept as a (…, 1) axis that broadcasts over the features. ReduceSum takes
// its axes as an input from opset 13, the oldest attnrun exports.
func normalizeONNX(g registry.GraphBuilder, x string) string {
	squares := g.Node("Mul", []string{x, x})
	sum := g.Node("ReduceSum", []string{squares, g.ConstInt64([]int64{-1})}, registry.IntAttr("keepdims", 1))
	norm := g.Node("Max", []string{g.Node("Sqrt", []string{sum}), g.ScalarFloat(normEps)})
	return g.Node("Div", []string{x, norm})
}

// futureONNX is the (T, T) boolean mask of the keys after each query for
// the tokens of x: key position > query position, from the sequence length.
func futureONNX(g registry.GraphBuilder, x string) string {
	shape := g.Node("Shape", []string{x})
	tokens := g.Node("Gather", []string{shape, g.ScalarInt64(1)}, registry.IntAttr("axis", 0))
	positions := g.Node("Range", []string{g.ScalarInt64(0), tokens, g.ScalarInt64(1)})
	queries := g.Node("Unsqueeze", []string{positions, g.ConstInt64([]int64{1})}) // (T, 1)
	keys := g.Node("Unsqueeze", []string{positions, g.ConstInt64([]int64{0})})    // (1, T)
	return g.Node("Greater", []string{keys, queries})
}

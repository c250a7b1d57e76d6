package layers

import (
	"fmt"
	"math"

	"github.com/attnrun/attnrun/registry"
)

// The ONNX pieces the built-in layers share. Every value is batched,
// (B, T, d) or (B, H, T, d), and float32; masks are computed from the
// sequence length, never stored, so that no bool tensor ends up in a file.

// oneONNXInput returns the input of a layer that takes exactly one.
func oneONNXInput(inputs []string) (string, error) {
	if len(inputs) != 1 {
		return "", fmt.Errorf("takes 1 input, got %d", len(inputs))
	}
	return inputs[0], nil
}

// someONNXInputs checks a layer that takes one or more inputs.
func someONNXInputs(inputs []string) error {
	if len(inputs) == 0 {
		return fmt.Errorf("takes 1 or more inputs, got 0")
	}
	return nil
}

// operands is shorthand for a node's input list.
func operands(values ...string) []string { return values }

// linearONNX is x Wᵀ (+ b) with the weight (out, in) as PyTorch stores it:
// the initializer keeps its name and layout and a Transpose node turns it
// into the (in, out) matrix MatMul wants (ONNX Runtime folds it at load).
func linearONNX(g registry.GraphBuilder, l *linearWeights, name, x string) string {
	wt := g.Node("Transpose", operands(g.Param(join(name, "weight"))), registry.IntsAttr("perm", 1, 0))
	y := g.Node("MatMul", operands(x, wt))
	if l.bias != nil {
		y = g.Node("Add", operands(y, g.Param(join(name, "bias"))))
	}
	return y
}

// projectONNX applies a query, key or value projection named name to x.
func projectONNX(g registry.GraphBuilder, p projection, name, x string) (string, error) {
	switch p := p.(type) {
	case *linearWeights:
		return linearONNX(g, p, name, x), nil
	case *matrixWeights: // a bare (in, out) parameter: x @ W
		return g.Node("MatMul", operands(x, g.Param(name))), nil
	}
	return "", fmt.Errorf("projection %s of type %T has no ONNX export", name, p)
}

// seqLenONNX is the length T of a (B, T, d) value, as an int64 scalar.
func seqLenONNX(g registry.GraphBuilder, x string) string {
	shape := g.Node("Shape", operands(x))
	return g.Node("Gather", operands(shape, g.ScalarInt64(1)), registry.IntAttr("axis", 0))
}

// positionsONNX is 0, 1, ..., T-1 for the tokens of x. With a
// contextLength the positions are looked up in a table of that many, so
// that a longer sequence fails as it fails in attnrun, instead of silently
// attending beyond the layer's context: Gather is out of range (ONNX
// Runtime turns Gather over a Range into a Slice, and then fails to
// broadcast the short mask against the scores, as PyTorch's exports do).
func positionsONNX(g registry.GraphBuilder, x string, contextLength int) string {
	pos := g.Node("Range", operands(g.ScalarInt64(0), seqLenONNX(g, x), g.ScalarInt64(1)))
	if contextLength > 0 {
		table := make([]int64, contextLength)
		for i := range table {
			table[i] = int64(i)
		}
		pos = g.Node("Gather", operands(g.ConstInt64(table), pos), registry.IntAttr("axis", 0))
	}
	return pos
}

// causalMaskONNX is the (T, T) bool mask of the future for the tokens of
// x: true where the key comes after the query, the entries causal attention
// sets to -inf (PyTorch's triu(ones, diagonal=1)).
func causalMaskONNX(g registry.GraphBuilder, x string, contextLength int) string {
	pos := positionsONNX(g, x, contextLength)
	queries := g.Node("Unsqueeze", operands(pos, g.ConstInt64([]int64{1}))) // (T, 1)
	keys := g.Node("Unsqueeze", operands(pos, g.ConstInt64([]int64{0})))    // (1, T)
	return g.Node("Greater", operands(keys, queries))
}

// attendONNX is softmax(mask(scale · q kᵀ)) v, given kT, the keys already
// transposed. scale is a float value ("" for none), mask a bool value that
// broadcasts against the scores ("" for none). The scores are scaled before
// the mask, as kernels.Attend does.
func attendONNX(g registry.GraphBuilder, q, kT, v, scale, mask string) string {
	scores := g.Node("MatMul", operands(q, kT))
	if scale != "" {
		scores = g.Node("Mul", operands(scores, scale))
	}
	if mask != "" {
		scores = g.Node("Where", operands(mask, g.ConstFloat([]float32{float32(math.Inf(-1))}), scores))
	}
	weights := g.Node("Softmax", operands(scores), registry.IntAttr("axis", -1))
	return g.Node("MatMul", operands(weights, v))
}

// scaleONNX is the constant score scale of a layer, or "" when it is 1.
func scaleONNX(g registry.GraphBuilder, scale float32) string {
	if scale == 1 {
		return ""
	}
	return g.ConstFloat([]float32{scale})
}

// transposeLast2 swaps the last two axes of a (B, T, d) value.
func transposeLast2(g registry.GraphBuilder, x string) string {
	return g.Node("Transpose", operands(x), registry.IntsAttr("perm", 0, 2, 1))
}

// exportONNX writes one head on x: projections, scores, mask and softmax,
// the product with the values. mask is the layer's causal mask ("" when
// the head is not causal), shared by the heads of a wrapper.
func (h *head) exportONNX(g registry.GraphBuilder, prefix, x, mask string) (string, error) {
	q, err := projectONNX(g, h.proj.query, join(prefix, "W_query"), x)
	if err != nil {
		return "", err
	}
	k, err := projectONNX(g, h.proj.key, join(prefix, "W_key"), x)
	if err != nil {
		return "", err
	}
	v, err := projectONNX(g, h.proj.value, join(prefix, "W_value"), x)
	if err != nil {
		return "", err
	}
	return attendONNX(g, q, transposeLast2(g, k), v, scaleONNX(g, h.scale), mask), nil
}

// maskONNX is the causal mask of a head on x, or "" when it is not causal.
func (h *head) maskONNX(g registry.GraphBuilder, x string) string {
	if !h.causal {
		return ""
	}
	return causalMaskONNX(g, x, h.contextLength)
}

// exportSingleHead is the whole export of attention.self and
// attention.causal.
func (h *head) exportSingleHead(g registry.GraphBuilder, inputs []string) (string, error) {
	if h == nil {
		return "", errNotValidated
	}
	x, err := oneONNXInput(inputs)
	if err != nil {
		return "", err
	}
	return h.exportONNX(g, "", x, h.maskONNX(g, x))
}

package layers

import (
	"fmt"

	"github.com/attnrun/attnrun/internal/attn"
	"github.com/attnrun/attnrun/registry"
)

var (
	_ registry.Exporter  = (*ScaledDotProduct)(nil)
	_ registry.InputDims = (*ScaledDotProduct)(nil)
)

// ONNXInputDims declares query, key and value as (batch, heads, tokens,
// head_dim) and the mask, when configured, as (batch, heads, queries,
// keys), each dimension its size or 1: none of them is a token stream.
func (s *ScaledDotProduct) ONNXInputDims(n int) map[int][]string {
	dims := map[int][]string{
		0: {"batch", "heads", "queries", "head_dim"},
		1: {"batch", "kv_heads", "keys", "head_dim"},
		2: {"batch", "kv_heads", "keys", "value_dim"},
	}
	if s.Mask != "" && n == 4 {
		dims[3] = []string{"batch", "heads", "queries", "keys"}
	}
	return dims
}

// ExportONNX writes the attention out of standard ops, at every opset, as
// PyTorch 2.x's exporters decompose F.scaled_dot_product_attention: keys
// and values repeated by Expand for the query heads (enable_gqa; a no-op
// with as many heads), MatMul with the transposed keys, the scale, the
// causal frontier and a bool mask by Where, an additive mask by Add,
// Softmax, a Where that gives zeros to queries that see no key (unless
// masked_rows: nan), and MatMul with the values. The head counts are read
// from the inputs' shapes, since the layer's config does not fix them.
func (s *ScaledDotProduct) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	if !s.ready {
		return "", errNotValidated
	}
	if len(inputs) != s.inputCount() {
		return "", fmt.Errorf("takes %d inputs, got %d", s.inputCount(), len(inputs))
	}
	q, k, v := inputs[0], inputs[1], inputs[2]
	k, v = repeatKVONNX(g, k, q), repeatKVONNX(g, v, q)
	m := onnxScoreMask{empty: s.mask != 0}
	if s.Causal { // top-left: query i sees keys j ≤ i
		qPos := g.Node("Range", operands(g.ScalarInt64(0), dimONNX(g, q, 2), g.ScalarInt64(1)))
		kPos := g.Node("Range", operands(g.ScalarInt64(0), dimONNX(g, k, 2), g.ScalarInt64(1)))
		m.hide(g, futureONNX(g, qPos, kPos))
	}
	switch s.mask {
	case attn.MaskAdd:
		m.add(g, inputs[3])
	case attn.MaskKeep:
		m.hide(g, g.Node("Equal", operands(inputs[3], g.ScalarFloat(0))))
	case attn.MaskDrop:
		m.hide(g, g.Node("Not", operands(g.Node("Equal", operands(inputs[3], g.ScalarFloat(0))))))
	}
	rule := onnxScoreRule{scale: float32(s.Scale), mask: m, nanRows: s.nanRows}
	if s.Scale == 0 {
		width := g.Width(q)
		if width == 0 {
			return scaledByWidthONNX(g, rule, q, k, v), nil
		}
		rule.scale = invSqrt(width)
	}
	return rule.attend(g, q, k, v), nil
}

// scaledByWidthONNX attends with the scale 1/√head_dim read from q's shape,
// for a head_dim the export does not know: the queries are scaled before
// the product (as PyTorch's decomposition scales them).
func scaledByWidthONNX(g registry.GraphBuilder, rule onnxScoreRule, q, k, v string) string {
	width := g.Node("Cast", operands(dimONNX(g, q, 3)), registry.IntAttr("to", 1))
	q = g.Node("Div", operands(q, g.Node("Sqrt", operands(width))))
	rule.scale = 1
	return rule.attend(g, q, k, v)
}

// repeatKVONNX repeats each head of y, (B, Hkv, T, d), for H/Hkv
// consecutive query heads of q, (B, H, Tq, d'): (B, H, T, d), so that
// query head h reads head ⌊h / (H/Hkv)⌋ (PyTorch's enable_gqa). The
// counts come from the shapes.
func repeatKVONNX(g registry.GraphBuilder, y, q string) string {
	shape := g.Node("Shape", operands(y))
	dims := func(from, to int64) string {
		return g.Node("Slice", operands(shape, g.ConstInt64([]int64{from}), g.ConstInt64([]int64{to})))
	}
	heads := g.Node("Slice", operands(g.Node("Shape", operands(q)), g.ConstInt64([]int64{1}), g.ConstInt64([]int64{2})))
	group := g.Node("Div", operands(heads, dims(1, 2)))
	axis0 := registry.IntAttr("axis", 0)
	expanded := g.Node("Expand", operands(
		g.Node("Unsqueeze", operands(y, g.ConstInt64([]int64{2}))), // (B, Hkv, 1, T, d)
		g.Node("Concat", operands(dims(0, 2), group, dims(2, 4)), axis0)))
	return g.Node("Reshape", operands(expanded, g.Node("Concat", operands(dims(0, 1), heads, dims(2, 4)), axis0)))
}

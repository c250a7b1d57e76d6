package layers

import "github.com/attnrun/attnrun/registry"

var _ registry.Exporter = (*MultiHead)(nil)

// ExportONNX writes the module as PyTorch's exporter writes the seeds'
// MultiHeadAttention: the three projections, each reshaped to
// (B, T, H, head_dim) and transposed to (B, H, T, head_dim) (the keys to
// (B, H, head_dim, T)), scores scaled by 1/√head_dim, the causal mask,
// Softmax, the product with the values, the heads merged back to
// (B, T, d_out) and out_proj. Without a causal mask nothing in the graph
// depends on context_length, so ONNX Runtime accepts longer sequences.
func (m *MultiHead) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	if m.outProj == nil {
		return "", errNotValidated
	}
	x, err := oneONNXInput(inputs)
	if err != nil {
		return "", err
	}
	dOut := m.proj.out
	headDim := dOut / m.numHeads
	// Reshape's 0 keeps the batch and sequence axes as they are.
	split := g.ConstInt64([]int64{0, 0, int64(m.numHeads), int64(headDim)})
	heads := func(name string, p projection, perm ...int64) (string, error) {
		y, err := projectONNX(g, p, name, x)
		if err != nil {
			return "", err
		}
		y = g.Node("Reshape", operands(y, split))
		return g.Node("Transpose", operands(y), registry.IntsAttr("perm", perm...)), nil
	}
	q, err := heads("W_query", m.proj.query, 0, 2, 1, 3)
	if err != nil {
		return "", err
	}
	kT, err := heads("W_key", m.proj.key, 0, 2, 3, 1)
	if err != nil {
		return "", err
	}
	v, err := heads("W_value", m.proj.value, 0, 2, 1, 3)
	if err != nil {
		return "", err
	}
	var mask string
	if m.causal {
		mask = causalMaskONNX(g, x, m.contextLength)
	}
	context := attendONNX(g, q, kT, v, scaleONNX(g, invSqrt(headDim)), mask)
	context = g.Node("Transpose", operands(context), registry.IntsAttr("perm", 0, 2, 1, 3))
	context = g.Node("Reshape", operands(context, g.ConstInt64([]int64{0, 0, int64(dOut)})))
	return linearONNX(g, m.outProj, "out_proj", context), nil
}

package layers

import "github.com/attnrun/attnrun/registry"

var _ registry.Exporter = (*MLA)(nil)

// ExportONNX writes the layer as Forward computes it, in standard ops that
// every opset from 13 on has: the low-rank projections (MatMul on the
// transposed weights), both RMSNorms written out (Pow, ReduceMean, Add,
// Sqrt, Div, Mul), the heads split by Reshape and Transpose and cut by
// Slice into their RoPE and non-RoPE parts, RoPE from Cos, Sin, Slice, Mul
// and Concat (angles in float64, as attnrun computes them), the shared
// rotated key broadcast to every head by Expand and joined to each head's
// key by Concat, then the causal softmax attention (MatMul, Mul by the
// scale, Where, Softmax, MatMul) and o_proj. An exported graph holds no
// cache: it is the full pass, whose keys and values it expands from the
// latent as Hugging Face's module does.
func (m *MLA) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	c := m.c
	if c == nil {
		return "", errNotValidated
	}
	x, err := oneONNXInput(inputs)
	if err != nil {
		return "", err
	}
	var q string
	if c.q != nil {
		q = linearONNX(g, c.q, "q_proj", x)
	} else {
		q = linearONNX(g, c.qA, "q_a_proj", x)
		q = rmsNormONNX(g, q, "q_a_layernorm.weight", c.eps)
		q = linearONNX(g, c.qB, "q_b_proj", q)
	}
	q = splitHeadsONNX(g, q, c.heads, c.dqk) // (B, H, T, dqk)
	dn, dqk := int64(c.dn), int64(c.dqk)
	latent := linearONNX(g, c.kvA, "kv_a_proj_with_mqa", x) // (B, T, kv_lora_rank + dr)
	latentC := rmsNormONNX(g, sliceLastONNX(g, latent, 0, int64(c.kvRank)), "kv_a_layernorm.weight", c.eps)
	kRope := sliceLastONNX(g, latent, int64(c.kvRank), int64(c.kvRank+c.dr))
	kRope = g.Node("Unsqueeze", operands(kRope, g.ConstInt64([]int64{1}))) // (B, 1, T, dr)

	cos, sin := c.rot.tablesONNX(g, x, 1)
	qRope := c.rot.rotateONNX(g, sliceLastONNX(g, q, dn, dqk), cos, sin)
	kRope = c.rot.rotateONNX(g, kRope, cos, sin)
	kRope = g.Node("Expand", operands(kRope, g.ConstInt64([]int64{1, int64(c.heads), 1, 1})))

	kv := splitHeadsONNX(g, linearONNX(g, c.kvB, "kv_b_proj", latentC), c.heads, c.dn+c.dv) // (B, H, T, dn + dv)
	lastAxis := registry.IntAttr("axis", -1)
	k := g.Node("Concat", operands(sliceLastONNX(g, kv, 0, dn), kRope), lastAxis)
	v := sliceLastONNX(g, kv, dn, dn+int64(c.dv))
	q = g.Node("Concat", operands(sliceLastONNX(g, q, 0, dn), qRope), lastAxis)

	mask := onnxScoreMask{hidden: causalMaskONNX(g, x, 0)}
	context := attendHeadsONNX(g, q, k, v, c.scale, 0, mask, false)
	return linearONNX(g, c.o, "o_proj", mergeHeadsONNX(g, context, c.heads*c.dv)), nil
}

// rmsNormONNX is weight · x / √(mean(x²) + eps) over the last axis, with
// the named weight parameter.
func rmsNormONNX(g registry.GraphBuilder, x, weight string, eps float64) string {
	meanSquare := reduceLastONNX(g, "ReduceMean", g.Node("Pow", operands(x, g.ScalarFloat(2))))
	rms := g.Node("Sqrt", operands(g.Node("Add", operands(meanSquare, g.ScalarFloat(float32(eps))))))
	return g.Node("Mul", operands(g.Node("Div", operands(x, rms)), g.Param(weight)))
}

// sliceLastONNX is x[..., from:to].
func sliceLastONNX(g registry.GraphBuilder, x string, from, to int64) string {
	return g.Node("Slice", operands(x, g.ConstInt64([]int64{from}), g.ConstInt64([]int64{to}), g.ConstInt64([]int64{-1})))
}

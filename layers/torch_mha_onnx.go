package layers

import (
	"math"

	"github.com/attnrun/attnrun/internal/attn"
	"github.com/attnrun/attnrun/registry"
)

var (
	_ registry.Exporter  = (*TorchMHA)(nil)
	_ registry.InputDims = (*TorchMHA)(nil)
)

// ONNXInputDims reports how the inputs are declared in an export: the
// token inputs (seq, batch, d) unless batch_first, and the mask inputs that
// follow them, key_padding_mask as (batch, keys) and attn_mask as
// (queries, keys), their common shapes (a per-head attn_mask,
// (B·num_heads, L, S), cannot be declared by the same export).
// export.Model declares the model inputs that way.
func (m *TorchMHA) ONNXInputDims(n int) map[int][]string {
	if m.c == nil {
		return nil
	}
	out := map[int][]string{}
	i := n - 1
	if m.c.attn != 0 && i >= 1 {
		out[i] = []string{"queries", "keys"}
		i--
	}
	if m.c.kpm != 0 && i >= 1 {
		out[i] = []string{"batch", "keys"}
		i--
	}
	if !m.c.batchFirst {
		for ; i >= 0; i-- {
			out[i] = []string{"seq", "batch", "d"}
		}
	}
	return out
}

// ExportONNX writes nn.MultiheadAttention's forward on batched inputs:
// sequence-first inputs transposed to batch-first (and the output back),
// the in-projections sliced from in_proj_weight and in_proj_bias (or the
// separate q/k/v_proj_weight), bias_k and bias_v and the zero key of
// add_zero_attn appended to the keys and values, the masks turned into one
// additive float mask (−Inf where a bool mask is true, PyTorch's polarity)
// padded with zeros for those extra keys, and out_proj.
//
// From opset 23 on the attention itself is ONNX's Attention op, 3-D with
// q_num_heads = kv_num_heads = num_heads, unless a mask may hide every key
// of a query and masked_rows is nan (PyTorch's NaN; the op gives zeros):
// then, as before opset 23, it is written out with MatMul and Softmax,
// which gives NaN there too.
func (m *TorchMHA) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	c := m.c
	if c == nil {
		return "", errNotValidated
	}
	in, err := sortMHAInputs(inputs, c.kpm != 0, c.attn != 0)
	if err != nil {
		return "", err
	}
	toBatchFirst := func(x string) string {
		if c.batchFirst {
			return x
		}
		return g.Node("Transpose", operands(x), registry.IntsAttr("perm", 1, 0, 2))
	}
	// Inputs given twice ([query] alone, or [query, memory]) are
	// transposed once.
	query := toBatchFirst(in.query)
	key := query
	if in.key != in.query {
		key = toBatchFirst(in.key)
	}
	value := key
	if in.value != in.key {
		value = toBatchFirst(in.value)
	}
	q := c.inProjONNX(g, 0, query)
	k := c.inProjONNX(g, 1, key)
	v := c.inProjONNX(g, 2, value)
	k, v = c.extrasONNX(g, k, v)
	bias := c.maskBiasONNX(g, in)
	var context string
	if g.Opset() >= attentionOpset && !(c.nanRows && bias != "") {
		mask := ""
		if bias != "" {
			shape := g.Node("Concat", operands(g.ConstInt64([]int64{1, 1}), lengthONNX(g, q), lengthONNX(g, k)), registry.IntAttr("axis", 0))
			mask = g.Node("Expand", operands(bias, shape))
		}
		op := attentionOp{heads: c.heads, kvHeads: c.heads, headDim: c.embed / c.heads}
		context = op.node(g, q, k, v, mask)
	} else {
		hd := c.embed / c.heads
		qh, kh, vh := splitHeadsONNX(g, q, c.heads, hd), splitHeadsONNX(g, k, c.heads, hd), splitHeadsONNX(g, v, c.heads, hd)
		mask := onnxScoreMask{bias: bias, empty: bias != ""}
		context = mergeHeadsONNX(g, attendHeadsONNX(g, qh, kh, vh, invSqrt(hd), 0, mask, c.nanRows), c.embed)
	}
	y := linearONNX(g, c.out, "out_proj", context)
	if !c.batchFirst {
		y = g.Node("Transpose", operands(y), registry.IntsAttr("perm", 1, 0, 2))
	}
	return y, nil
}

// inProjONNX applies in-projection which (0 query, 1 key, 2 value) to the
// batch-first x: MatMul by the transposed (embed_dim, in) weight, a slice
// of in_proj_weight or q/k/v_proj_weight, and Add of its slice of
// in_proj_bias.
func (c *mhaPrepared) inProjONNX(g registry.GraphBuilder, which int, x string) string {
	e := int64(c.embed)
	rows := func(param string) string {
		lo := int64(which) * e
		return g.Node("Slice", operands(g.Param(param), g.ConstInt64([]int64{lo}), g.ConstInt64([]int64{lo + e}), g.ConstInt64([]int64{0})))
	}
	var w string
	if c.separate {
		w = g.Param([]string{"q_proj_weight", "k_proj_weight", "v_proj_weight"}[which])
	} else {
		w = rows("in_proj_weight")
	}
	y := g.Node("MatMul", operands(x, g.Node("Transpose", operands(w), registry.IntsAttr("perm", 1, 0))))
	if c.inBias != nil {
		y = g.Node("Add", operands(y, rows("in_proj_bias")))
	}
	return y
}

// extrasONNX appends bias_k and bias_v, then add_zero_attn's zero key and
// value, to the projected keys and values (B, S, E), as Forward does.
func (c *mhaPrepared) extrasONNX(g registry.GraphBuilder, k, v string) (string, string) {
	if c.extraKeys() == 0 {
		return k, v
	}
	batch := g.Node("Gather", operands(g.Node("Shape", operands(k)), g.ConstInt64([]int64{0})), registry.IntAttr("axis", 0))
	row := g.Node("Concat", operands(batch, g.ConstInt64([]int64{1, int64(c.embed)})), registry.IntAttr("axis", 0)) // (B, 1, E)
	seq := registry.IntAttr("axis", 1)
	if c.biasK != nil {
		k = g.Node("Concat", operands(k, g.Node("Expand", operands(g.Param("bias_k"), row))), seq)
		v = g.Node("Concat", operands(v, g.Node("Expand", operands(g.Param("bias_v"), row))), seq)
	}
	if c.zeroAttn {
		zeros := g.Node("ConstantOfShape", operands(row))
		k = g.Node("Concat", operands(k, zeros), seq)
		v = g.Node("Concat", operands(v, zeros), seq)
	}
	return k, v
}

// maskBiasONNX turns key_padding_mask (B, S) and attn_mask (L, S) into
// one additive float mask that broadcasts to (B, H, L, S + extra keys):
// a bool mask adds −Inf where it is nonzero, a float mask its values;
// the extra keys get 0. It returns "" without masks.
func (c *mhaPrepared) maskBiasONNX(g registry.GraphBuilder, in mhaSorted[string]) string {
	additive := func(x string, kind attn.MaskKind) string {
		if kind == attn.MaskAdd {
			return x
		}
		keep := g.Node("Equal", operands(x, g.ScalarFloat(0)))
		return g.Node("Where", operands(keep, g.ScalarFloat(0), g.ScalarFloat(float32(math.Inf(-1)))))
	}
	var bias string
	if c.kpm != 0 {
		bias = g.Node("Unsqueeze", operands(additive(in.kpm, c.kpm), g.ConstInt64([]int64{1, 2}))) // (B, 1, 1, S)
	}
	if c.attn != 0 {
		a := additive(in.attn, c.attn)
		if bias == "" {
			bias = a
		} else {
			bias = g.Node("Add", operands(bias, a))
		}
	}
	if bias == "" || c.extraKeys() == 0 {
		return bias
	}
	// Zeros for the extra keys: the mask's shape with extraKeys columns.
	shape := g.Node("Shape", operands(bias))
	lead := g.Node("Slice", operands(shape, g.ConstInt64([]int64{0}), g.ConstInt64([]int64{-1}), g.ConstInt64([]int64{0})))
	zeros := g.Node("ConstantOfShape", operands(g.Node("Concat", operands(lead, g.ConstInt64([]int64{int64(c.extraKeys())})), registry.IntAttr("axis", 0))))
	return g.Node("Concat", operands(bias, zeros), registry.IntAttr("axis", -1))
}

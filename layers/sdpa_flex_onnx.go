package layers

import "github.com/attnrun/attnrun/registry"

// previewDomain is ONNX's domain of experimental operators, where
// FlexAttention is.
const previewDomain = "ai.onnx.preview"

// exportFlexAttention writes the layer with ai.onnx.preview's
// FlexAttention: the projections split into heads (with qk_norm and RoPE)
// are its Q, K and V (grouped-query attention is the op's own), the scale
// its attribute, and everything the layer does to the scores its
// score_mod subgraph: softcap, the score modifications, then the masks,
// which the subgraph reads from the main graph (causal frontier, window,
// ALiBi, the mask input). When a query may see no key, prob_mod gives it
// weights of 0, as Forward does (masked_rows: zeros).
//
// FlexAttention has no sinks. They become one more key whose value is
// zero: K and V get a row of zeros, and score_mod sets that key's score to
// the head's sink logit, after modifying the others, so the softmax has
// the sink's column and the product with V drops it.
func (c *sdpaPrepared) exportFlexAttention(g registry.GraphBuilder, d registry.DomainBuilder, in sdpaSorted[string]) string {
	q, k, v := c.headsONNX(g, in)
	rule := onnxScoreRule{scale: c.scale, softcap: c.softcap, mods: c.mods, mask: c.scoreMask(g, in, true), nanRows: c.nanRows}
	var sees string
	if rule.zeroesRows() {
		sees = rule.seesKeys(g, flexScoresShape(g, q, k))
	}
	var sinks string
	if c.sinks != nil {
		sinks = g.Param("sinks")
		k, v = appendZeroKeyONNX(g, k), appendZeroKeyONNX(g, v)
	}
	scoreMod := registry.Graph{Inputs: []int{4}, Build: func(body registry.GraphBuilder, in []string) string {
		scores := in[0]
		if sinks != "" {
			scores = body.Node("Slice", operands(scores, body.ConstInt64([]int64{0}), body.ConstInt64([]int64{-1}), body.ConstInt64([]int64{-1})))
		}
		scores = rule.modify(body, scores)
		if sinks != "" {
			scores = body.Node("Concat", operands(scores, sinkColumnONNX(body, scores, sinks)), registry.IntAttr("axis", -1))
		}
		return scores
	}}
	attrs := []registry.Attr{registry.FloatAttr("scale", c.scale), registry.GraphAttr("score_mod", scoreMod)}
	if sees != "" {
		attrs = append(attrs, registry.GraphAttr("prob_mod", registry.Graph{Inputs: []int{4}, Build: func(body registry.GraphBuilder, in []string) string {
			return body.Node("Where", operands(sees, in[0], body.ScalarFloat(0)))
		}}))
	}
	context := d.DomainNode(previewDomain, "FlexAttention", operands(q, k, v), attrs...)
	return linearONNX(g, c.out, c.outName, mergeHeadsONNX(g, context, c.hdim))
}

// flexScoresShape is the shape (B, H, Tq, Tk) of the scores of queries q
// (B, H, Tq, d) and keys k (B, H_kv, Tk, d), as a 1-D int64 value.
func flexScoresShape(g registry.GraphBuilder, q, k string) string {
	lead := g.Node("Slice", operands(g.Node("Shape", operands(q)), g.ConstInt64([]int64{0}), g.ConstInt64([]int64{3})))
	keys := g.Node("Slice", operands(g.Node("Shape", operands(k)), g.ConstInt64([]int64{2}), g.ConstInt64([]int64{3})))
	return g.Node("Concat", operands(lead, keys), registry.IntAttr("axis", 0))
}

// appendZeroKeyONNX appends a row of zeros to the keys (or values) x
// (B, H, T, d) along the token axis: (B, H, T+1, d).
func appendZeroKeyONNX(g registry.GraphBuilder, x string) string {
	shape := g.Node("Shape", operands(x))
	lead := g.Node("Slice", operands(shape, g.ConstInt64([]int64{0}), g.ConstInt64([]int64{2})))
	last := g.Node("Slice", operands(shape, g.ConstInt64([]int64{3}), g.ConstInt64([]int64{4})))
	rowShape := g.Node("Concat", operands(lead, g.ConstInt64([]int64{1}), last), registry.IntAttr("axis", 0))
	zeros := g.Node("Expand", operands(g.ScalarFloat(0), rowShape))
	return g.Node("Concat", operands(x, zeros), registry.IntAttr("axis", 2))
}

// sinkColumnONNX is the sink logits (H) as a column (B, H, Tq, 1) of
// scores (B, H, Tq, Tk).
func sinkColumnONNX(g registry.GraphBuilder, scores, sinks string) string {
	column := g.Node("Reshape", operands(sinks, g.ConstInt64([]int64{1, -1, 1, 1})))
	rows := g.Node("Slice", operands(g.Node("Shape", operands(scores)), g.ConstInt64([]int64{0}), g.ConstInt64([]int64{3})))
	shape := g.Node("Concat", operands(rows, g.ConstInt64([]int64{1})), registry.IntAttr("axis", 0))
	return g.Node("Expand", operands(column, shape))
}

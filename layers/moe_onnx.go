package layers

import "github.com/attnrun/attnrun/registry"

var _ registry.Exporter = (*MoE)(nil)

// ExportONNX writes the block as Hugging Face's batched experts export
// it: the router's Softmax and TopK (renormalized by ReduceSum and Div),
// each token's chosen experts' stacked weights gathered by the indices
// (Gather), their products with the token as batched MatMuls, and the
// outputs weighted by the router and summed over the chosen experts
// (ReduceSum); then the shared expert, scaled by its Sigmoid gate. The
// lift pattern (moe_lift.go) reads the graph back.
func (m *MoE) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	if m.c == nil {
		return "", errNotValidated
	}
	x, err := oneONNXInput(inputs)
	if err != nil {
		return "", err
	}
	last := g.ConstInt64([]int64{-1})
	probs := g.Node("Softmax", operands(linearONNX(g, m.c.router, "gate", x)), registry.IntAttr("axis", -1))
	top := g.NodeOutputs("TopK", operands(probs, g.ConstInt64([]int64{int64(m.TopK)})), 2, registry.IntAttr("axis", -1))
	weights, chosen := top[0], top[1]
	if m.Renormalize {
		weights = g.Node("Div", operands(weights, g.Node("ReduceSum", operands(weights, last))))
	}

	// The chosen experts' (…, k, rows, cols) matrices times a (…, 1, cols, 1)
	// column are their (…, k, rows) outputs.
	times := func(param, column string) string {
		w := g.Node("Gather", operands(g.Param(param), chosen), registry.IntAttr("axis", 0))
		col := g.Node("Unsqueeze", operands(column, last))
		return g.Node("Squeeze", operands(g.Node("MatMul", operands(w, col)), last))
	}
	gateUp := times("experts.gate_up_proj", g.Node("Unsqueeze", operands(x, g.ConstInt64([]int64{-2}))))
	h := int64(m.DHidden)
	gate := g.Node("Slice", operands(gateUp, g.ConstInt64([]int64{0}), g.ConstInt64([]int64{h}), last))
	up := g.Node("Slice", operands(gateUp, g.ConstInt64([]int64{h}), g.ConstInt64([]int64{2 * h}), last))
	act, err := activationONNX(g, m.Activation, gate)
	if err != nil {
		return "", err
	}
	each := times("experts.down_proj", g.Node("Mul", operands(act, up))) // (…, k, d)
	weighted := g.Node("Mul", operands(each, g.Node("Unsqueeze", operands(weights, last))))
	y := g.Node("ReduceSum", operands(weighted, g.ConstInt64([]int64{-2})), registry.IntAttr("keepdims", 0))
	if m.c.shared == nil {
		return y, nil
	}
	sharedAct, err := activationONNX(g, m.Activation, linearONNX(g, m.c.shared[0], moeSharedNames[0], x))
	if err != nil {
		return "", err
	}
	hidden := g.Node("Mul", operands(sharedAct, linearONNX(g, m.c.shared[1], moeSharedNames[1], x)))
	shared := linearONNX(g, m.c.shared[2], moeSharedNames[2], hidden)
	scale := g.Node("Sigmoid", operands(linearONNX(g, m.c.sharedGate, "shared_expert_gate", x)))
	return g.Node("Add", operands(y, g.Node("Mul", operands(scale, shared)))), nil
}

package layers

import "github.com/attnrun/attnrun/registry"

var _ registry.Exporter = (*MoE)(nil)

// ExportONNX writes the block densely, which any runtime runs with the
// standard ops: the router's Softmax and TopK (renormalized by ReduceSum
// and Div), the top-k weights scattered into a zeroed (…, experts) row
// (ScatterElements on ConstantOfShape), every expert applied to every
// token as one batched MatMul over the stacked weights, and the experts'
// outputs summed weighted by that row, zero for the experts not chosen;
// then the shared expert, scaled by its Sigmoid gate. The routed sum adds
// the experts in ascending order, as Forward does.
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
	weights := top[0]
	if m.Renormalize {
		weights = g.Node("Div", operands(weights, g.Node("ReduceSum", operands(weights, last))))
	}
	dense := g.Node("ScatterElements", operands(g.Node("ConstantOfShape", operands(g.Node("Shape", operands(probs)))),
		top[1], weights), registry.IntAttr("axis", -1))

	// x (…, d) as (…, 1, 1, d) times the (experts, d, ·) stacks is
	// (…, experts, 1, ·): every expert on every token.
	tokens := g.Node("Unsqueeze", operands(x, g.ConstInt64([]int64{-2, -3})))
	stacked := func(param string) string {
		return g.Node("Transpose", operands(g.Param(param)), registry.IntsAttr("perm", 0, 2, 1))
	}
	gateUp := g.Node("MatMul", operands(tokens, stacked("experts.gate_up_proj")))
	h := int64(m.DHidden)
	gate := g.Node("Slice", operands(gateUp, g.ConstInt64([]int64{0}), g.ConstInt64([]int64{h}), last))
	up := g.Node("Slice", operands(gateUp, g.ConstInt64([]int64{h}), g.ConstInt64([]int64{2 * h}), last))
	act, err := activationONNX(g, m.Activation, gate)
	if err != nil {
		return "", err
	}
	each := g.Node("MatMul", operands(g.Node("Mul", operands(act, up)), stacked("experts.down_proj")))
	each = g.Node("Squeeze", operands(each, g.ConstInt64([]int64{-2}))) // (…, experts, d)
	weighted := g.Node("Mul", operands(each, g.Node("Unsqueeze", operands(dense, last))))
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

package layers

import "github.com/attnrun/attnrun/registry"

var _ registry.Exporter = (*LayerNorm)(nil)

// ExportONNX writes LayerNormalization over the last axis from opset 17
// on, where it exists (a layer without elementwise_affine gets a constant
// scale of ones: the op needs one). Before opset 17 it writes the
// decomposition PyTorch's exporter writes for nn.LayerNorm: ReduceMean,
// Sub, Pow, ReduceMean, Add of eps, Sqrt, Div, then Mul by the weight and
// Add of the bias.
func (n *LayerNorm) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	if n.norm == nil {
		return "", errNotValidated
	}
	x, err := oneONNXInput(inputs)
	if err != nil {
		return "", err
	}
	eps := float32(n.norm.eps)
	if g.Opset() >= 17 {
		scale := g.ConstFloat(ones(n.norm.d))
		if n.norm.weight != nil {
			scale = g.Param("weight")
		}
		ins := operands(x, scale)
		if n.norm.bias != nil {
			ins = append(ins, g.Param("bias"))
		}
		return g.Node("LayerNormalization", ins, registry.IntAttr("axis", -1), registry.FloatAttr("epsilon", eps)), nil
	}
	centered := g.Node("Sub", operands(x, reduceLastONNX(g, "ReduceMean", x)))
	variance := reduceLastONNX(g, "ReduceMean", g.Node("Pow", operands(centered, g.ScalarFloat(2))))
	std := g.Node("Sqrt", operands(g.Node("Add", operands(variance, g.ScalarFloat(eps)))))
	return n.norm.affineONNX(g, g.Node("Div", operands(centered, std))), nil
}

// affineONNX multiplies by the weight and adds the bias, those the norm has.
func (n *tokenNorm) affineONNX(g registry.GraphBuilder, y string) string {
	if n.weight != nil {
		y = g.Node("Mul", operands(y, g.Param("weight")))
	}
	if n.bias != nil {
		y = g.Node("Add", operands(y, g.Param("bias")))
	}
	return y
}

// reduceLastONNX reduces x over its last axis with op (ReduceMean,
// ReduceMax), keeping the axis. The axes are an attribute before opset 18
// and an input from it on.
func reduceLastONNX(g registry.GraphBuilder, op, x string) string {
	if g.Opset() >= 18 {
		return g.Node(op, operands(x, g.ConstInt64([]int64{-1})), registry.IntAttr("keepdims", 1))
	}
	return g.Node(op, operands(x), registry.IntsAttr("axes", -1), registry.IntAttr("keepdims", 1))
}

// ones is a vector of n ones.
func ones(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = 1
	}
	return v
}

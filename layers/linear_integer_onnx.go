package layers

import "github.com/attnrun/attnrun/registry"

var _ registry.Exporter = (*LinearInteger)(nil)

// ExportONNX writes the graph ONNX Runtime's quantizer writes:
// MatMulInteger of the tokens and the (d_in, d_out) weight with their zero
// points, Cast to float, Mul by input_scale·weight_scale, then Add of the
// bias. The parameters are float32 initializers holding integers, so Casts
// turn the tokens, the weight and the zero points into their integer
// types first.
func (l *LinearInteger) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	if l.p == nil {
		return "", errNotValidated
	}
	x, err := oneONNXInput(inputs)
	if err != nil {
		return "", err
	}
	toInput := registry.IntAttr("to", l.p.inputRange.onnx)
	toWeight := registry.IntAttr("to", l.p.weightRange.onnx)
	xq := g.Node("Cast", operands(x), toInput)
	w := g.Node("Cast", operands(g.Node("Transpose", operands(g.Param("weight")), registry.IntsAttr("perm", 1, 0))), toWeight)
	xZero := g.Node("Cast", operands(g.Param("input_zero_point")), toInput)
	wZero := g.Node("Cast", operands(g.Param("weight_zero_point")), toWeight)
	acc := g.Node("MatMulInteger", operands(xq, w, xZero, wZero))
	scale := g.Node("Mul", operands(g.Param("input_scale"), g.Param("weight_scale")))
	y := g.Node("Mul", operands(g.Node("Cast", operands(acc), registry.IntAttr("to", onnxFloat)), scale))
	if l.p.bias != nil {
		y = g.Node("Add", operands(y, g.Param("bias")))
	}
	return y, nil
}

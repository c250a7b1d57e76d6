package layers

import "github.com/attnrun/attnrun/registry"

var _ registry.Exporter = (*MeanPool)(nil)

// ONNXInputDims reports the attention mask, when given, as (batch, keys):
// export.Model declares a float32 model input read as that mask with that
// rank, not as a token stream.
func (p *MeanPool) ONNXInputDims(n int) map[int][]string {
	if n < 2 {
		return nil
	}
	return map[int][]string{1: {"batch", "keys"}}
}

// ExportONNX writes sentence-transformers' mean pooling as its ONNX
// exports do: the mask Cast to float and Unsqueezed, Mul, ReduceSum over
// the tokens, the mask's ReduceSum clamped (Max) at 1e-9, Div. Without a
// mask, ReduceMean.
func (p *MeanPool) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	if err := someONNXInputs(inputs); err != nil {
		return "", err
	}
	x := inputs[0]
	if len(inputs) == 1 {
		return reduceAxisONNX(g, "ReduceMean", x, 1, 0), nil
	}
	mask := g.Node("Cast", operands(inputs[1]), registry.IntAttr("to", 1)) // FLOAT
	mask = g.Node("Unsqueeze", operands(mask, g.ConstInt64([]int64{-1})))
	sum := reduceAxisONNX(g, "ReduceSum", g.Node("Mul", operands(x, mask)), 1, 0)
	count := reduceAxisONNX(g, "ReduceSum", mask, 1, 0)
	count = g.Node("Max", operands(count, g.ScalarFloat(minMaskSum)))
	return g.Node("Div", operands(sum, count)), nil
}

// reduceAxisONNX reduces x over one axis with op, as the opset writes its
// axes (an input from opset 18 on, and for ReduceSum from 13).
func reduceAxisONNX(g registry.GraphBuilder, op, x string, axis, keepdims int64) string {
	if g.Opset() >= 18 || op == "ReduceSum" {
		return g.Node(op, operands(x, g.ConstInt64([]int64{axis})), registry.IntAttr("keepdims", keepdims))
	}
	return g.Node(op, operands(x), registry.IntsAttr("axes", axis), registry.IntAttr("keepdims", keepdims))
}

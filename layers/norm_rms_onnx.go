package layers

import "github.com/attnrun/attnrun/registry"

var _ registry.Exporter = (*RMSNorm)(nil)

// ExportONNX writes weight · x / √(mean(x²) + eps) as Pow, ReduceMean over
// the last axis, Add of eps, Sqrt, Div and Mul by the weight, the way
// Hugging Face's LlamaRMSNorm exports (with Div where it writes
// x·rsqrt(·), which ONNX lacks).
func (n *RMSNorm) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	if n.norm == nil {
		return "", errNotValidated
	}
	x, err := oneONNXInput(inputs)
	if err != nil {
		return "", err
	}
	meanSquare := reduceLastONNX(g, "ReduceMean", g.Node("Pow", operands(x, g.ScalarFloat(2))))
	rms := g.Node("Sqrt", operands(g.Node("Add", operands(meanSquare, g.ScalarFloat(float32(n.norm.eps))))))
	return n.norm.affineONNX(g, g.Node("Div", operands(x, rms))), nil
}

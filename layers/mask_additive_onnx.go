package layers

import "github.com/attnrun/attnrun/registry"

var _ registry.Exporter = (*AdditiveMask)(nil)

// ONNXInputDims reports the attention_mask as (batch, keys).
func (p *AdditiveMask) ONNXInputDims(int) map[int][]string {
	return map[int][]string{0: {"batch", "keys"}}
}

// ExportONNX writes (1 - m) * fill as Hugging Face's exports do: the mask
// Unsqueezed to (B, 1, 1, T) and Cast to float, Sub from 1, Mul by fill.
func (p *AdditiveMask) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	mask, err := oneONNXInput(inputs)
	if err != nil {
		return "", err
	}
	mask = g.Node("Unsqueeze", operands(mask, g.ConstInt64([]int64{1, 2})))
	mask = g.Node("Cast", operands(mask), registry.IntAttr("to", 1)) // FLOAT
	return g.Node("Mul", operands(g.Node("Sub", operands(g.ScalarFloat(1), mask)), g.ScalarFloat(float32(p.Fill)))), nil
}

package layers

import "github.com/attnrun/attnrun/registry"

var _ registry.Exporter = (*PaddingMask)(nil)

// ONNXInputDims reports the attention_mask as (batch, keys): export.Model
// declares a float32 model input read by the layer with that rank.
func (p *PaddingMask) ONNXInputDims(int) map[int][]string {
	return map[int][]string{0: {"batch", "keys"}}
}

// ExportONNX writes the keep mask as Hugging Face's exports begin their
// extended attention mask: Unsqueeze to (B, 1, 1, T), then a comparison
// with 0 (Not of Equal) Cast to float.
func (p *PaddingMask) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	mask, err := oneONNXInput(inputs)
	if err != nil {
		return "", err
	}
	mask = g.Node("Cast", operands(mask), registry.IntAttr("to", 1)) // FLOAT: int64 or float32 in
	expanded := g.Node("Unsqueeze", operands(mask, g.ConstInt64([]int64{1, 2})))
	keep := g.Node("Not", operands(g.Node("Equal", operands(expanded, g.ScalarFloat(0)))))
	return g.Node("Cast", operands(keep), registry.IntAttr("to", 1)), nil
}

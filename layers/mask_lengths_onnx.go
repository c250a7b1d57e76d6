package layers

import (
	"fmt"

	"github.com/attnrun/attnrun/registry"
)

var _ registry.Exporter = (*LengthsMask)(nil)

// ONNXInputDims reports the lengths as (batch): export.Model declares a
// model input read by the layer with that rank.
func (p *LengthsMask) ONNXInputDims(int) map[int][]string {
	return map[int][]string{0: {"batch"}}
}

// ExportONNX writes the keep mask as a comparison of the key positions,
// Range(0, T), with the lengths: Less(position, length) as float, shaped
// (B, 1, 1, T).
func (p *LengthsMask) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	if len(inputs) != 2 {
		return "", fmt.Errorf("takes 2 inputs, the lengths and the tokens, got %d", len(inputs))
	}
	lengths := g.Node("Cast", operands(inputs[0]), registry.IntAttr("to", 1)) // FLOAT
	t := g.Node("Gather", operands(g.Node("Shape", operands(inputs[1])), g.ScalarInt64(1)))
	positions := g.Node("Cast", operands(g.Node("Range", operands(g.ScalarInt64(0), t, g.ScalarInt64(1)))), registry.IntAttr("to", 1))
	lengths = g.Node("Unsqueeze", operands(lengths, g.ConstInt64([]int64{1, 2, 3})))
	keep := g.Node("Less", operands(positions, lengths))
	return g.Node("Cast", operands(keep), registry.IntAttr("to", 1)), nil
}

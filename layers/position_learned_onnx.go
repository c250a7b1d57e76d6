package layers

import "github.com/attnrun/attnrun/registry"

var _ registry.Exporter = (*LearnedPosition)(nil)

// ExportONNX writes x + weight[arange(T)] as PyTorch's exporter writes
// nn.Embedding on torch.arange: Gather on the (context_length, d) table
// with Range (plus the offset), or on position_ids when given; it fails
// in ONNX Runtime beyond context_length.
func (p *LearnedPosition) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	if p.weight == nil {
		return "", errNotValidated
	}
	if len(inputs) == 2 { // position_ids given
		pos := inputs[1]
		if p.Offset != 0 {
			pos = g.Node("Add", operands(pos, g.ScalarInt64(int64(p.Offset))))
		}
		table := g.Node("Gather", operands(g.Param("weight"), pos), registry.IntAttr("axis", 0))
		return g.Node("Add", operands(inputs[0], table)), nil
	}
	x, err := oneONNXInput(inputs)
	if err != nil {
		return "", err
	}
	pos := positionsONNX(g, x, 0)
	if p.Offset != 0 { // bound by the table of positions, not by its offset rows
		pos = positionsONNX(g, x, p.ContextLength)
		pos = g.Node("Add", operands(pos, g.ScalarInt64(int64(p.Offset))))
	}
	table := g.Node("Gather", operands(g.Param("weight"), pos), registry.IntAttr("axis", 0))
	return g.Node("Add", operands(x, table)), nil
}

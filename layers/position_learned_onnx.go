package layers

import "github.com/attnrun/attnrun/registry"

var _ registry.Exporter = (*LearnedPosition)(nil)

// ExportONNX writes x + weight[arange(T)] as PyTorch's exporter writes
// nn.Embedding on torch.arange: Gather on the (context_length, d) table
// with Range, which fails in ONNX Runtime beyond context_length.
func (p *LearnedPosition) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	if p.weight == nil {
		return "", errNotValidated
	}
	x, err := oneONNXInput(inputs)
	if err != nil {
		return "", err
	}
	pos := positionsONNX(g, x, 0)
	table := g.Node("Gather", operands(g.Param("weight"), pos), registry.IntAttr("axis", 0))
	return g.Node("Add", operands(x, table)), nil
}

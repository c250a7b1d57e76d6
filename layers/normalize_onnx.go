package layers

import "github.com/attnrun/attnrun/registry"

var _ registry.Exporter = (*Normalize)(nil)

// ExportONNX writes x / max(‖x‖₂, eps) as PyTorch's exporter writes
// F.normalize: ReduceL2 over the last axis, Max with eps (Clip's min in
// PyTorch's graph, the same values), Div.
func (n *Normalize) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	x, err := oneONNXInput(inputs)
	if err != nil {
		return "", err
	}
	norm := reduceLastONNX(g, "ReduceL2", x)
	norm = g.Node("Max", operands(norm, g.ScalarFloat(float32(n.Eps))))
	return g.Node("Div", operands(x, norm)), nil
}

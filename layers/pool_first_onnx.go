package layers

import "github.com/attnrun/attnrun/registry"

var _ registry.Exporter = (*FirstPool)(nil)

// ExportONNX writes hidden_states[:, 0] as PyTorch's exporter does: a
// Gather of index 0 (a scalar, which drops the axis) on axis 1.
func (p *FirstPool) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	if err := someONNXInputs(inputs); err != nil {
		return "", err
	}
	return g.Node("Gather", operands(inputs[0], g.ScalarInt64(0)), registry.IntAttr("axis", 1)), nil
}

package layers

import "github.com/attnrun/attnrun/registry"

var _ registry.Exporter = (*Add)(nil)

// ExportONNX writes a chain of Add nodes, summing the inputs in order as
// Forward does; a single input passes through.
func (a *Add) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	if err := someONNXInputs(inputs); err != nil {
		return "", err
	}
	sum := inputs[0]
	for _, x := range inputs[1:] {
		sum = g.Node("Add", operands(sum, x))
	}
	return sum, nil
}

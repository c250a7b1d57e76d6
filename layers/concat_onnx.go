package layers

import "github.com/attnrun/attnrun/registry"

var _ registry.Exporter = (*Concat)(nil)

// ExportONNX writes Concat along the last axis; a single input passes
// through.
func (c *Concat) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	if err := someONNXInputs(inputs); err != nil {
		return "", err
	}
	if len(inputs) == 1 {
		return inputs[0], nil
	}
	return g.Node("Concat", inputs, registry.IntAttr("axis", -1)), nil
}

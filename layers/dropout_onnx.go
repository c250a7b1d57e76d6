package layers

import "github.com/attnrun/attnrun/registry"

var _ registry.Exporter = (*Dropout)(nil)

// ExportONNX exports dropout as at inference, the identity: the layer's
// output is its input, and no node is written.
func (d *Dropout) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	return oneONNXInput(inputs)
}

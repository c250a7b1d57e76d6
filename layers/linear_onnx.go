package layers

import "github.com/attnrun/attnrun/registry"

var _ registry.Exporter = (*Linear)(nil)

// ExportONNX writes MatMul with the transposed (d_out, d_in) weight, then
// Add of the bias when there is one.
func (l *Linear) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	if l.weights == nil {
		return "", errNotValidated
	}
	x, err := oneONNXInput(inputs)
	if err != nil {
		return "", err
	}
	return linearONNX(g, l.weights, "", x), nil
}

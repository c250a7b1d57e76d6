package layers

import "github.com/attnrun/attnrun/registry"

var _ registry.Exporter = (*Self)(nil)

// ExportONNX writes the projections (MatMul on the transposed nn.Linear
// weights, or on the bare matrices), the scaled scores, the causal mask if
// any, Softmax and the product with the values.
func (s *Self) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	return s.head.exportSingleHead(g, inputs)
}

package layers

import "github.com/attnrun/attnrun/registry"

var _ registry.Exporter = (*Softcap)(nil)

// ExportONNX writes Div by cap, Tanh, Mul by cap, as PyTorch's exporters
// write Gemma's logit softcapping.
func (s *Softcap) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	x, err := oneONNXInput(inputs)
	if err != nil {
		return "", err
	}
	capped := g.ScalarFloat(float32(s.Cap))
	return g.Node("Mul", operands(g.Node("Tanh", operands(g.Node("Div", operands(x, capped)))), capped)), nil
}

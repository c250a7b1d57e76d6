package layers

import "github.com/attnrun/attnrun/registry"

var _ registry.Exporter = (*Scale)(nil)

// ExportONNX writes one Mul by the factor, or Div by the divisor.
func (s *Scale) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	x, err := oneONNXInput(inputs)
	if err != nil {
		return "", err
	}
	if s.Divisor != 0 {
		return g.Node("Div", operands(x, g.ScalarFloat(float32(s.Divisor)))), nil
	}
	return g.Node("Mul", operands(x, g.ScalarFloat(float32(s.Factor)))), nil
}

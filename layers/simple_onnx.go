package layers

import "github.com/attnrun/attnrun/registry"

var _ registry.Exporter = (*Simple)(nil)

// ExportONNX writes softmax(x xᵀ) x, scaled by 1/√d and masked as
// configured. The scale is a constant when the export knows d, and is
// computed from the input's shape otherwise.
func (s *Simple) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	x, err := oneONNXInput(inputs)
	if err != nil {
		return "", err
	}
	var scale string
	if s.Scaled {
		if d := g.Width(x); d > 0 {
			scale = scaleONNX(g, invSqrt(d))
		} else {
			scale = dynamicInvSqrtWidth(g, x)
		}
	}
	var mask string
	if s.Causal {
		mask = causalMaskONNX(g, x, 0)
	}
	return attendONNX(g, x, transposeLast2(g, x), x, scale, mask), nil
}

// dynamicInvSqrtWidth is 1/√d for the width d of x, computed in the graph.
func dynamicInvSqrtWidth(g registry.GraphBuilder, x string) string {
	shape := g.Node("Shape", operands(x))
	d := g.Node("Gather", operands(shape, g.ScalarInt64(2)), registry.IntAttr("axis", 0))
	d = g.Node("Cast", operands(d), registry.IntAttr("to", 1)) // FLOAT
	return g.Node("Reciprocal", operands(g.Node("Sqrt", operands(d))))
}

package layers

import "github.com/attnrun/attnrun/registry"

var _ registry.Exporter = (*MLP)(nil)

// ExportONNX writes fc2(act(fc1(x))), or down_proj(act(gate_proj(x)) ·
// up_proj(x)) for the gated form, each projection a MatMul by the
// transposed weight (and Add of the bias), the activation as
// activation.gelu writes the GELUs, Sigmoid·x for SiLU, Relu for ReLU.
func (m *MLP) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	if m.c == nil {
		return "", errNotValidated
	}
	x, err := oneONNXInput(inputs)
	if err != nil {
		return "", err
	}
	names, projs := m.c.names, m.c.projs
	hidden, err := activationONNX(g, m.Activation, linearONNX(g, projs[0], names[0], x))
	if err != nil {
		return "", err
	}
	if len(projs) == 3 {
		hidden = g.Node("Mul", operands(hidden, linearONNX(g, projs[1], names[1], x)))
	}
	last := len(projs) - 1
	return linearONNX(g, projs[last], names[last], hidden), nil
}

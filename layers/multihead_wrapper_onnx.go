package layers

import "github.com/attnrun/attnrun/registry"

var _ registry.Exporter = (*MultiHeadWrapper)(nil)

// ExportONNX writes every head on the input, sharing one causal mask, and
// concatenates their outputs along the last axis.
func (m *MultiHeadWrapper) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	if m.heads == nil {
		return "", errNotValidated
	}
	x, err := oneONNXInput(inputs)
	if err != nil {
		return "", err
	}
	mask := m.heads[0].maskONNX(g, x)
	outs := make([]string, len(m.heads))
	for i, h := range m.heads {
		if outs[i], err = h.exportONNX(g, headPrefix(i), x, mask); err != nil {
			return "", err
		}
	}
	if len(outs) == 1 {
		return outs[0], nil
	}
	return g.Node("Concat", outs, registry.IntAttr("axis", -1)), nil
}

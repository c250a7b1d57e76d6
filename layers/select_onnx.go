package layers

import "github.com/attnrun/attnrun/registry"

var _ registry.Exporter = (*Select)(nil)

// ExportONNX writes x[..., index] as a Gather of the scalar index on the
// last axis, which drops it.
func (s *Select) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	x, err := oneONNXInput(inputs)
	if err != nil {
		return "", err
	}
	return g.Node("Gather", operands(x, g.ScalarInt64(int64(s.Index))), registry.IntAttr("axis", -1)), nil
}

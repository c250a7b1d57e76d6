package layers

import (
	"github.com/attnrun/attnrun/registry"
)

var _ registry.Exporter = (*Transpose)(nil)

// ExportONNX writes a Transpose whose perm swaps the two axes of the
// rank-3 token stream export.Model passes (batch, sequence, features).
func (t *Transpose) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	x, err := oneONNXInput(inputs)
	if err != nil {
		return "", err
	}
	perm := []int64{0, 1, 2}
	perm[t.Dim0], perm[t.Dim1] = perm[t.Dim1], perm[t.Dim0]
	return g.Node("Transpose", operands(x), registry.IntsAttr("perm", perm...)), nil
}

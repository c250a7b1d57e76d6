package layers

import (
	"math"

	"github.com/attnrun/attnrun/registry"
)

var _ registry.Exporter = (*Average)(nil)

// ExportONNX writes the seeds' softmax trick: the weights are
// softmax(zeros(T, T) masked with -inf above the diagonal), row t holding
// 1/(t+1) for tokens ≤ t, and the output is their product with x.
func (a *Average) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	x, err := oneONNXInput(inputs)
	if err != nil {
		return "", err
	}
	mask := causalMaskONNX(g, x, 0)
	scores := g.Node("Where", operands(mask, g.ConstFloat([]float32{float32(math.Inf(-1))}), g.ConstFloat([]float32{0})))
	weights := g.Node("Softmax", operands(scores), registry.IntAttr("axis", -1))
	return g.Node("MatMul", operands(weights, x)), nil
}

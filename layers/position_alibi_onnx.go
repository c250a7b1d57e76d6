package layers

import (
	"math"

	"github.com/attnrun/attnrun/registry"
)

var _ registry.Exporter = (*ALiBi)(nil)

// ExportONNX writes the (H, T, T) bias of the input's T tokens:
// slope_h · (j − i) from a constant (H, 1, 1) of slopes and the key and
// query positions, with −Inf where causal hides key j from query i. Its
// value is a mask, for an attention layer's mask input, not a token stream.
func (a *ALiBi) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	if a.slopes == nil {
		return "", errNotValidated
	}
	x, err := oneONNXInput(inputs)
	if err != nil {
		return "", err
	}
	pos := g.Node("Range", operands(g.ScalarInt64(0), seqLenONNX(g, x), g.ScalarInt64(1)))
	bias := alibiONNX(g, a.slopes, pos, pos)
	if a.Causal {
		bias = g.Node("Where", operands(futureONNX(g, pos, pos), g.ConstFloat([]float32{float32(math.Inf(-1))}), bias))
	}
	return bias, nil
}

// alibiONNX is the (H, Tq, Tk) ALiBi bias slope_h · (key − query
// position) for int64 query and key positions.
func alibiONNX(g registry.GraphBuilder, slopes []float32, qPos, kPos string) string {
	dist := g.Node("Sub", operands(
		g.Node("Unsqueeze", operands(kPos, g.ConstInt64([]int64{0}))),  // (1, Tk)
		g.Node("Unsqueeze", operands(qPos, g.ConstInt64([]int64{1})))), // (Tq, 1)
	)
	dist = g.Node("Cast", operands(dist), registry.IntAttr("to", onnxFloat))
	return g.Node("Mul", operands(g.ConstFloat(slopes, int64(len(slopes)), 1, 1), dist))
}

// futureONNX is the (Tq, Tk) bool mask of the keys after each query: key
// position above query position, for int64 positions.
func futureONNX(g registry.GraphBuilder, qPos, kPos string) string {
	return g.Node("Greater", operands(
		g.Node("Unsqueeze", operands(kPos, g.ConstInt64([]int64{0}))),
		g.Node("Unsqueeze", operands(qPos, g.ConstInt64([]int64{1})))))
}

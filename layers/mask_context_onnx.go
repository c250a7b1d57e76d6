package layers

import (
	"fmt"

	"github.com/attnrun/attnrun/registry"
)

var (
	_ registry.Exporter  = (*ContextMask)(nil)
	_ registry.InputDims = (*ContextMask)(nil)
)

// ONNXInputDims reports the mask, the second input, as (batch, heads,
// rows, columns): export.Model declares a float32 model input of rank 4
// read by the layer.
func (c *ContextMask) ONNXInputDims(int) map[int][]string {
	return map[int][]string{1: {"batch", "heads", "rows", "columns"}}
}

// ExportONNX writes Forward: the mask sliced to its first T rows and
// columns, T the tokens' sequence axis, compared with 0 (Not of Equal)
// and Cast to float.
func (c *ContextMask) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	if len(inputs) != 2 {
		return "", fmt.Errorf("takes 2 inputs, the tokens and the mask, got %d", len(inputs))
	}
	// T is the tokens' next-to-last axis: (B, T, d) and (T, d) alike.
	t := g.Node("Slice", operands(g.Node("Shape", operands(inputs[0])), g.ConstInt64([]int64{-2}), g.ConstInt64([]int64{-1})))
	ends := g.Node("Concat", operands(t, t), registry.IntAttr("axis", 0))
	block := g.Node("Slice", operands(inputs[1], g.ConstInt64([]int64{0, 0}), ends, g.ConstInt64([]int64{2, 3})))
	keep := g.Node("Not", operands(g.Node("Equal", operands(block, g.ScalarFloat(0)))))
	return g.Node("Cast", operands(keep), registry.IntAttr("to", 1)), nil
}

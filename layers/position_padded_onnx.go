package layers

import "github.com/attnrun/attnrun/registry"

var _ registry.Exporter = (*PaddedPosition)(nil)

// ExportONNX writes the positions as PyTorch's exporters write
// create_position_ids_from_input_ids, then the lookup:
// mask = Cast(Not(Equal(ids, pad))), positions = CumSum(mask)·mask + pad
// over the last axis, Gather on the table; with input: attention_mask,
// the mask is where it is not 0.
func (p *PaddedPosition) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	if p.weight == nil {
		return "", errNotValidated
	}
	ids, err := oneONNXInput(inputs)
	if err != nil {
		return "", err
	}
	pad := g.ScalarInt64(int64(p.PaddingIdx))
	var mask string
	if p.fromMask() { // 1 for a token, as OPT's attention_mask
		mask = g.Node("Cast", operands(g.Node("Not", operands(g.Node("Equal", operands(ids, g.ScalarInt64(0)))))), registry.IntAttr("to", 7))
	} else {
		mask = g.Node("Cast", operands(g.Node("Not", operands(g.Node("Equal", operands(ids, pad))))), registry.IntAttr("to", 7))
	}
	counts := g.Node("CumSum", operands(mask, g.ScalarInt64(-1)))
	positions := g.Node("Add", operands(g.Node("Mul", operands(counts, mask)), pad))
	return g.Node("Gather", operands(g.Param("weight"), positions), registry.IntAttr("axis", 0)), nil
}

package lift

// Reshapes that regroup tokens. Hugging Face's GPT-2 applies its Conv1D
// layers to x.view(-1, x.size(-1)), a (B·T, d) matrix, and views the
// result back as (B, T, d'); its input_ids go through view(-1, T). Such a
// Reshape keeps the last axis and the order of the elements: it only
// regroups the rows, which the token-wise layers around it (Linear, MLP,
// activations) do not see. The lifter reads it as a copy of its input,
// as Identity; the lifted model is checked against the graph, which
// catches a regrouping that something between the two Reshapes did see.

// regroupsRows reports whether n is a Reshape of a value computed from the
// graph inputs to a static shape that keeps its last axis at every probe:
// (B, T, d) to (B·T, d) or back, or to its own shape.
func (a *analysis) regroupsRows(n *node) bool {
	ins := n.GetInput()
	if n.GetOpType() != "Reshape" || len(ins) != 2 || !a.g.IsData(ins[0]) || !a.g.Static(ins[1]) {
		return false
	}
	for _, p := range a.probes {
		in, err1 := p.shape(ins[0])
		out, err2 := p.shape(n.GetOutput()[0])
		if err1 != nil || err2 != nil || len(in) == 0 || len(out) == 0 || product(in) != product(out) || in[len(in)-1] != out[len(out)-1] {
			return false
		}
		if len(in) == len(out) && !equalShapes(in, out) {
			return false
		}
	}
	return true
}

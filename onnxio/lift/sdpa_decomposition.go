package lift

// PyTorch 2.x's decomposition of scaled_dot_product_attention with a bool
// mask (the TorchScript exporter and dynamo before opset 23, and so
// Hugging Face's sdpa attention) turns the mask into one added to the
// scores and gives zero weights to queries that see no key:
//
//	s = s + Where(mask, 0, −Inf);  w = Softmax(s);  w = Where(IsNaN(w), 0, w)
//
// The recognizer reads the last pair as a step of the weights' way to the
// values (the attention layers give such queries zeros by default), and
// the bool mask, not the Where of each layer, as the keep mask the layers
// share.

// nanZeroing reports whether the weights v are read only by IsNaN(v) and
// Where(IsNaN(v), 0, v), and returns those two nodes.
func (a *analysis) nanZeroing(v string) (isNaN, where *node, ok bool) {
	rs := a.readers(v)
	if len(rs) != 2 || a.g.IsOutput(v) {
		return nil, nil, false
	}
	isNaN, where = rs[0], rs[1]
	if isNaN.GetOpType() != "IsNaN" {
		isNaN, where = where, isNaN
	}
	if isNaN.GetOpType() != "IsNaN" || where.GetOpType() != "Where" || a.g.IsOutput(isNaN.GetOutput()[0]) {
		return nil, nil, false
	}
	ins := where.GetInput()
	if len(ins) != 3 || ins[0] != isNaN.GetOutput()[0] || ins[2] != v || !a.g.Static(ins[1]) {
		return nil, nil, false
	}
	zero, isScalar := a.probes[0].scalar(ins[1])
	return isNaN, where, isScalar && zero == 0
}

// keepMaskValue is the value an attention reads as its keep mask, given
// the value added to its scores: the bool mask of Where(mask, 0, fill)
// when a node computes it and the Where is this attention's own (the
// TorchScript exporter writes one per layer; dynamo shares one), else the
// added value itself.
func (a *analysis) keepMaskValue(added string) string {
	n := a.g.Producer(added)
	if n == nil || n.GetOpType() != "Where" || len(n.GetInput()) != 3 || len(a.readers(added)) != 1 || a.g.IsOutput(added) {
		return added
	}
	ins := n.GetInput()
	zero, ok := a.probes[0].scalar(ins[1])
	if !ok || zero != 0 || !a.g.Static(ins[1]) || !a.g.Static(ins[2]) || !a.isMaskFill(ins[2]) ||
		!a.g.IsData(ins[0]) || a.g.Producer(ins[0]) == nil {
		return added
	}
	return ins[0]
}

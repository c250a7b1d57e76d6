package lift

// ropeOnHeads extends the traced layout of a 4-D Attention operand through
// a RotaryEmbedding applied to the heads before they were laid out for the
// op (the dynamo exporter's Llama: RoPE on (B, KV heads, T, head_dim),
// then repeat_kv's Unsqueeze, Expand and Reshape): the rotation moves no
// element to another head or token, so for the layout it is the identity,
// and the trace goes on from its input. It records the node as the
// operand's rope and returns it, or nil when the traced base is not
// rotated so.
func (l *opLayer) ropeOnHeads(op *opOperand, rotates bool) *node {
	a := l.a
	pn := a.g.Producer(op.heads.base)
	if !rotates || op.rope != nil || pn == nil || pn.GetOpType() != "RotaryEmbedding" || !a.g.IsData(op.heads.base) {
		return nil
	}
	before := a.traceBack(pn.GetInput()[0], false)
	op.rope = pn
	l.nodes = append(l.nodes, pn)
	l.nodes = append(l.nodes, before.nodes...)
	op.heads.nodes = append(append(before.nodes, pn), op.heads.nodes...)
	op.heads.scales = append(op.heads.scales, pn) // traced as Identity on its data input
	op.heads.base = before.base
	return pn
}

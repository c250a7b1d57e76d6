package lift

import (
	"math"

	"github.com/attnrun/attnrun/onnxio/match"
)

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

// normOnHeads extends the traced layout of a 4-D Attention operand through
// a per-head RMSNorm before it (Qwen3's q_norm and k_norm on (B, T, heads,
// head_dim), then the transpose and RoPE): the norm moves no element either,
// so its nodes are traced as Identity on their data inputs, and the trace
// goes on from its input. It returns the norm, or nil.
func (l *opLayer) normOnHeads(op *opOperand, rotates bool) *headNorm {
	a := l.a
	if !rotates || op.norm != nil || a.g.Producer(op.heads.base) == nil {
		return nil
	}
	for _, n := range a.g.Nodes {
		var r *match.RMSNorm
		switch n.GetOpType() {
		case "Pow":
			r, _ = match.MatchRMSNorm(patternGraph{a: a}, match.NewNode(n))
		case "RMSNormalization":
			r = l.rmsNormOp(n)
		}
		if r == nil || r.Output != op.heads.base {
			continue
		}
		before := a.traceBack(r.Input, false)
		norm := unwrap(r.Nodes)
		l.nodes = append(append(l.nodes, norm...), before.nodes...)
		op.heads.nodes = append(append(before.nodes, norm...), op.heads.nodes...)
		op.heads.scales = append(op.heads.scales, norm...)
		op.heads.base = before.base
		shape := mustShape(a.probes[0], r.Input)
		return &headNorm{source: before.base, width: shape[len(shape)-1], norm: r}
	}
	return nil
}

// rmsNormOp reads ONNX's RMSNormalization op over the last axis with a
// static scale as a match.RMSNorm, or nil.
func (l *opLayer) rmsNormOp(n *node) *match.RMSNorm {
	a := l.a
	ins := n.GetInput()
	if len(ins) < 2 || !a.g.IsData(ins[0]) || a.g.IsData(ins[1]) {
		return nil
	}
	shape, err := a.probes[0].shape(ins[0])
	if err != nil || len(shape) == 0 {
		return nil
	}
	if axis := n.Int("axis", -1); axis != -1 && axis != int64(len(shape)-1) {
		return nil
	}
	width := shape[len(shape)-1]
	t, err := a.probes[0].value(ins[1])
	if err != nil || t.Shape().TotalSize() != width {
		return nil
	}
	w, err := match.Float32(t)
	if err != nil || w.Reshape(width) != nil {
		return nil
	}
	eps := n.Float("epsilon", 1e-5)
	if math.IsNaN(float64(eps)) {
		return nil
	}
	return &match.RMSNorm{Input: ins[0], Output: n.GetOutput()[0], Width: width, Eps: eps, Weight: w, WeightFrom: ins[1],
		Nodes: []*match.Node{match.NewNode(n)}}
}

package lift

import (
	"fmt"
	"slices"

	"gorgonia.org/tensor"

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
	if !rotates || op.rope != nil || pn == nil || !a.g.IsData(op.heads.base) {
		return nil
	}
	rotated, joins := pn.GetInput()[0], []*node{pn}
	switch pn.GetOpType() {
	case "RotaryEmbedding":
	case "Concat":
		rn, whole, dim, parts := l.partialRope(pn)
		if rn == nil {
			return nil
		}
		pn, rotated, op.ropeDim, joins = rn, whole, dim, append(parts, rn)
	default:
		return nil
	}
	before := a.traceBack(rotated, false)
	op.rope = pn
	l.nodes = append(l.nodes, joins...)
	l.nodes = append(l.nodes, before.nodes...)
	op.heads.nodes = append(append(before.nodes, joins...), op.heads.nodes...)
	op.heads.scales = append(op.heads.scales, pn) // traced as Identity on its data input
	op.heads.base = before.base
	return pn
}

// partialRope reads a rotation of the first features of each head (Hugging
// Face's partial_rotary_factor through the dynamo exporter at opset 23:
// Concat(RotaryEmbedding(x[…, :dim]), x[…, dim:]) on the last axis). It
// returns the RotaryEmbedding, the heads x, the rotated features and the
// Concat and Slices, or a nil node when cat is not such a join.
func (l *opLayer) partialRope(cat *node) (*node, string, int, []*node) {
	g := patternGraph{a: l.a}
	ins := cat.GetInput()
	if len(ins) != 2 || !g.lastAxis(cat.GetOutput()[0], int(cat.Int("axis", 0))) {
		return nil, "", 0, nil
	}
	rn, rest := l.a.g.Producer(ins[0]), l.a.g.Producer(ins[1])
	if rn == nil || rest == nil || rn.GetOpType() != "RotaryEmbedding" || rest.GetOpType() != "Slice" {
		return nil, "", 0, nil
	}
	head := l.a.g.Producer(rn.GetInput()[0])
	if head == nil || head.GetOpType() != "Slice" || head.GetInput()[0] != rest.GetInput()[0] {
		return nil, "", 0, nil
	}
	lo, dim, ok1 := g.sliceFeatures(head)
	from, to, ok2 := g.sliceFeatures(rest)
	shape, err := l.a.probes[0].shape(rest.GetInput()[0])
	if !ok1 || !ok2 || err != nil || lo != 0 || from != dim || to != shape[len(shape)-1] || dim%2 != 0 {
		return nil, "", 0, nil
	}
	if d := int(rn.Int("rotary_embedding_dim", 0)); d != 0 && d != dim {
		return nil, "", 0, nil
	}
	return rn, rest.GetInput()[0], dim, []*node{cat, head, rest}
}

// ropeOutOfOps extends the traced layout of a 4-D Attention operand through
// RoPE written out of standard ops that a registered reader finds
// (match.Unrotated: Hugging Face's rotate_half, Cohere's interleaved
// pairs, which the dynamo exporter at opset 23 leaves unfused): for the
// layout the rotation is the identity of the heads it rotates, so its last
// node is traced as Identity on them and the trace goes on from there. It
// records the rotation as the operand's; an error says why a rotation
// cannot be lifted.
func (l *opLayer) ropeOutOfOps(op *opOperand, rotates bool) error {
	a := l.a
	if !rotates || op.rope != nil || op.written != nil || !a.g.IsData(op.heads.base) || a.g.Producer(op.heads.base) == nil {
		return nil
	}
	r, err := match.Unrotated(patternGraph{a: a}, op.heads.base)
	if r == nil || err != nil {
		return err
	}
	rotation, err := a.between([]string{r.Heads}, op.heads.base)
	if err != nil {
		return fmt.Errorf("the rotation of %q: %w", op.heads.base, err)
	}
	before := a.traceBack(r.Heads, false)
	l.nodes = append(append(l.nodes, rotation...), before.nodes...)
	op.heads.nodes = slices.Concat(before.nodes, rotation, op.heads.nodes)
	if op.heads.as == nil {
		op.heads.as = map[*node]string{}
	}
	op.heads.as[a.g.Producer(op.heads.base)] = r.Heads
	op.heads.base = before.base
	op.written = &r.Rope
	return nil
}

// normOnHeads extends the traced layout of a 4-D Attention operand through
// an RMSNorm before it (Qwen3's q_norm and k_norm on (B, T, heads,
// head_dim), then the transpose and RoPE; OLMo-2's over the whole (B, T,
// heads·head_dim) projection before the split; the layer reads which from
// the norm's width): the norm moves no element either,
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
		return &headNorm{source: before.base, norm: r}
	}
	return nil
}

// rmsNormOp reads ONNX's RMSNormalization op over the last axis with a
// static scale as a match.RMSNorm, or nil.
func (l *opLayer) rmsNormOp(n *node) *match.RMSNorm {
	r, _ := match.MatchRMSNormalization(patternGraph{a: l.a}, match.NewNode(n))
	return r
}

// tokensBefore finds the tokens a projection reads and the layout between
// them: GPT-2's Conv1D is a Gemm on the tokens flattened to (B·T, d), so
// the tokens are (B, T, d) a Reshape before it; a projection of the
// tokens themselves reads them with no layout between.
func (l *opLayer) tokensBefore(lin *linear) (string, chain) {
	pre := l.a.traceBack(lin.in, false)
	direct := chain{value: lin.in, base: lin.in, scale: 1}
	if pre.base == lin.in || len(pre.nodes) == 0 {
		return lin.in, direct
	}
	shape, err := l.a.probes[0].shape(pre.base)
	in, err2 := l.a.probes[0].shape(lin.in)
	if err != nil || err2 != nil || len(shape) != 3 || len(in) != 2 || shape[0]*shape[1] != in[0] || shape[2] != in[1] {
		return lin.in, direct
	}
	l.nodes = append(l.nodes, pre.nodes...)
	return pre.base, pre
}

// headParams lists the columns of heads of d features where seg says as a
// projection's weight and bias, head after head: segmentParams when the
// heads lie side by side (stride d, or 0 for 3-D operands, which no
// layout traced), else a piece of the Linear for each head.
func (l *linear) headParams(prefix string, seg segment, heads, d int) []param {
	if seg.stride == 0 || seg.stride == d || heads == 1 {
		return l.segmentParams(prefix, seg.lo, heads*d)
	}
	w := l.weight.Float32s()
	in := len(w) / l.dOut
	var weight, bias []float32
	var wPieces, bPieces []piece
	for h := range heads {
		lo := seg.lo + h*seg.stride
		weight = append(weight, w[lo*in:(lo+d)*in]...)
		wPieces = append(wPieces, l.weightPiece(lo, lo+d, false))
		if l.bias != nil {
			bias = append(bias, l.bias.Float32s()[lo:lo+d]...)
			bPieces = append(bPieces, l.biasPiece(lo, lo+d, false))
		}
	}
	ps := []param{{name: prefix + "weight", value: tensor.New(tensor.WithShape(heads*d, in), tensor.WithBacking(weight)), pieces: wPieces}}
	if l.bias != nil {
		ps = append(ps, param{name: prefix + "bias", value: tensor.New(tensor.WithShape(heads*d), tensor.WithBacking(bias)), pieces: bPieces})
	}
	return ps
}

// segmentParams lists columns lo … lo+width−1 of the Linear (rows of
// nn.Linear's weight) as a projection's weight and bias: the whole Linear
// when they are all of it, else a split of it (GPT-2's fused c_attn).
func (l *linear) segmentParams(prefix string, lo, width int) []param {
	if lo == 0 && width == l.dOut {
		return l.params(prefix)
	}
	w := l.weight.Float32s()
	in := len(w) / l.dOut
	ps := []param{{name: prefix + "weight", value: tensor.New(tensor.WithShape(width, in), tensor.WithBacking(slices.Clone(w[lo*in:(lo+width)*in]))),
		pieces: []piece{l.weightPiece(lo, lo+width, false)}}}
	if l.bias != nil {
		b := l.bias.Float32s()
		ps = append(ps, param{name: prefix + "bias", value: tensor.New(tensor.WithShape(width), tensor.WithBacking(slices.Clone(b[lo:lo+width]))),
			pieces: []piece{l.biasPiece(lo, lo+width, false)}})
	}
	return ps
}

// unflatten moves the output of a projection of flattened tokens, (B·T, D)
// (GPT-2's Conv1D as a Gemm), to the Reshape back to (B, T, D) that
// follows it, so that the layer gives what attention.sdpa gives.
func (l *opLayer) unflatten(out *linear) {
	a := l.a
	flat, err := a.probes[0].shape(out.out)
	if err != nil || len(flat) != 2 {
		return
	}
	post := a.traceForward(out.out)
	shape, err := a.probes[0].shape(post.value)
	if err != nil || len(shape) != 3 || shape[0]*shape[1] != flat[0] || shape[2] != flat[1] {
		return
	}
	l.nodes = append(l.nodes, post.nodes...)
	out.out = post.value
}

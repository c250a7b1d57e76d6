package lift

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/attnrun/attnrun/onnxio/match"
)

// ONNX's Attention op (opsets 23 to 25) computes softmax(mask(softcap(scale
// Q Kᵀ))) V itself, heads and grouped-query attention included. Lifting it
// is reading its attributes and finding the projections around it:
//
//	x ─ Linear ─ [RotaryEmbedding] ─┐
//	m ─ Linear ─ [RotaryEmbedding] ─ Attention ─ [merge heads] ─ Linear ─ y
//	m ─ Linear ─────────────────────┘     │
//	                        attn_mask ────┘ (from nothing, or one input)
//
// Q, K and V are 3-D (B, T, heads·head_dim) with the q_num_heads and
// kv_num_heads attributes, or 4-D (B, heads, T, head_dim) split from the
// projections by any layout of Reshape and Transpose (traced as the Softmax
// path traces them). RotaryEmbedding (opset 23) on Q and K becomes
// attention.sdpa's rope, its base read from the cos and sin caches. An
// RMSNorm over each head of 3-D Q and K between the projection and RoPE
// (reshaped to (…, heads, head_dim) and back) becomes qk_norm: rms, with
// q_norm.weight and k_norm.weight (Qwen3's q_norm and k_norm). The
// mask is read by evaluating it: its part that depends on no input must be
// a causal frontier (bottom-right or top-left), a sliding window and ALiBi;
// its part computed from one graph input must be that input read as a bool
// mask of either polarity, or added to the scores, broadcast from the
// right as attention.sdpa broadcasts its mask input. Opset 25's sliding
// window attributes become attention.sdpa's causal frontier and window
// (see opWindow).

// windowProbe is the sequence length the static part of a mask is read at,
// so that a sliding window up to windowProbe−1 keys shows in it (the
// probes of the whole graph are 2 and 3 tokens long).
const windowProbe = 40

// opLayer is one Attention node being lifted.
type opLayer struct {
	a     *analysis
	n     *node
	nodes []*node // every data node the layer replaces
	notes []string
	// segments are the first columns of Q, K and V in their projections
	// (4-D operands; a fused projection gives them other columns than 0).
	segments [3]int
}

// opOperand is Q, K or V: a projection of tokens, perhaps rotated, perhaps
// split into heads.
type opOperand struct {
	lin     *linear
	tokens  string
	rope    *node       // RotaryEmbedding applied to it, or nil
	written *match.Rope // RoPE written out of standard ops applied to it (match.Unrotated), or nil
	heads   chain       // 4-D: the layout from the projection to the operand
	norm    *headNorm   // qk_norm's RMSNorm of each head, or nil
	pre     chain       // the layout from the tokens to the projection's input
}

// attentionOp lifts one Attention node with the projections around it to
// the layer type registered for the op (match.RegisterOpLayer), which
// writes its config from what build read (match.AttentionOp).
func (a *analysis) attentionOp(n *node) (*region, *failure) {
	typ := match.OpLayer("Attention")
	if typ == "" || !registered(typ) {
		return nil, fail([]*node{n}, "attention (Attention op): no layer type that takes ONNX's Attention op is registered in this build")
	}
	l := &opLayer{a: a, n: n, nodes: []*node{n}}
	r, err := l.build()
	if r != nil {
		r.typ = typ
	}
	if err != nil {
		return nil, fail(l.nodes, "attention (Attention op): %v", err)
	}
	for _, pad := range r.before { // the keep mask's layer, which the other attentions share
		l.nodes = slices.DeleteFunc(l.nodes, func(n *node) bool { return slices.Contains(pad.nodes, n) })
	}
	r.nodes = uniqueNodes(l.nodes)
	r.notes = l.notes
	if f := a.checkContained(r); f != nil {
		return nil, f
	}
	return r, nil
}

// keepMaskRegion is the layer registered by match.RegisterKeepMaskLayer
// computing the attention's mask from the (B, S) keep mask input, in
// place of the nodes that compute the graph's masks from it: the key
// padding part of every Attention node's mask read from that input, the
// rest being each attention's causal frontier and window (Gemma 3 builds a
// sliding-window mask and a causal one from the same attention_mask). Its
// output is named for the input; the Attention nodes alone read what the
// nodes compute.
func (l *opLayer) keepMaskRegion(input string) (*region, error) {
	typ := match.KeepMaskLayer()
	if typ == "" || !registered(typ) {
		return nil, fmt.Errorf("the mask reads the keep mask %q and no layer for it is registered in this build (match.RegisterKeepMaskLayer)", input)
	}
	a := l.a
	var nodes []*node
	masks := map[string]bool{}
	for _, n := range a.g.Nodes {
		if ins := n.GetInput(); n.GetOpType() == "Attention" && len(ins) > 3 && ins[3] != "" && slices.Equal(a.g.DependsOnInputs(ins[3]), []string{input}) {
			nodes = append(nodes, a.maskNodes(ins[3])...)
			masks[ins[3]] = true
		}
	}
	nodes = uniqueNodes(nodes)
	for _, n := range nodes {
		for _, out := range n.GetOutput() {
			for _, c := range a.readers(out) {
				if !slices.Contains(nodes, c) && !(masks[out] && c.GetOpType() == "Attention" && slices.Index(c.GetInput(), out) == 3) {
					return nil, fmt.Errorf("the mask's value %q, computed from the keep mask %q, is also read by node %s (%s)", out, input, c.Label(), c.GetOpType())
				}
			}
		}
	}
	if a.keepMasks == nil {
		a.keepMasks = map[string]bool{}
	}
	a.keepMasks[input] = true
	return &region{typ: typ, kind: "mask", inputs: []string{input}, output: input + "::keep", nodes: nodes}, nil
}

func (l *opLayer) build() (*region, error) {
	a, n := l.a, l.n
	ins := n.GetInput()
	for i, what := range []string{4: "past_key", 5: "past_value", 6: "nonpad_kv_seqlen"} {
		if what != "" && len(ins) > i && ins[i] != "" {
			return nil, fmt.Errorf("it reads %s: attention.sdpa keeps its KV cache outside the graph (Step)", what)
		}
	}
	for i, o := range n.GetOutput() {
		if i > 0 && o != "" && (len(a.readers(o)) > 0 || a.g.IsOutput(o)) {
			return nil, fmt.Errorf("its output %d (%s) is used; attention.sdpa returns only Y", i, []string{"Y", "present_key", "present_value", "qk_matmul_output"}[i])
		}
	}
	p := a.probes[0]
	qShape, err := p.shape(ins[0])
	if err != nil {
		return nil, err
	}
	rank4 := len(qShape) == 4
	if !rank4 && len(qShape) != 3 {
		return nil, fmt.Errorf("input Q has shape %s, want 3-D or 4-D", fmtShape(qShape))
	}

	var ops [3]opOperand
	for i, what := range []string{"Q", "K", "V"} {
		if ops[i], err = l.operand(ins[i], what, rank4, i < 2); err != nil {
			return nil, err
		}
	}
	q, k, v := ops[0], ops[1], ops[2]
	if k.tokens != v.tokens {
		return nil, fmt.Errorf("keys come from %q but values from %q", k.tokens, v.tokens)
	}
	cross := q.tokens != k.tokens
	heads, kvHeads, headDim, err := l.heads(ops, rank4)
	if err != nil {
		return nil, err
	}
	withBias := q.lin.bias != nil
	if (k.lin.bias != nil) != withBias || (v.lin.bias != nil) != withBias {
		return nil, errors.New("some of the query, key and value projections have a bias and some do not")
	}

	out, err := l.outProjection(heads, headDim, rank4)
	if err != nil {
		return nil, err
	}
	tokQ, err := a.tokensOf(p, q.tokens)
	if err != nil {
		return nil, err
	}
	tokK, err := a.tokensOf(p, k.tokens)
	if err != nil {
		return nil, err
	}
	if out.dOut != tokQ.D {
		return nil, fmt.Errorf("the output projection gives %d features, the queries' tokens have %d; attention.sdpa's output has the width of x", out.dOut, tokQ.D)
	}

	isCausal := n.Int("is_causal", 0) == 1
	w, err := l.opWindow(isCausal)
	if err != nil {
		return nil, err
	}
	isCausal = isCausal || w.causal
	var m opMask
	if len(ins) > 3 && ins[3] != "" {
		if m, err = l.mask(ins[3], heads, isCausal, cross, []string{q.tokens, k.tokens}); err != nil {
			return nil, err
		}
	}
	if isCausal && m.causal {
		m.causal = false // the mask repeats the op's own frontier
	}
	if isCausal && m.centred {
		return nil, errors.New("the mask is a window centred on the query and the op causal: attention.sdpa's window looks back with causal")
	}
	if w.keys > 0 {
		if m.centred {
			return nil, fmt.Errorf("left_window_size %d and a mask centred on the query: attention.sdpa has one window", w.keys-1)
		}
		if !isCausal && !(m.causal && (!cross || m.topLeft)) {
			return nil, fmt.Errorf("left_window_size %d without a causal frontier aligned as the op aligns its window (top-left): attention.sdpa's window needs causal in the same alignment", w.keys-1)
		}
		if m.window == 0 || w.keys < m.window {
			m.window = w.keys // the op's window and the mask's: the narrower
		}
	}

	op := &match.AttentionOp{Width: tokQ.D, KeyWidth: tokK.D, Cross: cross, Heads: heads, KVHeads: kvHeads, HeadDim: headDim,
		OutSources: a.g.StaticSources(out.weightValue), Window: m.window, Softcap: n.Float("softcap", 0), ALiBi: m.alibi,
		QNorm: q.norm.rms(), KNorm: k.norm.rms()}
	op.Q = publicParams(q.lin.segmentParams("", l.segments[0], heads*headDim)) // attention_op_rope.go
	op.K = publicParams(k.lin.segmentParams("", l.segments[1], kvHeads*headDim))
	op.V = publicParams(v.lin.segmentParams("", l.segments[2], kvHeads*headDim))
	op.Out = publicParams(out.params(""))
	switch {
	case isCausal:
		op.Causal, op.TopLeft = true, cross // ONNX's is_causal is aligned top-left
	case m.causal:
		op.Causal, op.TopLeft = true, m.topLeft
	}
	if at := n.Attr("scale"); at != nil {
		op.Scale = at.GetF()
	}
	if m.input != "" {
		op.Mask = m.kind
	}
	if q.rope == nil && k.rope != nil {
		return nil, errors.New("the keys are rotated by RotaryEmbedding but not the queries")
	}
	if (q.written == nil) != (k.written == nil) || q.written != nil && *q.written != *k.written {
		return nil, errors.New("the queries and keys are not rotated alike; attention.sdpa's rope rotates both")
	}
	if q.written != nil {
		if q.rope != nil {
			return nil, errors.New("the queries are rotated twice, by RotaryEmbedding and by standard ops")
		}
		op.Rope = q.written
	}
	if q.rope != nil {
		if op.Rope, err = l.rope(q.rope, k.rope, heads, kvHeads, headDim, rank4); err != nil {
			return nil, err
		}
	}
	layer, err := match.BuildOpLayer("Attention", op)
	if err != nil {
		return nil, err
	}
	if layer == nil {
		return nil, errors.New("the layer type that takes ONNX's Attention op declines it")
	}
	l.notes = append(l.notes, layer.Notes...)

	r := &region{kind: "attention", output: out.out, inputs: []string{q.tokens}}
	if cross {
		r.inputs = append(r.inputs, k.tokens)
	}
	if m.padding {
		pad, err := l.keepMaskRegion(m.input)
		if err != nil {
			return nil, err
		}
		r.inputs = append(r.inputs, pad.output)
		r.before = []*region{pad}
	} else if m.input != "" {
		r.inputs = append(r.inputs, m.input)
	}
	if r.fields, err = fieldsOf(layer); err != nil {
		return nil, err
	}
	if r.params, err = a.paramsOf(layer); err != nil {
		return nil, err
	}
	return r, nil
}

// headNorm is an RMSNorm over each head of a 3-D projection, between the
// projection and RotaryEmbedding: the projection reshaped to (…, heads,
// head_dim), normalized over the last axis, reshaped back.
type headNorm struct {
	source string // the projection it normalizes
	norm   *match.RMSNorm
}

// headNorm recognizes the per-head RMSNorm that computes v: layout nodes
// back to the RMSNorm's output, the RMSNorm (match.RMSNorm), and layout
// nodes from its input back to their source. It returns nil when v is not
// computed that way.
func (l *opLayer) headNorm(v string) *headNorm {
	a := l.a
	after := a.traceBack(v, false)
	if len(after.nodes) == 0 || a.g.Producer(after.base) == nil {
		return nil
	}
	for _, n := range a.g.Nodes {
		if n.GetOpType() != "Pow" {
			continue
		}
		r, err := match.MatchRMSNorm(patternGraph{a: a}, match.NewNode(n))
		if err != nil || r == nil || r.Output != after.base {
			continue
		}
		before := a.traceBack(r.Input, false)
		if len(before.nodes) == 0 {
			return nil
		}
		l.nodes = append(l.nodes, after.nodes...)
		l.nodes = append(l.nodes, unwrap(r.Nodes)...)
		l.nodes = append(l.nodes, before.nodes...)
		return &headNorm{source: before.base, norm: r}
	}
	return nil
}

// rms is the RMSNorm, nil for none.
func (h *headNorm) rms() *match.RMSNorm {
	if h == nil {
		return nil
	}
	return h.norm
}

// opWindow is what an Attention node's left_window_size and
// right_window_size (opset 25) say in attention.sdpa's terms.
type opWindow struct {
	// causal: right_window_size 0 hides the keys after each query, as
	// is_causal does (aligned top-left, the op's alignment).
	causal bool
	// keys > 0: a query sees at most keys keys back, itself included
	// (left_window_size + 1).
	keys int
}

// opWindow reads the window attributes. attention.sdpa has no window that
// looks ahead: a positive right_window_size is refused unless is_causal
// bounds the right side anyway.
func (l *opLayer) opWindow(isCausal bool) (opWindow, error) {
	var w opWindow
	left, right := l.n.Int("left_window_size", -1), l.n.Int("right_window_size", -1)
	if right > 0 && !isCausal {
		return w, fmt.Errorf("right_window_size %d lets queries see keys ahead of them: attention.sdpa's window looks back only", right)
	}
	w.causal = right == 0
	if left >= 0 {
		w.keys = int(min(left, math.MaxInt32)) + 1
	}
	return w, nil
}

// operand finds what Q, K or V is computed from: a Linear of tokens, maybe
// rotated by RotaryEmbedding (Q and K), maybe split into heads (4-D).
func (l *opLayer) operand(v, what string, rank4, rotates bool) (opOperand, error) {
	a := l.a
	var op opOperand
	if pn := a.g.Producer(v); pn != nil && pn.GetOpType() == "RotaryEmbedding" && a.g.IsData(v) {
		if !rotates {
			return op, fmt.Errorf("input V is rotated by RotaryEmbedding %s; RoPE rotates queries and keys", pn.Label())
		}
		op.rope = pn
		l.nodes = append(l.nodes, pn)
		v = pn.GetInput()[0]
	}
	base := v
	if rank4 {
		op.heads = a.traceBack(v, false)
		l.nodes = append(l.nodes, op.heads.nodes...)
		base = op.heads.base
		if rope := l.ropeOnHeads(&op, rotates); rope != nil { // attention_op_rope.go
			base = op.heads.base
		}
		if err := l.ropeOutOfOps(&op, rotates); err != nil { // attention_op_rope.go
			return op, err
		} else if op.written != nil {
			base = op.heads.base
		}
		if op.norm = l.normOnHeads(&op, rotates); op.norm != nil {
			base = op.heads.base
		}
	}
	op.lin = a.matchLinear(base)
	if op.lin == nil && rotates && !rank4 {
		if op.norm = l.headNorm(base); op.norm != nil {
			op.lin = a.matchLinear(op.norm.source)
		}
	}
	if op.lin == nil {
		return op, fmt.Errorf("%s is not a linear projection of tokens (it comes from %q)", what, base)
	}
	l.nodes = append(l.nodes, op.lin.nodes...)
	op.tokens, op.pre = l.tokensBefore(op.lin) // attention_op_rope.go
	return op, nil
}

// heads reads the head counts and size: from q_num_heads and kv_num_heads
// for 3-D operands, from the traced layouts for 4-D ones, which must be
// heads of the projections (head h is columns h·d … h·d+d−1).
func (l *opLayer) heads(ops [3]opOperand, rank4 bool) (heads, kvHeads, d int, err error) {
	n := l.n
	if !rank4 {
		heads, kvHeads = int(n.Int("q_num_heads", 0)), int(n.Int("kv_num_heads", 0))
		if heads <= 0 || kvHeads <= 0 {
			return 0, 0, 0, fmt.Errorf("3-D Q needs q_num_heads and kv_num_heads (they are %d and %d)", heads, kvHeads)
		}
		q, k, v := ops[0].lin, ops[1].lin, ops[2].lin
		if q.dOut%heads != 0 {
			return 0, 0, 0, fmt.Errorf("input Q has %d features, not a multiple of %d heads", q.dOut, heads)
		}
		d = q.dOut / heads
		if k.dOut != kvHeads*d || v.dOut != kvHeads*d {
			return 0, 0, 0, fmt.Errorf("inputs K and V have %d and %d features; attention.sdpa's are kv_num_heads·head_dim = %d", k.dOut, v.dOut, kvHeads*d)
		}
		if heads%kvHeads != 0 {
			return 0, 0, 0, fmt.Errorf("kv_num_heads %d does not divide q_num_heads %d", kvHeads, heads)
		}
		return heads, kvHeads, d, nil
	}
	var counts, sizes [3]int
	for _, p := range l.a.probes {
		for i, op := range ops {
			h, size, lo, err := l.heads4D(p, op)
			if err != nil {
				return 0, 0, 0, fmt.Errorf("%s: %w", []string{"Q", "K", "V"}[i], err)
			}
			counts[i], sizes[i], l.segments[i] = h, size, lo
		}
	}
	if counts[1] != counts[2] || sizes[0] != sizes[1] || sizes[1] != sizes[2] {
		return 0, 0, 0, fmt.Errorf("inputs Q, K and V have %v heads of %v features; attention.sdpa needs K and V alike and one head size", counts, sizes)
	}
	if counts[0]%counts[1] != 0 {
		return 0, 0, 0, fmt.Errorf("%d KV heads do not divide %d query heads", counts[1], counts[0])
	}
	return counts[0], counts[1], sizes[0], nil
}

// heads4D checks at a probe that a 4-D operand (B, H, T, d) holds, at
// [b, h, t, j], column h·d+j of the projection of token t of sequence b,
// and returns H and d.
func (l *opLayer) heads4D(p *probe, op opOperand) (heads, size, lo int, err error) {
	a := l.a
	tok, err := a.tokensOf(p, op.tokens)
	if err != nil {
		return 0, 0, 0, err
	}
	src := source{tokens: op.tokens, lin: op.lin, pre: op.pre}
	el, shape, err := a.elements(p, op.heads, src)
	if err != nil {
		return 0, 0, 0, err
	}
	if len(shape) != 4 || shape[0] != tok.B || shape[2] != tok.T || len(el) == 0 {
		return 0, 0, 0, fmt.Errorf("shape %s is not (batch %d, heads, tokens %d, head_dim)", fmtShape(shape), tok.B, tok.T)
	}
	H, d, lo := shape[1], shape[3], el[0].col // lo: the first column (GPT-2's fused c_attn gives K and V others than 0)
	var first error
	for rep := 1; rep <= H; rep++ { // each head of the projection repeated rep times (repeat_kv), 1 first
		if H%rep != 0 {
			continue
		}
		if err := headsOf(el, tok, H, d, rep, lo); err != nil {
			first = cmp.Or(first, err)
			continue
		}
		return H / rep, d, lo, nil
	}
	return 0, 0, 0, first
}

// headsOf checks that traced elements laid out (B, H, T, d) are the heads
// of a projection from column lo on, each repeated rep times: element
// [b, h, t, j] is feature lo + (h/rep)·d + j of token t of sequence b.
func headsOf(el []elem, tok tokens, H, d, rep, lo int) error {
	for i, e := range el {
		b, h, t, j := i/(H*tok.T*d), i/(tok.T*d)%H, i/d%tok.T, i%d
		if e.row != b*tok.T+t || e.col != lo+h/rep*d+j {
			return fmt.Errorf("element [%d, %d, %d, %d] is feature %d of token %d: not heads of the projection", b, h, t, j, e.col, e.row)
		}
	}
	return nil
}

// outProjection finds the Linear that reads Y (merged from heads first when
// Y is 4-D): attention.sdpa's output projection.
func (l *opLayer) outProjection(heads, headDim int, rank4 bool) (*linear, error) {
	a := l.a
	y := l.n.GetOutput()[0]
	if rank4 {
		merge := a.traceForward(y)
		l.nodes = append(l.nodes, merge.nodes...)
		for _, p := range a.probes {
			shape, idx, err := p.trace(y, merge.value, nil, nil)
			if err != nil {
				return nil, err
			}
			ys, err := p.shape(y)
			if err != nil {
				return nil, err
			}
			if err := mergedHeads(idx, shape, ys); err != nil {
				return nil, err
			}
		}
		y = merge.value
	}
	out := a.linearReading(y)
	if out == nil {
		return nil, errors.New("no output projection reads the attention's output (attention.sdpa has out_proj)")
	}
	if out.dIn != heads*headDim {
		return nil, fmt.Errorf("the output projection takes %d features, the heads give %d", out.dIn, heads*headDim)
	}
	l.nodes = append(l.nodes, out.nodes...)
	if rank4 {
		l.unflatten(out) // attention_op_rope.go: a Gemm on (B·T, H·d)
	}
	return out, nil
}

// mergedHeads checks that a merge of 4-D heads (B, H, T, d) gives
// (B, T, H·d), or (B·T, H·d), with head h at columns h·d … h·d+d−1.
func mergedHeads(idx, shape, heads []int) error {
	B, H, T, d := heads[0], heads[1], heads[2], heads[3]
	if len(shape) == 2 && shape[0] == B*T { // flattened for a Gemm, (B·T, H·d): the same elements
		shape = []int{B, T, shape[1]}
	}
	if len(shape) != 3 || shape[0] != B || shape[1] != T || shape[2] != H*d {
		return fmt.Errorf("the heads %s merge into %s, want (%d, %d, %d)", fmtShape(heads), fmtShape(shape), B, T, H*d)
	}
	for i, f := range idx {
		b, t, c := i/(T*H*d), i/(H*d)%T, i%(H*d)
		if want := ((b*H+c/d)*T+t)*d + c%d; f != want {
			return fmt.Errorf("merged element [%d, %d, %d] is not feature %d of head %d", b, t, c, c%d, c/d)
		}
	}
	return nil
}

// rope reads the RotaryEmbedding nodes on Q and K: one style and rotary
// dimension, caches of one base, positions 0..T−1.
func (l *opLayer) rope(qr, kr *node, heads, kvHeads, headDim int, rank4 bool) (*match.Rope, error) {
	if kr == nil {
		return nil, errors.New("the queries are rotated by RotaryEmbedding but not the keys")
	}
	for _, c := range []struct {
		n     *node
		heads int
	}{{qr, heads}, {kr, kvHeads}} {
		if h := int(c.n.Int("num_heads", 0)); !rank4 && h != c.heads {
			return nil, fmt.Errorf("RotaryEmbedding %s rotates %d heads, the attention has %d", c.n.Label(), h, c.heads)
		}
	}
	if qr.Int("interleaved", 0) != kr.Int("interleaved", 0) ||
		qr.Int("rotary_embedding_dim", 0) != kr.Int("rotary_embedding_dim", 0) {
		return nil, errors.New("the queries and keys are rotated differently")
	}
	dim := int(qr.Int("rotary_embedding_dim", 0))
	if dim == 0 {
		dim = headDim
	}
	if dim%2 != 0 || dim > headDim {
		return nil, fmt.Errorf("rotary_embedding_dim %d is not even or exceeds the head size %d", dim, headDim)
	}
	base, err := l.ropeBase(qr, kr, dim)
	if err != nil {
		return nil, err
	}
	return &match.Rope{Interleaved: qr.Int("interleaved", 0) == 1, Base: base, Dim: dim}, nil
}

// ropeBase reads the base θ of the rotation from the cos and sin caches,
// which must be static, and checks the positions: 0..T−1 in every
// sequence. It returns 0 when the caches cannot tell the base.
func (l *opLayer) ropeBase(qr, kr *node, dim int) (float64, error) {
	a := l.a
	for _, rn := range []*node{qr, kr} {
		ins := rn.GetInput()
		for _, v := range ins[1:] {
			if v != "" && !a.g.Static(v) {
				return 0, fmt.Errorf("RotaryEmbedding %s reads %q, computed from the inputs %s: attention.sdpa rotates positions 0..T−1",
					rn.Label(), v, quoted(a.g.DependsOnInputs(v)))
			}
		}
		if len(ins) > 3 && ins[3] != "" {
			for _, p := range a.probes {
				pos, err := p.value(ins[3])
				if err != nil {
					return 0, err
				}
				vals, err := match.Floats(pos)
				if err != nil {
					return 0, err
				}
				T := pos.Shape()[pos.Dims()-1]
				for i, x := range vals {
					if int(x) != i%T {
						return 0, fmt.Errorf("RotaryEmbedding %s rotates position %g at token %d: attention.sdpa rotates positions 0..T−1", rn.Label(), x, i%T)
					}
				}
			}
		}
	}
	half := dim / 2
	if half < 2 {
		return 0, nil // one rotating pair turns by its position whatever the base
	}
	p := a.probes[len(a.probes)-1]
	cos, err1 := p.value(qr.GetInput()[1])
	sin, err2 := p.value(qr.GetInput()[2])
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	c, _ := match.Floats(cos)
	s, _ := match.Floats(sin)
	if cos.Shape()[cos.Dims()-1] != half || len(c) < 2*half {
		return 0, fmt.Errorf("the cos cache has shape %v, want (positions, %d)", cos.Shape(), half)
	}
	// Position 1, pair 1: the angle is θ₁ = base^(−2/dim).
	theta := math.Atan2(s[half+1], c[half+1])
	base := math.Pow(theta, -float64(dim)/2)
	if r := math.Round(base); math.Abs(base-r) < 1e-4*base {
		base = r // the caches are float32: read 10000, not 9999.98
	}
	return base, nil
}

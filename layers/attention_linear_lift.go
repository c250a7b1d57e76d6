package layers

import (
	"fmt"
	"slices"

	"github.com/attnrun/attnrun/onnxio/match"
)

// attention.linear in ONNX graphs, as ExportONNX writes it: the parallel
// form O = ((Q Kᵀ) ⊙ D) U over the whole sequence, read back from the
// product O, which is anchored where it is merged into tokens:
//
//	O = MatMul(Mul(MatMul(q, Transpose(k)), D), U) → Transpose(0, 2, 1, 3) → gated RMSNorm → Reshape → out_proj
//
// The update rule is in D and U: D computed from the input (by the decay
// gates) is a gated rule, U solved from the values (a MatMul by the
// inverse) a delta rule. The heads come from the shapes of q and O, the
// L2 norm from a Div of the split heads, the convolution's kernel from the
// shape of its weight, and the projections from where the convolution's
// input and the gates are computed. The lifter builds the layer and runs
// it against the graph before accepting it, so what this reads loosely
// (z, the triangles, the solve's levels) is still checked.

func init() {
	match.RegisterPattern(match.Pattern{Name: "attention.linear", Op: "MatMul", Match: liftLinearAttention})
	match.RegisterPattern(match.Pattern{Name: "attention.linear (LinearAttention)", Op: "LinearAttention", Match: liftLinearAttentionOp})
}

// liftLinearAttention is the pattern's Match: nil, nil until the product is
// seen to be (Q Kᵀ ⊙ D) U merged through a gated RMSNorm.
func liftLinearAttention(g match.Graph, o *match.Node) (*match.Layer, error) {
	scores := g.Producer(o.Inputs()[0])
	if scores == nil || scores.Op() != "Mul" {
		return nil, nil
	}
	var qk *match.Node
	var decay string
	for i, in := range scores.Inputs() {
		if n := g.Producer(in); n != nil && n.Op() == "MatMul" {
			qk, decay = n, scores.Inputs()[1-i]
			break
		}
	}
	if qk == nil {
		return nil, nil
	}
	kT := g.Producer(qk.Inputs()[1])
	tr := match.OnlyReader(g, o.Output())
	if kT == nil || kT.Op() != "Transpose" || !slices.Equal(kT.Ints("perm"), []int64{0, 1, 3, 2}) ||
		tr == nil || tr.Op() != "Transpose" || !slices.Equal(tr.Ints("perm"), []int64{0, 2, 1, 3}) {
		return nil, nil
	}
	norm, gate := gatedNorm(g, tr.Output())
	if norm == nil {
		return nil, nil
	}
	if !g.Registered("attention.linear") {
		return nil, match.Refuse([]*match.Node{o}, "linear attention: no layer type attention.linear is registered in this build")
	}
	la := &linearLift{g: g, gated: g.IsData(decay), norm: norm}
	l, err := la.read(qk, o, decay, gate)
	if err != nil {
		return nil, match.Refuse([]*match.Node{o}, "linear attention (attention.linear): %v", err)
	}
	return l, nil
}

// liftLinearAttentionOp is the pattern of attention.linear exported with
// ONNX's LinearAttention op (opset 27), anchored at the op:
//
//	LinearAttention(q, k, v, , decay, β) → Reshape (B, T, H, dv) → gated RMSNorm → Reshape → out_proj
//
// The op's attributes give the heads and the rule; its queries and keys
// are read back through the repeat for the value heads and the L2 norm to
// the convolution, its decay and β to their gates. nil, nil until the
// output is seen to be merged through a gated RMSNorm.
func liftLinearAttentionOp(g match.Graph, op *match.Node) (*match.Layer, error) {
	if d := op.Unwrap().GetDomain(); d != "" && d != "ai.onnx" {
		return nil, nil
	}
	heads := match.OnlyReader(g, op.Output())
	if heads == nil || heads.Op() != "Reshape" {
		return nil, nil
	}
	norm, gate := gatedNorm(g, heads.Output())
	if norm == nil {
		return nil, nil
	}
	if !g.Registered("attention.linear") {
		return nil, match.Refuse([]*match.Node{op}, "linear attention: no layer type attention.linear is registered in this build")
	}
	p, gated, err := readLinearAttentionOp(g, op, heads)
	if err == nil {
		la := &linearLift{g: g, gated: gated, norm: norm}
		var l *match.Layer
		if l, err = la.layer(p, gate); err == nil {
			return l, nil
		}
	}
	return nil, match.Refuse([]*match.Node{op}, "LinearAttention as attention.linear: %v", err)
}

// readLinearAttentionOp reads the parts of the layer a LinearAttention
// node holds, heads the Reshape of its output into (B, T, H, dv), and
// whether its rule is gated. What attention.linear cannot be (a past
// state, a present state that is read, key-value heads other than the
// query heads, per-key decay, a shared β, another scale) is refused.
func readLinearAttentionOp(g match.Graph, op, heads *match.Node) (linearParts, bool, error) {
	var p linearParts
	name := "gated_delta"
	if a := op.Unwrap().Attr("update_rule"); a != nil {
		name = string(a.GetS())
	}
	rule, ok := updateRules[name]
	if !ok {
		return p, false, fmt.Errorf("update_rule %q is not one of linear, gated, delta, gated_delta", name)
	}
	in := op.Inputs()
	in = append(in, make([]string, 6-min(len(in), 6))...)
	outs := op.Outputs()
	switch {
	case in[3] != "":
		return p, false, fmt.Errorf("input past_state %q: attention.linear starts from a zero state", in[3])
	case len(outs) > 1 && outs[1] != "" && len(g.Readers(outs[1])) > 0:
		return p, false, fmt.Errorf("output present_state %q is read: attention.linear's forward returns no state", outs[1])
	}
	p.heads = int(op.Int("q_num_heads", 0))
	if kv := int(op.Int("kv_num_heads", 0)); p.heads <= 0 || kv != p.heads {
		return p, false, fmt.Errorf("q_num_heads %d and kv_num_heads %d: attention.linear groups value heads over key heads, never queries over values (equal counts expected)", p.heads, kv)
	}
	shape, err := g.Shape(heads.Output())
	if err != nil || len(shape) != 4 || shape[2] != p.heads {
		return p, false, fmt.Errorf("the output is not reshaped into (B, T, %d, head_v_dim) heads", p.heads)
	}
	p.dv, p.delta = shape[3], rule.delta
	q, err := unrepeatedKeys(g, in[0], p.heads)
	if err != nil {
		return p, false, fmt.Errorf("query: %v", err)
	}
	k, err := unrepeatedKeys(g, in[1], p.heads)
	if err != nil {
		return p, false, fmt.Errorf("key: %v", err)
	}
	if k.keyHeads != q.keyHeads || k.dk != q.dk || k.l2 != q.l2 {
		return p, false, fmt.Errorf("the queries (%d heads of %d, L2 norm %v) and keys (%d heads of %d, L2 norm %v) differ", q.keyHeads, q.dk, q.l2, k.keyHeads, k.dk, k.l2)
	}
	p.keyHeads, p.dk, p.l2 = q.keyHeads, q.dk, q.l2
	if scale := op.Float("scale", 0); scale != 0 && !closeTo(float64(scale), float64(invSqrt(p.dk))) {
		return p, false, fmt.Errorf("scale %g: attention.linear scales by 1/√head_k_dim = %g", scale, invSqrt(p.dk))
	}
	if p.mixed, err = sliceSource(g, q.packed); err != nil {
		return p, false, fmt.Errorf("query: %v", err)
	}
	if rule.gated {
		if s := mustShape(g, in[4]); len(s) != 3 || s[2] != p.heads {
			return p, false, fmt.Errorf("decay %q is not per head (B, T, %d); attention.linear has no per-key decay", in[4], p.heads)
		}
		p.decay = in[4]
	}
	if rule.delta {
		if s := mustShape(g, in[5]); len(s) != 3 || s[2] != p.heads {
			return p, false, fmt.Errorf("beta %q is not per head (B, T, %d)", in[5], p.heads)
		}
		la := &linearLift{g: g}
		if p.betaProj, ok = la.sigmoidGate(in[5]); !ok {
			return p, false, fmt.Errorf("beta is not the sigmoid of an nn.Linear of the input")
		}
	}
	return p, rule.gated, nil
}

// opKeys is LinearAttention's query or key input read back: the packed
// slice of the convolution it comes from, its key heads and head size,
// and whether it was L2-normalized.
type opKeys struct {
	packed       string
	keyHeads, dk int
	l2           bool
}

// unrepeatedKeys reads a query or key input (B, T, heads·dk) of
// LinearAttention back through Reshape ← [Expand ← Unsqueeze ←] [L2 norm
// (Div by a Sqrt) ←] Reshape (B, T, key heads, dk) to the packed slice,
// or takes the input as that slice itself.
func unrepeatedKeys(g match.Graph, v string, heads int) (opKeys, error) {
	shape, err := g.Shape(v)
	if err != nil || len(shape) != 3 || shape[2]%heads != 0 {
		return opKeys{}, fmt.Errorf("%q is not (B, T, %d·head_k_dim)", v, heads)
	}
	k := opKeys{packed: v, keyHeads: heads, dk: shape[2] / heads}
	merge := g.Producer(v)
	if merge == nil || merge.Op() != "Reshape" {
		return k, nil
	}
	x := merge.Inputs()[0]
	if n := g.Producer(x); n != nil && n.Op() == "Expand" {
		unsq := g.Producer(n.Inputs()[0])
		if unsq == nil || unsq.Op() != "Unsqueeze" {
			return k, fmt.Errorf("%q repeats heads other than by Unsqueeze and Expand", v)
		}
		x = unsq.Inputs()[0]
	}
	if n := g.Producer(x); n != nil && n.Op() == "Div" {
		if sqrt := g.Producer(n.Inputs()[1]); sqrt != nil && sqrt.Op() == "Sqrt" {
			x, k.l2 = n.Inputs()[0], true
		}
	}
	split := g.Producer(x)
	s := mustShape(g, x)
	if split == nil || split.Op() != "Reshape" || len(s) != 4 || s[2] <= 0 || heads%s[2] != 0 {
		return k, fmt.Errorf("%q is not split into key heads (B, T, key heads, head_k_dim)", v)
	}
	k.packed, k.keyHeads, k.dk = split.Inputs()[0], s[2], s[3]
	return k, nil
}

// gatedNorm reads Mul(RMSNorm(o), silu(z)) of the heads o and returns the
// norm and the Mul; nils when o is not normalized so.
func gatedNorm(g match.Graph, o string) (*match.RMSNorm, *match.Node) {
	for _, pow := range g.Readers(o) {
		if pow.Op() != "Pow" {
			continue
		}
		r, err := match.MatchRMSNorm(g, pow)
		if err != nil || r == nil {
			return nil, nil
		}
		if mul := match.OnlyReader(g, r.Output); mul != nil && mul.Op() == "Mul" {
			return r, mul
		}
	}
	return nil, nil
}

// linearLift is what readers of one linear attention share.
type linearLift struct {
	g     match.Graph
	gated bool
	norm  *match.RMSNorm
}

// read reads the layer from the product of queries and keys, the product
// O, the decay D and the gated norm's Mul.
func (la *linearLift) read(qk, o *match.Node, decay string, gate *match.Node) (*match.Layer, error) {
	g := la.g
	oShape, err := g.Shape(o.Output())
	if err != nil || len(oShape) != 4 {
		return nil, fmt.Errorf("the product %s is not (B, H, T, head_v_dim)", o.Name())
	}
	p := linearParts{heads: oShape[1], dv: oShape[3], decay: decay}
	q, l2 := la.queryHeads(qk.Inputs()[0])
	qShape, err := g.Shape(q)
	if err != nil || len(qShape) != 4 {
		return nil, fmt.Errorf("the queries of %s are not split into heads", qk.Name())
	}
	p.keyHeads, p.dk, p.l2 = qShape[1], qShape[3], l2
	if p.mixed, err = convolvedHeads(g, q); err != nil {
		return nil, err
	}
	values := g.Producer(o.Inputs()[1])
	if values != nil && values.Op() == "MatMul" { // the inverse of I + A times diag(β) V
		p.delta = true
		if p.betaProj, err = la.betaProjection(values); err != nil {
			return nil, err
		}
	}
	return la.layer(p, gate)
}

// linearParts is what a form of the recurrence tells of the layer: its
// heads, rule and where its queries, β and decay come from.
type linearParts struct {
	heads, keyHeads, dk, dv int
	l2, delta               bool
	// mixed is the convolution's output the queries are sliced from.
	mixed string
	// betaProj is the projection of β (the delta rules), decay the value
	// the gated rules' decay is computed into.
	betaProj *match.Linear
	decay    string
}

// layer reads what both forms share, from the convolution back to the
// input and from the gated norm on to out_proj, and builds the layer.
func (la *linearLift) layer(p linearParts, gate *match.Node) (*match.Layer, error) {
	g := la.g
	conv, err := la.convolution(p.mixed)
	if err != nil {
		return nil, err
	}
	qkvz, ok := g.Linear(conv.input)
	if !ok {
		return nil, fmt.Errorf("the convolution's input is not a slice of in_proj_qkvz, an nn.Linear of the input")
	}
	gateProj := p.betaProj
	var gatedParams []match.Param
	if la.gated {
		a, params, err := la.decayGate(p.decay)
		if err != nil {
			return nil, err
		}
		gatedParams = params
		if !p.delta {
			if gateProj, ok = la.gateLinear(a); !ok {
				return nil, fmt.Errorf("the decay gate is not computed from an nn.Linear of the input")
			}
		}
	}
	merge := match.OnlyReader(g, gate.Output())
	if merge == nil || merge.Op() != "Reshape" {
		return nil, fmt.Errorf("the heads are not merged (Reshape) after the gated norm")
	}
	out, err := outProjection(g, merge.Output(), p.heads*p.dv)
	if err != nil {
		return nil, err
	}
	x := qkvz.Input
	if gateProj != nil && gateProj.Input != x {
		return nil, fmt.Errorf("the gates and in_proj_qkvz read %q and %q; attention.linear is self-attention", gateProj.Input, x)
	}
	rule := updateRule{gated: la.gated, delta: p.delta}.name()
	cfg := []match.Field{{Key: "d", Value: out.Out}, {Key: "num_heads", Value: p.heads}}
	if p.keyHeads != p.heads {
		cfg = append(cfg, match.Field{Key: "num_key_heads", Value: p.keyHeads})
	}
	cfg = append(cfg, match.Field{Key: "head_k_dim", Value: p.dk}, match.Field{Key: "head_v_dim", Value: p.dv},
		match.Field{Key: "update_rule", Value: rule}, match.Field{Key: "conv_kernel_size", Value: conv.kernel},
		match.Field{Key: "qk_l2norm", Value: p.l2}, match.Field{Key: "eps", Value: la.norm.Eps})
	params := slices.Concat(gatedParams, []match.Param{conv.weight}, qkvz.Params("in_proj_qkvz"))
	if gateProj != nil {
		name := map[string]string{"gated_delta": "in_proj_ba", "delta": "in_proj_b", "gated": "in_proj_a"}[rule]
		params = append(params, gateProj.Params(name)...)
	}
	params = append(params, match.Param{Name: "norm.weight", Value: la.norm.Weight, From: la.norm.WeightFrom})
	params = append(params, out.Params("out_proj")...)
	return &match.Layer{Type: "attention.linear", Name: "attn", Config: cfg, Inputs: []string{x}, Output: out.Output, Params: params}, nil
}

// queryHeads follows the queries of the product back through the repeat of
// grouped heads and the scale 1/√head_k_dim to the split heads, and
// reports whether an L2 norm (Div by a Sqrt) came in between.
func (la *linearLift) queryHeads(q string) (string, bool) {
	g := la.g
	if inner, _, err := unrepeated(g, q); err == nil {
		q = inner
	}
	if n := g.Producer(q); n != nil && n.Op() == "Mul" {
		if data, _, ok := dataAndStatic(g, n); ok {
			q = data
		}
	}
	if n := g.Producer(q); n != nil && n.Op() == "Div" {
		if sqrt := g.Producer(n.Inputs()[1]); sqrt != nil && sqrt.Op() == "Sqrt" {
			return n.Inputs()[0], true
		}
	}
	return q, false
}

// linearConv is the causal convolution of attention.linear.
type linearConv struct {
	// input is the projection the convolution's channels are sliced from.
	input  string
	kernel int
	weight match.Param
}

// convolvedHeads reads the convolution's output the query heads q are
// split from: Transpose ← Reshape ← Slice.
func convolvedHeads(g match.Graph, q string) (string, error) {
	tr := g.Producer(q)
	if tr == nil || tr.Op() != "Transpose" {
		return "", fmt.Errorf("the queries %q are not split heads", q)
	}
	reshape := g.Producer(tr.Inputs()[0])
	if reshape == nil || reshape.Op() != "Reshape" {
		return "", fmt.Errorf("the queries %q are not split heads", q)
	}
	return sliceSource(g, reshape.Inputs()[0])
}

// convolution reads the causal convolution whose output is mixed:
// silu(Σ_j rows_j · column_j), whose columns are Slices of the
// (conv_dim, 1, kernel) weight.
func (la *linearLift) convolution(mixed string) (*linearConv, error) {
	g := la.g
	silu := g.Producer(mixed)
	if silu == nil || silu.Op() != "Mul" {
		return nil, fmt.Errorf("the queries are not sliced from the convolution's SiLU")
	}
	sum := silu.Inputs()[0]
	term := g.Producer(sum)
	for term != nil && term.Op() == "Add" {
		term = g.Producer(term.Inputs()[0])
	}
	if term == nil || term.Op() != "Mul" {
		return nil, fmt.Errorf("the convolution is not a sum of shifted rows times weight columns")
	}
	rows, column, ok := dataAndStatic(g, term)
	if !ok {
		return nil, fmt.Errorf("the convolution's first term %s has no weight column", term.Name())
	}
	c := &linearConv{}
	for _, src := range g.Sources(column) {
		if t, err := g.Constant(src); err == nil && len(t.Shape()) == 3 && t.Shape()[1] == 1 {
			w, err := match.Float32(t)
			if err != nil {
				return nil, err
			}
			c.kernel, c.weight = t.Shape()[2], match.Param{Name: "conv1d.weight", Value: w, From: src}
			break
		}
	}
	if c.kernel == 0 {
		return nil, fmt.Errorf("no (conv_dim, 1, kernel) weight computes the convolution's column %q", column)
	}
	// rows are the first kernel rows of the zero-padded input, or the input
	// itself for a kernel of 1.
	in := rows
	if n := g.Producer(in); n != nil && n.Op() == "Slice" {
		in = n.Inputs()[0]
	}
	if n := g.Producer(in); n != nil && n.Op() == "Concat" && c.kernel > 1 {
		in = n.Inputs()[len(n.Inputs())-1]
	}
	// The input is Concat(q, k, v) of the flattened slices of in_proj_qkvz.
	join := g.Producer(in)
	if join == nil || join.Op() != "Concat" {
		return nil, fmt.Errorf("the convolution's input is not the joined queries, keys and values")
	}
	flat := g.Producer(join.Inputs()[0])
	if flat == nil || flat.Op() != "Reshape" {
		return nil, fmt.Errorf("the convolution's input is not the joined queries, keys and values")
	}
	grouped, err := sliceSource(g, flat.Inputs()[0])
	if err != nil {
		return nil, err
	}
	if n := g.Producer(grouped); n != nil && n.Op() == "Reshape" {
		c.input = n.Inputs()[0]
		return c, nil
	}
	return nil, fmt.Errorf("the convolution's input is not sliced from a projection grouped by key head")
}

// betaProjection reads the projection the write strengths β are computed
// from: the values of the delta rules are MatMul(inverse, Mul(v, β)), β =
// Unsqueeze(Transpose(Sigmoid(b))).
func (la *linearLift) betaProjection(values *match.Node) (*match.Linear, error) {
	g := la.g
	vb := g.Producer(values.Inputs()[1])
	if vb == nil || vb.Op() != "Mul" {
		return nil, fmt.Errorf("the delta rule's values are not the values times β")
	}
	for _, in := range vb.Inputs() {
		if l, ok := la.sigmoidGate(in); ok {
			return l, nil
		}
	}
	return nil, fmt.Errorf("β is not the sigmoid of an nn.Linear of the input")
}

// sigmoidGate reads β = sigmoid(b), its heads moved by Unsqueeze or
// Transpose, back to the nn.Linear b is computed by.
func (la *linearLift) sigmoidGate(beta string) (*match.Linear, bool) {
	n := la.g.Producer(beta)
	for n != nil && (n.Op() == "Unsqueeze" || n.Op() == "Transpose") {
		n = la.g.Producer(n.Inputs()[0])
	}
	if n == nil || n.Op() != "Sigmoid" {
		return nil, false
	}
	return la.gateLinear(n.Inputs()[0])
}

// gateLinear returns the nn.Linear a gate is computed from: directly, or
// (gated_delta's in_proj_ba) through Reshape, Slice and Reshape.
func (la *linearLift) gateLinear(v string) (*match.Linear, bool) {
	g := la.g
	if l, ok := g.Linear(v); ok {
		return l, true
	}
	if n := g.Producer(v); n != nil && n.Op() == "Reshape" {
		if grouped, err := sliceSource(g, n.Inputs()[0]); err == nil {
			if r := g.Producer(grouped); r != nil && r.Op() == "Reshape" {
				return g.Linear(r.Inputs()[0])
			}
		}
	}
	return nil, false
}

// decayGate reads the gated rules' decay Where(causal, Cast(Exp(G_i −
// G_j)), 0) back to the log decays −exp(A_log)·softplus(a + dt_bias): it
// returns a and the parameters dt_bias and A_log.
func (la *linearLift) decayGate(decay string) (string, []match.Param, error) {
	g := la.g
	var mul *match.Node
	for n := g.Producer(decay); n != nil; {
		if n.Op() == "Mul" && len(n.Inputs()) == 2 {
			if neg := g.Producer(n.Inputs()[0]); neg != nil && neg.Op() == "Neg" {
				mul = n
				break
			}
		}
		var next *match.Node
		for _, in := range n.Inputs() {
			if g.IsData(in) {
				next = g.Producer(in)
				break
			}
		}
		n = next
	}
	if mul == nil {
		return "", nil, fmt.Errorf("the decay is not computed from −exp(A_log)·softplus(a + dt_bias)")
	}
	exp := g.Producer(g.Producer(mul.Inputs()[0]).Inputs()[0])
	if exp == nil || exp.Op() != "Exp" {
		return "", nil, fmt.Errorf("the decay rate is not −exp(A_log)")
	}
	aLog := exp.Inputs()[0]
	// softplus(a + dt_bias) = Where(Greater(s, 20), s, log1p(exp(s))), s = a + dt_bias
	sp := g.Producer(mul.Inputs()[1])
	if sp == nil || sp.Op() != "Where" {
		return "", nil, fmt.Errorf("the decay's softplus is not written as attnrun writes it")
	}
	add := g.Producer(sp.Inputs()[1])
	if add == nil || add.Op() != "Add" {
		return "", nil, fmt.Errorf("the decay's softplus does not read a + dt_bias")
	}
	a, dtBias, ok := dataAndStatic(g, add)
	if !ok {
		return "", nil, fmt.Errorf("the decay's softplus does not read a + dt_bias")
	}
	var params []match.Param
	for _, p := range []struct{ name, value string }{{"dt_bias", dtBias}, {"A_log", aLog}} {
		t, err := g.Constant(p.value)
		if err == nil {
			t, err = match.Float32(t)
		}
		if err != nil {
			return "", nil, fmt.Errorf("%s: %v", p.name, err)
		}
		params = append(params, match.Param{Name: p.name, Value: t, From: p.value})
	}
	return a, params, nil
}

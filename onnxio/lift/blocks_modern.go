package lift

import (
	"math"

	"gorgonia.org/tensor"
)

// The transformer-block pieces beyond LayerNorm and the exact GELU: the
// tanh GELU, RMSNorm, and the MLP that joins two Linears and an
// activation (and, gated, a third Linear) into one nn.mlp.

// closeTo compares a graph constant with the number it should be.
func closeTo(x, want float64) bool { return math.Abs(x-want) <= 1e-6*math.Max(1, math.Abs(want)) }

// onlyReader returns the single live reader of v, or nil when v has
// another number of readers or is a graph output.
func (a *analysis) onlyReader(v string) *node {
	rs := a.readers(v)
	if len(rs) != 1 || a.g.IsOutput(v) {
		return nil
	}
	return rs[0]
}

// scaledBy returns the node that multiplies v by a static scalar close to
// f (Mul by f or Div by 1/f), v's only reader.
func (a *analysis) scaledBy(v string, f float64) *node {
	n := a.onlyReader(v)
	if n == nil {
		return nil
	}
	if g, x, ok := a.scalarFactor(n); ok && x == v && closeTo(g, f) {
		return n
	}
	return nil
}

// geluTail matches x·(1 + t)·0.5 from the Add of 1 on: the products by x
// and by 0.5 in either order. It returns the nodes and the output.
func (a *analysis) geluTail(onePlus *node, x string) ([]*node, string, bool) {
	nodes := []*node{onePlus}
	v, haveX, haveHalf := onePlus.GetOutput()[0], false, false
	for !(haveX && haveHalf) {
		m := a.onlyReader(v)
		if m == nil || m.GetOpType() != "Mul" {
			return nil, "", false
		}
		switch other := otherInput(m, v); {
		case other == x && !haveX:
			haveX = true
		case !haveHalf && a.g.Static(other):
			if c, ok := a.probes[0].scalar(other); !ok || c != 0.5 {
				return nil, "", false
			}
			haveHalf = true
		default:
			return nil, "", false
		}
		nodes = append(nodes, m)
		v = m.GetOutput()[0]
	}
	return nodes, v, true
}

// geluTanhAt matches GELU's tanh approximation starting at the Pow that
// cubes x: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), as PyTorch exports
// nn.GELU(approximate="tanh"). It returns the nodes and the output.
func (a *analysis) geluTanhAt(pow *node) ([]*node, string, bool) {
	x := pow.GetInput()[0]
	if e, ok := a.probes[0].scalar(pow.GetInput()[1]); !ok || e != 3 || !a.g.IsData(x) {
		return nil, "", false
	}
	cubic := a.scaledBy(pow.GetOutput()[0], 0.044715)
	if cubic == nil {
		return nil, "", false
	}
	inner := a.onlyReader(cubic.GetOutput()[0])
	if inner == nil || inner.GetOpType() != "Add" || otherInput(inner, cubic.GetOutput()[0]) != x {
		return nil, "", false
	}
	scaled := a.scaledBy(inner.GetOutput()[0], math.Sqrt(2/math.Pi))
	if scaled == nil {
		return nil, "", false
	}
	tanh := a.onlyReader(scaled.GetOutput()[0])
	if tanh == nil || tanh.GetOpType() != "Tanh" {
		return nil, "", false
	}
	onePlus := a.onlyReader(tanh.GetOutput()[0])
	if onePlus == nil || onePlus.GetOpType() != "Add" {
		return nil, "", false
	}
	if c, ok := a.probes[0].scalar(otherInput(onePlus, tanh.GetOutput()[0])); !ok || c != 1 {
		return nil, "", false
	}
	tail, out, ok := a.geluTail(onePlus, x)
	if !ok {
		return nil, "", false
	}
	return append([]*node{pow, cubic, inner, scaled, tanh}, tail...), out, true
}

// geluTanh lifts the tanh GELU starting at n: activation.gelu with
// approximate: tanh.
func (a *analysis) geluTanh(n *node) (*region, *failure) {
	nodes, out, ok := a.geluTanhAt(n)
	if !ok {
		return nil, nil
	}
	if !registered("activation.gelu") {
		return nil, fail(nodes, "tanh GELU: no layer type activation.gelu is registered in this build")
	}
	return &region{typ: "activation.gelu", kind: "gelu", inputs: []string{n.GetInput()[0]}, output: out, nodes: nodes,
		fields: []field{{"approximate", "tanh"}}}, nil
}

// powBlock lifts what starts at a Pow: RMSNorm (x²) or the tanh GELU (x³).
func (a *analysis) powBlock(n *node) (*region, *failure) {
	if r, f := a.rmsNorm(n); r != nil || f != nil {
		return r, f
	}
	return a.geluTanh(n)
}

// rmsNorm lifts weight · x / √(mean(x²) + eps) starting at Pow(x, 2):
// ReduceMean over the last axis, Add of eps, Sqrt, then Div of x (or
// Reciprocal and Mul by x, as torch.rsqrt exports), and the Mul by the
// weight: norm.rms.
func (a *analysis) rmsNorm(pow *node) (*region, *failure) {
	g, p := a.g, a.probes[0]
	x := pow.GetInput()[0]
	if e, ok := p.scalar(pow.GetInput()[1]); !ok || e != 2 || !g.IsData(x) {
		return nil, nil
	}
	mean := a.onlyReader(pow.GetOutput()[0])
	if mean == nil || mean.GetOpType() != "ReduceMean" || !a.reducesLastAxis(mean) {
		return nil, nil
	}
	addEps := a.onlyReader(mean.GetOutput()[0])
	if addEps == nil || addEps.GetOpType() != "Add" {
		return nil, nil
	}
	eps, ok := p.scalar(otherInput(addEps, mean.GetOutput()[0]))
	sqrt := a.onlyReader(addEps.GetOutput()[0])
	if !ok || sqrt == nil || sqrt.GetOpType() != "Sqrt" {
		return nil, nil
	}
	nodes := []*node{pow, mean, addEps, sqrt}
	next := a.onlyReader(sqrt.GetOutput()[0])
	var out string
	switch {
	case next != nil && next.GetOpType() == "Div" && next.GetInput()[0] == x && next.GetInput()[1] == sqrt.GetOutput()[0]:
		nodes, out = append(nodes, next), next.GetOutput()[0]
	case next != nil && next.GetOpType() == "Reciprocal":
		mul := a.onlyReader(next.GetOutput()[0])
		if mul == nil || mul.GetOpType() != "Mul" || otherInput(mul, next.GetOutput()[0]) != x {
			return nil, nil
		}
		nodes, out = append(nodes, next, mul), mul.GetOutput()[0]
	default:
		return nil, nil
	}
	d := mustShape(p, x)
	width := d[len(d)-1]
	weight := tensor.New(tensor.WithShape(width), tensor.WithBacking(ones32(width)))
	from := ""
	if m := a.onlyReader(out); m != nil && m.GetOpType() == "Mul" {
		if w := otherInput(m, out); g.Static(w) {
			t, err := p.value(w)
			if err != nil || t.Shape().TotalSize() != width {
				return nil, fail(append(nodes, m), "RMSNorm weight %q is not a vector of %d", w, width)
			}
			weight, from = toFloat32(t, width), w
			nodes, out = append(nodes, m), m.GetOutput()[0]
		}
	}
	if !registered("norm.rms") {
		return nil, fail(nodes, "RMSNorm: no layer type norm.rms is registered in this build")
	}
	return &region{typ: "norm.rms", kind: "norm", inputs: []string{x}, output: out, nodes: nodes,
		fields: []field{{"d", width}, {"eps", float32(float32(eps))}},
		params: []param{{name: "weight", value: weight, pieces: []piece{{value: from}}}}}, nil
}

// ones32 is a vector of n ones.
func ones32(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = 1
	}
	return v
}

// activationAfter recognizes the activation applied to v (v's readers):
// relu (Relu), silu (Sigmoid·v), gelu (Erf form) or gelu_tanh, with the
// nodes and the output.
func (a *analysis) activationAfter(v string) (string, []*node, string) {
	if a.g.IsOutput(v) {
		return "", nil, ""
	}
	// Every reader of v must belong to the activation; checkContained
	// rejects the region otherwise.
	for _, r := range a.readers(v) {
		switch r.GetOpType() {
		case "Relu":
			return "relu", []*node{r}, r.GetOutput()[0]
		case "Sigmoid":
			if m := a.onlyReader(r.GetOutput()[0]); m != nil && m.GetOpType() == "Mul" && otherInput(m, r.GetOutput()[0]) == v {
				return "silu", []*node{r, m}, m.GetOutput()[0]
			}
		case "Div", "Mul":
			if reg, _ := a.gelu(r); reg != nil && reg.inputs[0] == v {
				return "gelu", reg.nodes, reg.output
			}
		case "Pow":
			if nodes, out, ok := a.geluTanhAt(r); ok {
				return "gelu_tanh", nodes, out
			}
		}
	}
	return "", nil, ""
}

// linearAt returns the Linear whose first node is n, a MatMul or Gemm,
// with the Add of its bias when the MatMul's only reader adds one.
func (a *analysis) linearAt(n *node) *linear {
	if n.GetOpType() == "Gemm" {
		return a.matchGemm(n)
	}
	l := a.matchMatMul(n)
	if l == nil {
		return nil
	}
	if add := a.onlyReader(l.out); add != nil && add.GetOpType() == "Add" {
		if withBias := a.matchLinear(add.GetOutput()[0]); withBias != nil && withBias.nodes[0] == n {
			return withBias
		}
	}
	return l
}

// mlp lifts the feed-forward network that starts at the Linear n:
// fc2(act(fc1(x))), or down_proj(act(gate_proj(x)) · up_proj(x)): nn.mlp.
// It returns nil, nil when n starts no MLP (a plain Linear).
func (a *analysis) mlp(n *node) (*region, *failure) {
	if !registered("nn.mlp") {
		return nil, nil
	}
	first := a.linearAt(n)
	if first == nil {
		return nil, nil
	}
	act, actNodes, h := a.activationAfter(first.out)
	if act == "" {
		return nil, nil
	}
	nodes := append(append([]*node{}, first.nodes...), actNodes...)
	var up *linear
	if m := a.onlyReader(h); m != nil && m.GetOpType() == "Mul" {
		if up = a.matchLinear(otherInput(m, h)); up == nil || up.in != first.in || a.onlyReader(up.out) != m {
			return nil, nil
		}
		nodes = append(nodes, up.nodes...)
		nodes = append(nodes, m)
		h = m.GetOutput()[0]
	}
	last := a.linearReading(h)
	if last == nil {
		return nil, nil
	}
	nodes = append(nodes, last.nodes...)
	lins := []*linear{first, last}
	names := []string{"fc1.", "fc2."}
	if up != nil {
		lins = []*linear{first, up, last}
		names = []string{"gate_proj.", "up_proj.", "down_proj."}
	}
	bias := first.bias != nil
	for _, l := range lins {
		if (l.bias != nil) != bias || (l != last && l.dOut != last.dIn) {
			return nil, nil // not the shape of nn.mlp: the pieces lift on their own
		}
	}
	if last.dOut != first.dIn {
		return nil, nil
	}
	r := &region{typ: "nn.mlp", kind: "mlp", inputs: []string{first.in}, output: last.out, nodes: nodes,
		fields: []field{{"d", first.dIn}, {"d_hidden", first.dOut}}}
	if up != nil {
		r.fields = append(r.fields, field{"gated", true})
	}
	if act != "gelu" {
		r.fields = append(r.fields, field{"activation", act})
	}
	if !bias {
		r.fields = append(r.fields, field{"bias", false})
	}
	for i, l := range lins {
		r.params = append(r.params, l.params(names[i])...)
	}
	return r, nil
}

package lift

import (
	"fmt"
	"math"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/registry"
)

// block recognizes the layer, other than attention, that starts at node n:
// an MLP (blocks_modern.go), a Linear, a residual Add, a learned position
// table, a Concat, the causal average, a layer norm, an RMSNorm or a GELU.
// It returns nil, nil when n starts none of them.
func (a *analysis) block(n *node) (*region, *failure) {
	switch n.GetOpType() {
	case "MatMul", "Gemm":
		if n.GetOpType() == "MatMul" && a.g.Static(n.GetInput()[0]) {
			return a.average(n)
		}
		if r, f := a.mlp(n); r != nil || f != nil {
			return r, f
		}
		return a.linearBlock(n)
	case "Pow":
		return a.powBlock(n)
	case "Add":
		return a.addBlock(n)
	case "Concat":
		return a.concat(n)
	case "LayerNormalization":
		return a.layerNorm(n)
	case "ReduceMean":
		return a.layerNormDecomposed(n)
	case "Div", "Mul":
		return a.gelu(n)
	}
	return nil, nil
}

// linearBlock lifts a Linear outside attention: nn.linear.
func (a *analysis) linearBlock(n *node) (*region, *failure) {
	l := a.linearAt(n)
	if l == nil {
		return nil, nil
	}
	r := &region{typ: "nn.linear", kind: "linear", inputs: []string{l.in}, output: l.out, nodes: l.nodes,
		fields: []field{{"d_in", l.dIn}, {"d_out", l.dOut}, {"bias", l.bias != nil}}}
	r.params = l.params("")
	return r, nil
}

// addBlock lifts x + y (nn.add, a residual) and x + table[:T] (a learned
// position embedding, position.learned).
func (a *analysis) addBlock(n *node) (*region, *failure) {
	x, y := n.GetInput()[0], n.GetInput()[1]
	switch {
	case a.g.IsData(x) && a.g.IsData(y):
		for _, p := range a.probes {
			sx, sy := mustShape(p, x), mustShape(p, y)
			if !equalShapes(sx, sy) {
				return nil, fail([]*node{n}, "add of shapes %s and %s: nn.add sums tensors of one shape", fmtShape(sx), fmtShape(sy))
			}
		}
		return &region{typ: "nn.add", kind: "residual", inputs: []string{x, y}, output: n.GetOutput()[0], nodes: []*node{n}}, nil
	case a.g.Static(x):
		x, y = y, x
	}
	return a.position(n, x, y)
}

// position lifts x + P where P is the first T rows of a (C, d) table:
// position.learned with context_length C.
func (a *analysis) position(n *node, x, pos string) (*region, *failure) {
	tables := a.staticSources(pos)
	var best string
	C := 0
	for _, cand := range tables {
		ok := true
		for _, p := range a.probes {
			if !a.isTablePrefix(p, cand, x, pos) {
				ok = false
				break
			}
		}
		if ok {
			best, C = cand, mustShape(a.probes[0], cand)[0]
			break
		}
	}
	if best == "" {
		return nil, fail([]*node{n}, "adds the constant %q, which is not the first rows of a position table (one row per token)", pos)
	}
	table, _ := a.probes[0].value(best)
	d := table.Shape()[1]
	r := &region{typ: "position.learned", kind: "pos", inputs: []string{x}, output: n.GetOutput()[0], nodes: []*node{n},
		fields: []field{{"context_length", C}, {"d", d}},
		params: []param{{name: "weight", value: toFloat32(table, 0), pieces: []piece{{value: best}}}}}
	if len(a.probes) == 1 && a.g.Producer(pos) == nil {
		r.notes = append(r.notes, fmt.Sprintf("the exporter kept only the %d rows this static graph uses; context_length is %d", C, C))
	}
	return r, nil
}

// staticSources lists the initializers and Constants a static value is
// computed from, itself included.
func (a *analysis) staticSources(v string) []string {
	var out []string
	seen := map[string]bool{}
	var walk func(string)
	walk = func(v string) {
		if v == "" || seen[v] || a.g.IsData(v) {
			return
		}
		seen[v] = true
		n := a.g.Producer(v)
		if n == nil || n.GetOpType() == "Constant" {
			out = append(out, v)
			return
		}
		for _, in := range n.GetInput() {
			walk(in)
		}
	}
	walk(v)
	return out
}

// isTablePrefix checks at a probe that pos equals rows 0..T-1 of table,
// shaped (T, d) or (1, T, d), for tokens x of shape (…, T, d).
func (a *analysis) isTablePrefix(p *probe, table, x, pos string) bool {
	tok, err := a.tokensOf(p, x)
	if err != nil {
		return false
	}
	tt, err1 := p.value(table)
	pt, err2 := p.value(pos)
	if err1 != nil || err2 != nil || tt.Dims() != 2 || tt.Shape()[1] != tok.D || tt.Shape()[0] < tok.T {
		return false
	}
	ps := []int(pt.Shape())
	if !(equalShapes(ps, []int{tok.T, tok.D}) || equalShapes(ps, []int{1, tok.T, tok.D})) {
		return false
	}
	tv, _ := floats64(tt)
	pv, _ := floats64(pt)
	for i, v := range pv {
		if tv[i] != v {
			return false
		}
	}
	return true
}

// concat lifts a Concat of token tensors on the feature axis: nn.concat.
func (a *analysis) concat(n *node) (*region, *failure) {
	for _, in := range n.GetInput() {
		if !a.g.IsData(in) {
			return nil, fail([]*node{n}, "concatenates the constant %q with computed values", in)
		}
	}
	shape := mustShape(a.probes[0], n.GetOutput()[0])
	axis := n.Int("axis", 0)
	if axis < 0 {
		axis += int64(len(shape))
	}
	if axis != int64(len(shape)-1) {
		return nil, fail([]*node{n}, "concatenates along axis %d of %d; nn.concat joins features (the last axis)", axis, len(shape))
	}
	return &region{typ: "nn.concat", kind: "concat", inputs: n.GetInput(), output: n.GetOutput()[0], nodes: []*node{n}}, nil
}

// average lifts A @ x with A the causal averaging matrix (row t holds
// 1/(t+1) in its first t+1 columns): attention.average.
func (a *analysis) average(n *node) (*region, *failure) {
	A, x := n.GetInput()[0], n.GetInput()[1]
	if !a.g.IsData(x) {
		return nil, nil
	}
	for _, p := range a.probes {
		tok, err := a.tokensOf(p, x)
		if err != nil {
			return nil, fail([]*node{n}, "%v", err)
		}
		t, err := p.value(A)
		if err != nil {
			return nil, fail([]*node{n}, "%v", err)
		}
		s := []int(t.Shape())
		if !(equalShapes(s, []int{tok.T, tok.T}) || equalShapes(s, []int{1, tok.T, tok.T})) {
			return nil, fail([]*node{n}, "multiplies tokens by a constant %s matrix; the causal average is %d×%d", fmtShape(s), tok.T, tok.T)
		}
		vals, _ := floats64(t)
		for i, v := range vals {
			r, c := i/tok.T%tok.T, i%tok.T
			want := 0.0
			if c <= r {
				want = 1 / float64(r+1)
			}
			if math.Abs(v-want) > 1e-6*math.Max(1, want) {
				return nil, fail([]*node{n}, "multiplies tokens by a constant matrix that is not the causal average (row %d, column %d is %g)", r, c, v)
			}
		}
	}
	return &region{typ: "attention.average", kind: "avg", inputs: []string{x}, output: n.GetOutput()[0], nodes: []*node{n}}, nil
}

// layerNorm lifts LayerNormalization (opset 17) over the last axis.
func (a *analysis) layerNorm(n *node) (*region, *failure) {
	ins := n.GetInput()
	shape := mustShape(a.probes[0], ins[0])
	axis := n.Int("axis", -1)
	if axis < 0 {
		axis += int64(len(shape))
	}
	if axis != int64(len(shape)-1) {
		return nil, fail([]*node{n}, "layer norm over axes from %d of a rank-%d tensor; norm.layer normalizes the last axis", axis, len(shape))
	}
	scale, bias := ins[1], ""
	if len(ins) > 2 {
		bias = ins[2]
	}
	return a.normRegion([]*node{n}, ins[0], n.GetOutput()[0], scale, bias, n.Float("epsilon", 1e-5))
}

// layerNormDecomposed lifts the ReduceMean, Sub, Pow, ReduceMean, Add,
// Sqrt, Div form older opsets export nn.LayerNorm as, with the optional
// Mul by the weight and Add of the bias.
func (a *analysis) layerNormDecomposed(mean *node) (*region, *failure) {
	g := a.g
	x := mean.GetInput()[0]
	nodes := []*node{mean}
	next := func(v, op string) *node {
		rs := a.readers(v)
		for _, r := range rs {
			if r.GetOpType() == op {
				return r
			}
		}
		return nil
	}
	sub := next(mean.GetOutput()[0], "Sub")
	if sub == nil || sub.GetInput()[0] != x || !a.reducesLastAxis(mean) {
		return nil, nil
	}
	d := sub.GetOutput()[0]
	pow := next(d, "Pow")
	div := next(d, "Div")
	if pow == nil || div == nil {
		return nil, nil
	}
	if e, ok := a.probes[0].scalar(pow.GetInput()[1]); !ok || e != 2 {
		return nil, nil
	}
	mean2 := next(pow.GetOutput()[0], "ReduceMean")
	if mean2 == nil || !a.reducesLastAxis(mean2) {
		return nil, nil
	}
	addEps := next(mean2.GetOutput()[0], "Add")
	if addEps == nil {
		return nil, nil
	}
	epsIn := addEps.GetInput()[1]
	if epsIn == mean2.GetOutput()[0] {
		epsIn = addEps.GetInput()[0]
	}
	eps, ok := a.probes[0].scalar(epsIn)
	sqrt := next(addEps.GetOutput()[0], "Sqrt")
	if !ok || sqrt == nil || div.GetInput()[1] != sqrt.GetOutput()[0] {
		return nil, nil
	}
	nodes = append(nodes, sub, pow, mean2, addEps, sqrt, div)
	out, scale, bias := div.GetOutput()[0], "", ""
	if rs := a.readers(out); len(rs) == 1 && rs[0].GetOpType() == "Mul" && !g.IsOutput(out) {
		if s := otherInput(rs[0], out); g.Static(s) {
			scale, out = s, rs[0].GetOutput()[0]
			nodes = append(nodes, rs[0])
		}
	}
	if rs := a.readers(out); len(rs) == 1 && rs[0].GetOpType() == "Add" && !g.IsOutput(out) {
		if b := otherInput(rs[0], out); g.Static(b) {
			bias, out = b, rs[0].GetOutput()[0]
			nodes = append(nodes, rs[0])
		}
	}
	return a.normRegion(nodes, x, out, scale, bias, float32(eps))
}

// otherInput returns the input of a binary node that is not v.
func otherInput(n *node, v string) string {
	if n.GetInput()[0] == v {
		return n.GetInput()[1]
	}
	return n.GetInput()[0]
}

// reducesLastAxis checks a ReduceMean over the last axis with kept dims.
func (a *analysis) reducesLastAxis(n *node) bool {
	rank := len(mustShape(a.probes[0], n.GetInput()[0]))
	var axes []int64
	if at := n.Attr("axes"); at != nil {
		axes = at.GetInts()
	} else if len(n.GetInput()) > 1 {
		t, err := a.probes[0].value(n.GetInput()[1])
		if err != nil {
			return false
		}
		f, _ := floats64(t)
		for _, v := range f {
			axes = append(axes, int64(v))
		}
	}
	return len(axes) == 1 && (axes[0] == -1 || axes[0] == int64(rank-1)) && n.Int("keepdims", 1) == 1
}

// normRegion builds norm.layer, nn.LayerNorm with weight and bias.
func (a *analysis) normRegion(nodes []*node, x, out, scale, bias string, eps float32) (*region, *failure) {
	if !registered("norm.layer") {
		return nil, fail(nodes, "layer normalization: no layer type norm.layer is registered in this build")
	}
	d := mustShape(a.probes[0], x)
	width := d[len(d)-1]
	vec := func(v string, fill float32) (*tensor.Dense, error) {
		if v == "" {
			data := make([]float32, width)
			for i := range data {
				data[i] = fill
			}
			return tensor.New(tensor.WithShape(width), tensor.WithBacking(data)), nil
		}
		t, err := a.probes[0].value(v)
		if err != nil || t.Shape().TotalSize() != width {
			return nil, fmt.Errorf("layer norm parameter %q is not a vector of %d", v, width)
		}
		return toFloat32(t, width), nil
	}
	w, err := vec(scale, 1)
	if err != nil {
		return nil, fail(nodes, "%v", err)
	}
	b, err := vec(bias, 0)
	if err != nil {
		return nil, fail(nodes, "%v", err)
	}
	return &region{typ: "norm.layer", kind: "norm", inputs: []string{x}, output: out, nodes: nodes,
		fields: []field{{"d", width}, {"eps", float32(eps)}},
		params: []param{{name: "weight", value: w, pieces: []piece{{value: scale}}},
			{name: "bias", value: b, pieces: []piece{{value: bias}}}}}, nil
}

// gelu lifts x · 0.5 · (1 + erf(x / √2)), PyTorch's exact GELU, starting
// at the Div (or Mul by 1/√2) that feeds the Erf: activation.gelu.
func (a *analysis) gelu(n *node) (*region, *failure) {
	f, x, ok := a.scalarFactor(n)
	if !ok || math.Abs(f-1/math.Sqrt2) > 1e-6 {
		return nil, nil
	}
	rs := a.readers(n.GetOutput()[0])
	if len(rs) != 1 || rs[0].GetOpType() != "Erf" {
		return nil, nil
	}
	erf := rs[0]
	nodes := []*node{n, erf}
	rs = a.readers(erf.GetOutput()[0])
	if len(rs) != 1 || rs[0].GetOpType() != "Add" {
		return nil, nil
	}
	one := rs[0]
	if c, ok := a.probes[0].scalar(otherInput(one, erf.GetOutput()[0])); !ok || c != 1 {
		return nil, nil
	}
	nodes = append(nodes, one)
	// The rest is x · (1 + erf) · 0.5 in some order of the two products.
	v, haveX, haveHalf := one.GetOutput()[0], false, false
	for !(haveX && haveHalf) {
		rs = a.readers(v)
		if len(rs) != 1 || rs[0].GetOpType() != "Mul" || a.g.IsOutput(v) {
			return nil, nil
		}
		m := rs[0]
		other := otherInput(m, v)
		switch {
		case other == x && !haveX:
			haveX = true
		case !haveHalf && a.g.Static(other):
			if c, ok := a.probes[0].scalar(other); !ok || c != 0.5 {
				return nil, nil
			}
			haveHalf = true
		default:
			return nil, nil
		}
		nodes = append(nodes, m)
		v = m.GetOutput()[0]
	}
	if !registered("activation.gelu") {
		return nil, fail(nodes, "exact (erf) GELU: no layer type activation.gelu is registered in this build")
	}
	return &region{typ: "activation.gelu", kind: "gelu", inputs: []string{x}, output: v, nodes: nodes,
		fields: []field{{"approximate", "none"}}}, nil
}

// hidden lists layer types the lift must act as if they were not
// registered: tests use it to see what a build without them reports.
var hidden = map[string]bool{}

// registered reports whether a layer type is available to lift into.
func registered(id string) bool {
	_, err := registry.Lookup(id)
	return err == nil && !hidden[id]
}

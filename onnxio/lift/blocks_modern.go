package lift

import "gorgonia.org/tensor"

// RMSNorm, the transformer-block piece beyond LayerNorm whose recognizer
// is still here (the attention op's per-head qk_norm reads it too).

// onlyReader returns the single live reader of v, or nil when v has
// another number of readers or is a graph output.
func (a *analysis) onlyReader(v string) *node {
	rs := a.readers(v)
	if len(rs) != 1 || a.g.IsOutput(v) {
		return nil
	}
	return rs[0]
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

package lift

import (
	"fmt"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio/match"
	"github.com/attnrun/attnrun/registry"
)

// block recognizes the layer, other than attention, that starts at node n
// among those whose recognizers are still here: a layer norm or an
// RMSNorm. (The others, from the residual Add to the MLP, are late
// patterns next to their layers: layers/*_lift.go.) It returns nil, nil
// when n starts none of them.
func (a *analysis) block(n *node) (*region, *failure) {
	switch n.GetOpType() {
	case "Pow":
		return a.powBlock(n)
	case "LayerNormalization":
		return a.layerNorm(n)
	case "ReduceMean":
		return a.layerNormDecomposed(n)
	}
	return nil, nil
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
		f, _ := match.Floats(t)
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

// hidden lists layer types the lift must act as if they were not
// registered: tests use it to see what a build without them reports.
var hidden = map[string]bool{}

// registered reports whether a layer type is available to lift into.
func registered(id string) bool {
	_, err := registry.Lookup(id)
	return err == nil && !hidden[id]
}

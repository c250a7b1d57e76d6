package layers

import (
	"cmp"
	"fmt"
	"slices"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio/match"
)

// norm.layer in ONNX graphs: LayerNormalization (opset 17) over the last
// axis, or the ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div form older
// opsets export nn.LayerNorm as, with the optional Mul by the weight and
// Add of the bias.

func init() {
	match.RegisterPattern(match.Pattern{Name: "norm.layer", Op: "LayerNormalization", Late: true, Match: liftLayerNorm})
	match.RegisterPattern(match.Pattern{Name: "norm.layer/decomposed", Op: "ReduceMean", Late: true, Match: liftLayerNormDecomposed})
}

// liftLayerNorm lifts a LayerNormalization node.
func liftLayerNorm(g match.Graph, n *match.Node) (*match.Layer, error) {
	ins := n.Inputs()
	shape, _ := g.Shape(ins[0])
	axis := n.Int("axis", -1)
	if axis < 0 {
		axis += int64(len(shape))
	}
	if axis != int64(len(shape)-1) {
		return nil, match.Refuse([]*match.Node{n}, "layer norm over axes from %d of a rank-%d tensor; norm.layer normalizes the last axis", axis, len(shape))
	}
	scale, bias := ins[1], ""
	if len(ins) > 2 {
		bias = ins[2]
	}
	return layerNormLayer(g, []*match.Node{n}, ins[0], n.Output(), scale, bias, n.Float("epsilon", 1e-5))
}

// liftLayerNormDecomposed lifts the decomposed form from its first
// ReduceMean.
func liftLayerNormDecomposed(g match.Graph, mean *match.Node) (*match.Layer, error) {
	x := mean.Inputs()[0]
	var copies []*match.Node // Casts of float32 to float32 on the way (GPT-2's exports cast x - mean before squaring it)
	var next func(v, op string) *match.Node
	next = func(v, op string) *match.Node {
		for _, r := range g.Readers(v) {
			if r.Op() == op {
				return r
			}
		}
		for _, r := range g.Readers(v) {
			if match.IsFloatCopy(g, r) && !g.IsOutput(r.Output()) {
				if n := next(r.Output(), op); n != nil {
					if !slices.Contains(copies, r) {
						copies = append(copies, r)
					}
					return n
				}
			}
		}
		return nil
	}
	if !match.ReducesLastAxis(g, mean) {
		return nil, nil
	}
	// x - mean, once or computed again for the division (PyTorch 1.x
	// BertLayerNorm writes (x - u) twice).
	var subs []*match.Node
	var pow, div *match.Node
	for _, r := range g.Readers(mean.Output()) {
		if r.Op() != "Sub" || r.Inputs()[0] != x || r.Inputs()[1] != mean.Output() {
			continue
		}
		subs = append(subs, r)
		pow = cmp.Or(pow, next(r.Output(), "Pow"))
		div = cmp.Or(div, next(r.Output(), "Div"))
	}
	if pow == nil || div == nil || len(subs) > 2 {
		return nil, nil
	}
	if e, ok := scalarAt(g, pow.Inputs()[1]); !ok || e != 2 {
		return nil, nil
	}
	mean2 := next(pow.Output(), "ReduceMean")
	if mean2 == nil || !match.ReducesLastAxis(g, mean2) {
		return nil, nil
	}
	addEps := next(mean2.Output(), "Add")
	if addEps == nil {
		return nil, nil
	}
	eps, ok := scalarAt(g, otherInput(addEps, mean2.Output()))
	sqrt := next(addEps.Output(), "Sqrt")
	if !ok || sqrt == nil || div.Inputs()[1] != sqrt.Output() {
		return nil, nil
	}
	nodes := append([]*match.Node{mean}, subs...)
	nodes = append(append(nodes, copies...), pow, mean2, addEps, sqrt, div)
	out, scale, bias := div.Output(), "", ""
	if m := onlyReader(g, out); m != nil && m.Op() == "Mul" {
		if s := otherInput(m, out); s != "" && !g.IsData(s) {
			scale, out = s, m.Output()
			nodes = append(nodes, m)
		}
	}
	if a := onlyReader(g, out); a != nil && a.Op() == "Add" {
		if b := otherInput(a, out); b != "" && !g.IsData(b) {
			bias, out = b, a.Output()
			nodes = append(nodes, a)
		}
	}
	return layerNormLayer(g, nodes, x, out, scale, bias, float32(eps))
}

// layerNormLayer is norm.layer over x's last axis, with weight scale and
// bias bias ("" for ones and zeros).
func layerNormLayer(g match.Graph, nodes []*match.Node, x, out, scale, bias string, eps float32) (*match.Layer, error) {
	if !g.Registered("norm.layer") {
		return nil, match.Refuse(nodes, "layer normalization: no layer type norm.layer is registered in this build")
	}
	shape, _ := g.Shape(x)
	width := shape[len(shape)-1]
	vec := func(v string, fill float32) (*tensor.Dense, error) {
		if v == "" {
			data := make([]float32, width)
			for i := range data {
				data[i] = fill
			}
			return tensor.New(tensor.WithShape(width), tensor.WithBacking(data)), nil
		}
		t, err := g.ValueAt(0, v)
		if err != nil || t.Shape().TotalSize() != width {
			return nil, fmt.Errorf("layer norm parameter %q is not a vector of %d", v, width)
		}
		f, err := match.Float32(t)
		if err != nil {
			return nil, err
		}
		if err := f.Reshape(width); err != nil {
			return nil, err
		}
		return f, nil
	}
	w, err := vec(scale, 1)
	if err != nil {
		return nil, match.Refuse(nodes, "%v", err)
	}
	b, err := vec(bias, 0)
	if err != nil {
		return nil, match.Refuse(nodes, "%v", err)
	}
	return &match.Layer{Type: "norm.layer", Name: "norm", Inputs: []string{x}, Output: out, Nodes: nodes,
		Config: []match.Field{{Key: "d", Value: width}, {Key: "eps", Value: eps}},
		Params: []match.Param{{Name: "weight", Value: w, From: scale}, {Name: "bias", Value: b, From: bias}}}, nil
}

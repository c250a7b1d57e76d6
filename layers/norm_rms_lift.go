package layers

import "github.com/attnrun/attnrun/onnxio/match"

// norm.rms in ONNX graphs: match.RMSNorm, anchored at its Pow(x, 2), and
// ONNX's RMSNormalization op.

func init() {
	match.RegisterPattern(match.Pattern{Name: "norm.rms", Op: "Pow", Late: true, Match: liftRMSNorm})
	match.RegisterPattern(match.Pattern{Name: "norm.rms/op", Op: "RMSNormalization", Late: true, Match: liftRMSNormalization})
}

// liftRMSNormalization lifts ONNX's RMSNormalization op (opset 23) over
// the last axis, with its scale as the weight.
func liftRMSNormalization(g match.Graph, n *match.Node) (*match.Layer, error) {
	ins := n.Inputs()
	shape, err := g.Shape(ins[0])
	if err != nil || len(shape) == 0 || len(ins) < 2 {
		return nil, nil
	}
	axis := n.Int("axis", -1)
	if axis < 0 {
		axis += int64(len(shape))
	}
	nodes := []*match.Node{n}
	if axis != int64(len(shape)-1) {
		return nil, match.Refuse(nodes, "RMSNormalization over axes from %d of a rank-%d tensor; norm.rms normalizes the last axis", axis, len(shape))
	}
	width := shape[len(shape)-1]
	if g.IsData(ins[1]) {
		return nil, match.Refuse(nodes, "RMSNormalization scale %q is computed from the inputs; norm.rms has a weight", ins[1])
	}
	t, err := g.ValueAt(0, ins[1])
	if err != nil || t.Shape().TotalSize() != width {
		return nil, match.Refuse(nodes, "RMSNormalization scale %q is not a vector of %d", ins[1], width)
	}
	w, err := match.Float32(t)
	if err != nil {
		return nil, err
	}
	if err := w.Reshape(width); err != nil {
		return nil, err
	}
	if !g.Registered("norm.rms") {
		return nil, match.Refuse(nodes, "RMSNormalization: no layer type norm.rms is registered in this build")
	}
	return &match.Layer{Type: "norm.rms", Name: "norm", Inputs: []string{ins[0]}, Output: n.Output(), Nodes: nodes,
		Config: []match.Field{{Key: "d", Value: width}, {Key: "eps", Value: n.Float("epsilon", 1e-5)}},
		Params: []match.Param{{Name: "weight", Value: w, From: ins[1]}}}, nil
}

// liftRMSNorm lifts the RMSNorm that starts at pow.
func liftRMSNorm(g match.Graph, pow *match.Node) (*match.Layer, error) {
	r, err := match.MatchRMSNorm(g, pow)
	if err != nil || r == nil {
		return nil, err
	}
	if !g.Registered("norm.rms") {
		return nil, match.Refuse(r.Nodes, "RMSNorm: no layer type norm.rms is registered in this build")
	}
	return &match.Layer{Type: "norm.rms", Name: "norm", Inputs: []string{r.Input}, Output: r.Output, Nodes: r.Nodes,
		Config: []match.Field{{Key: "d", Value: r.Width}, {Key: "eps", Value: r.Eps}},
		Params: []match.Param{{Name: "weight", Value: r.Weight, From: r.WeightFrom}}}, nil
}

package layers

import "github.com/attnrun/attnrun/onnxio/match"

// nn.concat in ONNX graphs: a Concat of computed tensors on the feature
// (last) axis.

func init() {
	match.RegisterPattern(match.Pattern{Name: "nn.concat", Op: "Concat", Late: true, Match: liftConcat})
}

// liftConcat lifts a Concat anchor.
func liftConcat(g match.Graph, n *match.Node) (*match.Layer, error) {
	anchor := []*match.Node{n}
	for _, in := range n.Inputs() {
		if !g.IsData(in) {
			return nil, match.Refuse(anchor, "concatenates the constant %q with computed values", in)
		}
	}
	shape, _ := g.Shape(n.Output())
	if len(shape) != 2 && len(shape) != 3 {
		return nil, match.Refuse(anchor, "concatenates tensors of rank %d; nn.concat joins (T, d) or (B, T, d) token streams", len(shape))
	}
	axis := n.Int("axis", 0)
	if axis < 0 {
		axis += int64(len(shape))
	}
	if axis != int64(len(shape)-1) {
		return nil, match.Refuse(anchor, "concatenates along axis %d of %d; nn.concat joins features (the last axis)", axis, len(shape))
	}
	return &match.Layer{Type: "nn.concat", Name: "concat", Inputs: n.Inputs(), Output: n.Output(), Nodes: anchor}, nil
}

package layers

import "github.com/attnrun/attnrun/onnxio/match"

// pool.first in ONNX graphs: hidden_states[:, 0] as exporters write it, a
// Gather on axis 1 of a (B, T, d) tensor by the static scalar index 0 (a
// scalar index drops the axis: (B, d)).

func init() {
	match.RegisterPattern(match.Pattern{Name: "pool.first", Op: "Gather", Late: true, Match: liftFirstPool})
}

// liftFirstPool lifts a Gather anchor that takes the first token.
func liftFirstPool(g match.Graph, n *match.Node) (*match.Layer, error) {
	ins := n.Inputs()
	if len(ins) != 2 || !g.IsData(ins[0]) || g.IsData(ins[1]) {
		return nil, nil
	}
	idx, err := g.Constant(ins[1])
	if err != nil || idx.Dims() != 0 {
		return nil, nil
	}
	if first, ok := g.Scalar(ins[1]); !ok || first != 0 {
		return nil, nil
	}
	shape, err := g.Shape(ins[0])
	if err != nil || len(shape) != 3 {
		return nil, nil
	}
	if axis := n.Int("axis", 0); axis != 1 && axis != -2 {
		return nil, nil
	}
	if !g.Registered("pool.first") {
		return nil, match.Refuse([]*match.Node{n}, "the first token of each sequence: no layer type pool.first is registered in this build")
	}
	return &match.Layer{Type: "pool.first", Name: "pool", Inputs: []string{ins[0]}, Output: n.Output(), Nodes: []*match.Node{n}}, nil
}

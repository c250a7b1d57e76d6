package layers

import "github.com/attnrun/attnrun/onnxio/match"

// nn.select in ONNX graphs: a Squeeze of the last axis of one piece of a
// Split of the last axis into pieces of one feature (a question-answering
// head's logits.split(1, dim=-1), TensorFlow's tf.split and unstack). The
// layer reads the Split's input; the Split itself is then read by no
// lifted layer and goes with them.

func init() {
	match.RegisterPattern(match.Pattern{Name: "nn.select", Op: "Squeeze", Late: true, Match: liftSelect})
}

// liftSelect lifts a Squeeze anchor of a one-feature piece of a Split.
func liftSelect(g match.Graph, sq *match.Node) (*match.Layer, error) {
	piece := sq.Inputs()[0]
	split := g.Producer(piece)
	if split == nil || split.Op() != "Split" || !g.IsData(split.Inputs()[0]) {
		return nil, nil
	}
	x := split.Inputs()[0]
	shape, err := g.Shape(x)
	if err != nil || len(shape) < 2 {
		return nil, nil
	}
	last := int64(len(shape) - 1)
	if axis := split.Int("axis", 0); axis != last && axis != -1 {
		return nil, nil
	}
	index := -1
	for k, out := range split.Outputs() {
		s, err := g.Shape(out)
		if err != nil || s[len(s)-1] != 1 {
			return nil, nil // every piece one feature: piece k is feature k
		}
		if out == piece {
			index = k
		}
	}
	if index < 0 || !squeezesLast(g, sq, len(shape)) {
		return nil, nil
	}
	if !g.Registered("nn.select") {
		return nil, match.Refuse([]*match.Node{sq}, "one feature of the last axis: no layer type nn.select is registered in this build")
	}
	return &match.Layer{Type: "nn.select", Name: "select", Inputs: []string{x}, Output: sq.Output(), Nodes: []*match.Node{sq},
		Config: []match.Field{{Key: "index", Value: index}}}, nil
}

// squeezesLast reports whether a Squeeze removes exactly the last axis of
// a rank-rank tensor (axes as an attribute, or as a static input from
// opset 13).
func squeezesLast(g match.Graph, sq *match.Node, rank int) bool {
	axes := sq.Ints("axes")
	if ins := sq.Inputs(); len(ins) > 1 && ins[1] != "" {
		t, err := g.Constant(ins[1])
		if err != nil {
			return false
		}
		f, err := match.Floats(t)
		if err != nil {
			return false
		}
		axes = nil
		for _, v := range f {
			axes = append(axes, int64(v))
		}
	}
	return len(axes) == 1 && (axes[0] == -1 || axes[0] == int64(rank-1))
}

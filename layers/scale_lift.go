package layers

import (
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio/match"
)

// nn.scale in ONNX graphs: a Mul of a computed float32 tensor by a static
// scalar, or a Div of one by it, the same at every probe shape (Granite's
// residual_multiplier and logits_scaling). It is late and offered after
// the other patterns of its node, and it declines a scale that is the
// first step of a longer elementwise function of the same input (x/√2
// inside GELU, x/cap before softcap's Tanh), which the activations'
// patterns read as a whole.

func init() {
	for _, op := range []string{"Mul", "Div"} {
		match.RegisterPattern(match.Pattern{Name: "nn.scale/" + op, Op: op, Late: true, Priority: 1, Match: liftScale})
	}
}

// liftScale lifts x·c, c·x or x/c standing alone.
func liftScale(g match.Graph, n *match.Node) (*match.Layer, error) {
	f, x, ok := scalarFactor(g, n)
	if !ok || !isFloat32(g, x) {
		return nil, nil
	}
	c := chainFrom(g, x)
	for _, r := range g.Readers(n.Output()) {
		if c.by[r.Output()] != nil { // an activation's chain goes on from here
			return nil, nil
		}
	}
	field := match.Field{Key: "factor", Value: float32(f)}
	if n.Op() == "Div" {
		d, _ := g.Scalar(n.Inputs()[1]) // scalarFactor read it
		field = match.Field{Key: "divisor", Value: float32(d)}
	}
	if !g.Registered("nn.scale") {
		return nil, match.Refuse([]*match.Node{n}, "a %s by the constant %g: no layer type nn.scale is registered in this build", n.Op(), f)
	}
	return &match.Layer{Type: "nn.scale", Name: "scale", Inputs: []string{x}, Output: n.Output(), Nodes: []*match.Node{n},
		Config: []match.Field{field}}, nil
}

// isFloat32 reports whether a value holds float32 numbers.
func isFloat32(g match.Graph, v string) bool {
	t, err := g.ValueAt(0, v)
	return err == nil && t.Dtype() == tensor.Float32
}

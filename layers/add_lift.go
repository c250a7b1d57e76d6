package layers

import (
	"slices"

	"github.com/attnrun/attnrun/onnxio/match"
)

// nn.add in ONNX graphs: an Add of two computed tensors of one shape (a
// residual connection). An Add of a constant is position.learned's.

func init() {
	match.RegisterPattern(match.Pattern{Name: "nn.add", Op: "Add", Late: true, Match: liftAdd})
}

// liftAdd lifts an Add anchor whose inputs are both computed.
func liftAdd(g match.Graph, n *match.Node) (*match.Layer, error) {
	ins := n.Inputs()
	x, y := ins[0], ins[1]
	if !g.IsData(x) || !g.IsData(y) {
		return nil, nil
	}
	anchor := []*match.Node{n}
	for i := range g.Probes() {
		sx, _ := g.ShapeAt(i, x)
		sy, _ := g.ShapeAt(i, y)
		if !slices.Equal(sx, sy) {
			return nil, match.Refuse(anchor, "add of shapes %s and %s: nn.add sums tensors of one shape", fmtShape(sx), fmtShape(sy))
		}
	}
	return &match.Layer{Type: "nn.add", Name: "residual", Inputs: []string{x, y}, Output: n.Output(), Nodes: anchor}, nil
}

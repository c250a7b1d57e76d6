package layers

import "github.com/attnrun/attnrun/onnxio/match"

// nn.linear in ONNX graphs: a Linear outside any larger layer, MatMul by
// a static matrix with an optional Add of a bias, or Gemm.

func init() {
	match.RegisterPattern(match.Pattern{Name: "nn.linear", Op: "MatMul", Late: true, Match: liftLinear})
	match.RegisterPattern(match.Pattern{Name: "nn.linear/gemm", Op: "Gemm", Late: true, Match: liftLinear})
}

// liftLinear lifts the Linear whose first node is n.
func liftLinear(g match.Graph, n *match.Node) (*match.Layer, error) {
	l := linearAt(g, n)
	if l == nil {
		return nil, nil
	}
	return &match.Layer{Type: "nn.linear", Name: "linear", Inputs: []string{l.Input}, Output: l.Output, Nodes: l.Nodes,
		Config: []match.Field{{Key: "d_in", Value: l.In}, {Key: "d_out", Value: l.Out}, {Key: "bias", Value: l.Bias != nil}},
		Params: l.Params("")}, nil
}

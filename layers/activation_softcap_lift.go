package layers

import "github.com/attnrun/attnrun/onnxio/match"

// activation.softcap in ONNX graphs: a Tanh of a computed tensor is
// softcap with cap 1, cap·tanh(x/cap) being exactly tanh(x) then (BERT's
// pooler activation).

func init() {
	match.RegisterPattern(match.Pattern{Name: "activation.softcap", Op: "Tanh", Late: true, Match: liftTanh})
}

// liftTanh lifts a Tanh anchor.
func liftTanh(g match.Graph, n *match.Node) (*match.Layer, error) {
	x := n.Inputs()[0]
	if !g.IsData(x) {
		return nil, nil
	}
	if !g.Registered("activation.softcap") {
		return nil, match.Refuse([]*match.Node{n}, "tanh: no layer type activation.softcap is registered in this build")
	}
	return &match.Layer{Type: "activation.softcap", Name: "tanh", Inputs: []string{x}, Output: n.Output(), Nodes: []*match.Node{n},
		Config: []match.Field{{Key: "cap", Value: 1.0}}}, nil
}

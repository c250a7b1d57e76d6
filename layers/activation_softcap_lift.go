package layers

import "github.com/attnrun/attnrun/onnxio/match"

// activation.softcap in ONNX graphs: cap·tanh(x/cap), as Gemma 2 exports
// its final logit softcapping: a Div by cap (or Mul by 1/cap), the Tanh,
// and a Mul by cap, anchored at the Tanh.

func init() {
	match.RegisterPattern(match.Pattern{Name: "activation.softcap", Op: "Tanh", Late: true, Match: liftSoftcap})
}

// liftSoftcap lifts the softcapping around tanh.
func liftSoftcap(g match.Graph, tanh *match.Node) (*match.Layer, error) {
	in := g.Producer(tanh.Inputs()[0])
	if in == nil || onlyReader(g, in.Output()) == nil {
		return nil, nil
	}
	inv, x, ok := scalarFactor(g, in)
	if !ok || !(inv > 0) {
		return nil, nil
	}
	out := scaledBy(g, tanh.Output(), 1/inv)
	if out == nil {
		return nil, nil
	}
	nodes := []*match.Node{in, tanh, out}
	if !g.Registered("activation.softcap") {
		return nil, match.Refuse(nodes, "softcapping: no layer type activation.softcap is registered in this build")
	}
	capped, _, _ := scalarFactor(g, out)
	return &match.Layer{Type: "activation.softcap", Name: "softcap", Inputs: []string{x}, Output: out.Output(), Nodes: nodes,
		Config: []match.Field{{Key: "cap", Value: capped}}}, nil
}

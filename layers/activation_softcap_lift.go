package layers

import "github.com/attnrun/attnrun/onnxio/match"

// activation.softcap in ONNX graphs, anchored at the Tanh: cap·tanh(x/cap),
// as Gemma 2 exports its final logit softcapping (a Div by cap or Mul by
// 1/cap, the Tanh, a Mul by cap); and a Tanh alone, which is softcap with
// cap 1, cap·tanh(x/cap) being exactly tanh(x) then (BERT's pooler
// activation).

func init() {
	match.RegisterPattern(match.Pattern{Name: "activation.softcap", Op: "Tanh", Late: true, Match: liftSoftcap})
}

// liftSoftcap lifts the softcapping around tanh, or tanh alone.
func liftSoftcap(g match.Graph, tanh *match.Node) (*match.Layer, error) {
	if l, err := liftScaledSoftcap(g, tanh); l != nil || err != nil {
		return l, err
	}
	x := tanh.Inputs()[0]
	if !g.IsData(x) {
		return nil, nil
	}
	if !g.Registered("activation.softcap") {
		return nil, match.Refuse([]*match.Node{tanh}, "tanh: no layer type activation.softcap is registered in this build")
	}
	return &match.Layer{Type: "activation.softcap", Name: "tanh", Inputs: []string{x}, Output: tanh.Output(), Nodes: []*match.Node{tanh},
		Config: []match.Field{{Key: "cap", Value: 1.0}}}, nil
}

// liftScaledSoftcap lifts cap·tanh(x/cap) around tanh; nil when the Tanh
// is not scaled so.
func liftScaledSoftcap(g match.Graph, tanh *match.Node) (*match.Layer, error) {
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

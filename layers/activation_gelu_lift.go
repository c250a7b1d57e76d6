package layers

import (
	"github.com/attnrun/attnrun/onnxio/match"
)

// activation.gelu in ONNX graphs: PyTorch's exact GELU,
// x · 0.5 · (1 + erf(x / √2)), and its tanh approximation,
// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), however the exporter orders
// their products and sums (a Pow or x·x·x; 0.5 first or last; Megatron's
// √(2/π)·x·(1 + 0.044715·x²)): recognized by evaluating the elementwise
// chain that starts at the anchor (elementwise_lift.go); and ONNX's Gelu
// op (opset 20), its approximate attribute "none" or "tanh" as it is.

func init() {
	for _, op := range []string{"Add", "Div", "Mul", "Pow", "Sub"} { // where a chain from x may start
		match.RegisterPattern(match.Pattern{Name: "activation.gelu/" + op, Op: op, Late: true, Match: liftGELU})
	}
	match.RegisterPattern(match.Pattern{Name: "activation.gelu/op", Op: "Gelu", Late: true, Match: liftGELUOp})
}

// geluForms are the functions activation.gelu computes, by its
// approximate field, and how a report names them.
var geluForms = []struct {
	approximate, name string
	f                 func(float64) float64
}{
	{"none", "exact (erf)", gelu},
	{"tanh", "tanh", geluTanh},
}

// liftGELU lifts the elementwise chain through n that computes either
// GELU.
func liftGELU(g match.Graph, n *match.Node) (*match.Layer, error) {
	fs := make([]func(float64) float64, len(geluForms))
	for i, form := range geluForms {
		fs[i] = form.f
	}
	k, x, out, nodes, ok := elementwiseAt(g, n, fs)
	if !ok {
		return nil, nil
	}
	if !g.Registered("activation.gelu") {
		return nil, match.Refuse(nodes, "%s GELU: no layer type activation.gelu is registered in this build", geluForms[k].name)
	}
	return &match.Layer{Type: "activation.gelu", Name: "gelu", Inputs: []string{x}, Output: out, Nodes: nodes,
		Config: []match.Field{{Key: "approximate", Value: geluForms[k].approximate}}}, nil
}

// liftGELUOp lifts ONNX's Gelu op of the default domain; its approximate
// attribute ("none" unless set) names the same two functions as
// nn.GELU's.
func liftGELUOp(g match.Graph, n *match.Node) (*match.Layer, error) {
	ins := n.Inputs()
	if len(ins) != 1 || !g.IsData(ins[0]) {
		return nil, nil
	}
	approximate := n.StringAttr("approximate", "none")
	if approximate != "none" && approximate != "tanh" {
		return nil, match.Refuse([]*match.Node{n}, "Gelu with approximate %q: activation.gelu computes \"none\" and \"tanh\"", approximate)
	}
	if !g.Registered("activation.gelu") {
		return nil, match.Refuse([]*match.Node{n}, "Gelu op: no layer type activation.gelu is registered in this build")
	}
	return &match.Layer{Type: "activation.gelu", Name: "gelu", Inputs: ins, Output: n.Output(), Nodes: []*match.Node{n},
		Config: []match.Field{{Key: "approximate", Value: approximate}}}, nil
}

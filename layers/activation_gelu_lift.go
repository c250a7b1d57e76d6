package layers

import (
	"math"

	"github.com/attnrun/attnrun/onnxio/match"
)

// activation.gelu in ONNX graphs: PyTorch's exact GELU,
// x · 0.5 · (1 + erf(x / √2)), anchored at the Div (or Mul by 1/√2) that
// feeds the Erf, and its tanh approximation,
// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), anchored at the Pow that
// cubes x or at x·x; and ONNX's Gelu op (opset 20), its approximate
// attribute "none" or "tanh" as it is.

func init() {
	match.RegisterPattern(match.Pattern{Name: "activation.gelu", Op: "Div", Late: true, Match: liftGELU})
	match.RegisterPattern(match.Pattern{Name: "activation.gelu/mul", Op: "Mul", Late: true, Match: liftGELU})
	match.RegisterPattern(match.Pattern{Name: "activation.gelu/tanh", Op: "Pow", Late: true, Match: liftGELUTanh})
	match.RegisterPattern(match.Pattern{Name: "activation.gelu/tanh-mul", Op: "Mul", Late: true, Match: liftGELUTanh})
	match.RegisterPattern(match.Pattern{Name: "activation.gelu/op", Op: "Gelu", Late: true, Match: liftGELUOp})
}

// liftGELU lifts the exact GELU.
func liftGELU(g match.Graph, n *match.Node) (*match.Layer, error) {
	x, nodes, out, ok := exactGELUAt(g, n)
	if !ok {
		return nil, nil
	}
	if !g.Registered("activation.gelu") {
		return nil, match.Refuse(nodes, "exact (erf) GELU: no layer type activation.gelu is registered in this build")
	}
	return &match.Layer{Type: "activation.gelu", Name: "gelu", Inputs: []string{x}, Output: out, Nodes: nodes,
		Config: []match.Field{{Key: "approximate", Value: "none"}}}, nil
}

// liftGELUTanh lifts the tanh GELU.
func liftGELUTanh(g match.Graph, n *match.Node) (*match.Layer, error) {
	nodes, out, ok := tanhGELUAt(g, n)
	if !ok {
		return nil, nil
	}
	if !g.Registered("activation.gelu") {
		return nil, match.Refuse(nodes, "tanh GELU: no layer type activation.gelu is registered in this build")
	}
	return &match.Layer{Type: "activation.gelu", Name: "gelu", Inputs: []string{n.Inputs()[0]}, Output: out, Nodes: nodes,
		Config: []match.Field{{Key: "approximate", Value: "tanh"}}}, nil
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

// exactGELUAt matches the exact GELU starting at n, the scaling by 1/√2:
// it returns x, the nodes and the output.
func exactGELUAt(g match.Graph, n *match.Node) (string, []*match.Node, string, bool) {
	f, x, ok := scalarFactor(g, n)
	if !ok || math.Abs(f-1/math.Sqrt2) > 1e-6 {
		return "", nil, "", false
	}
	rs := g.Readers(n.Output())
	if len(rs) != 1 || rs[0].Op() != "Erf" {
		return "", nil, "", false
	}
	erf := rs[0]
	nodes := []*match.Node{n, erf}
	rs = g.Readers(erf.Output())
	if len(rs) != 1 || rs[0].Op() != "Add" {
		return "", nil, "", false
	}
	one := rs[0]
	if c, ok := scalarAt(g, otherInput(one, erf.Output())); !ok || c != 1 {
		return "", nil, "", false
	}
	tail, out, ok := geluProducts(g, one, x)
	if !ok {
		return "", nil, "", false
	}
	return x, append(nodes, tail...), out, true
}

// geluProducts matches x·(1 + t)·0.5 from the Add of 1 on: the products
// by x and by 0.5 in either order, or by x·0.5 computed apart
// (pytorch-pretrained-bert's gelu). It returns the nodes and the output.
func geluProducts(g match.Graph, onePlus *match.Node, x string) ([]*match.Node, string, bool) {
	nodes := []*match.Node{onePlus}
	v, haveX, haveHalf := onePlus.Output(), false, false
	for !(haveX && haveHalf) {
		m := onlyReader(g, v)
		if m == nil || m.Op() != "Mul" {
			return nil, "", false
		}
		switch other := otherInput(m, v); {
		case other == x && !haveX:
			haveX = true
		case !haveX && !haveHalf && isHalfOf(g, other, x): // (x · 0.5) · (1 + t)
			haveX, haveHalf = true, true
			nodes = append(nodes, g.Producer(other))
		case !haveHalf && other != "" && !g.IsData(other):
			if c, ok := scalarAt(g, other); !ok || c != 0.5 {
				return nil, "", false
			}
			haveHalf = true
		default:
			return nil, "", false
		}
		nodes = append(nodes, m)
		v = m.Output()
	}
	return nodes, v, true
}

// isHalfOf reports whether v is x · 0.5 (or 0.5 · x), read by one node.
func isHalfOf(g match.Graph, v, x string) bool {
	m := g.Producer(v)
	if m == nil || m.Op() != "Mul" || len(g.Readers(v)) != 1 {
		return false
	}
	c, ok := scalarAt(g, otherInput(m, x))
	return ok && c == 0.5 && otherInput(m, x) != x
}

// tanhGELUAt matches GELU's tanh approximation starting where x is cubed:
// a Pow, as PyTorch exports nn.GELU(approximate="tanh"), or x·x, then
// times x (Hugging Face's gelu_pytorch_tanh in Gemma, and the 0.5 last).
// It returns the nodes and the output.
func tanhGELUAt(g match.Graph, first *match.Node) ([]*match.Node, string, bool) {
	ins := first.Inputs()
	x := ins[0]
	if !g.IsData(x) {
		return nil, "", false
	}
	cube := []*match.Node{first}
	switch first.Op() {
	case "Pow":
		if e, ok := scalarAt(g, ins[1]); !ok || e != 3 {
			return nil, "", false
		}
	case "Mul":
		times := onlyReader(g, first.Output())
		if ins[1] != x || times == nil || times.Op() != "Mul" || otherInput(times, first.Output()) != x {
			return nil, "", false
		}
		cube = append(cube, times)
	default:
		return nil, "", false
	}
	cubic := scaledBy(g, cube[len(cube)-1].Output(), 0.044715)
	if cubic == nil {
		return nil, "", false
	}
	inner := onlyReader(g, cubic.Output())
	if inner == nil || inner.Op() != "Add" || otherInput(inner, cubic.Output()) != x {
		return nil, "", false
	}
	scaled := scaledBy(g, inner.Output(), math.Sqrt(2/math.Pi))
	if scaled == nil {
		return nil, "", false
	}
	tanh := onlyReader(g, scaled.Output())
	if tanh == nil || tanh.Op() != "Tanh" {
		return nil, "", false
	}
	onePlus := onlyReader(g, tanh.Output())
	if onePlus == nil || onePlus.Op() != "Add" {
		return nil, "", false
	}
	if c, ok := scalarAt(g, otherInput(onePlus, tanh.Output())); !ok || c != 1 {
		return nil, "", false
	}
	tail, out, ok := geluProducts(g, onePlus, x)
	if !ok {
		return nil, "", false
	}
	return append(append(cube, cubic, inner, scaled, tanh), tail...), out, true
}

package layers

import (
	"math"

	"github.com/attnrun/attnrun/onnxio/match"
)

// activation.gelu in ONNX graphs: PyTorch's exact GELU,
// x · 0.5 · (1 + erf(x / √2)), anchored at the Div (or Mul by 1/√2) that
// feeds the Erf, and its tanh approximation,
// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), anchored at the Pow that
// cubes x.

func init() {
	match.RegisterPattern(match.Pattern{Name: "activation.gelu", Op: "Div", Late: true, Match: liftGELU})
	match.RegisterPattern(match.Pattern{Name: "activation.gelu/mul", Op: "Mul", Late: true, Match: liftGELU})
	match.RegisterPattern(match.Pattern{Name: "activation.gelu/tanh", Op: "Pow", Late: true, Match: liftGELUTanh})
	match.RegisterPattern(match.Pattern{Name: "activation.gelu/op", Op: "Gelu", Late: true, Match: liftGELUOp})
}

// liftGELUOp lifts ONNX's Gelu op (opset 20 on, which PyTorch's dynamo
// exporter writes at opset 23): its approximate attribute, "none" or
// "tanh", is the layer's.
func liftGELUOp(g match.Graph, n *match.Node) (*match.Layer, error) {
	x := n.Inputs()[0]
	if !g.IsData(x) {
		return nil, nil
	}
	approximate := "none"
	if a := n.Unwrap().Attr("approximate"); a != nil {
		approximate = string(a.GetS())
	}
	if approximate != "none" && approximate != "tanh" {
		return nil, match.Refuse([]*match.Node{n}, "Gelu with approximate=%q: ONNX knows \"none\" and \"tanh\"", approximate)
	}
	if !g.Registered("activation.gelu") {
		return nil, match.Refuse([]*match.Node{n}, "Gelu: no layer type activation.gelu is registered in this build")
	}
	return &match.Layer{Type: "activation.gelu", Name: "gelu", Inputs: []string{x}, Output: n.Output(), Nodes: []*match.Node{n},
		Config: []match.Field{{Key: "approximate", Value: approximate}}}, nil
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

// tanhGELUAt matches GELU's tanh approximation starting at the Pow that
// cubes x, as PyTorch exports nn.GELU(approximate="tanh"). It returns the
// nodes and the output.
func tanhGELUAt(g match.Graph, pow *match.Node) ([]*match.Node, string, bool) {
	ins := pow.Inputs()
	x := ins[0]
	if e, ok := scalarAt(g, ins[1]); !ok || e != 3 || !g.IsData(x) {
		return nil, "", false
	}
	cubic := scaledBy(g, pow.Output(), 0.044715)
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
	return append([]*match.Node{pow, cubic, inner, scaled, tanh}, tail...), out, true
}

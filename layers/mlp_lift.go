package layers

import (
	"slices"

	"github.com/attnrun/attnrun/onnxio/match"
)

// nn.mlp in ONNX graphs: the feed-forward network of a transformer block,
// fc2(act(fc1(x))) or down_proj(act(gate_proj(x)) · up_proj(x)), anchored
// at its first Linear. It runs before nn.linear, which would otherwise
// take each Linear on its own.

func init() {
	match.RegisterPattern(match.Pattern{Name: "nn.mlp", Op: "MatMul", Late: true, Priority: -1, Match: liftMLP})
	match.RegisterPattern(match.Pattern{Name: "nn.mlp/gemm", Op: "Gemm", Late: true, Priority: -1, Match: liftMLP})
}

// liftMLP lifts the MLP that starts at the Linear n; it declines when n
// starts none (a plain Linear).
func liftMLP(g match.Graph, n *match.Node) (*match.Layer, error) {
	if !g.Registered("nn.mlp") {
		return nil, nil
	}
	first := linearAt(g, n)
	if first == nil {
		return nil, nil
	}
	if gate := slicedGate(g, first); gate != nil {
		first = gate
	}
	act, actNodes, h := activationAfter(g, first.Output)
	if act == "" {
		return nil, nil
	}
	nodes := append(append([]*match.Node{}, first.Nodes...), actNodes...)
	var up *match.Linear
	if m := onlyReader(g, h); m != nil && m.Op() == "Mul" {
		var ok bool
		if up, ok = g.Linear(otherInput(m, h)); !ok || up.Input != first.Input || !same(onlyReader(g, up.Output), m) {
			return nil, nil
		}
		nodes = append(nodes, up.Nodes...)
		nodes = append(nodes, m)
		h = m.Output()
	}
	last := linearReading(g, h)
	if last == nil {
		return nil, nil
	}
	nodes = append(nodes, last.Nodes...)
	nodes = uniqueMatchNodes(nodes) // a fused gate_up_proj's MatMul is both gate's and up's
	lins := []*match.Linear{first, last}
	names := []string{"fc1", "fc2"}
	if up != nil {
		lins = []*match.Linear{first, up, last}
		names = []string{"gate_proj", "up_proj", "down_proj"}
	}
	bias := first.Bias != nil
	for _, l := range lins {
		if (l.Bias != nil) != bias || (l != last && l.Out != last.In) {
			return nil, nil // not the shape of nn.mlp: the pieces lift on their own
		}
	}
	if last.Out != first.In {
		return nil, nil
	}
	l := &match.Layer{Type: "nn.mlp", Name: "mlp", Inputs: []string{first.Input}, Output: last.Output, Nodes: nodes,
		Config: []match.Field{{Key: "d", Value: first.In}, {Key: "d_hidden", Value: first.Out}}}
	if up != nil {
		l.Config = append(l.Config, match.Field{Key: "gated", Value: true})
	}
	if act != "gelu" {
		l.Config = append(l.Config, match.Field{Key: "activation", Value: act})
	}
	if !bias {
		l.Config = append(l.Config, match.Field{Key: "bias", Value: false})
	}
	for i, lin := range lins {
		l.Params = append(l.Params, lin.Params(names[i])...)
	}
	return l, nil
}

// slicedGate returns the gate of a fused gate_up_proj that starts at
// whole (Phi-3): the Slice or Split of its output features that an activation
// reads, as its own Linear; nil when whole is not read so.
func slicedGate(g match.Graph, whole *match.Linear) *match.Linear {
	for _, r := range g.Readers(whole.Output) {
		if r.Op() != "Slice" && r.Op() != "Split" {
			continue
		}
		if gate, ok := g.Linear(r.Output()); ok {
			if act, _, _ := activationAfter(g, gate.Output); act != "" {
				return gate
			}
		}
	}
	return nil
}

// uniqueMatchNodes drops the repeats of nodes, keeping the first of each.
func uniqueMatchNodes(nodes []*match.Node) []*match.Node {
	var out []*match.Node
	for _, n := range nodes {
		if !slices.ContainsFunc(out, func(m *match.Node) bool { return same(m, n) }) {
			out = append(out, n)
		}
	}
	return out
}

// same reports whether two pattern nodes are one graph node.
func same(a, b *match.Node) bool {
	return a != nil && b != nil && a.Unwrap() == b.Unwrap()
}

// activationAfter recognizes the activation applied to v (v's readers):
// relu (Relu), silu (Sigmoid·v), gelu (erf form or ONNX's Gelu op) or
// gelu_tanh, with the nodes and the output.
func activationAfter(g match.Graph, v string) (string, []*match.Node, string) {
	if g.IsOutput(v) {
		return "", nil, ""
	}
	// Every reader of v must belong to the activation; the lifter rejects
	// the layer otherwise.
	for _, r := range g.Readers(v) {
		switch r.Op() {
		case "Relu":
			return "relu", []*match.Node{r}, r.Output()
		case "Sigmoid":
			if m := onlyReader(g, r.Output()); m != nil && m.Op() == "Mul" && otherInput(m, r.Output()) == v {
				return "silu", []*match.Node{r, m}, m.Output()
			}
		case "Add", "Div", "Mul", "Pow", "Sub":
			if name, nodes, out, ok := geluAt(g, r, v); ok {
				return name, nodes, out
			}
		case "Gelu": // ONNX's op (opset 20)
			switch r.StringAttr("approximate", "none") {
			case "none":
				return "gelu", []*match.Node{r}, r.Output()
			case "tanh":
				return "gelu_tanh", []*match.Node{r}, r.Output()
			}
		}
	}
	return "", nil, ""
}

// geluAt recognizes either GELU computed from v through n, written however
// the exporter orders it (elementwise_lift.go): "gelu" (the exact form only
// where its layer is available) or "gelu_tanh", with the nodes and the
// output.
func geluAt(g match.Graph, n *match.Node, v string) (string, []*match.Node, string, bool) {
	k, x, out, nodes, ok := elementwiseAt(g, n, []func(float64) float64{gelu, geluTanh})
	switch {
	case !ok || x != v:
		return "", nil, "", false
	case k == 0 && g.Registered("activation.gelu"):
		return "gelu", nodes, out, true
	case k == 1:
		return "gelu_tanh", nodes, out, true
	}
	return "", nil, "", false
}

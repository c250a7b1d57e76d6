package layers

import (
	"math"
	"slices"

	"github.com/attnrun/attnrun/onnxio/match"
)

// Helpers the layers' lift patterns share: reading the graph around an
// anchor as match.Graph shows it.

// onlyReader returns the single node that reads v's contents, or nil.
func onlyReader(g match.Graph, v string) *match.Node { return match.OnlyReader(g, v) }

// otherInput returns the input of binary node n that is not v.
func otherInput(n *match.Node, v string) string { return match.OtherInput(n, v) }

// scalarAt returns the number a single-element value holds at the first
// probe shape.
func scalarAt(g match.Graph, v string) (float64, bool) { return g.ScalarAt(0, v) }

// scalarFactor reads n as x·c, c·x or x/c with x computed from the graph
// inputs and c a static nonzero scalar, the same at every probe shape: it
// returns the factor (1/c for a Div) and x.
func scalarFactor(g match.Graph, n *match.Node) (float64, string, bool) {
	op := n.Op()
	if op != "Mul" && op != "Div" {
		return 0, "", false
	}
	ins := n.Inputs()
	for k := range 2 {
		x, c := ins[k], ins[1-k]
		if !g.IsData(x) || c == "" || g.IsData(c) || op == "Div" && k == 1 {
			continue
		}
		f, ok := scalarAt(g, c)
		if !ok || f == 0 {
			continue
		}
		for i := 1; i < g.Probes(); i++ { // the same number at every size
			if h, ok := g.ScalarAt(i, c); !ok || h != f {
				return 0, "", false
			}
		}
		if op == "Div" {
			f = 1 / f
		}
		return f, x, true
	}
	return 0, "", false
}

// closeTo compares a graph constant with the number it should be.
func closeTo(x, want float64) bool { return math.Abs(x-want) <= 1e-6*math.Max(1, math.Abs(want)) }

// scaledBy returns the node that multiplies v by a static scalar close to
// f (Mul by f or Div by 1/f), v's only reader.
func scaledBy(g match.Graph, v string, f float64) *match.Node {
	n := onlyReader(g, v)
	if n == nil {
		return nil
	}
	if h, x, ok := scalarFactor(g, n); ok && x == v && closeTo(h, f) {
		return n
	}
	return nil
}

// linearAt returns the Linear whose first node is n, a MatMul or Gemm,
// with the Add of its bias when the MatMul's only reader adds one.
func linearAt(g match.Graph, n *match.Node) *match.Linear {
	l, ok := g.Linear(n.Output())
	if !ok || l.Nodes[0].Unwrap() != n.Unwrap() {
		return nil
	}
	if n.Op() == "Gemm" {
		return l
	}
	next := onlyReader(g, l.Output)
	if next != nil && next.Op() == "Reshape" { // TensorFlow's Tensordot: the rows reshaped before the bias
		next = onlyReader(g, next.Output())
	}
	if next != nil && next.Op() == "Add" {
		if withBias, ok := g.Linear(next.Output()); ok && slices.ContainsFunc(withBias.Nodes, func(m *match.Node) bool { return m.Unwrap() == n.Unwrap() }) {
			return withBias
		}
	}
	return l
}

// linearReading finds a Linear whose input is v and v's only reader.
func linearReading(g match.Graph, v string) *match.Linear {
	rs := g.Readers(v)
	if len(rs) != 1 || g.IsOutput(v) || rs[0].Inputs()[0] != v {
		return nil
	}
	n := rs[0]
	switch n.Op() {
	case "Gemm":
		if l, ok := g.Linear(n.Output()); ok {
			return l
		}
	case "MatMul":
		out := n.Output()
		if next := g.Readers(out); len(next) == 1 && next[0].Op() == "Add" && !g.IsOutput(out) {
			if l, ok := g.Linear(next[0].Output()); ok && l.Input == v {
				return l
			}
		}
		if l, ok := g.Linear(out); ok {
			return l
		}
	}
	return nil
}

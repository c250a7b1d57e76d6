package layers

import (
	"math"
	"slices"

	"github.com/attnrun/attnrun/onnxio/match"
)

// Recognizing an elementwise function of one value by what it computes
// rather than by how it is written: exporters spell the same formula with
// its products and sums in any order (GELU's tanh form as Hugging Face's
// GPT-2 and as Megatron write it), and one structural pattern per
// spelling never ends. Instead, the nodes that compute a function of x
// alone (through arithmetic on x and static scalars) are collected and
// evaluated on sample numbers, and the result is compared with the
// candidate activation's formula.

// chainLimit bounds how many nodes a chain collects: an activation is a
// handful of them.
const chainLimit = 32

// chainOps are the ops a chain evaluates: arithmetic on values of the
// chain and static scalars.
var chainOps = map[string]func(a []float64) float64{
	"Add":  func(a []float64) float64 { return a[0] + a[1] },
	"Sub":  func(a []float64) float64 { return a[0] - a[1] },
	"Mul":  func(a []float64) float64 { return a[0] * a[1] },
	"Div":  func(a []float64) float64 { return a[0] / a[1] },
	"Pow":  func(a []float64) float64 { return math.Pow(a[0], a[1]) },
	"Neg":  func(a []float64) float64 { return -a[0] },
	"Tanh": func(a []float64) float64 { return math.Tanh(a[0]) },
	"Erf":  func(a []float64) float64 { return math.Erf(a[0]) },
}

// chainArity is how many inputs each chain op takes.
func chainArity(op string) int {
	switch op {
	case "Neg", "Tanh", "Erf":
		return 1
	}
	return 2
}

// chain is the nodes that compute elementwise functions of one value x.
type chain struct {
	g match.Graph
	x string
	// by holds the chain's nodes by the value they compute; order lists
	// them as they were found, each after the nodes it reads.
	by    map[string]*match.Node
	order []*match.Node
}

// chainFrom collects the nodes that compute a function of x alone: every
// node of a chain op whose inputs are x, values the chain computes and
// static scalars (the same at every probe shape).
func chainFrom(g match.Graph, x string) *chain {
	c := &chain{g: g, x: x, by: map[string]*match.Node{}}
	for frontier := []string{x}; len(frontier) > 0 && len(c.order) < chainLimit; frontier = frontier[1:] {
		for _, r := range g.Readers(frontier[0]) {
			if out := r.Output(); c.by[out] == nil && c.takes(r) {
				c.by[out] = r
				c.order = append(c.order, r)
				frontier = append(frontier, out)
			}
		}
	}
	return c
}

// takes reports whether n computes a function of x from the chain's
// values and static scalars.
func (c *chain) takes(n *match.Node) bool {
	ins := n.Inputs()
	if chainOps[n.Op()] == nil || len(ins) != chainArity(n.Op()) || len(n.Outputs()) != 1 {
		return false
	}
	for _, in := range ins {
		if in == c.x || c.by[in] != nil {
			continue
		}
		if _, ok := c.g.Scalar(in); in == "" || c.g.IsData(in) || !ok {
			return false
		}
	}
	return true
}

// ancestors returns the chain's nodes that out is computed through, in
// the order the chain found them.
func (c *chain) ancestors(out string) []*match.Node {
	need := map[*match.Node]bool{}
	var visit func(v string)
	visit = func(v string) {
		n := c.by[v]
		if n == nil || need[n] {
			return
		}
		need[n] = true
		for _, in := range n.Inputs() {
			visit(in)
		}
	}
	visit(out)
	var nodes []*match.Node
	for _, n := range c.order {
		if need[n] {
			nodes = append(nodes, n)
		}
	}
	return nodes
}

// closed reports whether nodes, computing out, keep their other values to
// themselves: no node outside reads them and no graph output returns them.
func (c *chain) closed(nodes []*match.Node, out string) bool {
	for _, n := range nodes {
		v := n.Output()
		if v == out {
			continue
		}
		if c.g.IsOutput(v) {
			return false
		}
		for _, r := range c.g.Readers(v) {
			if !slices.ContainsFunc(nodes, func(n *match.Node) bool { return same(n, r) }) {
				return false
			}
		}
	}
	return true
}

// at evaluates the chain's value v at x.
func (c *chain) at(v string, x float64, memo map[string]float64) float64 {
	if v == c.x {
		return x
	}
	if y, ok := memo[v]; ok {
		return y
	}
	n := c.by[v]
	if n == nil { // a static scalar (takes checked it is one)
		s, _ := c.g.Scalar(v)
		return s
	}
	var args []float64
	for _, in := range n.Inputs() {
		args = append(args, c.at(in, x, memo))
	}
	y := chainOps[n.Op()](args)
	memo[v] = y
	return y
}

// chainSamples are the numbers a chain is compared with a formula at:
// both signs, around 0 and where activations bend.
var chainSamples = []float64{-5, -3, -2.2, -1.4, -0.9, -0.35, -0.05, 0, 0.12, 0.5, 1.1, 1.9, 2.7, 4}

// computes reports whether the chain's value out equals f at every sample,
// to within float32 constants' rounding.
func (c *chain) computes(out string, f func(float64) float64) bool {
	for _, x := range chainSamples {
		got, want := c.at(out, x, map[string]float64{}), f(x)
		if math.IsNaN(got) || math.Abs(got-want) > 1e-6+1e-6*math.Abs(want) {
			return false
		}
	}
	return true
}

// elementwiseAt finds the elementwise function of one value that anchor
// takes part in and that one of the candidates computes: it returns the
// candidate's index, the function's input and output and its nodes, or
// ok false. The function is the first value of the chain from one of
// anchor's data inputs, through anchor, that computes a candidate and
// whose other values no node outside reads.
func elementwiseAt(g match.Graph, anchor *match.Node, candidates []func(float64) float64) (k int, x, out string, nodes []*match.Node, ok bool) {
	for _, x := range anchor.Inputs() {
		if x == "" || !g.IsData(x) {
			continue
		}
		c := chainFrom(g, x)
		if c.by[anchor.Output()] == nil {
			continue
		}
		for _, n := range c.order {
			nodes := c.ancestors(n.Output())
			if !slices.ContainsFunc(nodes, func(n *match.Node) bool { return same(n, anchor) }) || !c.closed(nodes, n.Output()) {
				continue
			}
			for k, f := range candidates {
				if c.computes(n.Output(), f) {
					return k, x, n.Output(), nodes, true
				}
			}
		}
	}
	return 0, "", "", nil, false
}

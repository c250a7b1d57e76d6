package lift

import (
	"fmt"
	"slices"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// analysis is the state shared by the recognizers: the graph and its
// probes (one for a static graph, two for a dynamic one).
type analysis struct {
	g      *graph
	probes []*probe
	// ties are ties between input dimensions the recognizers learned that
	// the probes did not honour (tiedKeys): Lift reads the graph again
	// with them.
	ties []dimSum
	// live marks the data values some graph output depends on through data
	// edges. A data node whose outputs only feed Shape nodes (PyTorch emits
	// Transpose nodes just to take their shape) is not live: it decides no
	// number and belongs to no layer.
	live map[string]bool
	// source is the graph as written, which the self-check runs; g may be
	// the same computation spelled otherwise (graph.InOrder, readEinsums).
	source *onnxpb.ModelProto
	// repairs say how g differs from source, for the notes.
	repairs []string
	// keepMasks are the graph inputs read as Hugging Face attention
	// masks (mask.padding): the self-check feeds them 0s and 1s.
	keepMasks map[string]bool
	// lengthInputs are the graph inputs read as sequence lengths
	// (mask.lengths), with the tokens whose keys they count: the
	// self-check feeds lengths from 1 to the number of tokens.
	lengthInputs map[string]string
	// idBounds are the graph inputs read as ids, with how many rows the
	// tables they index have: the self-check feeds ids below that.
	idBounds map[string]int
	// cache is the KV-cache interface split off the graph (kvcache.go),
	// nil for a graph without one.
	cache *cacheSplit
	// weightInputs are the graph inputs read as weights (param_inputs.go):
	// source and g hold them as initializers of random values.
	weightInputs []string
	// fillInputs are the weight inputs declared as vectors of symbolic
	// size, which may hold one value for all rows (ParamInput.Fill).
	fillInputs []string
	// written are the nodes g reads otherwise (reading.written), as
	// written, by the node g reads in each's place.
	written map[*onnxpb.NodeProto]*onnxpb.NodeProto
}

// markLive computes the live values, walking back from the graph outputs.
func (a *analysis) markLive() {
	a.live = map[string]bool{}
	for _, o := range a.g.Outputs {
		a.live[o] = a.g.IsData(o)
	}
	for i := len(a.g.Nodes) - 1; i >= 0; i-- {
		n := a.g.Nodes[i]
		used := false
		for _, out := range n.GetOutput() {
			used = used || a.live[out]
		}
		if !used {
			continue
		}
		for _, in := range n.GetInput() {
			if a.g.IsData(in) && n.GetOpType() != "Shape" && n.GetOpType() != "Size" {
				a.live[in] = true
			}
		}
	}
}

// liveNode reports whether a data node decides some output's numbers.
func (a *analysis) liveNode(n *node) bool {
	for _, out := range n.GetOutput() {
		if a.live[out] {
			return true
		}
	}
	return false
}

// readers lists the live nodes that read v's contents.
func (a *analysis) readers(v string) []*node {
	var out []*node
	for _, c := range a.g.DataConsumers(v) {
		if a.liveNode(c) {
			out = append(out, c)
		}
	}
	return out
}

// isLayout reports whether n only moves the values of its first input:
// Transpose, Reshape, Slice, Gather with static indices and the like, with
// every other input static; Expand copies them (keys and values repeated
// for grouped-query attention).
func (a *analysis) isLayout(n *node) bool {
	switch n.GetOpType() {
	case "Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Slice", "Gather", "Split", "Identity", "Dropout", "Expand":
	default:
		return false
	}
	ins := n.GetInput()
	if len(ins) == 0 || !a.g.IsData(ins[0]) {
		return false
	}
	for _, in := range ins[1:] {
		if in != "" && !a.g.Static(in) {
			return false
		}
	}
	if n.GetOpType() == "Dropout" && len(ins) > 2 && ins[2] != "" {
		if t, ok := a.probes[0].scalar(ins[2]); !ok || t != 0 {
			return false // training_mode on
		}
	}
	return true
}

// scalarFactor recognizes x * c, c * x and x / c with c a static scalar, and
// returns the factor and x.
func (a *analysis) scalarFactor(n *node) (float64, string, bool) {
	op := n.GetOpType()
	if op != "Mul" && op != "Div" {
		return 0, "", false
	}
	ins := n.GetInput()
	for k := 0; k < 2; k++ {
		x, c := ins[k], ins[1-k]
		if !a.g.IsData(x) || !a.g.Static(c) || op == "Div" && k == 1 {
			continue
		}
		f, ok := a.probes[0].scalar(c)
		if !ok || f == 0 {
			continue
		}
		for _, p := range a.probes[1:] { // the same number at every size
			if g, ok := p.scalar(c); !ok || g != f {
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

// chain is a run of layout nodes (and, where allowed, scalar factors) that
// leads from base to value.
type chain struct {
	value, base string
	nodes       []*node // base to value, in order
	scales      []*node // the scalar factors among nodes
	scale       float64 // their product
	// as maps nodes traced as Identity on another input than their
	// data input (a rotation's last node, on the heads it rotates).
	as map[*node]string
}

// traceBack follows value back through layout nodes (and scalar factors
// when withScale) to the first value something else computes.
func (a *analysis) traceBack(value string, withScale bool) chain {
	c := chain{value: value, scale: 1}
	v := value
	for {
		n := a.g.Producer(v)
		if n == nil {
			break
		}
		if a.isLayout(n) {
			c.nodes = append(c.nodes, n)
			v = n.GetInput()[0]
			continue
		}
		if f, x, ok := a.scalarFactor(n); ok && withScale {
			c.nodes = append(c.nodes, n)
			c.scales = append(c.scales, n)
			c.scale *= f
			v = x
			continue
		}
		break
	}
	slices.Reverse(c.nodes)
	c.base = v
	return c
}

// traceForward follows v forward through layout nodes while each value has
// a single reader, and returns where it ends.
func (a *analysis) traceForward(v string) chain {
	c := chain{base: v, scale: 1}
	for !a.g.IsOutput(v) {
		rs := a.readers(v)
		if len(rs) != 1 || !a.isLayout(rs[0]) || rs[0].GetInput()[0] != v || len(rs[0].GetOutput()) != 1 {
			break
		}
		c.nodes = append(c.nodes, rs[0])
		v = rs[0].GetOutput()[0]
	}
	c.value = v
	return c
}

// tokens describes a token tensor at a probe: B sequences of T tokens of
// width D, (B, T, D) or (T, D) for B = 1.
type tokens struct{ B, T, D int }

// tokensOf reads a value's shape as a token tensor.
func (a *analysis) tokensOf(p *probe, v string) (tokens, error) {
	s, err := p.shape(v)
	if err != nil {
		return tokens{}, err
	}
	switch len(s) {
	case 3:
		return tokens{B: s[0], T: s[1], D: s[2]}, nil
	case 2:
		return tokens{B: 1, T: s[0], D: s[1]}, nil
	}
	return tokens{}, fmt.Errorf("%q has shape %s; attnrun layers take (T, d) or (B, T, d)", v, fmtShape(s))
}

// rowsOf traces a layout chain from a token tensor to v, where every row
// (last axis) of v must be a whole token in order: it returns the token
// index of each row of v.
func (a *analysis) rowsOf(p *probe, c chain) ([]int, error) {
	tok, err := a.tokensOf(p, c.base)
	if err != nil {
		return nil, err
	}
	shape, idx, err := p.trace(c.base, c.value, c.scales, c.as)
	if err != nil {
		return nil, err
	}
	if len(shape) == 0 || shape[len(shape)-1] != tok.D {
		return nil, fmt.Errorf("%q has shape %s: its last axis is not the feature axis of %q", c.value, fmtShape(shape), c.base)
	}
	n := len(idx) / tok.D
	out := make([]int, n)
	for r := 0; r < n; r++ {
		f := idx[r*tok.D]
		if f%tok.D != 0 {
			return nil, fmt.Errorf("%q mixes features of different tokens of %q", c.value, c.base)
		}
		for j := 1; j < tok.D; j++ {
			if idx[r*tok.D+j] != f+j {
				return nil, fmt.Errorf("%q reorders the features of %q", c.value, c.base)
			}
		}
		out[r] = f / tok.D
	}
	return out, nil
}

// fmtShape prints a shape as attnrun's one shape formatter does
// (array.FormatShape): (2, 6, 8), (3,).
func fmtShape(s []int) string { return array.FormatShape(s) }

// product multiplies dimensions; it is -1 when a dimension is negative or
// the product overflows (shapes come from files).
func product(s []int) int {
	return int(budget.Elements(s))
}

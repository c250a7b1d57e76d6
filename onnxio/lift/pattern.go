package lift

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/registry"
)

// Lifting patterns registered from outside this package.
//
// The built-in recognizers know attnrun's own layers. A layer type written
// elsewhere (see examples/cosine) teaches the lifter its structure with a
// Pattern, registered from an init function next to its registry.Register:
//
//	func init() {
//		lift.RegisterPattern(lift.Pattern{Name: "attention.cosine", Op: "Softmax", Match: matchCosine})
//	}
//
// Lift tries the built-in attention recognizer on every Softmax first; then,
// in graph order, it offers every node of a pattern's Op that no layer has
// claimed to the registered patterns, sorted by name, and the first that
// returns a Layer claims it. The layer is then wired, built and checked
// against the graph like any other: a pattern that recognizes the wrong
// thing yields an error naming the mismatch, never a wrong model.

// Pattern recognizes one layer type in ONNX graphs by its structure.
type Pattern struct {
	// Name identifies the pattern in reports ("pattern attention.cosine: ...");
	// by convention the ID of the layer type it lifts to. It must be unique.
	Name string
	// Op is the op type of the anchor node a match starts from, typically
	// "Softmax" for an attention variant.
	Op string
	// Match looks at the structure around anchor. It returns (nil, nil) when
	// the structure is not this pattern's, so that other patterns and the
	// unlifted report have their turn; an error when it is, but cannot be
	// lifted (the error becomes the anchor's reason in the report); or the
	// Layer the structure lifts to. g is valid only during the call.
	Match func(g *Graph, anchor *Node) (*Layer, error)
}

// Layer is what a Pattern lifts a part of the graph to: one attnrun layer.
// The nodes it replaces are found from Inputs and Output: every node
// between them. No value computed in between may be read from outside.
type Layer struct {
	// Type is the registered layer type, "attention.cosine".
	Type string
	// Config is the layer's config, written in this order after its name,
	// type and inputs: {d_in: 4, d_out: 3, causal: true}.
	Config []Field
	// Inputs are the graph values the layer reads, in the order of its
	// config's inputs; typically one, the token tensor.
	Inputs []string
	// Output is the graph value the layer computes.
	Output string
	// Params are the layer's parameters under their names within the
	// layer, with where the graph holds them; Lift loads them into the
	// model, and every parameter of the layer must be among them.
	Params []Param
	// Notes are assumptions the pattern made, shown with the result.
	Notes []string
}

// Field is one key of a lifted layer's config and its value.
type Field struct {
	// Key is the yaml key of the layer's config field, "d_in".
	Key string
	// Value is a string, a number, a bool or a []string, written as YAML
	// (a float32 prints at float32 precision: 0.3, not 0.30000001192092896).
	Value any
}

// Param is one parameter of a lifted layer.
type Param struct {
	// Name is the parameter's name within the layer, "W_query.weight".
	Name string
	// Value holds its numbers, in the layout the layer's Params uses
	// (nn.Linear weights (out, in)).
	Value *tensor.Dense
	// From is the graph value it was read from, for the mapping table;
	// "" when the numbers were computed rather than read.
	From string
	// Transposed records that the graph holds the value transposed, as
	// MatMul holds nn.Linear weights (in, out).
	Transposed bool
}

var (
	patternsMu sync.RWMutex
	patterns   = map[string]Pattern{}
)

// RegisterPattern makes a pattern available to every Lift. It is meant to
// be called from init and panics if the name is empty or taken, the op is
// empty, or Match is nil: programming errors that must surface at start-up,
// as with registry.Register.
func RegisterPattern(p Pattern) {
	switch {
	case p.Name == "":
		panic("lift: RegisterPattern with an empty name")
	case p.Op == "":
		panic(fmt.Sprintf("lift: RegisterPattern %q with an empty anchor op", p.Name))
	case p.Match == nil:
		panic(fmt.Sprintf("lift: RegisterPattern %q with a nil Match", p.Name))
	}
	patternsMu.Lock()
	defer patternsMu.Unlock()
	if _, dup := patterns[p.Name]; dup {
		panic(fmt.Sprintf("lift: RegisterPattern called twice for %q", p.Name))
	}
	patterns[p.Name] = p
}

// Patterns lists the names of the registered patterns, sorted.
func Patterns() []string {
	patternsMu.RLock()
	defer patternsMu.RUnlock()
	names := make([]string, 0, len(patterns))
	for name := range patterns {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// registeredPatterns returns the patterns sorted by name, so that the order
// they are tried in does not depend on package initialization order.
func registeredPatterns() []Pattern {
	patternsMu.RLock()
	defer patternsMu.RUnlock()
	out := make([]Pattern, 0, len(patterns))
	for _, p := range patterns {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// matchPatterns offers every live node no layer claims to the registered
// patterns anchored at its op. It runs after the built-in attention
// recognizer and before the other built-ins, so that a pattern claims its
// projections before they are taken for plain Linears. The first pattern
// that returns a Layer claims the node; when none does, the first error
// becomes the node's reason in the report, in place of a built-in's.
func (a *analysis) matchPatterns(p *plan) {
	ps := registeredPatterns()
	if len(ps) == 0 {
		return
	}
	for _, n := range a.g.Nodes {
		if p.claimed[n] || !a.liveNode(n) {
			continue
		}
		var first *failure
		for _, pat := range ps {
			if pat.Op != n.GetOpType() {
				continue
			}
			r, err := a.matchPattern(pat, n)
			if r != nil {
				p.add(r, nil)
				first = nil
				break
			}
			if err != nil && first == nil {
				first = fail([]*node{n}, "pattern %s: %v", pat.Name, err)
			}
		}
		if first != nil {
			p.failures = append(p.failures, first)
			p.failedBy[n] = first
		}
	}
}

// matchPattern runs one pattern's Match on an anchor, recovering from a
// panic in it, and turns the Layer it returns into a region.
func (a *analysis) matchPattern(pat Pattern, anchor *node) (r *region, err error) {
	defer func() {
		if v := recover(); v != nil {
			r, err = nil, fmt.Errorf("panic in Match: %v", v)
		}
	}()
	l, err := pat.Match(&Graph{a: a}, &Node{n: anchor})
	if err != nil || l == nil {
		return nil, err
	}
	if r, err = a.patternRegion(l, anchor); err != nil {
		return nil, err
	}
	if f := a.checkContained(r); f != nil {
		return nil, errors.New(strings.TrimPrefix(f.reason, r.kind+": "))
	}
	return r, nil
}

// patternRegion checks a pattern's Layer and builds its region: the nodes
// are every live data node between the inputs and the output.
func (a *analysis) patternRegion(l *Layer, anchor *node) (*region, error) {
	if _, err := registry.Lookup(l.Type); err != nil {
		return nil, err
	}
	if l.Output == "" || a.g.Producer(l.Output) == nil || !a.live[l.Output] {
		return nil, fmt.Errorf("output %q is not a value computed from the graph inputs for a graph output", l.Output)
	}
	if len(l.Inputs) == 0 {
		return nil, fmt.Errorf("the %s layer reads no input", l.Type)
	}
	nodes, err := a.between(l.Inputs, l.Output)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(nodes, anchor) {
		return nil, fmt.Errorf("the %s layer from %v to %q does not contain the anchor node %s", l.Type, l.Inputs, l.Output, anchor.Label())
	}
	r := &region{typ: l.Type, inputs: slices.Clone(l.Inputs), output: l.Output, nodes: nodes,
		kind: sanitize(l.Type), notes: slices.Clone(l.Notes)}
	for _, f := range l.Config {
		if f.Key == "" {
			return nil, fmt.Errorf("the %s layer's config has a field without a key", l.Type)
		}
		r.fields = append(r.fields, field{key: f.Key, value: f.Value})
	}
	for _, p := range l.Params {
		if p.Value == nil {
			return nil, fmt.Errorf("parameter %q has no value", p.Name)
		}
		if p.From != "" && !a.g.Static(p.From) {
			return nil, fmt.Errorf("parameter %q comes from %q, which is not a constant of the graph", p.Name, p.From)
		}
		rows := 1
		if p.Value.Dims() > 0 {
			rows = p.Value.Shape()[0]
		}
		r.params = append(r.params, param{name: p.Name, value: p.Value,
			pieces: []piece{{value: p.From, transposed: p.Transposed, hi: rows}}})
	}
	return r, nil
}

// between lists, in graph order, the live data nodes an output is computed
// by from the given inputs. It fails if the output also depends on a graph
// input that is not among them, or does not depend on one of them.
func (a *analysis) between(inputs []string, output string) ([]*node, error) {
	stop := map[string]bool{}
	for _, in := range inputs {
		if !a.g.IsData(in) {
			return nil, fmt.Errorf("input %q is not a value computed from the graph inputs", in)
		}
		stop[in] = true
	}
	reached := map[string]bool{}
	seen := map[*node]bool{}
	var nodes []*node
	var walk func(v string) error
	walk = func(v string) error {
		if stop[v] {
			reached[v] = true
			return nil
		}
		n := a.g.Producer(v)
		if n == nil {
			return fmt.Errorf("output %q depends on graph input %q, which is not among the layer's inputs %v", output, v, inputs)
		}
		if seen[n] {
			return nil
		}
		seen[n] = true
		nodes = append(nodes, n)
		for _, in := range n.GetInput() {
			if a.g.IsData(in) {
				if err := walk(in); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(output); err != nil {
		return nil, err
	}
	for _, in := range inputs {
		if !reached[in] {
			return nil, fmt.Errorf("output %q is not computed from input %q", output, in)
		}
	}
	return uniqueNodes(nodes), nil
}

// Graph is the view of an ONNX graph a Pattern matches against: who
// produces and who reads each value, and the numbers static values hold.
//
// Values are named as in the graph. A value is data when it depends on the
// contents of the graph inputs, and static otherwise: computed from
// initializers, Constants and input shapes alone. Static values are
// evaluated by running the graph at probe shapes (two sizes for a dynamic
// graph), so a pattern reads a scale or an axis however the exporter
// computed it.
type Graph struct {
	a *analysis
}

// Node is a node of the Graph.
type Node struct {
	n *node
}

// Opset is the graph's default-domain opset version.
func (g *Graph) Opset() int { return int(g.a.g.Opset) }

// Producer returns the node that computes a value, or nil for a graph
// input or an initializer.
func (g *Graph) Producer(value string) *Node {
	if n := g.a.g.Producer(value); n != nil {
		return &Node{n: n}
	}
	return nil
}

// Readers returns the nodes that read a value's contents (not merely its
// shape) and contribute to some graph output, in graph order.
func (g *Graph) Readers(value string) []*Node {
	var out []*Node
	for _, n := range g.a.readers(value) {
		out = append(out, &Node{n: n})
	}
	return out
}

// IsData reports whether a value depends on the contents of the graph
// inputs; a static value does not.
func (g *Graph) IsData(value string) bool { return g.a.g.IsData(value) }

// IsOutput reports whether a value is one of the graph's outputs.
func (g *Graph) IsOutput(value string) bool { return g.a.g.IsOutput(value) }

// Shape returns a value's shape at the first probe shape. Symbolic sizes
// are set to small numbers there: use it for ranks and fixed sizes such
// as feature widths.
func (g *Graph) Shape(value string) ([]int, error) { return g.a.probes[0].shape(value) }

// Constant returns a static value that is the same at every probe shape:
// a weight, an axis list, an epsilon. A value that changes with the input
// shapes (a mask cut to the sequence length) is an error.
func (g *Graph) Constant(value string) (*tensor.Dense, error) {
	if !g.a.g.Static(value) {
		return nil, fmt.Errorf("value %q depends on the graph inputs", value)
	}
	first, err := g.a.probes[0].value(value)
	if err != nil {
		return nil, err
	}
	want, err := floats64(first)
	if err != nil {
		return nil, fmt.Errorf("value %q: %w", value, err)
	}
	for _, p := range g.a.probes[1:] {
		t, err := p.value(value)
		if err != nil {
			return nil, err
		}
		got, err := floats64(t)
		if err != nil || !equalShapes(t.Shape(), first.Shape()) || !slices.Equal(got, want) {
			return nil, fmt.Errorf("value %q changes with the input shapes", value)
		}
	}
	return first, nil
}

// Scalar returns the number a static single-element value holds, the same
// at every probe shape, and whether it is one.
func (g *Graph) Scalar(value string) (float64, bool) {
	t, err := g.Constant(value)
	if err != nil || t.Shape().TotalSize() != 1 {
		return 0, false
	}
	f, err := floats64(t)
	if err != nil {
		return 0, false
	}
	return f[0], true
}

// Linear recognizes the nn.Linear that computes a value, however the
// exporter wrote it (MatMul by a static matrix with an optional Add of a
// bias, or Gemm), and reports whether there is one.
func (g *Graph) Linear(value string) (*Linear, bool) {
	l := g.a.matchLinear(value)
	if l == nil {
		return nil, false
	}
	return &Linear{Input: l.in, Output: l.out, In: l.dIn, Out: l.dOut, Weight: l.weight, Bias: l.bias, l: l}, true
}

// Scores follows a Softmax back to the product of queries and keys it
// normalizes: through scale factors (Mul or Div by a static scalar) and
// static masks (Where with -inf, or an added 0/-inf tensor), checking at
// every probe shape that a mask hides exactly the future keys. It fails
// when the softmax is not over the last axis, when the scores are masked
// by values computed from graph inputs (a padding mask), or when a mask is
// not causal.
func (g *Graph) Scores(softmax *Node) (*Scores, error) {
	a := g.a
	if softmax == nil || softmax.n.GetOpType() != "Softmax" {
		return nil, fmt.Errorf("Scores needs a Softmax node")
	}
	sc, f := a.scores(softmax.n)
	if f != nil {
		return nil, f
	}
	if f := a.softmaxAxis(softmax.n); f != nil {
		return nil, f
	}
	if len(sc.dynamic) > 0 {
		return nil, fmt.Errorf("the scores are masked by values computed from graph inputs %s", quoted(a.g.DependsOnInputs(sc.dynamic[0].value)))
	}
	causal := false
	for i, p := range a.probes {
		shape, err := p.shape(sc.qk.GetOutput()[0])
		if err != nil {
			return nil, err
		}
		if len(shape) < 2 {
			return nil, fmt.Errorf("the scores have shape %s: want (..., queries, keys)", fmtShape(shape))
		}
		m, err := a.maskAt(p, sc.masks, shape)
		if err != nil {
			return nil, err
		}
		c, err := causality(m, shape)
		if err != nil {
			return nil, err
		}
		if i > 0 && c != causal {
			return nil, fmt.Errorf("the mask is causal at one sequence length and not at another")
		}
		causal = c
	}
	return &Scores{Product: &Node{n: sc.qk}, Scale: sc.scale, Causal: causal}, nil
}

// Linear is an nn.Linear found in the graph: Output = Input Weightᵀ + Bias.
type Linear struct {
	// Input and Output are the graph values it reads and computes.
	Input, Output string
	// In and Out are its input and output widths.
	In, Out int
	// Weight is (Out, In), as nn.Linear stores it; Bias is (Out), or nil.
	Weight, Bias *tensor.Dense
	l            *linear
}

// Params lists the Linear as nn.Linear's parameters under a prefix:
// "<prefix>.weight", then "<prefix>.bias" if it has one, with where the
// graph holds them.
func (l *Linear) Params(prefix string) []Param {
	ps := []Param{{Name: prefix + ".weight", Value: l.Weight, From: l.l.weightValue, Transposed: l.l.transposed}}
	if l.Bias != nil {
		ps = append(ps, Param{Name: prefix + ".bias", Value: l.Bias, From: l.l.biasValue})
	}
	return ps
}

// Scores is the chain from a product of queries and keys to the softmax
// over it.
type Scores struct {
	// Product is the MatMul of the queries and the transposed keys.
	Product *Node
	// Scale is the product of the scalar factors applied to the scores.
	Scale float64
	// Causal reports that a mask hides every key after its query's position
	// and nothing else; false means no score is masked.
	Causal bool
}

// Op is the node's op type.
func (n *Node) Op() string { return n.n.GetOpType() }

// Name is the node's name, or "#index (op)" when the exporter left it
// unnamed; for messages.
func (n *Node) Name() string { return n.n.Label() }

// Inputs are the values the node reads, in order ("" for an omitted
// optional input).
func (n *Node) Inputs() []string { return slices.Clone(n.n.GetInput()) }

// Outputs are the values the node writes, in order.
func (n *Node) Outputs() []string { return slices.Clone(n.n.GetOutput()) }

// Output is the node's first output.
func (n *Node) Output() string {
	if outs := n.n.GetOutput(); len(outs) > 0 {
		return outs[0]
	}
	return ""
}

// Int returns an integer attribute, or def when the node does not have it.
func (n *Node) Int(name string, def int64) int64 { return n.n.Int(name, def) }

// Float returns a float attribute, or def when the node does not have it.
func (n *Node) Float(name string, def float32) float32 { return n.n.Float(name, def) }

// Ints returns an integer-list attribute (Transpose's perm), or nil.
func (n *Node) Ints(name string) []int64 {
	if at := n.n.Attr(name); at != nil {
		return slices.Clone(at.GetInts())
	}
	return nil
}

package lift

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio/match"
	"github.com/attnrun/attnrun/registry"
)

// Lifting patterns (package onnxio/match): the engine that offers the
// graph's nodes to the registered patterns and turns what they return into
// regions. Lift tries the built-in attention recognizer on every Softmax
// first; then, in graph order, it offers every node of a pattern's Op that
// no layer has claimed to the registered patterns, sorted by name, and the
// first that returns a Layer claims it.

// matchPatterns offers every live node no layer claims to the registered
// patterns anchored at its op. It runs after the built-in attention
// recognizer and before the other built-ins, so that a pattern claims its
// projections before they are taken for plain Linears. The first pattern
// that returns a Layer claims the node; when none does, the first error
// becomes the node's reason in the report, in place of a built-in's.
func (a *analysis) matchPatterns(p *plan) {
	ps := match.Registered()
	if len(ps) == 0 {
		return
	}
	for _, n := range a.g.Nodes {
		if p.claimed[n] || !a.liveNode(n) {
			continue
		}
		var first *failure
		for _, pat := range ps {
			if pat.Late || pat.Op != n.GetOpType() {
				continue
			}
			r, err := a.matchPattern(pat, n)
			if r != nil {
				p.add(r, nil)
				first = nil
				break
			}
			if err != nil && first == nil {
				first = patternFailure(pat, n, err)
			}
		}
		if first != nil {
			p.failures = append(p.failures, first)
			for _, m := range first.nodes {
				if m == n || p.failedBy[m] == nil && !p.claimed[m] {
					p.failedBy[m] = first
				}
			}
		}
	}
}

// matchLate offers node n to the late patterns anchored at its op. It
// returns the region of the first pattern that returns a Layer (or why
// that Layer cannot stand), else the first failure; nils when every late
// pattern declines.
func (a *analysis) matchLate(n *node) (r *region, f *failure) {
	for _, pat := range match.Registered() {
		if !pat.Late || pat.Op != n.GetOpType() {
			continue
		}
		l, err := a.runMatch(pat, n)
		switch {
		case l != nil:
			r, err := a.patternRegion(l, n)
			if err != nil {
				return nil, patternFailure(pat, n, err)
			}
			return r, a.checkContained(r)
		case err != nil && f == nil:
			f = patternFailure(pat, n, err)
		}
	}
	return nil, f
}

// patternFailure is a pattern's error as the report shows it: a
// match.Refusal as it is, over the nodes it names; any other error after
// the pattern's name, on the anchor.
func patternFailure(pat match.Pattern, anchor *node, err error) *failure {
	var refusal *match.Refusal
	if errors.As(err, &refusal) {
		nodes := []*node{anchor}
		if len(refusal.Nodes) > 0 {
			nodes = unwrap(refusal.Nodes)
		}
		return fail(nodes, "%s", refusal.Reason)
	}
	return fail([]*node{anchor}, "pattern %s: %v", pat.Name, err)
}

// unwrap returns the graph nodes of pattern nodes.
func unwrap(ns []*match.Node) []*node {
	out := make([]*node, len(ns))
	for i, n := range ns {
		out[i] = n.Unwrap()
	}
	return out
}

// runMatch runs one pattern's Match on an anchor, recovering from a panic
// in it.
func (a *analysis) runMatch(pat match.Pattern, anchor *node) (l *match.Layer, err error) {
	defer func() {
		if v := recover(); v != nil {
			l, err = nil, fmt.Errorf("panic in Match: %v", v)
		}
	}()
	return pat.Match(patternGraph{a: a}, match.NewNode(anchor))
}

// matchPattern runs one pattern's Match on an anchor and turns the Layer
// it returns into a region.
func (a *analysis) matchPattern(pat match.Pattern, anchor *node) (*region, error) {
	l, err := a.runMatch(pat, anchor)
	if err != nil || l == nil {
		return nil, err
	}
	r, err := a.patternRegion(l, anchor)
	if err != nil {
		return nil, err
	}
	if f := a.checkContained(r); f != nil {
		return nil, errors.New(strings.TrimPrefix(f.reason, r.kind+": "))
	}
	return r, nil
}

// patternRegion checks a pattern's Layer and builds its region: the nodes
// it names, or every live data node between the inputs and the output.
func (a *analysis) patternRegion(l *match.Layer, anchor *node) (*region, error) {
	r, err := a.layerRegion(l)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(r.nodes, anchor) {
		return nil, fmt.Errorf("the %s layer from %v to %q does not contain the anchor node %s", l.Type, l.Inputs, l.Output, anchor.Label())
	}
	return r, nil
}

// layerRegion checks a pattern's Layer and builds its region: the nodes
// it names, or every live data node between the inputs and the output.
func (a *analysis) layerRegion(l *match.Layer) (*region, error) {
	if _, err := registry.Lookup(l.Type); err != nil {
		return nil, err
	}
	if l.Output == "" || a.g.Producer(l.Output) == nil || !a.live[l.Output] {
		return nil, fmt.Errorf("output %q is not a value computed from the graph inputs for a graph output", l.Output)
	}
	if len(l.Inputs) == 0 {
		return nil, fmt.Errorf("the %s layer reads no input", l.Type)
	}
	nodes := unwrap(l.Nodes)
	if len(nodes) == 0 {
		var err error
		if nodes, err = a.between(l.Inputs, l.Output); err != nil {
			return nil, err
		}
	}
	kind := l.Name
	if kind == "" {
		kind = sanitize(l.Type)
	}
	r := &region{typ: l.Type, inputs: slices.Clone(l.Inputs), output: l.Output, nodes: nodes,
		kind: kind, notes: slices.Clone(l.Notes), indexBound: l.IndexBound}
	var err error
	if r.fields, err = fieldsOf(l); err != nil {
		return nil, err
	}
	if r.params, err = a.paramsOf(l); err != nil {
		return nil, err
	}
	if r.before, err = a.beforeRegions(l); err != nil {
		return nil, err
	}
	for i, b := range l.Before { // a keep mask's layer is the one of its input (beforeRegions)
		if out := r.before[i].output; out != b.Output {
			for k, in := range r.inputs {
				if in == b.Output {
					r.inputs[k] = out
				}
			}
		}
	}
	for _, in := range l.KeepMasks {
		if !slices.Contains(l.Inputs, in) || a.g.Producer(in) != nil {
			return nil, fmt.Errorf("keep mask %q is not a graph input the %s layer reads", in, l.Type)
		}
		if a.keepMasks == nil {
			a.keepMasks = map[string]bool{}
		}
		a.keepMasks[in] = true
	}
	return r, nil
}

// beforeRegions builds the regions of the layers a Layer was found with
// (Layer.Before).
func (a *analysis) beforeRegions(l *match.Layer) ([]*region, error) {
	var out []*region
	for _, b := range l.Before {
		if b == nil {
			return nil, fmt.Errorf("the %s layer lists a nil layer before it", l.Type)
		}
		r, err := a.layerRegion(b)
		if err != nil {
			return nil, fmt.Errorf("the %s layer before %s: %w", b.Type, l.Type, err)
		}
		if len(b.KeepMasks) == 1 && slices.Equal(b.Inputs, b.KeepMasks) && len(b.Nodes) == 0 {
			// A layer computing a keep mask from a graph input alone is one
			// for every layer reading the input (Gemma's sliding-window and
			// global masks share their first nodes): every node computing
			// a mask from it up to what each layer reads (plan.add merges
			// them).
			r.output, r.nodes = keepMaskValue(b.KeepMasks[0]), a.maskNodes(b.Output)
		}
		r.nodes = uniqueNodes(r.nodes)
		out = append(out, r)
	}
	return out, nil
}

// fieldsOf checks and converts a Layer's config.
func fieldsOf(l *match.Layer) ([]field, error) {
	var fields []field
	for _, f := range l.Config {
		if f.Key == "" {
			return nil, fmt.Errorf("the %s layer's config has a field without a key", l.Type)
		}
		fields = append(fields, field{key: f.Key, value: f.Value})
	}
	return fields, nil
}

// paramsOf checks and converts a Layer's parameters: each read from a
// constant of the graph (or computed), whole or some of its rows.
func (a *analysis) paramsOf(l *match.Layer) ([]param, error) {
	var params []param
	for _, p := range l.Params {
		if p.Value == nil {
			return nil, fmt.Errorf("parameter %q has no value", p.Name)
		}
		q := param{name: p.Name, value: p.Value}
		for _, pc := range p.Pieces {
			if pc.From != "" && !a.g.Static(pc.From) {
				return nil, fmt.Errorf("parameter %q comes from %q, which is not a constant of the graph", p.Name, pc.From)
			}
			q.pieces = append(q.pieces, piece{value: pc.From, transposed: pc.Transposed, lo: pc.Lo, hi: pc.Hi, split: pc.Split})
		}
		if len(p.Pieces) == 0 {
			if p.From != "" && !a.g.Static(p.From) {
				return nil, fmt.Errorf("parameter %q comes from %q, which is not a constant of the graph", p.Name, p.From)
			}
			c := piece{value: p.From, transposed: p.Transposed, hi: 1}
			if p.Value.Dims() > 0 {
				c.hi = p.Value.Shape()[0]
			}
			switch len(p.Rows) {
			case 0:
			case 2:
				c.lo, c.hi, c.split = p.Rows[0], p.Rows[1], true
			default:
				return nil, fmt.Errorf("parameter %q has rows %v: want [lo, hi]", p.Name, p.Rows)
			}
			q.pieces = []piece{c}
		}
		params = append(params, q)
	}
	return params, nil
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

// patternGraph is the graph as patterns see it (match.Graph).
type patternGraph struct {
	a *analysis
}

var _ match.Graph = patternGraph{}

// Opset is the graph's default-domain opset version.
func (g patternGraph) Opset() int { return int(g.a.g.Opset) }

// Producer returns the node that computes a value, or nil.
func (g patternGraph) Producer(value string) *match.Node {
	if n := g.a.g.Producer(value); n != nil {
		return match.NewNode(n)
	}
	return nil
}

// Readers returns the live nodes that read a value's contents.
func (g patternGraph) Readers(value string) []*match.Node {
	var out []*match.Node
	for _, n := range g.a.readers(value) {
		out = append(out, match.NewNode(n))
	}
	return out
}

// IsData reports whether a value depends on the graph inputs' contents.
func (g patternGraph) IsData(value string) bool { return g.a.g.IsData(value) }

// IsOutput reports whether a value is a graph output.
func (g patternGraph) IsOutput(value string) bool { return g.a.g.IsOutput(value) }

// Shape returns a value's shape at the first probe shape.
func (g patternGraph) Shape(value string) ([]int, error) { return g.a.probes[0].shape(value) }

// Probes is the number of probe shapes.
func (g patternGraph) Probes() int { return len(g.a.probes) }

// ShapeAt returns a value's shape at probe i.
func (g patternGraph) ShapeAt(i int, value string) ([]int, error) {
	if i < 0 || i >= len(g.a.probes) {
		return nil, fmt.Errorf("probe %d of %d", i, len(g.a.probes))
	}
	return g.a.probes[i].shape(value)
}

// ValueAt returns a value's contents at probe i.
func (g patternGraph) ValueAt(i int, value string) (*tensor.Dense, error) {
	if i < 0 || i >= len(g.a.probes) {
		return nil, fmt.Errorf("probe %d of %d", i, len(g.a.probes))
	}
	return g.a.probes[i].value(value)
}

// Sources lists the initializers and Constants a static value comes from.
func (g patternGraph) Sources(value string) []string { return g.a.g.StaticSources(value) }

// Constant returns a static value that is the same at every probe shape.
func (g patternGraph) Constant(value string) (*tensor.Dense, error) {
	if !g.a.g.Static(value) {
		return nil, fmt.Errorf("value %q depends on the graph inputs", value)
	}
	first, err := g.a.probes[0].value(value)
	if err != nil {
		return nil, err
	}
	want, err := match.Floats(first)
	if err != nil {
		return nil, fmt.Errorf("value %q: %w", value, err)
	}
	for _, p := range g.a.probes[1:] {
		t, err := p.value(value)
		if err != nil {
			return nil, err
		}
		got, err := match.Floats(t)
		if err != nil || !equalShapes(t.Shape(), first.Shape()) || !slices.Equal(got, want) {
			return nil, fmt.Errorf("value %q changes with the input shapes", value)
		}
	}
	return first, nil
}

// Scalar returns the number a static single-element value holds.
func (g patternGraph) Scalar(value string) (float64, bool) {
	if _, err := g.Constant(value); err != nil {
		return 0, false
	}
	return g.a.probes[0].scalar(value)
}

// ScalarAt returns the number a single-element value holds at probe i.
func (g patternGraph) ScalarAt(i int, value string) (float64, bool) {
	if i < 0 || i >= len(g.a.probes) {
		return 0, false
	}
	return g.a.probes[i].scalar(value)
}

// Linear recognizes the nn.Linear that computes a value.
func (g patternGraph) Linear(value string) (*match.Linear, bool) {
	l := g.a.matchLinear(value)
	if l == nil {
		if part := g.slicedLinear(value); part != nil { // sliced_linear.go
			return part, true
		}
		return nil, false
	}
	return l.public(), true
}

// Registered reports whether a layer type is available to lift into.
func (patternGraph) Registered(layerType string) bool { return registered(layerType) }

// Scores follows a Softmax back to the product of queries and keys.
func (g patternGraph) Scores(softmax *match.Node) (*match.Scores, error) {
	a := g.a
	if softmax == nil || softmax.Op() != "Softmax" {
		return nil, fmt.Errorf("Scores needs a Softmax node")
	}
	sm := softmax.Unwrap()
	sc, f := a.scores(sm)
	if f != nil {
		return nil, f
	}
	if f := a.softmaxAxis(sm); f != nil {
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
	return &match.Scores{Product: match.NewNode(sc.qk), Scale: sc.scale, Causal: causal}, nil
}

// keepMaskValue names the output of the layer that computes a keep mask
// from graph input in: a name no graph value has.
func keepMaskValue(in string) string { return in + "::keep" }

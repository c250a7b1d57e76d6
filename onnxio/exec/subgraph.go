package exec

import (
	"errors"
	"fmt"
	"slices"

	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// subgraph is a graph-valued attribute (AttributeProto.g) prepared like
// the model's own graph, for the op that carries it to run: FlexAttention's
// score_mod and prob_mod, and the bodies of If, Loop and Scan when the
// executor implements them (Loop and Scan call their body once per
// iteration, If one of two branches).
//
// ONNX lets a body read by name any value of the graphs around it (outer
// scope). Each such read is a capture: the value becomes an extra input of
// the node that holds the attribute, after its declared inputs, so that the
// enclosing graph orders the node after the value's producer and keeps the
// value alive until the node has run, as for any input; call binds it in
// the body. A body nested in a body captures through it in the same way.
type subgraph struct {
	name     string // the attribute's name, for errors
	g        *Graph
	captures []capture
}

// capture is a value of an enclosing graph that a body reads.
type capture struct {
	name  string // the value's name, the same inside and outside
	inner int    // its slot in the body
	arg   int    // its position among the inputs of the node holding the body
}

// scope is what the builder of a body knows of its surroundings.
type scope struct {
	local    map[string]bool // the names the body defines: initializers, inputs, node outputs
	captures []capture       // the outer values the body reads; arg is set by the enclosing node
}

// prepareSubgraphs prepares every GRAPH attribute of node n that its op
// declares, and appends the outer values their bodies read to the node's
// inputs (once per name, however many bodies read it).
func (b *builder) prepareSubgraphs(n *node, aps []*onnxpb.AttributeProto) error {
	args := map[string]int{} // captured name: position in n.in
	for _, ap := range aps {
		name := ap.GetName()
		a, ok := n.attrs[name]
		if !ok || a.kind != attrGraph {
			continue
		}
		sg, err := b.subgraph(n, name, ap.GetG())
		if err != nil {
			return fmt.Errorf("attribute %q: %w", name, err)
		}
		for i := range sg.captures {
			c := &sg.captures[i]
			k, seen := args[c.name]
			if !seen {
				k = len(n.in)
				args[c.name] = k
				n.in = append(n.in, b.ref(c.name))
				n.inName = append(n.inName, c.name)
			}
			c.arg = k
		}
		a.g = sg
		n.attrs[name] = a
	}
	return nil
}

// subgraph prepares the body of attribute name of node n. Bodies see the
// model's opset imports; they are not fused (the attention and bias
// fusions target the model's main graph, and keeping bodies node by node
// keeps their values exactly those the graph names).
func (b *builder) subgraph(n *node, name string, gp *onnxpb.GraphProto) (*subgraph, error) {
	if gp == nil {
		return nil, errors.New("holds no graph")
	}
	body := &builder{
		g:        &Graph{opset: b.g.opset, maxMemory: b.g.maxMemory, defaults: map[string]int{}},
		slots:    map[string]int{},
		prepared: map[int]*node{},
		imports:  b.imports,
		scope:    &scope{local: localNames(gp)},
		funcs:    b.funcs,
		budget:   b.budget, // a body's initializers count with the graph's
	}
	if err := body.build(gp); err != nil {
		return nil, err
	}
	for _, w := range body.g.warnings {
		b.warn("node %s (%s): attribute %q: %s", n.label(), n.op, name, w)
	}
	return &subgraph{name: name, g: body.g, captures: body.scope.captures}, nil
}

// localNames lists the names a graph defines itself. The outputs of graphs
// nested in its nodes are theirs, not its own.
func localNames(gp *onnxpb.GraphProto) map[string]bool {
	local := map[string]bool{}
	for _, t := range gp.GetInitializer() {
		local[t.GetName()] = true
	}
	for _, vi := range gp.GetInput() {
		local[vi.GetName()] = true
	}
	for _, np := range gp.GetNode() {
		for _, o := range np.GetOutput() {
			if o != "" {
				local[o] = true
			}
		}
	}
	return local
}

// valueInfo reads a declared input or output of the graph being built.
// Bodies often leave the types of theirs out, as ONNX infers them from the
// node holding the body (the expanded function graphs of ONNX's node tests
// do); such a value is a tensor of any type and shape, which the ops that
// read it check.
func (b *builder) valueInfo(vi *onnxpb.ValueInfoProto) (TensorInfo, error) {
	t := vi.GetType()
	untyped := t.GetValue() == nil || t.GetTensorType() != nil && t.GetTensorType().GetElemType() == 0
	if b.scope != nil && untyped {
		return TensorInfo{Name: vi.GetName()}, nil
	}
	return tensorInfo(vi)
}

// ref returns the slot of a value that a node reads. In a body, a name the
// body does not define is captured from the enclosing graph; whether that
// graph defines it is checked when the enclosing graph is sorted, where a
// missing value names the node holding the body.
func (b *builder) ref(name string) int {
	if s, ok := b.slots[name]; ok {
		return s
	}
	s := b.slot(name)
	if b.scope != nil && !b.scope.local[name] {
		b.known[s] = true
		b.scope.captures = append(b.scope.captures, capture{name: name, inner: s})
	}
	return s
}

// lookup returns the slot of a name a graph output refers to; a body may
// output a value of its enclosing graph, which is then captured.
func (b *builder) lookup(name string) (int, bool) {
	if s, ok := b.slots[name]; ok {
		return s, true
	}
	if b.scope != nil && !b.scope.local[name] {
		return b.ref(name), true
	}
	return 0, false
}

// call runs the body: args are the values of its declared inputs in order,
// in the inputs of the node holding the body (where the captured values
// are). It checks each argument against the body's declaration, checks the
// run's context between nodes, and returns the body's outputs in order.
// The outputs may be the body's constants or its arguments: callers must
// not write into them.
//
// The body's environment holds its values for the run's memory accounting
// (runCtx) only while it runs: once it returns, what its outputs hold is up
// to the caller (runNode holds an op's outputs; a Loop reserves the scan
// values it keeps).
func (s *subgraph) call(rc *runCtx, args, in []*value) (outs []*value, err error) {
	g := s.g
	if len(args) != len(g.inputs) {
		return nil, fmt.Errorf("subgraph %q has %d inputs, called with %d", s.name, len(g.inputs), len(args))
	}
	env := slices.Clone(g.consts)
	sizes, bound := map[string]int{}, map[string]string{}
	for i, info := range g.inputs {
		v := args[i]
		if info.DType != 0 && v.dtype != info.DType {
			return nil, fmt.Errorf("subgraph %q: input %q: dtype %s, the subgraph declares %s", s.name, info.Name, v.dtype, info)
		}
		if err := checkShape(info, v.shape, sizes, bound); err != nil {
			return nil, fmt.Errorf("subgraph %q: input %q: %w", s.name, info.Name, err)
		}
		env[g.inSlots[i]] = v
		rc.hold(v)
	}
	for _, c := range s.captures {
		env[c.inner] = in[c.arg]
		rc.hold(in[c.arg])
	}
	defer func() {
		for _, v := range env {
			rc.drop(v)
		}
		if err != nil {
			rc.settle() // the caller returns the error: nothing of the body lives on
		}
	}()
	for _, n := range g.nodes {
		if err := rc.ctx.Err(); err != nil {
			return nil, err
		}
		if err := runNode(rc, n, env); err != nil {
			return nil, fmt.Errorf("subgraph %q: %w", s.name, err)
		}
	}
	outs = make([]*value, len(g.outSlots))
	for i, slot := range g.outSlots {
		outs[i] = env[slot]
	}
	return outs, nil
}

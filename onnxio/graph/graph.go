package graph

import (
	"errors"
	"fmt"
	"slices"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// Graph indexes a model's main graph by value name: its nodes in order,
// who produces and who reads each value, and which values depend on the
// contents of the graph inputs at all. A Graph is read-only once made.
type Graph struct {
	// Model is the model the graph belongs to.
	Model *onnxpb.ModelProto
	// Opset is the model's default-domain opset version.
	Opset int64
	// Nodes are the graph's nodes in topological order, as ONNX requires.
	Nodes []*Node
	// Inits are the initializers by name.
	Inits map[string]*onnxpb.TensorProto
	// Inputs are the graph inputs that have no initializer, in order.
	Inputs []*onnxpb.ValueInfoProto
	// Outputs are the names of the graph outputs, in order.
	Outputs []string

	uses *Uses[string, *Node]
	// data marks values that depend on the inputs' contents. Every other
	// value is static: computed from initializers, Constants and input
	// shapes only, so it can be evaluated once the shapes are known.
	data map[string]bool
}

// New indexes m's graph. It refuses graphs that cannot be read by name:
// no graph, no default-domain opset, a node outside the default domain,
// nodes out of topological order, values written twice, an output nothing
// produces.
func New(m *onnxpb.ModelProto) (*Graph, error) {
	gp := m.GetGraph()
	if gp == nil {
		return nil, errors.New("the model has no graph")
	}
	g := &Graph{
		Model: m,
		Opset: onnxio.OpsetVersion(m, ""),
		Inits: map[string]*onnxpb.TensorProto{},
		uses:  NewUses[string, *Node](""),
		data:  map[string]bool{},
	}
	if g.Opset == 0 {
		return nil, errors.New("the model imports no default-domain (ai.onnx) opset")
	}
	for _, t := range gp.GetInitializer() {
		g.Inits[t.GetName()] = t
	}
	available := map[string]bool{"": true}
	for name := range g.Inits {
		available[name] = true
	}
	for _, vi := range gp.GetInput() {
		available[vi.GetName()] = true
		if _, ok := g.Inits[vi.GetName()]; !ok {
			g.Inputs = append(g.Inputs, vi)
			g.data[vi.GetName()] = true
		}
	}
	for i, np := range gp.GetNode() {
		if err := g.add(&Node{NodeProto: np, Index: i}, available); err != nil {
			return nil, err
		}
	}
	for _, vi := range gp.GetOutput() {
		if !available[vi.GetName()] {
			return nil, fmt.Errorf("graph output %q is not produced by any node", vi.GetName())
		}
		g.Outputs = append(g.Outputs, vi.GetName())
		g.uses.MarkOutput(vi.GetName())
	}
	return g, nil
}

// add indexes node n, given the values available before it.
func (g *Graph) add(n *Node, available map[string]bool) error {
	if d := n.GetDomain(); d != "" && d != "ai.onnx" {
		return fmt.Errorf("node %s: op %q is in domain %q; only the default ONNX domain is supported", n.Label(), n.GetOpType(), d)
	}
	for _, in := range n.GetInput() {
		if !available[in] {
			return fmt.Errorf("node %s (%s): input %q is not produced before it (nodes must be in topological order)", n.Label(), n.GetOpType(), in)
		}
	}
	isData := false
	if !readsShapeOnly(n) {
		for _, in := range n.GetInput() {
			isData = isData || g.data[in]
		}
	}
	for _, out := range n.GetOutput() {
		if out == "" {
			continue
		}
		if available[out] {
			return fmt.Errorf("node %s (%s): writes %q, which already exists", n.Label(), n.GetOpType(), out)
		}
		available[out] = true
		g.data[out] = isData
	}
	g.uses.Add(n, n.GetInput(), n.GetOutput())
	g.Nodes = append(g.Nodes, n)
	return nil
}

// readsShapeOnly reports whether a node reads only the shapes of its
// inputs, not their contents: Shape and Size.
func readsShapeOnly(n *Node) bool {
	op := n.GetOpType()
	return op == "Shape" || op == "Size"
}

// Producer returns the node that computes v, or nil for a graph input, an
// initializer or an unknown name.
func (g *Graph) Producer(v string) *Node {
	n, _ := g.uses.Producer(v)
	return n
}

// Consumers lists the nodes that read v, in graph order, once per input
// that reads it.
func (g *Graph) Consumers(v string) []*Node { return g.uses.Readers(v) }

// DataConsumers lists the nodes that read v's contents: every consumer
// except Shape and Size, which read only its shape.
func (g *Graph) DataConsumers(v string) []*Node {
	var out []*Node
	for _, c := range g.Consumers(v) {
		if !readsShapeOnly(c) {
			out = append(out, c)
		}
	}
	return out
}

// IsData reports whether v depends on the contents of the graph inputs.
func (g *Graph) IsData(v string) bool { return g.data[v] }

// Static reports whether v is known once the input shapes are: an
// initializer, a Constant, a shape, or computed from those alone.
func (g *Graph) Static(v string) bool { return v != "" && !g.data[v] }

// IsInput reports whether v is a graph input (one without an initializer).
func (g *Graph) IsInput(v string) bool {
	return slices.ContainsFunc(g.Inputs, func(vi *onnxpb.ValueInfoProto) bool { return vi.GetName() == v })
}

// IsOutput reports whether v is one of the graph's outputs.
func (g *Graph) IsOutput(v string) bool { return g.uses.IsOutput(v) }

// Origin names the initializer a static value is a plain copy of,
// following Identity nodes (PyTorch shares equal tensors that way),
// "(constant NODE)" for a Constant's output, or "" when the value is
// computed.
func (g *Graph) Origin(v string) string {
	for {
		if _, ok := g.Inits[v]; ok {
			return v
		}
		n := g.Producer(v)
		if n == nil {
			return ""
		}
		switch n.GetOpType() {
		case "Identity":
			v = n.GetInput()[0]
		case "Constant":
			return "(constant " + n.Label() + ")"
		default:
			return ""
		}
	}
}

// DependsOnInputs lists the graph inputs a value is computed from, for
// reasons such as "the mask depends on input key_padding_mask".
func (g *Graph) DependsOnInputs(v string) []string {
	seen := map[string]bool{}
	var found []string
	var walk func(string)
	walk = func(v string) {
		if seen[v] || !g.data[v] {
			return
		}
		seen[v] = true
		if g.IsInput(v) {
			found = append(found, v)
			return
		}
		if n := g.Producer(v); n != nil {
			for _, in := range n.GetInput() {
				walk(in)
			}
		}
	}
	walk(v)
	return found
}

// StaticSources lists the initializers and Constant outputs a static value
// is computed from, itself included, in the order a depth-first walk meets
// them; nil for a data value.
func (g *Graph) StaticSources(v string) []string {
	var out []string
	seen := map[string]bool{}
	var walk func(string)
	walk = func(v string) {
		if v == "" || seen[v] || g.data[v] {
			return
		}
		seen[v] = true
		n := g.Producer(v)
		if n == nil || n.GetOpType() == "Constant" {
			out = append(out, v)
			return
		}
		for _, in := range n.GetInput() {
			walk(in)
		}
	}
	walk(v)
	return out
}

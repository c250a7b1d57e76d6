package lift

import (
	"fmt"
	"strings"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// node is a graph node with its position in topological order.
type node struct {
	*onnxpb.NodeProto
	index int
}

// label names a node in reports: its name, or its op and position when the
// exporter left it unnamed.
func (n *node) label() string {
	if n.GetName() != "" {
		return n.GetName()
	}
	return fmt.Sprintf("#%d (%s)", n.index, n.GetOpType())
}

// graph indexes a model's main graph for pattern matching: who produces and
// who reads each value, and which values depend on input data at all.
type graph struct {
	model     *onnxpb.ModelProto
	opset     int64
	nodes     []*node // topological order, as ONNX requires
	producer  map[string]*node
	consumers map[string][]*node
	inits     map[string]*onnxpb.TensorProto
	inputs    []*onnxpb.ValueInfoProto // graph inputs that have no initializer
	outputs   []string
	// data marks values that depend on the inputs' contents. Every other
	// value is static: computed from initializers, Constants and input
	// shapes only, so it can be evaluated once the shapes are known.
	data map[string]bool
	// limits bound the executor's runs of the graph (probe.go).
	limits execLimits
}

// newGraph indexes m's graph. It refuses graphs the lifter cannot read:
// no graph, nodes out of topological order, values written twice.
func newGraph(m *onnxpb.ModelProto) (*graph, error) {
	gp := m.GetGraph()
	if gp == nil {
		return nil, fmt.Errorf("the model has no graph")
	}
	g := &graph{
		model:     m,
		opset:     onnxio.OpsetVersion(m, ""),
		producer:  map[string]*node{},
		consumers: map[string][]*node{},
		inits:     map[string]*onnxpb.TensorProto{},
		data:      map[string]bool{},
	}
	if g.opset == 0 {
		return nil, fmt.Errorf("the model imports no default-domain (ai.onnx) opset")
	}
	for _, t := range gp.GetInitializer() {
		g.inits[t.GetName()] = t
	}
	available := map[string]bool{"": true}
	for name := range g.inits {
		available[name] = true
	}
	for _, vi := range gp.GetInput() {
		available[vi.GetName()] = true
		if _, ok := g.inits[vi.GetName()]; !ok {
			if err := checkInputDims(vi); err != nil {
				return nil, err
			}
			g.inputs = append(g.inputs, vi)
			g.data[vi.GetName()] = true
		}
	}
	for i, np := range gp.GetNode() {
		n := &node{NodeProto: np, index: i}
		if d := np.GetDomain(); d != "" && d != "ai.onnx" {
			return nil, fmt.Errorf("node %s: op %q is in domain %q; only the default ONNX domain is supported", n.label(), np.GetOpType(), d)
		}
		for _, in := range np.GetInput() {
			if !available[in] {
				return nil, fmt.Errorf("node %s (%s): input %q is not produced before it (nodes must be in topological order)", n.label(), np.GetOpType(), in)
			}
			if in != "" {
				g.consumers[in] = append(g.consumers[in], n)
			}
		}
		isData := false
		if op := np.GetOpType(); op != "Shape" && op != "Size" {
			for _, in := range np.GetInput() {
				isData = isData || g.data[in]
			}
		}
		for _, out := range np.GetOutput() {
			if out == "" {
				continue
			}
			if available[out] {
				return nil, fmt.Errorf("node %s (%s): writes %q, which already exists", n.label(), np.GetOpType(), out)
			}
			available[out] = true
			g.producer[out] = n
			g.data[out] = isData
		}
		g.nodes = append(g.nodes, n)
	}
	for _, vi := range gp.GetOutput() {
		if !available[vi.GetName()] {
			return nil, fmt.Errorf("graph output %q is not produced by any node", vi.GetName())
		}
		g.outputs = append(g.outputs, vi.GetName())
	}
	return g, nil
}

// checkInputDims refuses a graph input with a fixed dimension below 1: the
// lifter reads a graph by running it on inputs of the declared shapes (see
// probe), and an empty input computes nothing to read (nor can an attnrun
// layer take one).
func checkInputDims(vi *onnxpb.ValueInfoProto) error {
	for i, d := range onnxio.Dims(vi) {
		if d.Known && d.Value < 1 {
			return fmt.Errorf("input %q declares shape %s: dimension %d has size %d, want at least 1 (the lifter runs the graph on inputs of the declared shape)",
				vi.GetName(), onnxio.FormatDims(onnxio.Dims(vi)), i, d.Value)
		}
	}
	return nil
}

// static reports whether a value is known once the input shapes are: an
// initializer, a Constant, a shape, or computed from those alone.
func (g *graph) static(v string) bool { return v != "" && !g.data[v] }

// isInput reports whether v is a graph input (one without an initializer).
func (g *graph) isInput(v string) bool {
	for _, vi := range g.inputs {
		if vi.GetName() == v {
			return true
		}
	}
	return false
}

// dataConsumers lists the nodes that read v's contents: every consumer
// except Shape and Size, which read only its shape.
func (g *graph) dataConsumers(v string) []*node {
	var out []*node
	for _, c := range g.consumers[v] {
		if op := c.GetOpType(); op != "Shape" && op != "Size" {
			out = append(out, c)
		}
	}
	return out
}

// isGraphOutput reports whether v is one of the graph's outputs.
func (g *graph) isGraphOutput(v string) bool {
	for _, o := range g.outputs {
		if o == v {
			return true
		}
	}
	return false
}

// origin names the initializer a static value is a plain copy of, following
// Identity nodes (PyTorch shares equal tensors that way), or "" when the
// value is computed.
func (g *graph) origin(v string) string {
	for {
		if _, ok := g.inits[v]; ok {
			return v
		}
		n := g.producer[v]
		if n == nil {
			return ""
		}
		switch n.GetOpType() {
		case "Identity":
			v = n.GetInput()[0]
		case "Constant":
			return "(constant " + n.label() + ")"
		default:
			return ""
		}
	}
}

// dependsOnInputs lists the graph inputs a value is computed from, for
// reasons such as "the mask depends on input key_padding_mask".
func (g *graph) dependsOnInputs(v string) []string {
	seen := map[string]bool{}
	var found []string
	var walk func(string)
	walk = func(v string) {
		if seen[v] || !g.data[v] {
			return
		}
		seen[v] = true
		if g.isInput(v) {
			found = append(found, v)
			return
		}
		if n := g.producer[v]; n != nil {
			for _, in := range n.GetInput() {
				walk(in)
			}
		}
	}
	walk(v)
	return found
}

// attr returns a node's attribute by name, or nil.
func attr(n *node, name string) *onnxpb.AttributeProto {
	for _, a := range n.GetAttribute() {
		if a.GetName() == name {
			return a
		}
	}
	return nil
}

// attrInt returns an integer attribute, or def when it is absent.
func attrInt(n *node, name string, def int64) int64 {
	if a := attr(n, name); a != nil {
		return a.GetI()
	}
	return def
}

// attrFloat returns a float attribute, or def when it is absent.
func attrFloat(n *node, name string, def float32) float32 {
	if a := attr(n, name); a != nil {
		return a.GetF()
	}
	return def
}

// quoted formats names for messages: "a", "b".
func quoted(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

package exec

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// Graph is an ONNX graph prepared for execution: opset resolved, every op
// checked, initializers and Constant nodes converted once, nodes in
// topological order. A Graph is immutable; Run may be called from many
// goroutines at once.
type Graph struct {
	opset    int
	nodes    []*node  // execution order; nodes no output depends on are dropped
	consts   []*value // by slot: initializers and Constant outputs, nil elsewhere
	inputs   []TensorInfo
	inSlots  []int
	defaults map[string]int // inputs that have an initializer, by name: slot
	outputs  []TensorInfo
	outSlots []int
}

// TensorInfo describes a graph input or output as the model declares it.
type TensorInfo struct {
	// Name is the value's name in the graph.
	Name string
	// DType is the element type.
	DType DType
	// Shape lists the declared dimensions, fixed or symbolic ("batch"). It
	// is nil when the model declares no shape (any rank is accepted) and
	// empty for a declared scalar.
	Shape []onnxio.Dim
}

// String formats the info as "x float32 [batch seq 8]".
func (t TensorInfo) String() string {
	shape := "[?]"
	if t.Shape != nil {
		shape = onnxio.FormatDims(t.Shape)
	}
	return t.Name + " " + t.DType.String() + " " + shape
}

// Inputs describes the inputs Run needs, in the model's order. Inputs that
// have an initializer (a default value, in models of IR version < 4) are
// not listed; Run accepts them as overrides.
func (g *Graph) Inputs() []TensorInfo { return slices.Clone(g.inputs) }

// Outputs describes what Run returns, in the model's order.
func (g *Graph) Outputs() []TensorInfo { return slices.Clone(g.outputs) }

// Opset is the default-domain opset version the graph runs with.
func (g *Graph) Opset() int { return g.opset }

// New prepares a model for execution. Every problem that does not depend
// on the input values is reported here rather than during Run: an op the
// executor does not implement at the model's opset, an operator domain
// other than the default one, an unknown attribute, an input nothing
// produces, a cycle, an unsupported element type.
func New(m *onnxpb.ModelProto) (*Graph, error) {
	if m == nil || m.GetGraph() == nil {
		return nil, errors.New("exec: the model has no graph")
	}
	opset, err := defaultOpset(m)
	if err != nil {
		return nil, fmt.Errorf("exec: %w", err)
	}
	b := &builder{g: &Graph{opset: opset, defaults: map[string]int{}}, slots: map[string]int{}}
	if err := b.build(m.GetGraph()); err != nil {
		return nil, fmt.Errorf("exec: %w", err)
	}
	return b.g, nil
}

// defaultOpset returns the model's default-domain opset version, checked
// against the versions this package knows.
func defaultOpset(m *onnxpb.ModelProto) (int, error) {
	v := onnxio.OpsetVersion(m, "")
	switch {
	case v == 0:
		return 0, errors.New("the model imports no default-domain (ai.onnx) opset")
	case v < 1 || v > maxOpset:
		return 0, fmt.Errorf("default-domain opset %d is not supported (1 to %d)", v, maxOpset)
	}
	return int(v), nil
}

// builder holds the state of New while it resolves names to slots.
type builder struct {
	g        *Graph
	slots    map[string]int // value name to slot
	producer []int          // by slot: node index, -1 for sources
	known    []bool         // by slot: initializer, Constant or graph input
}

// slot returns the slot of a value name, allocating one on first sight.
func (b *builder) slot(name string) int {
	if s, ok := b.slots[name]; ok {
		return s
	}
	s := len(b.g.consts)
	b.slots[name] = s
	b.g.consts = append(b.g.consts, nil)
	b.producer = append(b.producer, -1)
	b.known = append(b.known, false)
	return s
}

func (b *builder) build(gp *onnxpb.GraphProto) error {
	for _, tp := range gp.GetInitializer() {
		name := tp.GetName()
		if _, dup := b.slots[name]; dup {
			return fmt.Errorf("initializer %q is defined twice", name)
		}
		v, err := tensorValue(tp)
		if err != nil {
			return fmt.Errorf("initializer %q: %w", name, err)
		}
		s := b.slot(name)
		b.g.consts[s], b.known[s] = v, true
	}
	if len(gp.GetSparseInitializer()) > 0 {
		return errors.New("sparse initializers are not supported")
	}
	if err := b.graphInputs(gp.GetInput()); err != nil {
		return err
	}
	nodes, err := b.prepareNodes(gp.GetNode())
	if err != nil {
		return err
	}
	order, err := b.sort(nodes)
	if err != nil {
		return err
	}
	if err := b.graphOutputs(gp.GetOutput()); err != nil {
		return err
	}
	if err := b.foldConstants(order); err != nil {
		return err
	}
	b.schedule(order)
	return nil
}

// graphInputs records the declared inputs; those with an initializer are
// defaults that Run may override.
func (b *builder) graphInputs(vis []*onnxpb.ValueInfoProto) error {
	for _, vi := range vis {
		name := vi.GetName()
		info, err := tensorInfo(vi)
		if err != nil {
			return fmt.Errorf("input %q: %w", name, err)
		}
		if s, ok := b.slots[name]; ok && b.g.consts[s] != nil {
			b.g.defaults[name] = s
			continue
		}
		if _, dup := b.slots[name]; dup {
			return fmt.Errorf("input %q is declared twice", name)
		}
		s := b.slot(name)
		b.known[s] = true
		b.g.inputs = append(b.g.inputs, info)
		b.g.inSlots = append(b.g.inSlots, s)
	}
	return nil
}

// graphOutputs records the declared outputs, each of which something must
// produce.
func (b *builder) graphOutputs(vis []*onnxpb.ValueInfoProto) error {
	for _, vi := range vis {
		name := vi.GetName()
		info, err := tensorInfo(vi)
		if err != nil {
			return fmt.Errorf("output %q: %w", name, err)
		}
		s, ok := b.slots[name]
		if !ok || (!b.known[s] && b.producer[s] < 0) {
			return fmt.Errorf("output %q is not produced by any node, nor an input or initializer", name)
		}
		b.g.outputs = append(b.g.outputs, info)
		b.g.outSlots = append(b.g.outSlots, s)
	}
	return nil
}

// tensorInfo reads a declared input or output.
func tensorInfo(vi *onnxpb.ValueInfoProto) (TensorInfo, error) {
	if vi.GetType().GetTensorType() == nil {
		return TensorInfo{}, errors.New("only tensor values are supported (not sequences, maps or optionals)")
	}
	dt := DType(onnxio.ElemType(vi))
	if err := checkDType(dt); err != nil {
		return TensorInfo{}, err
	}
	return TensorInfo{Name: vi.GetName(), DType: dt, Shape: onnxio.Dims(vi)}, nil
}

// tensorValue converts an initializer or tensor attribute. Tensors without
// elements are built here (a *tensor.Dense cannot hold them); the others
// go through onnxio.TensorToDense, which checks sizes and data.
func tensorValue(tp *onnxpb.TensorProto) (*value, error) {
	dt := DType(tp.GetDataType())
	if err := checkDType(dt); err != nil {
		return nil, err
	}
	elems, err := onnxio.DefaultLimits.CheckDims(tp.GetDims(), 8)
	if err != nil {
		return nil, err
	}
	shape := make([]int, len(tp.GetDims()))
	for i, d := range tp.GetDims() {
		shape[i] = int(d)
	}
	if elems == 0 {
		return newValue(dt, shape), nil
	}
	d, err := onnxio.TensorToDense(tp)
	if err != nil {
		return nil, err
	}
	v, err := fromDense(d)
	if err != nil {
		return nil, err
	}
	if v.dtype != dt {
		return nil, fmt.Errorf("decoded as %s, declared %s", v.dtype, dt)
	}
	v.shape = shape
	return v, nil
}

// prepareNodes resolves every node's op, attributes and value slots. It
// reports all problems at once, and the supported ops once at the end when
// some op is not among them.
func (b *builder) prepareNodes(nps []*onnxpb.NodeProto) ([]*node, error) {
	var errs []error
	var unsupported []string
	nodes := make([]*node, 0, len(nps))
	for i, np := range nps {
		n, err := b.prepareNode(i, np)
		var u unsupportedOpError
		switch {
		case errors.As(err, &u):
			unsupported = append(unsupported, u.Error())
		case err != nil:
			errs = append(errs, err)
		default:
			nodes = append(nodes, n)
		}
	}
	if len(unsupported) > 0 {
		errs = append(errs, fmt.Errorf("%s; supported: %s", strings.Join(unsupported, "; "), strings.Join(SupportedOps(), ", ")))
	}
	return nodes, errors.Join(errs...)
}

// unsupportedOpError is a node whose op the executor does not implement.
type unsupportedOpError struct {
	label, op string
	opset     int
}

func (e unsupportedOpError) Error() string {
	return fmt.Sprintf("node %s: op %q (opset %d) is not supported", e.label, e.op, e.opset)
}

func (b *builder) prepareNode(i int, np *onnxpb.NodeProto) (*node, error) {
	n := &node{index: i, name: np.GetName(), op: np.GetOpType(), opset: b.g.opset}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("node %s: op %q "+format, append([]any{n.label(), n.op}, args...)...)
	}
	if d := np.GetDomain(); d != "" && d != "ai.onnx" {
		return nil, fail("is in domain %q; only the default ONNX domain (ai.onnx) is supported", d)
	}
	spec, ok := ops[n.op]
	if !ok {
		return nil, unsupportedOpError{n.label(), n.op, n.opset}
	}
	if n.opset < spec.since {
		return nil, fail("(opset %d) is not supported: it is implemented from opset %d on", n.opset, spec.since)
	}
	n.spec = spec
	ins, outs := np.GetInput(), np.GetOutput()
	if len(ins) < spec.minIn || spec.maxIn >= 0 && len(ins) > spec.maxIn {
		return nil, fail("takes %s inputs, the node has %d", arity(spec.minIn, spec.maxIn), len(ins))
	}
	if len(outs) < spec.minOut || spec.maxOut >= 0 && len(outs) > spec.maxOut {
		return nil, fail("has %s outputs, the node has %d", arity(spec.minOut, spec.maxOut), len(outs))
	}
	attrs, err := decodeAttributes(np.GetAttribute(), spec)
	if err != nil {
		return nil, fail("%w", err)
	}
	n.attrs = attrs
	for k, name := range ins {
		switch {
		case name != "":
			n.in = append(n.in, b.slot(name))
		case k < spec.minIn:
			return nil, fail("needs input %d, which is empty", k)
		default:
			n.in = append(n.in, -1)
		}
		n.inName = append(n.inName, name)
	}
	for _, name := range outs {
		if name == "" {
			n.out = append(n.out, -1)
			continue
		}
		s := b.slot(name)
		if b.known[s] || b.producer[s] >= 0 {
			return nil, fail("writes %q, which is already an input, initializer or another node's output", name)
		}
		b.producer[s] = i
		n.out = append(n.out, s)
	}
	return n, nil
}

// arity formats an input or output count range: "2", "1 to 3", "at least 1".
func arity(lo, hi int) string {
	switch {
	case hi < 0:
		return "at least " + strconv.Itoa(lo)
	case lo == hi:
		return strconv.Itoa(lo)
	}
	return fmt.Sprintf("%d to %d", lo, hi)
}

// decodeAttributes converts a node's attributes, checking each against the
// op's schema.
func decodeAttributes(aps []*onnxpb.AttributeProto, spec *opSpec) (map[string]attribute, error) {
	attrs := make(map[string]attribute, len(aps))
	for _, ap := range aps {
		name := ap.GetName()
		want, ok := spec.attrs[name]
		if !ok {
			return nil, fmt.Errorf("has unknown attribute %q", name)
		}
		if ap.GetRefAttrName() != "" {
			return nil, fmt.Errorf("attribute %q refers to a function attribute, which is not supported", name)
		}
		kind := attrKind(ap.GetType())
		if kind == 0 {
			kind = inferKind(ap)
		}
		if kind != want {
			return nil, fmt.Errorf("attribute %q must be %s, is %s", name, want, kind)
		}
		a := attribute{kind: kind, f: ap.GetF(), i: ap.GetI(), s: string(ap.GetS()), floats: ap.GetFloats(), ints: ap.GetInts()}
		if kind == attrTensor {
			v, err := tensorValue(ap.GetT())
			if err != nil {
				return nil, fmt.Errorf("attribute %q: %w", name, err)
			}
			a.t = v
		}
		if _, dup := attrs[name]; dup {
			return nil, fmt.Errorf("has attribute %q twice", name)
		}
		attrs[name] = a
	}
	return attrs, nil
}

// inferKind guesses the kind of an attribute written without its type
// field (very old exporters) from the field that is set.
func inferKind(ap *onnxpb.AttributeProto) attrKind {
	switch {
	case ap.F != nil:
		return attrFloat
	case ap.I != nil:
		return attrInt
	case ap.S != nil:
		return attrString
	case ap.T != nil:
		return attrTensor
	case len(ap.Floats) > 0:
		return attrFloats
	case len(ap.Ints) > 0:
		return attrInts
	case len(ap.Strings) > 0:
		return attrStrings
	}
	return 0
}

// sort orders the nodes so that each runs after the producers of its
// inputs (Kahn's algorithm, keeping the model's order where it is free to).
// It names the node and input when an input has no source, and the nodes
// involved when they form a cycle.
func (b *builder) sort(nodes []*node) ([]*node, error) {
	waiting := make([]int, len(nodes))   // by position: inputs not yet available
	readers := make(map[int][]int)       // slot: positions of nodes reading it
	pos := make(map[int]int, len(nodes)) // node index: position
	for p, n := range nodes {
		pos[n.index] = p
	}
	var ready []int
	for p, n := range nodes {
		for k, s := range n.in {
			switch {
			case s < 0 || b.known[s]:
			case b.producer[s] < 0:
				return nil, fmt.Errorf("node %s (%s): input %q is not produced by any node, nor a graph input or initializer", n.label(), n.op, n.inName[k])
			default:
				waiting[p]++
				readers[s] = append(readers[s], p)
			}
		}
		if waiting[p] == 0 {
			ready = append(ready, p)
		}
	}
	order := make([]*node, 0, len(nodes))
	for len(ready) > 0 {
		slices.Sort(ready) // keep the model's order among ready nodes
		p := ready[0]
		ready = ready[1:]
		order = append(order, nodes[p])
		for _, s := range nodes[p].out {
			if s < 0 {
				continue
			}
			for _, r := range readers[s] {
				if waiting[r]--; waiting[r] == 0 {
					ready = append(ready, r)
				}
			}
		}
	}
	if len(order) < len(nodes) {
		var stuck []string
		for p, n := range nodes {
			if waiting[p] > 0 {
				stuck = append(stuck, n.label()+" ("+n.op+")")
			}
		}
		return nil, fmt.Errorf("the graph has a cycle: nodes %s wait on each other", strings.Join(stuck, ", "))
	}
	return order, nil
}

// foldConstants runs the Constant nodes once, now, and stores their
// outputs like initializers.
func (b *builder) foldConstants(order []*node) error {
	for _, n := range order {
		if n.op != "Constant" {
			continue
		}
		outs, err := n.spec.run(n, nil)
		if err != nil {
			return fmt.Errorf("node %s (%s): %w", n.label(), n.op, err)
		}
		b.g.consts[n.out[0]] = outs[0]
	}
	return nil
}

// schedule keeps the non-Constant nodes that some graph output depends on,
// in order, and gives each the list of slots it is the last reader of, so
// that Run drops intermediates as soon as they are dead.
func (b *builder) schedule(order []*node) {
	needed := make([]bool, len(b.g.consts))
	for _, s := range b.g.outSlots {
		needed[s] = true
	}
	var keep []*node
	for i := len(order) - 1; i >= 0; i-- {
		n := order[i]
		live := false
		for _, s := range n.out {
			live = live || s >= 0 && needed[s]
		}
		if !live || n.op == "Constant" {
			continue
		}
		for _, s := range n.in {
			if s >= 0 {
				needed[s] = true
			}
		}
		keep = append(keep, n)
	}
	slices.Reverse(keep)

	isOutput := make([]bool, len(b.g.consts))
	for _, s := range b.g.outSlots {
		isOutput[s] = true
	}
	last := make([]int, len(b.g.consts)) // slot: position of its last reader
	for i := range last {
		last[i] = -1
	}
	for p, n := range keep {
		for _, s := range n.in {
			if s >= 0 {
				last[s] = p
			}
		}
		for _, s := range n.out { // outputs nobody reads die at once
			if s >= 0 && last[s] < p {
				last[s] = p
			}
		}
	}
	for s, p := range last {
		if p >= 0 && !isOutput[s] {
			keep[p].free = append(keep[p].free, s)
		}
	}
	b.g.nodes = keep
}

package exec

import (
	"errors"
	"fmt"
	"slices"

	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/internal/kernels"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// Graph is an ONNX graph prepared for execution: opset resolved, every op
// checked, initializers and Constant nodes converted once, nodes in
// topological order. A Graph is immutable; Run may be called from many
// goroutines at once.
type Graph struct {
	opset     int
	maxMemory int64    // each run's budget
	nodes     []*node  // execution order; nodes no output depends on are dropped
	consts    []*value // by slot: initializers and Constant outputs, nil elsewhere
	inputs    []TensorInfo
	inSlots   []int
	defaults  map[string]int // inputs that have an initializer, by name: slot
	outputs   []TensorInfo
	outSlots  []int
	// attention holds the plans of the fused attention nodes.
	attention []*fusedAttention
	// weights holds the constant operands of products packed once (weights.go).
	weights map[weightKey]*kernels.PackedB
	// plans holds the run plans of recent input signatures (plan.go).
	plans *planCache
	// warnings lists what New accepted only because ONNX Runtime does.
	warnings []string
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

// Warnings lists what the file does that the ONNX standard does not allow
// but ONNX Runtime accepts, and that New accepted in the same way: an op
// used below the opset that standardized it, an unknown attribute (ignored),
// a value name produced twice (the later producer wins), nodes out of
// topological order. Callers should show them; the CLI prints them on stderr.
func (g *Graph) Warnings() []string { return slices.Clone(g.warnings) }

// Options tune how a graph is prepared and run. The zero value is the
// default.
type Options struct {
	// MaxMemory bounds, in bytes, the tensors the graph holds: its
	// initializers and constants, converted once by NewWithOptions, and,
	// separately for each run, the values the run holds at once (outputs,
	// intermediates not yet dropped, the temporaries of the running node).
	// A tensor that would exceed it is an error naming the node, op, shape
	// and bytes (matching budget.ErrExceeded), raised before allocating.
	// 0 (or less) means budget.DefaultLimit, 4 GiB.
	MaxMemory int64
}

// New prepares a model for execution with the default Options. Every
// problem that does not depend on the input values is reported here rather
// than during Run: an op the executor does not implement at the model's
// opset, an operator domain it does not implement or the model does not
// import, an input nothing produces (in the graph or a subgraph), a cycle,
// an unsupported element type, initializers over the memory budget.
func New(m *onnxpb.ModelProto) (*Graph, error) {
	return NewWithOptions(m, Options{})
}

// NewWithOptions prepares a model for execution as New does, with the
// given Options.
func NewWithOptions(m *onnxpb.ModelProto, opts Options) (*Graph, error) {
	return prepare(m, opts, true)
}

// newGraph is New, with the fusions (fuse_attention.go, fuse_bias.go)
// optional so that tests can compare with the node-by-node run.
func newGraph(m *onnxpb.ModelProto, fuse bool) (*Graph, error) {
	return prepare(m, Options{}, fuse)
}

// prepare is NewWithOptions with the fusions optional.
func prepare(m *onnxpb.ModelProto, opts Options, fuse bool) (*Graph, error) {
	if m == nil || m.GetGraph() == nil {
		return nil, errors.New("exec: the model has no graph")
	}
	opset, err := defaultOpset(m)
	if err != nil {
		return nil, fmt.Errorf("exec: %w", err)
	}
	funcs, err := newFunctionTable(m)
	if err != nil {
		return nil, fmt.Errorf("exec: %w", err)
	}
	limit := budget.New(opts.MaxMemory).Limit()
	b := &builder{
		g:     &Graph{opset: opset, maxMemory: limit, defaults: map[string]int{}},
		slots: map[string]int{}, fuse: fuse, budget: budget.New(limit),
		prepared: map[int]*node{}, imports: opsetImports(m), funcs: funcs,
	}
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
	known    []bool         // by slot: initializer or graph input
	fuse     bool           // rewrite attention chains and bias adds into fused nodes
	prepared map[int]*node  // by node index: the nodes prepared so far
	imports  map[string]int // the model's opset versions by domain ("" for the default)
	scope    *scope         // for a subgraph body: its enclosing graph (subgraph.go); nil for the model's graph
	budget   *budget.Budget // initializers and constant attributes, all together
	funcs    *functionTable // the model's local functions, shared by the builders of its bodies (functions.go)
}

// warn records a leniency of New; see Graph.Warnings.
func (b *builder) warn(format string, args ...any) {
	b.g.warnings = append(b.g.warnings, fmt.Sprintf(format, args...))
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

// build resolves the graph: initializers, inputs, nodes, order, outputs,
// constants and the plan for dropping intermediates.
func (b *builder) build(gp *onnxpb.GraphProto) error {
	for _, tp := range gp.GetInitializer() {
		name := tp.GetName()
		if _, dup := b.slots[name]; dup {
			return fmt.Errorf("initializer %q is defined twice", name)
		}
		v, err := loadTensor(tp, b.budget)
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
	nps, err := b.expandCalls(gp.GetNode())
	if err != nil {
		return err
	}
	nodes, err := b.prepareNodes(nps)
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
	if b.fuse {
		order = b.fuseNodes(order)
	}
	b.schedule(order)
	return nil
}

// graphInputs records the declared inputs; those with an initializer are
// defaults that Run may override.
func (b *builder) graphInputs(vis []*onnxpb.ValueInfoProto) error {
	for _, vi := range vis {
		name := vi.GetName()
		info, err := b.valueInfo(vi)
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
		info, err := b.valueInfo(vi)
		if err != nil {
			return fmt.Errorf("output %q: %w", name, err)
		}
		s, ok := b.lookup(name)
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

// tensorValue converts a TensorProto outside the graph's budget (test
// data), as loadTensor does.
func tensorValue(tp *onnxpb.TensorProto) (*value, error) {
	return loadTensor(tp, nil)
}

// loadTensor converts an initializer or tensor attribute after reserving
// its memory from b; callers name the tensor in errors.
// onnxio.TensorToArray checks sizes and data, and converts every element
// type the executor supports, zero-element tensors included.
func loadTensor(tp *onnxpb.TensorProto, b *budget.Budget) (*value, error) {
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
	if err := checkExtent(shape); err != nil {
		return nil, err
	}
	if err := b.Reserve(budget.Bytes(elems, dt.size()), dt.String()+" "+shapeString(shape)); err != nil {
		return nil, err
	}
	a, err := onnxio.TensorToArray(tp)
	if err != nil {
		return nil, err
	}
	return &value{dtype: DType(a.DType), shape: a.Shape, data: a.Data}, nil
}

package layers

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"slices"

	"google.golang.org/protobuf/proto"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/match"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/attnrun/attnrun/registry"
)

// liftSubgraph is the layer the lifter's partial mode makes of a piece of
// a graph no other layer lifts.
func liftSubgraph(model []byte, params []string) *match.Layer {
	return &match.Layer{Type: "onnx.subgraph", Config: []match.Field{
		{Key: "graph", Value: base64.StdEncoding.EncodeToString(model)}, {Key: "params", Value: params}}}
}

// Subgraph is onnx.subgraph: a piece of an ONNX graph, kept as ONNX and run
// by the executor inside an attnrun model. `attnrun import --partial` makes
// one for each part of a graph no attnrun layer computes, so that the
// lifted model still runs as a whole.
//
// The graph's inputs are the layer's inputs, in order, then its parameters.
// Parameters are the graph's float32 tensors, stored in the model's state
// dict like any layer's ("<layer>.<initializer name>"); the other constants
// (shapes, masks) stay inside the graph. Inputs arrive as float32, like
// every model value, and are converted to the type the graph declares (a
// bool key_padding_mask is given as 0/1).
type Subgraph struct {
	// Graph is the subgraph: a serialized ONNX ModelProto, base64.
	Graph string `yaml:"graph"`
	// ParamNames lists the graph inputs that are parameters.
	ParamNames []string `yaml:"params"`

	exec   *exec.Graph
	model  *onnxpb.ModelProto
	inputs []exec.TensorInfo
	params []registry.Param
}

var (
	_ registry.Provisioner = (*Subgraph)(nil)
	_ registry.Exporter    = (*Subgraph)(nil)
)

func init() {
	match.RegisterSubgraph(liftSubgraph)
	registry.Register(registry.Info{
		ID:      "onnx.subgraph",
		Summary: "part of an ONNX graph run by attnrun's executor (what `attnrun import --partial` could not lift)",
		New:     func() registry.Layer { return &Subgraph{} },
	})
}

// Validate decodes and prepares the graph, and allocates the parameters
// with the shapes the graph declares, within budget.DefaultLimit.
func (s *Subgraph) Validate() error { return s.Provision(nil) }

// PlanParams decodes the graph and lists the parameters it declares,
// allocating none of them.
func (s *Subgraph) PlanParams() ([]registry.ParamShape, error) {
	_, shapes, err := s.decode(nil)
	return shapes, err
}

// Provision decodes the graph within mem (a budget of
// budget.DefaultLimit when nil), reserves its parameters, prepares the
// graph for the executor within what remains of the budget, and only then
// allocates the parameters.
func (s *Subgraph) Provision(mem registry.Memory) error {
	s.exec, s.model, s.inputs, s.params = nil, nil, nil, nil
	if mem == nil {
		mem = budget.New(budget.DefaultLimit)
	}
	m, shapes, err := s.decode(mem)
	if err != nil {
		return err
	}
	if err := registry.ReserveParams(mem, shapes); err != nil {
		return err
	}
	g, err := newSubgraphExec(m, mem.Limit()-mem.Used())
	if err != nil {
		return fmt.Errorf("graph: %w", err)
	}
	declared := map[string][]int{}
	for _, p := range shapes {
		declared[p.Name] = p.Shape
	}
	var inputs []exec.TensorInfo
	for _, info := range g.Inputs() {
		if _, ok := declared[info.Name]; !ok {
			inputs = append(inputs, info)
		}
	}
	params := make([]registry.Param, len(shapes))
	for i, p := range shapes {
		t := tensor.New(tensor.WithShape(p.Shape...), tensor.WithBacking(make([]float32, budget.Elements(p.Shape))))
		params[i] = registry.Param{Name: p.Name, Value: t, Init: registry.ConstantInit(0)}
	}
	s.exec, s.model, s.inputs, s.params = g, m, inputs, params
	return nil
}

// decode decodes the graph, reserving its size from mem unless mem is nil
// (planning), and lists the parameters it declares: the float32 graph
// inputs ParamNames names, with fixed positive dimensions, in ParamNames
// order.
func (s *Subgraph) decode(mem registry.Memory) (*onnxpb.ModelProto, []registry.ParamShape, error) {
	size := int64(len(s.Graph)) / 4 * 3
	if mem != nil {
		if err := mem.Reserve(size, "the decoded graph"); err != nil {
			return nil, nil, err
		}
	}
	data, err := base64.StdEncoding.DecodeString(s.Graph)
	if err != nil {
		return nil, nil, fmt.Errorf("graph is not base64: %v", err)
	}
	// Everything in the graph is inline in data: its tensors are bounded
	// by its size, and external data is refused (there is no folder).
	m, err := onnxio.DecodeModel(data, "", onnxio.Limits{MaxFileBytes: int64(len(data)), MaxTensorBytes: int64(len(data)), MaxDims: onnxio.DefaultLimits.MaxDims})
	if err != nil {
		return nil, nil, fmt.Errorf("graph: %w", err)
	}
	if n := len(m.GetGraph().GetOutput()); n != 1 {
		return nil, nil, fmt.Errorf("graph has %d outputs, want 1", n)
	}
	inits := map[string]bool{}
	for _, t := range m.GetGraph().GetInitializer() {
		inits[t.GetName()] = true
	}
	declared := map[string]*onnxpb.ValueInfoProto{}
	for _, vi := range m.GetGraph().GetInput() {
		if !inits[vi.GetName()] {
			declared[vi.GetName()] = vi
		}
	}
	shapes := make([]registry.ParamShape, 0, len(s.ParamNames))
	seen := map[string]bool{}
	for _, name := range s.ParamNames {
		vi, ok := declared[name]
		if !ok || seen[name] {
			return nil, nil, fmt.Errorf("params lists %q, which is not a graph input (or is listed twice)", name)
		}
		seen[name] = true
		shape, err := paramShape(vi)
		if err != nil {
			return nil, nil, fmt.Errorf("parameter %q %w", name, err)
		}
		shapes = append(shapes, registry.ParamShape{Name: name, Shape: shape})
	}
	return m, shapes, nil
}

// paramShape is the shape of a graph input that holds a parameter: a
// float32 tensor of rank ≥ 1 with fixed positive dimensions. Its size is
// the budget's to judge.
func paramShape(vi *onnxpb.ValueInfoProto) ([]int, error) {
	dims := onnxio.Dims(vi)
	if onnxio.ElemType(vi) != onnxio.Float || len(dims) == 0 {
		return nil, errors.New("must be a float32 tensor of rank ≥ 1")
	}
	shape := make([]int, len(dims))
	for i, d := range dims {
		if !d.Known || d.Value <= 0 || d.Value > math.MaxInt32 {
			return nil, fmt.Errorf("has dimension %s; parameters need fixed sizes from 1 to 2^31-1", d)
		}
		shape[i] = int(d.Value)
	}
	return shape, nil
}

// newSubgraphExec prepares the graph for the executor, which holds at
// most maxMemory bytes, its constants and each run's values.
func newSubgraphExec(m *onnxpb.ModelProto, maxMemory int64) (*exec.Graph, error) {
	return exec.NewWithOptions(m, exec.Options{MaxMemory: maxMemory})
}

// Params lists the graph's float32 tensors, in the order ParamNames gives.
func (s *Subgraph) Params() []registry.Param { return s.params }

// Forward runs the graph on the inputs and the parameters.
func (s *Subgraph) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	if s.exec == nil {
		return nil, fmt.Errorf("layer used before a successful Validate")
	}
	if len(inputs) != len(s.inputs) {
		return nil, fmt.Errorf("takes %d input(s), got %d", len(s.inputs), len(inputs))
	}
	feeds := make(map[string]*tensor.Dense, len(inputs)+len(s.params))
	for i, info := range s.inputs {
		t, err := convertInput(inputs[i], info.DType)
		if err != nil {
			return nil, fmt.Errorf("input %d (%s): %w", i, info.Name, err)
		}
		feeds[info.Name] = t
	}
	for _, p := range s.params {
		feeds[p.Name] = p.Value
	}
	ctx := context.Background()
	if run != nil && run.Context != nil {
		ctx = run.Context
	}
	outs, err := s.exec.RunContext(ctx, feeds)
	if err != nil {
		return nil, err
	}
	y := outs[s.exec.Outputs()[0].Name]
	if y.Dtype() != tensor.Float32 && y.Dtype() != tensor.Int64 {
		return nil, fmt.Errorf("the graph's output is %v, want float32 (or int64: ids, positions)", y.Dtype())
	}
	return y, nil
}

// convertInput turns a float32 model value into the element type a graph
// input declares.
func convertInput(t *tensor.Dense, dt exec.DType) (*tensor.Dense, error) {
	if t.Dtype() == tensor.Float32 && (dt == exec.Float32 || dt == exec.Float16 || dt == exec.BFloat16) {
		return t, nil // the executor takes narrow floats in float32 and rounds them
	}
	f, err := match.Floats(t)
	if err != nil {
		return nil, err
	}
	var backing any
	switch dt {
	case exec.Float32:
		backing = convertAll(f, func(v float64) float32 { return float32(v) })
	case exec.Float64:
		backing = f
	case exec.Bool:
		backing = convertAll(f, func(v float64) bool { return v != 0 })
	case exec.Int64:
		backing = convertAll(f, func(v float64) int64 { return int64(v) })
	case exec.Int32:
		backing = convertAll(f, func(v float64) int32 { return int32(v) })
	case exec.Int8:
		backing = convertAll(f, func(v float64) int8 { return int8(v) })
	case exec.Uint8:
		backing = convertAll(f, func(v float64) uint8 { return uint8(v) })
	default:
		return nil, fmt.Errorf("element type %s is not supported as a subgraph input", dt)
	}
	if t.IsScalar() {
		return nil, fmt.Errorf("scalar inputs are not supported")
	}
	return tensor.New(tensor.WithShape(t.Shape().Clone()...), tensor.WithBacking(backing)), nil
}

// convertAll returns the elements of f, each converted by conv.
func convertAll[T any](f []float64, conv func(float64) T) []T {
	out := make([]T, len(f))
	for i, v := range f {
		out[i] = conv(v)
	}
	return out
}

// ExportONNX writes the subgraph's nodes back into an export. Constants
// become the builder's constants and parameters its initializers.
func (s *Subgraph) ExportONNX(b registry.GraphBuilder, inputs []string) (string, error) {
	if s.model == nil {
		return "", fmt.Errorf("layer used before a successful Validate")
	}
	gp := s.model.GetGraph()
	names := map[string]string{}
	for i, info := range s.inputs {
		names[info.Name] = inputs[i]
	}
	for _, p := range s.params {
		names[p.Name] = b.Param(p.Name)
	}
	for _, t := range gp.GetInitializer() {
		v, err := exportConstant(b, t)
		if err != nil {
			return "", fmt.Errorf("initializer %q: %w", t.GetName(), err)
		}
		names[t.GetName()] = v
	}
	for _, n := range gp.GetNode() {
		ins := make([]string, len(n.GetInput()))
		for i, in := range n.GetInput() {
			if in == "" {
				continue
			}
			v, ok := names[in]
			if !ok {
				return "", fmt.Errorf("node %q reads %q, which is not defined before it", n.GetName(), in)
			}
			ins[i] = v
		}
		outs, err := exportNode(b, n, ins)
		if err != nil {
			return "", fmt.Errorf("node %q (%s): %w", n.GetName(), n.GetOpType(), err)
		}
		for i, out := range n.GetOutput() {
			names[out] = outs[i]
		}
	}
	return names[gp.GetOutput()[0].GetName()], nil
}

// exportNode re-emits one node through the builder.
func exportNode(b registry.GraphBuilder, n *onnxpb.NodeProto, ins []string) ([]string, error) {
	var attrs []registry.Attr
	var value *onnxpb.TensorProto
	for _, a := range n.GetAttribute() {
		switch a.GetType() {
		case onnxpb.AttributeProto_INT:
			attrs = append(attrs, registry.IntAttr(a.GetName(), a.GetI()))
		case onnxpb.AttributeProto_INTS:
			attrs = append(attrs, registry.IntsAttr(a.GetName(), a.GetInts()...))
		case onnxpb.AttributeProto_FLOAT:
			attrs = append(attrs, registry.FloatAttr(a.GetName(), a.GetF()))
		case onnxpb.AttributeProto_FLOATS:
			attrs = append(attrs, registry.FloatsAttr(a.GetName(), a.GetFloats()...))
		case onnxpb.AttributeProto_STRING:
			attrs = append(attrs, registry.StringAttr(a.GetName(), string(a.GetS())))
		case onnxpb.AttributeProto_TENSOR:
			value = a.GetT()
		default:
			return nil, fmt.Errorf("attribute %q of type %s cannot be exported", a.GetName(), a.GetType())
		}
	}
	switch n.GetOpType() {
	case "Constant":
		if value == nil {
			return nil, fmt.Errorf("only tensor constants can be exported")
		}
		v, err := exportConstant(b, value)
		return []string{v}, err
	case "ConstantOfShape":
		fill := &onnxpb.TensorProto{DataType: proto.Int32(int32(onnxio.Float)), Dims: []int64{1}, FloatData: []float32{0}}
		if value != nil {
			fill = value
		}
		v, err := exportConstant(b, fill)
		if err != nil {
			return nil, err
		}
		return []string{b.Node("Expand", []string{v, ins[0]})}, nil
	}
	if value != nil {
		return nil, fmt.Errorf("tensor attributes cannot be exported")
	}
	return b.NodeOutputs(n.GetOpType(), ins, len(n.GetOutput()), attrs...), nil
}

// exportConstant adds a constant tensor: float32 and int64 as they are,
// bool as int64 cast back to bool.
func exportConstant(b registry.GraphBuilder, t *onnxpb.TensorProto) (string, error) {
	d, err := onnxio.TensorToDense(t)
	if err != nil {
		return "", err
	}
	dims := slices.Clone(t.GetDims())
	f, err := match.Floats(d)
	if err != nil {
		return "", err
	}
	switch onnxio.DataType(t.GetDataType()) {
	case onnxio.Float:
		v := make([]float32, len(f))
		for i, x := range f {
			v[i] = float32(x)
		}
		if len(dims) == 0 {
			return b.ScalarFloat(v[0]), nil
		}
		return b.ConstFloat(v, dims...), nil
	case onnxio.Int64, onnxio.Bool:
		v := make([]int64, len(f))
		for i, x := range f {
			v[i] = int64(x)
		}
		c := b.ScalarInt64(v[0])
		if len(dims) > 0 {
			c = b.ConstInt64(v, dims...)
		}
		if onnxio.DataType(t.GetDataType()) == onnxio.Bool {
			c = b.Node("Cast", []string{c}, registry.IntAttr("to", int64(onnxio.Bool)))
		}
		return c, nil
	}
	return "", fmt.Errorf("constants of type %s cannot be exported", onnxio.DataType(t.GetDataType()))
}

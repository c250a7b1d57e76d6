package lift

import (
	"context"
	"fmt"
	"math"
	"slices"

	"google.golang.org/protobuf/proto"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/match"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// A probe evaluates the graph at one concrete choice of input shapes.
//
// Patterns are recognized by structure, but the numbers that structure
// carries (a scale of 1/√8 computed as Pow(Cast(Gather(Shape(k))), 0.5), a
// mask sliced from a buffer by the sequence length, the layout a chain of
// Reshape and Transpose nodes produces) are easiest to read by running the
// graph: every static value is computed once per probe with the executor,
// and layout chains are traced by pushing an index tensor through them.
// Dynamic graphs are probed at two sizes, so that a pattern that holds only
// by coincidence at one size is caught.
type probe struct {
	g      *graph
	dims   map[string]int // symbolic dimension: its size in this probe
	feeds  map[string]*tensor.Dense
	values map[string]*tensor.Dense // every value of the graph, on zero inputs
}

// execLimits is how the lifter runs the executor on a graph: the caller's
// context and memory budget (Options.Context and Options.MaxMemory).
type execLimits struct {
	ctx  context.Context
	opts exec.Options
}

// newExecLimits returns the limits of ctx (nil: none) and maxMemory
// bytes (0: the default budget).
func newExecLimits(ctx context.Context, maxMemory int64) execLimits {
	if ctx == nil {
		ctx = context.Background()
	}
	return execLimits{ctx: ctx, opts: exec.Options{MaxMemory: maxMemory}}
}

// context returns the context of the runs; the zero limits have none.
func (l execLimits) context() context.Context {
	if l.ctx == nil {
		return context.Background()
	}
	return l.ctx
}

// maxProbeElements bounds an input the probes feed: a static graph
// declares its input shapes, and the file may come from a stranger.
const maxProbeElements = 1 << 24

// probeIndexInput is the name of the extra graph input index traces feed.
const probeIndexInput = "__lift_index"

// symbolic lists the graph inputs' symbolic dimensions in order of first
// appearance; a dimension with neither size nor name gets a name of its own.
func symbolic(g *graph) []string {
	var names []string
	for i, vi := range g.Inputs {
		for j, d := range onnxio.Dims(vi) {
			name := d.Param
			if !d.Known && name == "" {
				name = fmt.Sprintf("?%d.%d", i, j)
			}
			if !d.Known && !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	return names
}

// newProbe evaluates every value of the graph with the symbolic dimensions
// set to first, first+1, ... in order of appearance, on zero inputs. When
// the graph fails at those sizes and has inputs whose every dimension is
// symbolic and its own (masks declared broadcastable, as attnrun's exports
// declare them), it tries again with those dimensions 1.
//
// Failing still, it tries the dimensions that only inputs of fixed
// dimensions lack at 1: a per-channel quantization scale (C) whose size
// the graph's weights fix, which a probe's own sizes cannot guess, is
// read per tensor then.
func newProbe(g *graph, first int) (*probe, error) {
	p, err := evalProbe(g, first, nil)
	for _, ones := range []map[string]bool{maskOnlyDims(g), unfixedOnlyDims(g)} {
		if err == nil || len(ones) == 0 {
			continue
		}
		if q, err2 := evalProbe(g, first, ones); err2 == nil {
			return q, nil
		}
	}
	return p, err
}

// unfixedOnlyDims lists the symbolic dimensions that appear only in graph
// inputs with no fixed dimension.
func unfixedOnlyDims(g *graph) map[string]bool {
	inFixed := map[string]bool{}
	all := map[string]bool{}
	for _, vi := range g.Inputs {
		dims := onnxio.Dims(vi)
		fixed := false
		for _, d := range dims {
			fixed = fixed || d.Known
		}
		for _, d := range dims {
			if d.Param != "" {
				all[d.Param] = true
				inFixed[d.Param] = inFixed[d.Param] || fixed
			}
		}
	}
	out := map[string]bool{}
	for name := range all {
		if !inFixed[name] {
			out[name] = true
		}
	}
	return out
}

// evalProbe builds the feeds of a probe (see newProbeWith) and evaluates
// every value of the graph on them.
func evalProbe(g *graph, first int, ones map[string]bool) (*probe, error) {
	p, err := newProbeWith(g, first, ones)
	if err != nil {
		return nil, err
	}
	return p, p.evaluate()
}

// evaluate computes every value of the graph on the probe's feeds.
func (p *probe) evaluate() error {
	g := p.g
	var all []string // every value a node computes; Constants are read below
	for _, n := range g.Nodes {
		for _, out := range n.GetOutput() {
			if out != "" && n.GetOpType() != "Constant" {
				all = append(all, out)
			}
		}
	}
	vals, err := p.run(g.Model.GetGraph().GetNode(), nil, all, nil)
	if err != nil {
		return err
	}
	p.values = vals
	for _, n := range g.Nodes { // Constants the executor folded: read them directly
		if n.GetOpType() == "Constant" && p.values[n.GetOutput()[0]] == nil {
			if t, err := constantValue(n); err == nil {
				p.values[n.GetOutput()[0]] = t
			}
		}
	}
	for name, t := range g.Inits {
		if d, err := onnxio.TensorToDense(t); err == nil {
			p.values[name] = d
		}
	}
	for name, t := range p.feeds {
		p.values[name] = t
	}
	return nil
}

// newProbeWith builds a probe's feeds without evaluating the graph: the
// symbolic dimensions set to first, first+1, ... and those in ones (a
// mask's broadcastable axes, maskOnlyDims) set to 1.
func newProbeWith(g *graph, first int, ones map[string]bool) (*probe, error) {
	dims := map[string]int{}
	for i, name := range symbolic(g) {
		dims[name] = first + i
	}
	for name := range ones {
		dims[name] = 1
	}
	if err := applySums(dims, g.sums); err != nil {
		return nil, err
	}
	return probeAt(g, dims)
}

// probeAt builds the feeds of a probe with the symbolic dimensions set to
// dims, without evaluating the graph.
func probeAt(g *graph, dims map[string]int) (*probe, error) {
	p := &probe{g: g, dims: dims, feeds: map[string]*tensor.Dense{}, values: map[string]*tensor.Dense{}}
	for i, vi := range g.Inputs {
		if !onnxio.HasShape(vi) {
			return nil, fmt.Errorf("input %q declares no shape", vi.GetName())
		}
		var shape []int
		for j, d := range onnxio.Dims(vi) {
			switch {
			case d.Known:
				shape = append(shape, int(d.Value))
			case d.Param != "":
				shape = append(shape, p.dims[d.Param])
			default:
				shape = append(shape, p.dims[fmt.Sprintf("?%d.%d", i, j)])
			}
		}
		if n := product(shape); n > maxProbeElements || n < 0 {
			return nil, fmt.Errorf("input %q of shape %s is too large to probe (limit %d elements)", vi.GetName(), fmtShape(shape), maxProbeElements)
		}
		t, err := zeros(onnxio.ElemType(vi), shape)
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", vi.GetName(), err)
		}
		p.feeds[vi.GetName()] = t
	}
	return p, nil
}

// maskOnlyDims lists the symbolic dimensions that appear in only one
// graph input, one with no fixed dimension: a mask attnrun declares
// (mask_batch, mask_heads, mask_queries, mask_keys), whose sizes may be 1
// or the scores'. Probes set them to 1, which broadcasts to any scores.
func maskOnlyDims(g *graph) map[string]bool {
	users := map[string]int{}
	for _, vi := range g.Inputs {
		seen := map[string]bool{}
		for _, d := range onnxio.Dims(vi) {
			if d.Param != "" && !seen[d.Param] {
				seen[d.Param] = true
				users[d.Param]++
			}
		}
	}
	out := map[string]bool{}
	for _, vi := range g.Inputs {
		dims := onnxio.Dims(vi)
		fixed := false
		for _, d := range dims {
			fixed = fixed || d.Known
		}
		if fixed || len(dims) == 0 {
			continue
		}
		for _, d := range dims {
			if d.Param != "" && users[d.Param] == 1 {
				out[d.Param] = true
			}
		}
	}
	return out
}

// constantValue reads a Constant node's tensor attribute.
func constantValue(n *node) (*tensor.Dense, error) {
	a := n.Attr("value")
	if a == nil || a.GetT() == nil {
		return nil, fmt.Errorf("Constant %s has no tensor value", n.Label())
	}
	return onnxio.TensorToDense(a.GetT())
}

// zeros allocates a zero tensor of an ONNX element type, in the Go type
// the executor holds it in (float16 and bfloat16 in float32).
func zeros(dt onnxio.DataType, shape []int) (*tensor.Dense, error) {
	a, err := array.New(array.DType(dt), shape...)
	if err != nil {
		return nil, fmt.Errorf("element type %s is not supported", dt)
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(a.Data)), nil
}

// value returns a value of the graph at this probe.
func (p *probe) value(v string) (*tensor.Dense, error) {
	t, ok := p.values[v]
	if !ok || t == nil {
		return nil, fmt.Errorf("value %q could not be evaluated", v)
	}
	return t, nil
}

// shape returns a value's shape at this probe.
func (p *probe) shape(v string) ([]int, error) {
	t, err := p.value(v)
	if err != nil {
		return nil, err
	}
	if t.IsScalar() {
		return []int{}, nil
	}
	return slices.Clone([]int(t.Shape())), nil
}

// scalar returns a static value holding exactly one number.
func (p *probe) scalar(v string) (float64, bool) {
	t, err := p.value(v)
	if err != nil || t.Shape().TotalSize() != 1 {
		return 0, false
	}
	f, err := match.Floats(t)
	if err != nil {
		return 0, false
	}
	return f[0], true
}

// run executes a variant of the graph: the given nodes, with extra inputs
// fed by extra, and returns the named values. Only the nodes and
// initializers the outputs need are kept.
func (p *probe) run(nodes []*onnxpb.NodeProto, extraInputs []*onnxpb.ValueInfoProto, outputs []string, extra map[string]*tensor.Dense) (map[string]*tensor.Dense, error) {
	gp := p.g.Model.GetGraph()
	keep, inits := closure(nodes, gp.GetInitializer(), outputs)
	var outInfos []*onnxpb.ValueInfoProto
	for _, o := range outputs {
		outInfos = append(outInfos, untypedInfo(o, onnxio.Float))
	}
	m := &onnxpb.ModelProto{
		IrVersion:   proto.Int64(p.g.Model.GetIrVersion()),
		OpsetImport: p.g.Model.GetOpsetImport(),
		Graph: &onnxpb.GraphProto{
			Name:        proto.String("probe"),
			Node:        keep,
			Initializer: inits,
			Input:       append(slices.Clone(gp.GetInput()), extraInputs...),
			Output:      outInfos,
		},
	}
	eg, err := exec.NewWithOptions(m, p.g.limits.opts)
	if err != nil {
		return nil, err
	}
	feeds := map[string]*array.Array{}
	for _, in := range []map[string]*tensor.Dense{p.feeds, extra} {
		for k, v := range in {
			if feeds[k], err = array.FromDense(v); err != nil {
				return nil, fmt.Errorf("input %q: %w", k, err)
			}
		}
	}
	outs, err := eg.RunArrays(p.g.limits.context(), feeds)
	if err != nil {
		return nil, err
	}
	// A value of zero elements (an empty Slice of a shape) is left out: a
	// *tensor.Dense cannot hold it, and value reports it unevaluated.
	res := map[string]*tensor.Dense{}
	for k, a := range outs {
		if a.Len() == 0 {
			continue
		}
		if res[k], err = a.Dense(); err != nil {
			return nil, fmt.Errorf("value %q: %w", k, err)
		}
	}
	return res, nil
}

// untypedInfo declares a value with an element type and no shape.
func untypedInfo(name string, dt onnxio.DataType) *onnxpb.ValueInfoProto {
	return &onnxpb.ValueInfoProto{
		Name: proto.String(name),
		Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
			ElemType: proto.Int32(int32(dt)),
		}}},
	}
}

// closure keeps the nodes (in order) and initializers that the outputs
// depend on.
func closure(nodes []*onnxpb.NodeProto, inits []*onnxpb.TensorProto, outputs []string) ([]*onnxpb.NodeProto, []*onnxpb.TensorProto) {
	producer := map[string]int{}
	for i, n := range nodes {
		for _, o := range n.GetOutput() {
			producer[o] = i
		}
	}
	need := map[string]bool{}
	keepNode := make([]bool, len(nodes))
	stack := slices.Clone(outputs)
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if v == "" || need[v] {
			continue
		}
		need[v] = true
		if i, ok := producer[v]; ok && !keepNode[i] {
			keepNode[i] = true
			stack = append(stack, nodes[i].GetInput()...)
		}
	}
	var keep []*onnxpb.NodeProto
	for i, n := range nodes {
		if keepNode[i] {
			keep = append(keep, n)
		}
	}
	var keptInits []*onnxpb.TensorProto
	for _, t := range inits {
		if need[t.GetName()] {
			keptInits = append(keptInits, t)
		}
	}
	return keep, keptInits
}

// trace follows a chain of layout nodes from base to end by running it on
// an index tensor: element k of base holds k, so element i of the result
// holds the flat index in base it was copied from. The nodes in scale (Mul
// or Div by a scalar, which a trace must not apply) are replaced by Identity
// on their data input, and the nodes in as by Identity on the input they
// map to (a rotation's last node, on the heads it rotates). It returns the
// end's shape and the index map.
func (p *probe) trace(base, end string, scale []*node, as map[*node]string) ([]int, []int, error) {
	baseShape, err := p.shape(base)
	if err != nil {
		return nil, nil, err
	}
	n := 1
	for _, d := range baseShape {
		n *= d
	}
	if base == end {
		return baseShape, indices(n), nil
	}
	if n >= 1<<24 {
		return nil, nil, fmt.Errorf("value %q has %d elements at the probe shape, too many to trace", base, n)
	}
	idx := make([]float64, n)
	for i := range idx {
		idx[i] = float64(i)
	}
	skip := map[*onnxpb.NodeProto]string{}
	for _, s := range scale {
		for _, in := range s.GetInput() {
			if p.g.IsData(in) {
				skip[s.NodeProto] = in
			}
		}
	}
	for n, in := range as {
		skip[n.NodeProto] = in
	}
	var nodes []*onnxpb.NodeProto
	for _, np := range p.g.Model.GetGraph().GetNode() {
		c := proto.Clone(np).(*onnxpb.NodeProto)
		if data, ok := skip[np]; ok {
			c = &onnxpb.NodeProto{OpType: proto.String("Identity"), Name: np.Name, Input: []string{data}, Output: np.GetOutput()}
		}
		for k, in := range c.Input {
			if in == base {
				c.Input[k] = probeIndexInput
			}
		}
		nodes = append(nodes, c)
	}
	index := tensor.New(tensor.WithShape(baseShape...), tensor.WithBacking(idx))
	if len(baseShape) == 0 {
		index = tensor.New(tensor.FromScalar(idx[0]))
	}
	outs, err := p.run(nodes, []*onnxpb.ValueInfoProto{untypedInfo(probeIndexInput, onnxio.Float64)}, []string{end},
		map[string]*tensor.Dense{probeIndexInput: index})
	if err != nil {
		return nil, nil, fmt.Errorf("tracing %q back to %q: %w", end, base, err)
	}
	got := outs[end]
	vals, err := match.Floats(got)
	if err != nil {
		return nil, nil, err
	}
	out := make([]int, len(vals))
	for i, v := range vals {
		if v != math.Trunc(v) || v < 0 || int(v) >= n {
			return nil, nil, fmt.Errorf("tracing %q back to %q: the chain computes new values, it does not only move them", end, base)
		}
		out[i] = int(v)
	}
	shape := []int(got.Shape())
	if got.IsScalar() {
		shape = []int{}
	}
	return slices.Clone(shape), out, nil
}

func indices(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

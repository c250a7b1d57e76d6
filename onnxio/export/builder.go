package export

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/attnrun/attnrun/registry"
)

// graph is the ONNX graph an export is building: its nodes in order, the
// names in use, and what is known of each value's width. The body of a
// graph attribute is a graph of its own that shares the names of the model
// (ONNX's values are named once in the whole model) and its domains.
type graph struct {
	opset    int
	nodes    []*onnxpb.NodeProto
	names    map[string]bool // value and node names in use
	produced map[string]bool // values some node outputs
	widths   map[string]int  // static last axis of a value, when known
	ids      map[string]bool // graph inputs of int64 token ids (typed model inputs)
	// probed is the model's output on one token of each input, nil when
	// the probe failed: its rank tells a pooled (batch, d) output.
	probed *tensor.Dense
	// domains are the versions of the other operator set domains the
	// export may use; used, those its nodes use.
	domains map[string]int
	used    map[string]bool
}

func newGraph(opset int) *graph {
	return &graph{opset: opset, names: map[string]bool{}, produced: map[string]bool{}, widths: map[string]int{}, ids: map[string]bool{},
		domains: map[string]int{}, used: map[string]bool{}}
}

// body returns the graph of a graph attribute's body inside g.
func (g *graph) body() *graph {
	return &graph{opset: g.opset, names: g.names, produced: map[string]bool{}, widths: map[string]int{}, ids: map[string]bool{},
		domains: g.domains, used: g.used}
}

// reserve marks a name (a graph input, an initializer) as taken.
func (g *graph) reserve(name string) { g.names[name] = true }

// defined reports whether a value exists: a graph input, an initializer or
// a node output.
func (g *graph) defined(value string) bool { return g.names[value] }

// addNode appends a node with the given (unique) name and output names.
func (g *graph) addNode(op, name string, inputs, outputs []string, attrs []*onnxpb.AttributeProto) {
	g.nodes = append(g.nodes, &onnxpb.NodeProto{
		Name:      proto.String(name),
		OpType:    proto.String(op),
		Input:     inputs,
		Output:    outputs,
		Attribute: attrs,
	})
	g.names[name] = true
	for _, out := range outputs {
		g.names[out] = true
		g.produced[out] = true
	}
}

// layerBuilder is the registry.GraphBuilder one layer exports with. Node
// and value names follow PyTorch's exporter: node "/attn/MatMul_1", output
// "/attn/MatMul_1_output_0". The first misuse is kept in err and fails the
// export.
type layerBuilder struct {
	g      *graph
	path   string            // "/attn"
	params map[string]string // the layer's parameter names -> model names
	local  []string          // the layer's parameter names, for errors
	inputs map[string]bool
	counts map[string]int // nodes of each op so far, for names
	err    error
}

var _ registry.GraphBuilder = (*layerBuilder)(nil)

func newLayerBuilder(g *graph, spec *models.LayerSpec, inputs []string) *layerBuilder {
	b := &layerBuilder{
		g: g, path: "/" + spec.Name,
		params: map[string]string{}, inputs: map[string]bool{}, counts: map[string]int{},
	}
	for _, p := range spec.Layer.Params() {
		b.params[p.Name] = spec.Name + "." + p.Name
		b.local = append(b.local, p.Name)
	}
	if tier, ok := spec.Layer.(registry.Tier); ok { // a borrowed parameter is its source's initializer
		for _, t := range tier.TiedParams() {
			b.params[t.Name] = t.Source
			b.local = append(b.local, t.Name)
		}
	}
	for _, in := range inputs {
		b.inputs[in] = true
	}
	return b
}

// fail records the first misuse.
func (b *layerBuilder) fail(format string, args ...any) {
	if b.err == nil {
		b.err = fmt.Errorf(format, args...)
	}
}

func (b *layerBuilder) Opset() int { return b.g.opset }

func (b *layerBuilder) Param(name string) string {
	full, ok := b.params[name]
	if !ok {
		b.fail("ExportONNX asked for parameter %q; the layer has %s", name, paramList(b.local))
		return name
	}
	return full
}

func (b *layerBuilder) Width(value string) int {
	if !b.inputs[value] {
		return 0
	}
	return b.g.widths[value]
}

func (b *layerBuilder) Node(op string, inputs []string, attrs ...registry.Attr) string {
	return b.NodeOutputs(op, inputs, 1, attrs...)[0]
}

func (b *layerBuilder) NodeOutputs(op string, inputs []string, n int, attrs ...registry.Attr) []string {
	if n < 1 {
		b.fail("node %s: %d outputs requested, want at least 1", op, n)
		n = 1
	}
	name := b.nodeName(op, n)
	outputs := make([]string, n)
	for i := range outputs {
		outputs[i] = outputValue(name, i)
	}
	for _, in := range inputs {
		if in != "" && !b.g.defined(in) {
			b.fail("node %s: input %q is not a value of the graph", name, in)
		}
	}
	protos := make([]*onnxpb.AttributeProto, 0, len(attrs))
	for _, a := range attrs {
		if body, ok := a.Value.(registry.Graph); ok {
			protos = append(protos, b.graphAttribute(name, a.Name, body))
			continue
		}
		ap, err := attribute(a)
		if err != nil {
			b.fail("node %s: %v", name, err)
			continue
		}
		protos = append(protos, ap)
	}
	b.g.addNode(op, name, append([]string(nil), inputs...), outputs, protos)
	return outputs
}

// DomainVersion is the version of domain the export allows, 0 if none.
func (b *layerBuilder) DomainVersion(domain string) int { return b.g.domains[domain] }

// DomainNode adds a node of op from domain and has the model import it.
func (b *layerBuilder) DomainNode(domain, op string, inputs []string, attrs ...registry.Attr) string {
	out := b.Node(op, inputs, attrs...)
	if b.g.domains[domain] == 0 {
		b.fail("node %s: the export does not allow the %q domain (export.Options.Preview allows ai.onnx.preview)", op, domain)
		return out
	}
	b.g.nodes[len(b.g.nodes)-1].Domain = proto.String(domain)
	b.g.used[domain] = true
	return out
}

// graphAttribute builds the body of graph attribute attr of node node with
// a builder of its own that shares the layer's names and parameters, and
// returns the attribute. The body's inputs are named after the node.
func (b *layerBuilder) graphAttribute(node, attr string, body registry.Graph) *onnxpb.AttributeProto {
	sub := &layerBuilder{g: b.g.body(), path: b.path, params: b.params, local: b.local,
		inputs: map[string]bool{}, counts: b.counts}
	names := make([]string, len(body.Inputs))
	inputs := make([]*onnxpb.ValueInfoProto, len(body.Inputs))
	for i, rank := range body.Inputs {
		names[i] = node + "/" + attr + "_input_" + strconv.Itoa(i)
		sub.g.reserve(names[i])
		dims := make([]onnxio.Dim, rank)
		for j := range dims {
			dims[j] = onnxio.SymbolicDim(fmt.Sprintf("%s_%s_%d_%d", strings.TrimPrefix(node, "/"), attr, i, j))
		}
		inputs[i] = onnxio.TensorValueInfo(names[i], onnxio.Float, dims)
	}
	var out string
	if body.Build == nil {
		sub.fail("graph attribute %q has no Build", attr)
	} else {
		out = body.Build(sub, names)
	}
	if sub.err != nil {
		b.fail("node %s, attribute %q: %v", node, attr, sub.err)
	} else if !sub.g.produced[out] && !slices.Contains(names, out) {
		b.fail("node %s, attribute %q: the body returned %q, which none of its nodes produces", node, attr, out)
	}
	return &onnxpb.AttributeProto{
		Name: proto.String(attr),
		Type: onnxpb.AttributeProto_GRAPH.Enum(),
		G: &onnxpb.GraphProto{
			Name:   proto.String(strings.TrimPrefix(node, "/") + "/" + attr),
			Node:   sub.g.nodes,
			Input:  inputs,
			Output: []*onnxpb.ValueInfoProto{unshapedValueInfo(out, onnxio.Float)},
		},
	}
}

// unshapedValueInfo is the value info of a tensor of a known element type
// and unknown shape, as a body declares its output.
func unshapedValueInfo(name string, elem onnxio.DataType) *onnxpb.ValueInfoProto {
	return &onnxpb.ValueInfoProto{
		Name: proto.String(name),
		Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
			ElemType: proto.Int32(int32(elem)),
		}}},
	}
}

// nodeName returns the next node name for op under the layer's path that
// is unused, as are the names of its n outputs (a graph input an Interface
// declares may have any name).
func (b *layerBuilder) nodeName(op string, n int) string {
	for {
		name := b.path + "/" + op
		if k := b.counts[op]; k > 0 {
			name += "_" + strconv.Itoa(k)
		}
		b.counts[op]++
		free := !b.g.names[name]
		for i := 0; i < n && free; i++ {
			free = !b.g.names[outputValue(name, i)]
		}
		if free {
			return name
		}
	}
}

// outputValue names output i of a node: "/attn/MatMul_1_output_0".
func outputValue(node string, i int) string { return node + "_output_" + strconv.Itoa(i) }

func (b *layerBuilder) ConstInt64(values []int64, dims ...int64) string {
	return b.constant(onnxio.Int64, len(values), dims, func() []byte {
		return onnxio.EncodeRaw(values, 8, func(p []byte, v int64) { binary.LittleEndian.PutUint64(p, uint64(v)) })
	})
}

func (b *layerBuilder) ConstFloat(values []float32, dims ...int64) string {
	return b.constant(onnxio.Float, len(values), dims, func() []byte {
		return onnxio.EncodeRaw(values, 4, func(p []byte, v float32) { binary.LittleEndian.PutUint32(p, math.Float32bits(v)) })
	})
}

func (b *layerBuilder) ScalarInt64(v int64) string {
	return b.ConstInt64([]int64{v}, []int64{}...)
}

func (b *layerBuilder) ScalarFloat(v float32) string {
	return b.ConstFloat([]float32{v}, []int64{}...)
}

// constant adds a Constant node holding n elements of type dt with shape
// dims (a vector of n when dims is nil; a scalar when it is empty but not
// nil, as the Scalar methods pass it).
func (b *layerBuilder) constant(dt onnxio.DataType, n int, dims []int64, raw func() []byte) string {
	if dims == nil {
		dims = []int64{int64(n)}
	}
	elems := int64(1)
	for _, d := range dims {
		elems *= d
	}
	if elems != int64(n) || n == 0 {
		b.fail("constant of shape %v needs %d values, got %d", dims, elems, n)
	}
	t := &onnxpb.TensorProto{Dims: append([]int64{}, dims...), DataType: proto.Int32(int32(dt)), RawData: raw()}
	return b.Node("Constant", nil, registry.Attr{Name: "value", Value: t})
}

// attribute converts a registry.Attr into its AttributeProto.
func attribute(a registry.Attr) (*onnxpb.AttributeProto, error) {
	if a.Name == "" {
		return nil, errors.New("attribute without a name")
	}
	ap := &onnxpb.AttributeProto{Name: proto.String(a.Name)}
	switch v := a.Value.(type) {
	case int64:
		ap.Type, ap.I = onnxpb.AttributeProto_INT.Enum(), proto.Int64(v)
	case int:
		ap.Type, ap.I = onnxpb.AttributeProto_INT.Enum(), proto.Int64(int64(v))
	case []int64:
		ap.Type, ap.Ints = onnxpb.AttributeProto_INTS.Enum(), append([]int64{}, v...)
	case float32:
		ap.Type, ap.F = onnxpb.AttributeProto_FLOAT.Enum(), proto.Float32(v)
	case []float32:
		ap.Type, ap.Floats = onnxpb.AttributeProto_FLOATS.Enum(), append([]float32{}, v...)
	case string:
		ap.Type, ap.S = onnxpb.AttributeProto_STRING.Enum(), []byte(v)
	case *onnxpb.TensorProto: // Constant values, built by this package
		ap.Type, ap.T = onnxpb.AttributeProto_TENSOR.Enum(), v
	default:
		return nil, fmt.Errorf("attribute %q has a value of type %T (want int64, []int64, float32, []float32 or string)", a.Name, a.Value)
	}
	return ap, nil
}

// paramList lists a layer's parameter names for an error.
func paramList(names []string) string {
	if len(names) == 0 {
		return "no parameters"
	}
	return "parameters " + quoteNames(names)
}

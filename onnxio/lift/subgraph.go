package lift

import (
	"errors"
	"fmt"
	"slices"
	"sort"

	"google.golang.org/protobuf/proto"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/match"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// addSubgraphs covers what no layer lifts with onnx.subgraph layers: one
// for each value a lifted layer (or a graph output) needs and no lifted
// layer computes. Each holds the graph nodes that compute its value from
// values the model has: its inputs and the outputs of earlier layers.
func (b *builder) addSubgraphs() error {
	a, p := b.a, b.p
	available := map[string]bool{}
	for _, vi := range a.g.Inputs {
		available[vi.GetName()] = true
	}
	weights := map[string]bool{} // outputs a layer returns as its attention weights
	for _, r := range b.regions {
		available[r.output] = true
		for _, w := range r.weights {
			weights[w.output] = true
		}
	}
	var needed []string
	for _, r := range b.regions {
		for _, in := range r.inputs {
			if v := p.resolve(in); !available[v] {
				needed = append(needed, v)
			}
		}
	}
	for _, o := range a.g.Outputs {
		if out := p.resolve(o); !available[out] && !weights[o] {
			needed = append(needed, out)
		}
	}
	pos := func(v string) int {
		if n := a.g.Producer(v); n != nil {
			return n.Index
		}
		return -1
	}
	sort.SliceStable(needed, func(i, j int) bool { return pos(needed[i]) < pos(needed[j]) })
	for _, v := range slices.Compact(needed) {
		if available[v] {
			continue
		}
		r, err := b.subgraph(v, available)
		if err != nil {
			return err
		}
		for _, n := range r.nodes {
			p.claimed[n] = true
		}
		b.regions = append(b.regions, r)
		available[v] = true
	}
	return nil
}

// subgraph builds the onnx.subgraph layer that computes v from available
// values, recomputing inside it whatever else it needs.
func (b *builder) subgraph(v string, available map[string]bool) (*region, error) {
	g := b.a.g
	keep := map[*node]bool{}
	var boundary []string
	usedInit := map[string]bool{}
	seen := map[string]bool{}
	stack := []string{v}
	for len(stack) > 0 {
		u := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if u == "" || seen[u] {
			continue
		}
		seen[u] = true
		switch {
		case available[u] && u != v:
			boundary = append(boundary, u)
		case g.Inits[u] != nil:
			usedInit[u] = true
		case g.Producer(u) != nil:
			n := g.Producer(u)
			keep[n] = true
			stack = append(stack, n.GetInput()...)
		default:
			return nil, fmt.Errorf("value %q is neither computed nor available", u)
		}
	}
	pos := func(u string) int {
		if n := g.Producer(u); n != nil {
			return n.Index
		}
		for i, vi := range g.Inputs {
			if vi.GetName() == u {
				return -len(g.Inputs) + i
			}
		}
		return -1
	}
	sort.Slice(boundary, func(i, j int) bool { return pos(boundary[i]) < pos(boundary[j]) })

	gp := &onnxpb.GraphProto{Name: proto.String("subgraph")}
	var nodes, ours []*node
	for _, n := range g.Nodes {
		if keep[n] {
			np := n.NodeProto
			if written := b.a.written[np]; written != nil {
				np = written // the subgraph computes as the graph does
			}
			gp.Node = append(gp.Node, np)
			nodes = append(nodes, n)
			if !b.p.claimed[n] && b.a.liveNode(n) {
				ours = append(ours, n)
			}
		}
	}
	for _, u := range boundary {
		info := untypedInfo(u, onnxio.Float)
		for _, vi := range g.Inputs {
			if vi.GetName() == u {
				info = vi
			}
		}
		gp.Input = append(gp.Input, info)
	}
	var params []param
	var paramNames []string
	for _, t := range g.Model.GetGraph().GetInitializer() {
		if !usedInit[t.GetName()] {
			continue
		}
		if onnxio.DataType(t.GetDataType()) == onnxio.Float && len(t.GetDims()) > 0 {
			d, err := onnxio.TensorToDense(t)
			if err != nil {
				return nil, err
			}
			dims := make([]onnxio.Dim, len(t.GetDims()))
			for i, x := range t.GetDims() {
				dims[i] = onnxio.FixedDim(x)
			}
			gp.Input = append(gp.Input, onnxio.TensorValueInfo(t.GetName(), onnxio.Float, dims))
			params = append(params, param{name: t.GetName(), value: d, pieces: []piece{{value: t.GetName()}}})
			paramNames = append(paramNames, t.GetName())
			continue
		}
		if slices.Contains(b.a.weightInputs, t.GetName()) { // a narrow-float weight input: a float32 parameter, cast
			p, err := narrowWeightParam(gp, t)
			if err != nil {
				return nil, err
			}
			params = append(params, p)
			paramNames = append(paramNames, t.GetName())
			continue
		}
		gp.Initializer = append(gp.Initializer, t)
	}
	gp.Output = []*onnxpb.ValueInfoProto{untypedInfo(v, onnxio.Float)}
	m := &onnxpb.ModelProto{IrVersion: proto.Int64(g.Model.GetIrVersion()), OpsetImport: g.Model.GetOpsetImport(), Graph: gp}
	data, err := onnxio.EncodeModel(m)
	if err != nil {
		return nil, err
	}
	if len(ours) == 0 {
		ours = nodes
	}
	kind := "onnx"
	if op := sanitize(g.Producer(v).GetOpType()); op != "" {
		kind = "onnx_" + op
	}
	layer := match.Subgraph()
	if layer == nil {
		return nil, errors.New("no layer type runs unlifted parts of a graph (onnx.subgraph: import package layers)")
	}
	l := layer(data, paramNames)
	fields, err := fieldsOf(l)
	if err != nil {
		return nil, err
	}
	return &region{typ: l.Type, kind: kind, inputs: boundary, output: v, nodes: ours, params: params, fields: fields}, nil
}

// narrowWeightParam makes a float16 weight input of the graph (param_inputs.go)
// a float32 parameter of a subgraph: the subgraph takes it as a float32
// input of the same name and Casts it for the nodes that read it.
func narrowWeightParam(gp *onnxpb.GraphProto, t *onnxpb.TensorProto) (param, error) {
	d, err := onnxio.TensorToDense(t)
	if err != nil {
		return param{}, err
	}
	if d.Dtype() != tensor.Float32 {
		return param{}, fmt.Errorf("weight input %q holds %v, want a float type", t.GetName(), d.Dtype())
	}
	dims := make([]onnxio.Dim, len(t.GetDims()))
	for i, x := range t.GetDims() {
		dims[i] = onnxio.FixedDim(x)
	}
	name, cast := t.GetName(), t.GetName()+"::cast"
	for i, n := range gp.Node {
		if slices.Contains(n.GetInput(), name) {
			c := proto.Clone(n).(*onnxpb.NodeProto)
			for k, in := range c.Input {
				if in == name {
					c.Input[k] = cast
				}
			}
			gp.Node[i] = c
		}
	}
	to := &onnxpb.AttributeProto{Name: proto.String("to"), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(int64(t.GetDataType()))}
	castNode := &onnxpb.NodeProto{OpType: proto.String("Cast"), Name: proto.String(cast), Input: []string{name}, Output: []string{cast}, Attribute: []*onnxpb.AttributeProto{to}}
	gp.Node = append([]*onnxpb.NodeProto{castNode}, gp.Node...)
	gp.Input = append(gp.Input, onnxio.TensorValueInfo(name, onnxio.Float, dims))
	return param{name: name, value: d, pieces: []piece{{value: name}}}, nil
}

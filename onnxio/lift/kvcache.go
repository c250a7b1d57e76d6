package lift

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// A graph with a KV cache interface (Hugging Face's decoders: past keys
// and values in, the extended cache out) is the graph without one plus
// that interface. The lifter reads it so: each past input whose data only
// a Concat along the sequence axis reads, Concat(past, new), is taken out,
// the Concat becomes Identity(new), and what the graph read of the past's
// shape (its length, for RoPE positions and the causal mask's offset)
// becomes a past of length 0. The graph left is the decoder run on a fresh
// sequence, whose present outputs are the new keys and values of each
// attention layer: it lifts as any other, and the lifted model runs the
// cache through its attention layers' sessions (models.Model.Resume,
// State.Cache), checked against the original graph with a past.

// cacheLink is one KV-cache tensor of the graph's interface.
type cacheLink struct {
	past    string // the graph input that holds it
	present string // the graph output that returns it extended
	fresh   string // the value Concat appends to the past: the new tokens'
}

// sequenceAxis is the axis of a (B, heads, T, head_dim) cache that grows.
const sequenceAxis = 2

// splitCache finds the KV-cache links of m and returns m rewritten without
// its past inputs (see above), or m itself and no links when it has none
// or cannot be rewritten (the error says why).
func splitCache(m *onnxpb.ModelProto) (*onnxpb.ModelProto, []cacheLink, error) {
	gp := m.GetGraph()
	inits := map[string]bool{}
	for _, t := range gp.GetInitializer() {
		inits[t.GetName()] = true
	}
	outputs := map[string]bool{}
	for _, o := range gp.GetOutput() {
		outputs[o.GetName()] = true
	}
	var links []cacheLink
	concats := map[*onnxpb.NodeProto]string{} // Concat(past, fresh): fresh
	copies := map[*onnxpb.NodeProto]string{}  // a copy of a past: the past
	for _, in := range gp.GetInput() {
		if inits[in.GetName()] || len(onnxio.Dims(in)) != 4 {
			continue
		}
		if link, cat, cs, ok := cacheOf(gp, in.GetName(), outputs); ok {
			links = append(links, link)
			concats[cat] = link.fresh
			for _, c := range cs {
				copies[c] = in.GetName()
			}
		}
	}
	if len(links) == 0 {
		return m, nil, nil
	}
	out, err := withoutPast(m, links, concats, copies)
	if err != nil {
		return m, nil, err
	}
	return out, links, nil
}

// cacheOf reports whether input past is a KV cache: its data is read by
// exactly one node, Concat(past, fresh) along the sequence axis, whose
// output is a graph output; other nodes read its shape only, or copy it
// (Identity, a Concat of one input: the TorchScript exporter writes one)
// for shape reads or that Concat. It returns the link, the Concat and the
// copies.
func cacheOf(gp *onnxpb.GraphProto, past string, outputs map[string]bool) (cacheLink, *onnxpb.NodeProto, []*onnxpb.NodeProto, bool) {
	var cat *onnxpb.NodeProto
	var copies []*onnxpb.NodeProto
	aliases := map[string]bool{past: true}
	for _, n := range gp.GetNode() { // in order: a copy comes before its readers
		ins := n.GetInput()
		if !slices.ContainsFunc(ins, func(v string) bool { return aliases[v] }) {
			continue
		}
		axis, _ := intAttr(n, "axis")
		switch {
		case n.GetOpType() == "Shape" || n.GetOpType() == "Size":
		case (n.GetOpType() == "Identity" || n.GetOpType() == "Concat" && len(ins) == 1) && !outputs[n.GetOutput()[0]]:
			copies = append(copies, n)
			aliases[n.GetOutput()[0]] = true
		case n.GetOpType() == "Concat" && cat == nil && len(ins) == 2 && aliases[ins[0]] && !aliases[ins[1]] &&
			(axis == sequenceAxis || axis == sequenceAxis-4):
			cat = n
		default:
			return cacheLink{}, nil, nil, false
		}
	}
	if cat == nil {
		return cacheLink{}, nil, nil, false
	}
	present, ok := returned(gp, cat.GetOutput()[0], outputs, past)
	if !ok {
		return cacheLink{}, nil, nil, false
	}
	return cacheLink{past: past, present: present, fresh: cat.GetInput()[1]}, cat, copies, true
}

// returned names the graph output that returns the extended cache v: v
// itself, or a copy of it (Identity, or a Cast to the past's own element
// type: the TorchScript exporter writes GPT-J's keys through one).
func returned(gp *onnxpb.GraphProto, v string, outputs map[string]bool, past string) (string, bool) {
	if outputs[v] {
		return v, true
	}
	var elem int32
	for _, in := range gp.GetInput() {
		if in.GetName() == past {
			elem = int32(onnxio.ElemType(in))
		}
	}
	for _, n := range gp.GetNode() {
		if len(n.GetInput()) != 1 || n.GetInput()[0] != v || !outputs[n.GetOutput()[0]] {
			continue
		}
		to, _ := intAttr(n, "to")
		if n.GetOpType() == "Identity" || n.GetOpType() == "Cast" && elem != 0 && int32(to) == elem {
			return n.GetOutput()[0], true
		}
	}
	return "", false
}

// intAttr is a node's int attribute and whether it has it.
func intAttr(n *onnxpb.NodeProto, name string) (int64, bool) {
	for _, a := range n.GetAttribute() {
		if a.GetName() == name {
			return a.GetI(), true
		}
	}
	return 0, false
}

// withoutPast rewrites m: the past inputs and their copies removed, each
// cache Concat an Identity of the fresh value, and each read of a past's
// (or a copy's) shape a read of (batch, heads, 0, head_dim), the batch
// taken from another input that declares the same batch dimension.
func withoutPast(m *onnxpb.ModelProto, links []cacheLink, concats, copies map[*onnxpb.NodeProto]string) (*onnxpb.ModelProto, error) {
	out := proto.Clone(m).(*onnxpb.ModelProto)
	gp := out.GetGraph()
	past := map[string]*onnxpb.ValueInfoProto{}
	for _, l := range links {
		for _, in := range gp.GetInput() {
			if in.GetName() == l.past {
				past[l.past] = in
			}
		}
	}
	var inputs []*onnxpb.ValueInfoProto
	for _, in := range gp.GetInput() {
		if past[in.GetName()] == nil {
			inputs = append(inputs, in)
		}
	}
	var prologue, nodes []*onnxpb.NodeProto
	var inits []*onnxpb.TensorProto
	shapes := map[string]string{} // past input: its shape at length 0
	for _, l := range links {
		name := "__lift_empty_shape_" + l.past
		ns, ts, err := emptyPastShape(past[l.past], inputs, name)
		if err != nil {
			return nil, fmt.Errorf("cache input %q: %w", l.past, err)
		}
		prologue, inits = append(prologue, ns...), append(inits, ts...)
		shapes[l.past] = name
	}
	for i, n := range m.GetGraph().GetNode() {
		c := gp.GetNode()[i]
		if p, ok := copies[n]; ok { // read for its shape alone now, as the past is
			shapes[c.GetOutput()[0]] = shapes[p]
			continue
		}
		if fresh, ok := concats[n]; ok {
			nodes = append(nodes, &onnxpb.NodeProto{Name: c.Name, OpType: proto.String("Identity"), Input: []string{fresh}, Output: c.GetOutput()})
			continue
		}
		if len(c.GetInput()) > 0 && shapes[c.GetInput()[0]] != "" {
			r, ts := shapeRead(c, shapes[c.GetInput()[0]])
			nodes, inits = append(nodes, r...), append(inits, ts...)
			continue
		}
		nodes = append(nodes, c)
	}
	gp.Input = inputs
	gp.Node = append(prologue, nodes...)
	gp.Initializer = append(gp.Initializer, inits...)
	return out, nil
}

// emptyPastShape builds the shape (batch, heads, 0, head_dim) of a past of
// length 0 as nodes writing name: heads and head_dim as the input
// declares them (fixed), batch fixed too or read from another input's
// axis that declares the same dimension.
func emptyPastShape(past *onnxpb.ValueInfoProto, inputs []*onnxpb.ValueInfoProto, name string) ([]*onnxpb.NodeProto, []*onnxpb.TensorProto, error) {
	dims := onnxio.Dims(past)
	if !dims[1].Known || !dims[3].Known {
		return nil, nil, fmt.Errorf("declares %s; a cache has fixed heads and head_dim", onnxio.FormatDims(dims))
	}
	rest := int64Tensor(name+"_rest", []int64{dims[1].Value, 0, dims[3].Value})
	if dims[0].Known {
		first := int64Tensor(name+"_batch", []int64{dims[0].Value})
		return []*onnxpb.NodeProto{concat0(name, first.GetName(), rest.GetName())}, []*onnxpb.TensorProto{first, rest}, nil
	}
	for _, in := range inputs {
		for axis, d := range onnxio.Dims(in) {
			if d.Param == "" || d.Param != dims[0].Param {
				continue
			}
			idx := int64Tensor(name+"_axis", []int64{int64(axis)})
			nodes := []*onnxpb.NodeProto{
				{OpType: proto.String("Shape"), Input: []string{in.GetName()}, Output: []string{name + "_of"}},
				{OpType: proto.String("Gather"), Input: []string{name + "_of", idx.GetName()}, Output: []string{name + "_batch"}},
				concat0(name, name+"_batch", rest.GetName()),
			}
			return nodes, []*onnxpb.TensorProto{idx, rest}, nil
		}
	}
	return nil, nil, fmt.Errorf("no other input declares its batch dimension %q", dims[0].Param)
}

// concat0 joins two 1-D values into out.
func concat0(out, a, b string) *onnxpb.NodeProto {
	return &onnxpb.NodeProto{OpType: proto.String("Concat"), Input: []string{a, b}, Output: []string{out},
		Attribute: []*onnxpb.AttributeProto{{Name: proto.String("axis"), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(0)}}}
}

// shapeRead replaces a Shape or Size node reading a past input by nodes
// reading the past's shape at length 0 instead.
func shapeRead(n *onnxpb.NodeProto, shape string) ([]*onnxpb.NodeProto, []*onnxpb.TensorProto) {
	out := n.GetOutput()
	if n.GetOpType() == "Size" {
		zero := &onnxpb.TensorProto{Name: proto.String(out[0] + "_zero"), DataType: proto.Int32(int32(onnxio.Int64)), Int64Data: []int64{0}}
		return []*onnxpb.NodeProto{{Name: n.Name, OpType: proto.String("Identity"), Input: []string{zero.GetName()}, Output: out}}, []*onnxpb.TensorProto{zero}
	}
	start, hasStart := intAttr(n, "start")
	end, hasEnd := intAttr(n, "end")
	if !hasStart && !hasEnd {
		return []*onnxpb.NodeProto{{Name: n.Name, OpType: proto.String("Identity"), Input: []string{shape}, Output: out}}, nil
	}
	if !hasEnd {
		end = 4
	}
	s, e := int64Tensor(out[0]+"_start", []int64{start}), int64Tensor(out[0]+"_end", []int64{end})
	return []*onnxpb.NodeProto{{Name: n.Name, OpType: proto.String("Slice"), Input: []string{shape, s.GetName(), e.GetName()}, Output: out}},
		[]*onnxpb.TensorProto{s, e}
}

// int64Tensor is a 1-D int64 initializer.
func int64Tensor(name string, v []int64) *onnxpb.TensorProto {
	return &onnxpb.TensorProto{Name: proto.String(name), DataType: proto.Int32(int32(onnxio.Int64)), Dims: []int64{int64(len(v))}, Int64Data: v}
}

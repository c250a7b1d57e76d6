package lift

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio"
	ir "github.com/attnrun/attnrun/onnxio/graph"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// The Attention op spelled out. The Attention-op recognizer
// (attention_op.go) lifts the op between projections of batch-first tokens
// to attention.sdpa. What it cannot lift, such as nn.MultiheadAttention as
// the dynamo exporter writes it at opset 23 (sequence-first tokens, a
// packed in_proj, a key padding mask made additive and expanded over the
// heads), the Softmax recognizer can, in the form the exporter writes
// before opset 23. So a graph with an Attention node no layer claimed is
// read once more with that node as the standard ops it stands for:
//
//	Y = MatMul(Softmax(mask(Mul(MatMul(Q, Transpose(K)), scale))), V)
//
// where mask is an Add of Where(attn_mask, 0, −Inf) for a bool mask or of
// the float mask itself, and is_causal an Add of the static top-left causal mask
// (Trilu), as PyTorch's decomposition builds it. Only 4-D operands with as
// many key/value heads as query heads, no softcap and no KV cache are
// spelled out. The lifted model is checked against the graph as written,
// Attention op and all: where the op's rule (a query that sees no key gets
// zeros) and the decomposition's differ, the check says so.

// decomposeAttentionOps returns m with the Attention nodes among unlifted
// spelled out, and a note; nil when none can be.
func (a *analysis) decomposeAttentionOps(m *onnxpb.ModelProto, unlifted map[*node]bool) (*onnxpb.ModelProto, string) {
	var nodes []*onnxpb.NodeProto
	var added []*onnxpb.TensorProto
	var names []string
	for i, n := range a.g.Nodes {
		if n.GetOpType() == "Attention" && n.GetDomain() == "" && unlifted[n] {
			if spelled, inits, ok := a.spellAttention(n, fmt.Sprintf("%s%d", spelledPrefix, i)); ok {
				nodes, added = append(nodes, spelled...), append(added, inits...)
				names = append(names, n.Label())
				continue
			}
		}
		nodes = append(nodes, n.NodeProto)
	}
	if len(names) == 0 {
		return nil, ""
	}
	return ir.WithNodes(m, nodes, added), fmt.Sprintf("Attention node(s) %s read as the MatMul, Softmax and masks they compute (no Attention-op pattern lifts them)", quoted(names))
}

// spelledPrefix begins the names of the nodes and values that spell out
// an Attention node.
const spelledPrefix = "__lift_attention_"

// spelledUnclaimed reports whether some node spelling out an Attention
// node is not lifted either: then the report names the Attention node as
// the graph has it, from the first reading.
func spelledUnclaimed(p *plan) bool {
	for n := range p.unclaimed() {
		if strings.HasPrefix(n.GetName(), spelledPrefix) {
			return true
		}
	}
	return false
}

// spellAttention writes one Attention node as standard ops, their values
// named under prefix, or reports that it cannot.
func (a *analysis) spellAttention(n *node, prefix string) ([]*onnxpb.NodeProto, []*onnxpb.TensorProto, bool) {
	ins, outs := n.GetInput(), n.GetOutput()
	if len(ins) < 3 || len(ins) > 4 || n.Float("softcap", 0) != 0 || len(outs) == 0 {
		return nil, nil, false
	}
	for _, o := range outs[1:] {
		if o != "" && (len(a.readers(o)) > 0 || a.g.IsOutput(o)) {
			return nil, nil, false
		}
	}
	for _, p := range a.probes {
		q, errQ := p.shape(ins[0])
		k, errK := p.shape(ins[1])
		if errQ != nil || errK != nil || len(q) != 4 || len(k) != 4 || q[1] != k[1] {
			return nil, nil, false
		}
	}
	q, _ := a.probes[0].shape(ins[0])
	scale := float32(1 / math.Sqrt(float64(q[3])))
	if n.Attr("scale") != nil {
		scale = n.Float("scale", 0)
	}
	w := &spelling{prefix: prefix}
	kT := w.node("Transpose", []string{ins[1]}, intsAttribute("perm", 0, 1, 3, 2))
	s := w.node("MatMul", []string{ins[0], kT})
	s = w.node("Mul", []string{s, w.scalar(scale)})
	if len(ins) == 4 && ins[3] != "" {
		if a.isBool(ins[3]) {
			s = w.node("Add", []string{s, w.node("Where", []string{ins[3], w.scalar(0), w.scalar(float32(math.Inf(-1)))})})
		} else {
			s = w.node("Add", []string{s, ins[3]})
		}
	}
	if n.Int("is_causal", 0) != 0 {
		s = w.node("Add", []string{s, w.causalMask(ins[0], ins[1])})
	}
	weights := w.node("Softmax", []string{s}, intAttribute("axis", -1))
	w.nodes = append(w.nodes, &onnxpb.NodeProto{Name: proto.String(prefix + "_MatMul_values"), OpType: proto.String("MatMul"),
		Input: []string{weights, ins[2]}, Output: []string{outs[0]}})
	return w.nodes, w.inits, true
}

// isBool reports whether a value is bool at the first probe.
func (a *analysis) isBool(v string) bool {
	t, err := a.probes[0].value(v)
	return err == nil && t.Dtype() == tensor.Bool
}

// spelling collects the nodes and constants that spell out one node.
type spelling struct {
	prefix string
	nodes  []*onnxpb.NodeProto
	inits  []*onnxpb.TensorProto
}

// node adds a node with one output and returns the output's name.
func (w *spelling) node(op string, inputs []string, attrs ...*onnxpb.AttributeProto) string {
	name := fmt.Sprintf("%s_%s_%d", w.prefix, op, len(w.nodes))
	w.nodes = append(w.nodes, &onnxpb.NodeProto{Name: proto.String(name), OpType: proto.String(op),
		Input: slices.Clone(inputs), Output: []string{name}, Attribute: attrs})
	return name
}

// scalar adds a float32 scalar constant.
func (w *spelling) scalar(v float32) string {
	name := fmt.Sprintf("%s_const_%d", w.prefix, len(w.inits))
	w.inits = append(w.inits, &onnxpb.TensorProto{Name: proto.String(name), DataType: proto.Int32(int32(onnxio.Float)), FloatData: []float32{v}})
	return name
}

// ints adds an int64 vector constant.
func (w *spelling) ints(v ...int64) string {
	name := fmt.Sprintf("%s_const_%d", w.prefix, len(w.inits))
	w.inits = append(w.inits, &onnxpb.TensorProto{Name: proto.String(name), DataType: proto.Int32(int32(onnxio.Int64)),
		Dims: []int64{int64(len(v))}, Int64Data: v})
	return name
}

// causalMask is the (Tq, Tk) mask of 0 where query i may see key j ≤ i
// and −Inf elsewhere (top-left, the op's is_causal), from q's and k's
// lengths (axis 2): PyTorch's decomposition, with Trilu.
func (w *spelling) causalMask(q, k string) string {
	tq := w.node("Slice", []string{w.node("Shape", []string{q}), w.ints(2), w.ints(3)})
	tk := w.node("Slice", []string{w.node("Shape", []string{k}), w.ints(2), w.ints(3)})
	ones := w.node("Expand", []string{w.scalar(1), w.node("Concat", []string{tq, tk}, intAttribute("axis", 0))})
	below := w.node("Trilu", []string{ones}, intAttribute("upper", 0))
	hidden := w.node("Equal", []string{below, w.scalar(0)})
	return w.node("Where", []string{hidden, w.scalar(float32(math.Inf(-1))), w.scalar(0)})
}

// intAttribute is an INT attribute.
func intAttribute(name string, v int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(v)}
}

// intsAttribute is an INTS attribute.
func intsAttribute(name string, v ...int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INTS.Enum(), Ints: v}
}

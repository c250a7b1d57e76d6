package cli

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// `attnrun run FILE.onnx --attention LAYER` on the graph executor. The
// weights are a value of the graph in two places: the output of the
// Softmax of an attention chain (MatMul(Q, Kᵀ) → scale, mask → Softmax →
// MatMul(·, V), as PyTorch exports it), and the qk_matmul_output of the
// Attention op (opset 23+), asked for after the softmax
// (qk_matmul_output_mode 3). The command adds that value to a copy of the
// graph's outputs and runs the copy: an output is never fused away, so
// the executor computes the chain node by node there.

// attentionSite is one place of a graph whose value is attention weights.
type attentionSite struct {
	node  *onnxpb.NodeProto
	scope string // the module path PyTorch gives the node: "heads.0" of "/heads.0/Softmax"
}

// label names the site in messages: "/heads.0/Softmax (Softmax, scope heads.0)".
func (s attentionSite) label() string {
	var parts []string
	parts = append(parts, s.node.GetOpType())
	if s.scope != "" {
		parts = append(parts, "scope "+s.scope)
	}
	return fmt.Sprintf("%s (%s)", s.node.GetName(), strings.Join(parts, ", "))
}

// matches reports whether --attention names the site: its node's name
// (with or without the leading slash), its scope, or the value it writes.
func (s attentionSite) matches(name string) bool {
	n := s.node.GetName()
	return name == n || "/"+name == n || name == s.scope && s.scope != "" ||
		s.node.GetOpType() == "Softmax" && name == s.node.GetOutput()[0]
}

// attentionSites lists the attention weights a graph computes, in node
// order.
func attentionSites(g *onnxpb.GraphProto) []attentionSite {
	producer := map[string]*onnxpb.NodeProto{}
	readers := map[string][]*onnxpb.NodeProto{}
	for _, n := range g.GetNode() {
		for _, o := range n.GetOutput() {
			producer[o] = n
		}
		for _, in := range n.GetInput() {
			readers[in] = append(readers[in], n)
		}
	}
	var sites []attentionSite
	for _, n := range g.GetNode() {
		switch {
		case n.GetOpType() == "Attention" && n.GetDomain() == "":
		case n.GetOpType() == "Softmax" && len(n.GetInput()) == 1 && len(n.GetOutput()) == 1 &&
			fedByMatMul(producer, n.GetInput()[0], 4) && feedsMatMul(readers, n.GetOutput()[0], 3):
		default:
			continue
		}
		sites = append(sites, attentionSite{node: n, scope: scopeOf(n.GetName())})
	}
	return sites
}

// fedByMatMul reports whether a MatMul computes value within depth nodes
// of the elementwise steps attention puts between the scores and the
// softmax (scale, mask, bias, casts, reshapes).
func fedByMatMul(producer map[string]*onnxpb.NodeProto, value string, depth int) bool {
	n := producer[value]
	if n == nil || depth == 0 {
		return false
	}
	switch n.GetOpType() {
	case "MatMul", "Einsum":
		return true
	case "Add", "Sub", "Mul", "Div", "Where", "Cast", "Reshape", "Tanh", "Transpose":
		for _, in := range n.GetInput() {
			if fedByMatMul(producer, in, depth-1) {
				return true
			}
		}
	}
	return false
}

// feedsMatMul reports whether value reaches a MatMul within depth nodes
// of dropout, casts and reshapes: the weights multiply V.
func feedsMatMul(readers map[string][]*onnxpb.NodeProto, value string, depth int) bool {
	if depth == 0 {
		return false
	}
	for _, n := range readers[value] {
		switch n.GetOpType() {
		case "MatMul", "Einsum":
			return true
		case "Dropout", "Cast", "Reshape", "Where", "Identity":
			if len(n.GetOutput()) > 0 && feedsMatMul(readers, n.GetOutput()[0], depth-1) {
				return true
			}
		}
	}
	return false
}

// scopeOf is the module path of a node name PyTorch's exporter wrote:
// "/heads.0/Softmax" is in "heads.0"; "/Softmax" and "Softmax_12" in none.
func scopeOf(name string) string {
	if !strings.HasPrefix(name, "/") {
		return ""
	}
	i := strings.LastIndex(name, "/")
	return strings.TrimPrefix(name[:i], "/")
}

// attentionWeightsName is the graph output the weights are written to in
// the copy of an Attention op's graph.
const attentionWeightsName = "attnrun::attention_weights"

// withAttentionOutput returns a copy of m that also outputs the weights of
// the site --attention names, and the name of that output. A name that
// matches no site or several is an error listing the sites.
func withAttentionOutput(path string, m *onnxpb.ModelProto, name string) (*onnxpb.ModelProto, string, error) {
	sites := attentionSites(m.GetGraph())
	if len(sites) == 0 {
		return nil, "", usageError{fmt.Errorf("--attention %q: %s has no attention weights to show: no Softmax between a MatMul of the scores and one of the values, and no Attention op (attnrun import %s lifts it into layers, if it lifts)",
			name, path, path)}
	}
	var found []int
	for i, s := range sites {
		if s.matches(name) {
			found = append(found, i)
		}
	}
	if len(found) != 1 {
		var labels []string
		for _, s := range sites {
			labels = append(labels, s.label())
		}
		what := "names none of them"
		if len(found) > 1 {
			what = "names several; give a node name"
		}
		return nil, "", usageError{fmt.Errorf("--attention %q %s; %s has attention weights at %s", name, what, path, strings.Join(labels, ", "))}
	}
	m = proto.Clone(m).(*onnxpb.ModelProto)
	node := attentionSites(m.GetGraph())[found[0]].node
	out := node.GetOutput()[0]
	if node.GetOpType() == "Attention" {
		out = askQKOutput(node)
	}
	g := m.GetGraph()
	g.Output = append(g.Output, &onnxpb.ValueInfoProto{
		Name: proto.String(out),
		Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
			ElemType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)),
		}}},
	})
	return m, out, nil
}

// askQKOutput makes an Attention node write its weights after the softmax
// to its fourth output (qk_matmul_output, mode 3), naming the output if
// the graph did not ask for it, and returns its name. The mode changes
// nothing else the node computes.
func askQKOutput(n *onnxpb.NodeProto) string {
	for len(n.Output) < 4 {
		n.Output = append(n.Output, "")
	}
	if n.Output[3] == "" {
		n.Output[3] = attentionWeightsName
	}
	mode := &onnxpb.AttributeProto{Name: proto.String("qk_matmul_output_mode"), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(3)}
	kept := n.Attribute[:0]
	for _, a := range n.Attribute {
		if a.GetName() != "qk_matmul_output_mode" {
			kept = append(kept, a)
		}
	}
	n.Attribute = append(kept, mode)
	return n.Output[3]
}

// graphAttention runs the graph of path, with its weights output added,
// on inputs and returns the weights of the site name.
func graphAttention(lim *limits, path string, m *onnxpb.ModelProto, name string, inputs []*array.Array) (*array.Array, error) {
	m, out, err := withAttentionOutput(path, m, name)
	if err != nil {
		return nil, err
	}
	g, err := lim.newGraph(m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	feeds := map[string]*array.Array{}
	for i, info := range g.Inputs() {
		if i < len(inputs) {
			feeds[info.Name] = inputs[i]
		}
	}
	outs, err := g.RunArrays(lim.ctx, feeds)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return outs[out], nil
}

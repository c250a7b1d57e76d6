package lift

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// readPrecisionCasts reads the Casts of a graph between float32 and
// float16 or bfloat16 as copies (Identity): a mixed-precision graph (ONNX
// Runtime's float16 models compute their softmax in float32 between two
// Casts) is the same computation as attnrun's layers do in float32. The
// self-check still
// runs the graph as written, so the lifted model must agree with it within
// the graph's precision. Element types are followed from the graph inputs,
// initializers and Constants through the nodes: a Cast sets its type,
// comparisons give bool, Shape and Size int64, every other op keeps its
// first input's. m's nodes must be in dependency order (graph.InOrder).
//
// It also returns the Casts as written, by the Identity that stands for
// each: the onnx.subgraph layers of a partial lift run them as written.
func readPrecisionCasts(m *onnxpb.ModelProto) (*onnxpb.ModelProto, map[*onnxpb.NodeProto]*onnxpb.NodeProto, []string) {
	gp := m.GetGraph()
	if gp == nil {
		return m, nil, nil
	}
	types := map[string]onnxio.DataType{}
	for _, vi := range gp.GetInput() {
		types[vi.GetName()] = onnxio.ElemType(vi)
	}
	for _, t := range gp.GetInitializer() {
		types[t.GetName()] = onnxio.DataType(t.GetDataType())
	}
	var casts []int
	for i, n := range gp.GetNode() {
		var in onnxio.DataType
		if len(n.GetInput()) > 0 {
			in = types[n.GetInput()[0]]
		}
		out := in
		switch n.GetOpType() {
		case "Cast":
			out = castTo(n)
			if isFloatType(in) && isFloatType(out) && (isNarrowFloat(in) || isNarrowFloat(out)) {
				casts = append(casts, i)
			}
		case "Constant":
			for _, a := range n.GetAttribute() {
				if a.GetName() == "value" && a.GetT() != nil {
					out = onnxio.DataType(a.GetT().GetDataType())
				}
			}
		case "Shape", "Size", "ArgMax", "ArgMin", "NonZero":
			out = onnxio.Int64
		case "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or", "Xor", "IsNaN", "IsInf":
			out = onnxio.Bool
		case "Where":
			if len(n.GetInput()) > 1 {
				out = types[n.GetInput()[1]]
			}
		}
		for _, o := range n.GetOutput() {
			types[o] = out
		}
	}
	if len(casts) == 0 {
		return m, nil, nil
	}
	c := proto.Clone(m).(*onnxpb.ModelProto)
	written := map[*onnxpb.NodeProto]*onnxpb.NodeProto{}
	for _, i := range casts {
		n := c.GetGraph().GetNode()[i]
		written[n] = gp.GetNode()[i]
		n.OpType = proto.String("Identity")
		n.Attribute = nil
	}
	return c, written, []string{fmt.Sprintf("%d Cast node(s) between float types were read as copies: attnrun's layers compute in float32", len(casts))}
}

// castTo is the element type a Cast node casts to, 0 when it says none.
func castTo(n *onnxpb.NodeProto) onnxio.DataType {
	for _, a := range n.GetAttribute() {
		if a.GetName() == "to" {
			return onnxio.DataType(a.GetI())
		}
	}
	return 0
}

// isFloatType reports whether t is float32 or a narrower float type that
// the executor holds in float32, between which a Cast only changes
// precision (float64 is computed as such: its Casts stay).
func isFloatType(t onnxio.DataType) bool { return t == onnxio.Float || isNarrowFloat(t) }

// isNarrowFloat reports whether t is float16 or bfloat16.
func isNarrowFloat(t onnxio.DataType) bool { return t == onnxio.Float16 || t == onnxio.BFloat16 }

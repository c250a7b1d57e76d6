package lift

import (
	"fmt"
	"math"

	"google.golang.org/protobuf/proto"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/match"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// readKeepProducts reads Megatron's masking of the scores s by a keep
// mask m (1 keeps a key, 0 hides it),
//
//	Sub(Mul(s, m), Mul(Sub(1, m), c))      s·m − (1 − m)·c
//
// with c a constant of at least −masked (Megatron's 10000), as the
// extended mask Hugging Face adds, Add(Identity(s), Mul(Sub(m, 1), c)),
// s + (m − 1)·c. Where m is 1 both give s; where it is 0 both give a
// (finite) score c or more below the row, whose weight softmax makes an
// exact 0 as long as the row keeps a key. The lifter then reads m as a
// keep mask, and the self-check runs the graph as written, fed keep masks
// of 0s and 1s that keep a key in every row. Each rewritten node reads
// some of the inputs of the node as written, which it stands for (the map
// returned): the onnx.subgraph layers of a partial lift run those.
func readKeepProducts(m *onnxpb.ModelProto) (*onnxpb.ModelProto, map[*onnxpb.NodeProto]*onnxpb.NodeProto, []string) {
	gp := m.GetGraph()
	if gp == nil {
		return m, nil, nil
	}
	x := newProtoIndex(gp)
	var found []keepProduct
	for _, n := range gp.GetNode() {
		if kp, ok := x.keepProduct(n); ok {
			found = append(found, kp)
		}
	}
	if len(found) == 0 {
		return m, nil, nil
	}
	out := proto.Clone(m).(*onnxpb.ModelProto)
	at := map[*onnxpb.NodeProto]int{}
	for i, n := range gp.GetNode() {
		at[n] = i
	}
	written := map[*onnxpb.NodeProto]*onnxpb.NodeProto{}
	rewrite := func(n *onnxpb.NodeProto, op string, inputs ...string) {
		c := out.GetGraph().GetNode()[at[n]]
		written[c] = n
		c.OpType, c.Input = proto.String(op), inputs
		if op == "Identity" {
			c.Attribute = nil // an opset-6 Mul's broadcast
		}
	}
	for _, kp := range found {
		rewrite(kp.product, "Identity", kp.scores)
		rewrite(kp.complement, "Sub", kp.complement.GetInput()[1], kp.complement.GetInput()[0]) // m − 1
		rewrite(kp.sub, "Add", kp.sub.GetInput()...)
	}
	return out, written, []string{fmt.Sprintf("%d mask(s) s·m − (1 − m)·c (Megatron's) were read as s + (m − 1)·c, the same weights for a keep mask m of 0s and 1s", len(found))}
}

// keepProduct is one s·m − (1 − m)·c as readKeepProducts reads it.
type keepProduct struct {
	sub        *onnxpb.NodeProto // the Sub of the two products
	product    *onnxpb.NodeProto // Mul(s, m)
	complement *onnxpb.NodeProto // Sub(1, m)
	scores     string            // s
}

// keepProduct reports whether n is the Sub of s·m − (1 − m)·c, each
// product and 1 − m read by the next node alone.
func (x *protoIndex) keepProduct(n *onnxpb.NodeProto) (keepProduct, bool) {
	ins := n.GetInput()
	if n.GetOpType() != "Sub" || len(ins) != 2 || n.GetDomain() != "" {
		return keepProduct{}, false
	}
	kp := keepProduct{sub: n, product: x.producer[ins[0]]}
	hide := x.producer[ins[1]]
	if !x.onlyFor(kp.product, n) || !x.onlyFor(hide, n) || kp.product.GetOpType() != "Mul" || hide.GetOpType() != "Mul" {
		return keepProduct{}, false
	}
	for k, in := range hide.GetInput() {
		c, ok := x.floatScalar(hide.GetInput()[1-k])
		one := x.producer[in]
		if !ok || c < -masked || math.IsInf(c, 0) || !x.onlyFor(one, hide) || one.GetOpType() != "Sub" {
			continue
		}
		if u, ok := x.floatScalar(one.GetInput()[0]); !ok || u != 1 {
			continue
		}
		mask := one.GetInput()[1]
		for j, p := range kp.product.GetInput() {
			if p == mask && kp.product.GetInput()[1-j] != mask {
				kp.complement, kp.scores = one, kp.product.GetInput()[1-j]
				return kp, true
			}
		}
	}
	return keepProduct{}, false
}

// onlyFor reports whether n's one output is read by reader alone and is
// no graph output.
func (x *protoIndex) onlyFor(n, reader *onnxpb.NodeProto) bool {
	if n == nil || len(n.GetOutput()) != 1 || len(n.GetInput()) != 2 || n.GetDomain() != "" {
		return false
	}
	v := n.GetOutput()[0]
	rs := x.readers[v]
	return !x.outputs[v] && len(rs) == 1 && rs[0] == reader
}

// floatScalar reads v as a constant of one element (an initializer or a
// Constant node) of any number type.
func (x *protoIndex) floatScalar(v string) (float64, bool) {
	tp := x.constant(v)
	if tp == nil {
		return 0, false
	}
	d, err := onnxio.TensorToDense(tp)
	if err != nil || d.Shape().TotalSize() != 1 {
		return 0, false
	}
	f, err := match.Floats(d)
	if err != nil || len(f) != 1 {
		return 0, false
	}
	return f[0], true
}

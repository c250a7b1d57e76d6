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
// extended mask Hugging Face adds, Add(s, Mul(Sub(1, m), −c)). Where m is
// 1 both give s; where it is 0 both give a score c or more below the row,
// whose weight softmax makes an exact 0 as long as the row keeps a key.
// The lifter then reads m as a keep mask, and the self-check runs the
// graph as written, fed keep masks of 0s and 1s that keep a key in every
// row. Each rewritten node stands for the node as written (the map
// returned), which the onnx.subgraph layers of a partial lift run.
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
	og := out.GetGraph()
	at := map[*onnxpb.NodeProto]int{}
	for i, n := range gp.GetNode() {
		at[n] = i
	}
	written := map[*onnxpb.NodeProto]*onnxpb.NodeProto{}
	rewrite := func(n *onnxpb.NodeProto, op string, inputs ...string) {
		c := og.GetNode()[at[n]]
		written[c] = n
		c.OpType, c.Input, c.Attribute, c.Domain = proto.String(op), inputs, nil, nil
	}
	for _, kp := range found {
		fill := x.freshName(kp.sub.GetOutput()[0] + "_fill")
		og.Initializer = append(og.Initializer, &onnxpb.TensorProto{Name: proto.String(fill),
			DataType: proto.Int32(int32(onnxio.Float)), FloatData: []float32{float32(-kp.c)}})
		rewrite(kp.product, "Identity", kp.scores)
		rewrite(kp.hide, "Mul", kp.hidden, fill)
		rewrite(kp.sub, "Add", kp.product.GetOutput()[0], kp.hide.GetOutput()[0])
	}
	return out, written, []string{fmt.Sprintf("%d mask(s) s·m − (1 − m)·c (Megatron's) were read as s + (1 − m)·(−c), the same weights for a keep mask m of 0s and 1s", len(found))}
}

// keepProduct is one s·m − (1 − m)·c as readKeepProducts reads it.
type keepProduct struct {
	sub     *onnxpb.NodeProto // the Sub of the two products
	product *onnxpb.NodeProto // Mul(s, m)
	hide    *onnxpb.NodeProto // Mul(Sub(1, m), c)
	scores  string            // s
	hidden  string            // Sub(1, m): 1 where m hides a key
	c       float64
}

// keepProduct reports whether n is the Sub of s·m − (1 − m)·c, each
// product read by n alone.
func (x *protoIndex) keepProduct(n *onnxpb.NodeProto) (keepProduct, bool) {
	ins := n.GetInput()
	if n.GetOpType() != "Sub" || len(ins) != 2 || n.GetDomain() != "" {
		return keepProduct{}, false
	}
	kp := keepProduct{sub: n, product: x.producer[ins[0]], hide: x.producer[ins[1]]}
	if !x.onlyFor(kp.product, n) || !x.onlyFor(kp.hide, n) || kp.product.GetOpType() != "Mul" || kp.hide.GetOpType() != "Mul" {
		return keepProduct{}, false
	}
	for k, in := range kp.hide.GetInput() {
		c, ok := x.floatScalar(kp.hide.GetInput()[1-k])
		one := x.producer[in]
		if !ok || c < -masked || math.IsInf(c, 0) || one == nil || one.GetOpType() != "Sub" || len(one.GetInput()) != 2 {
			continue
		}
		if u, ok := x.floatScalar(one.GetInput()[0]); !ok || u != 1 {
			continue
		}
		mask := one.GetInput()[1]
		for j, p := range kp.product.GetInput() {
			if p == mask && kp.product.GetInput()[1-j] != mask {
				kp.scores, kp.hidden, kp.c = kp.product.GetInput()[1-j], in, c
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
	var tp *onnxpb.TensorProto
	if n := x.producer[v]; n != nil && n.GetOpType() == "Constant" {
		for _, a := range n.GetAttribute() {
			if a.GetName() == "value" {
				tp = a.GetT()
			}
		}
	} else if n == nil {
		for _, t := range x.gp.GetInitializer() {
			if t.GetName() == v {
				tp = t
			}
		}
	}
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

package lift

import (
	"slices"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// Quantized weights given as graph inputs. ONNX Runtime's quantized
// Attention tests feed a quantized Linear's parameters as graph inputs:
//
//	y = Cast<float>(MatMulInteger(x, W, x_zp, w_zp)) · Mul(x_scale, w_scale) + b
//
// W and the zero points (integers), the scales and the bias. They are
// weights in the sense of param_inputs.go when the graph reads them only
// there: W and the zero points as MatMulInteger's B and zero points, the
// scales as operands of the factor the sums are multiplied by, the bias
// as the Add after it. A scale or zero point may be declared with a
// symbolic size (ONNX Runtime's [C]: one per tensor or one per column):
// the lift reads it as one per column, the number of W's columns.

// integerWeightInputs lists the graph inputs of m that hold the
// parameters of a quantized Linear, with the shape each is read at.
func integerWeightInputs(m *onnxpb.ModelProto) map[string][]int {
	g := m.GetGraph()
	declared := map[string]*onnxpb.ValueInfoProto{}
	for _, vi := range g.GetInput() {
		declared[vi.GetName()] = vi
	}
	for _, t := range g.GetInitializer() {
		delete(declared, t.GetName())
	}
	readers := map[string][]*onnxpb.NodeProto{}
	producers := map[string]*onnxpb.NodeProto{}
	for _, n := range g.GetNode() {
		for _, in := range n.GetInput() {
			readers[in] = append(readers[in], n)
		}
		if outs := n.GetOutput(); len(outs) == 1 {
			producers[outs[0]] = n
		}
	}
	only := func(v, op string) *onnxpb.NodeProto {
		if rs := readers[v]; len(rs) == 1 && rs[0].GetOpType() == op {
			return rs[0]
		}
		return nil
	}
	out := map[string][]int{}
	for _, n := range g.GetNode() {
		ins := n.GetInput()
		if n.GetOpType() != "MatMulInteger" || len(ins) < 2 || declared[ins[1]] == nil {
			continue
		}
		w := declared[ins[1]]
		dims := onnxio.Dims(w)
		if !fixedShape(w) || len(dims) != 2 {
			continue
		}
		columns := int(dims[1].Value)
		params := map[string]*onnxpb.NodeProto{ins[1]: n} // each with the node that reads it
		for _, zp := range ins[2:] {
			params[zp] = n
		}
		cast := only(n.GetOutput()[0], "Cast")
		if cast == nil {
			continue
		}
		mul := only(cast.GetOutput()[0], "Mul")
		if mul == nil {
			continue
		}
		factor := otherOf(mul, cast.GetOutput()[0])
		params[factor] = mul
		if p := producers[factor]; p != nil && p.GetOpType() == "Mul" { // the factor as the product of the two scales
			for _, s := range p.GetInput() {
				params[s] = p
			}
		}
		if add := only(mul.GetOutput()[0], "Add"); add != nil {
			b := otherOf(add, mul.GetOutput()[0])
			params[b] = add
		}
		for name, reader := range params {
			vi := declared[name]
			if vi == nil || len(readers[name]) != 1 || readers[name][0] != reader || !integerParamType(onnxio.ElemType(vi)) {
				continue
			}
			if shape, ok := integerParamShape(vi, columns); ok {
				out[name] = shape
			}
		}
	}
	return out
}

// otherOf returns the input of binary node n that is not v.
func otherOf(n *onnxpb.NodeProto, v string) string {
	if ins := n.GetInput(); len(ins) == 2 && ins[0] == v {
		return ins[1]
	}
	return n.GetInput()[0]
}

// integerParamType reports whether a quantized Linear's parameter may
// have type t: integers (weights, zero points) or float32 (scales, bias).
func integerParamType(t onnxio.DataType) bool {
	return t == onnxio.Int8 || t == onnxio.Uint8 || t == onnxio.Float
}

// integerParamShape is the shape a parameter input is read at: as
// declared, or one per column for a vector of symbolic size.
func integerParamShape(vi *onnxpb.ValueInfoProto, columns int) ([]int, bool) {
	dims := onnxio.Dims(vi)
	if fixedShape(vi) {
		return declaredDims(vi), true
	}
	if onnxio.HasShape(vi) && len(dims) == 1 && !dims[0].Known {
		return []int{columns}, true
	}
	return nil, false
}

// symbolicVectors lists the named graph inputs that m declares as vectors
// of symbolic size.
func symbolicVectors(m *onnxpb.ModelProto, names []string) []string {
	var out []string
	for _, vi := range m.GetGraph().GetInput() {
		dims := onnxio.Dims(vi)
		if slices.Contains(names, vi.GetName()) && onnxio.HasShape(vi) && len(dims) == 1 && !dims[0].Known {
			out = append(out, vi.GetName())
		}
	}
	return out
}

package exec

import (
	"context"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// FLOPCount is the work of one forward pass of a graph, counted on its
// matrix products by registry.FLOPCounter's rules: 2 FLOPs per
// multiply-add.
type FLOPCount struct {
	// FLOPs sums 2·m·n·k over the MatMul and Gemm nodes, times the
	// broadcast batch of MatMul.
	FLOPs float64
	// Uncounted names the nodes whose products are not counted, by op:
	// "2 Attention node(s)".
	Uncounted []string
}

// uncountedProducts are the ops with matrix products CountFLOPs does not
// count.
var uncountedProducts = []string{"Attention", "MultiHeadAttention", "Einsum", "Conv", "MatMulInteger", "QLinearMatMul"}

// CountFLOPs counts the MatMul and Gemm nodes of m with the operand shapes
// of one run on inputs: a copy of m that also outputs those operands runs
// once under opts and ctx. m itself is not modified.
func CountFLOPs(ctx context.Context, m *onnxpb.ModelProto, inputs map[string]*tensor.Dense, opts Options) (FLOPCount, error) {
	var c FLOPCount
	probe := proto.Clone(m).(*onnxpb.ModelProto)
	g := probe.GetGraph()
	exposed := map[string]bool{}
	for _, out := range g.GetOutput() {
		exposed[out.GetName()] = true
	}
	var products []*onnxpb.NodeProto
	other := map[string]int{}
	for _, n := range g.GetNode() {
		op := n.GetOpType()
		switch {
		case op == "MatMul" || op == "Gemm":
			if n.GetDomain() != "" || len(n.GetInput()) < 2 {
				continue
			}
			products = append(products, n)
			for _, name := range n.GetInput()[:2] {
				if !exposed[name] {
					exposed[name] = true
					g.Output = append(g.Output, floatValueInfo(name))
				}
			}
		case slices.Contains(uncountedProducts, op):
			other[op]++
		}
	}
	for op, n := range other {
		c.Uncounted = append(c.Uncounted, fmt.Sprintf("%d %s node(s)", n, op))
	}
	slices.Sort(c.Uncounted)
	if len(products) == 0 {
		return c, nil
	}
	run, err := NewWithOptions(probe, opts)
	if err != nil {
		return c, err
	}
	values, err := run.RunContext(ctx, inputs)
	if err != nil {
		return c, err
	}
	for _, n := range products {
		a, b := values[n.GetInput()[0]].Shape(), values[n.GetInput()[1]].Shape()
		f, err := productFLOPs(n.GetOpType(), gemmTransposes(n), a, b)
		if err != nil {
			return c, fmt.Errorf("node %q (%s): %w", n.GetName(), n.GetOpType(), err)
		}
		c.FLOPs += f
	}
	return c, nil
}

// floatValueInfo declares a float32 tensor value of any shape.
func floatValueInfo(name string) *onnxpb.ValueInfoProto {
	return &onnxpb.ValueInfoProto{
		Name: proto.String(name),
		Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
			ElemType: proto.Int32(int32(Float32)),
		}}},
	}
}

// gemmTransposes reads Gemm's transA and transB attributes.
func gemmTransposes(n *onnxpb.NodeProto) (t [2]bool) {
	for _, at := range n.GetAttribute() {
		switch at.GetName() {
		case "transA":
			t[0] = at.GetI() != 0
		case "transB":
			t[1] = at.GetI() != 0
		}
	}
	return t
}

// productFLOPs is 2·batch·m·n·k for MatMul (numpy's matmul: 1-D operands
// are promoted, batch axes broadcast) and for Gemm (2-D, transposed as
// trans says) on operands of shapes a and b.
func productFLOPs(op string, trans [2]bool, a, b []int) (float64, error) {
	if op == "Gemm" {
		if len(a) != 2 || len(b) != 2 {
			return 0, fmt.Errorf("operands of shapes %s and %s, want matrices", shapeString(a), shapeString(b))
		}
		m, k, n := a[0], a[1], b[1]
		if trans[0] {
			m, k = k, m
		}
		if trans[1] {
			n = b[0]
		}
		return 2 * float64(m) * float64(n) * float64(k), nil
	}
	if len(a) == 0 || len(b) == 0 {
		return 0, fmt.Errorf("scalar operand (shapes %s and %s)", shapeString(a), shapeString(b))
	}
	if len(a) == 1 {
		a = []int{1, a[0]}
	}
	if len(b) == 1 {
		b = []int{b[0], 1}
	}
	m, k, n := a[len(a)-2], a[len(a)-1], b[len(b)-1]
	batch := 1.0
	ba, bb := a[:len(a)-2], b[:len(b)-2]
	for i := range max(len(ba), len(bb)) {
		da, db := 1, 1
		if j := len(ba) - 1 - i; j >= 0 {
			da = ba[j]
		}
		if j := len(bb) - 1 - i; j >= 0 {
			db = bb[j]
		}
		batch *= float64(max(da, db))
	}
	return 2 * batch * float64(m) * float64(n) * float64(k), nil
}

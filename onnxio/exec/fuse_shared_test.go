package exec

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// TestSharedInputFusion checks that products by constant weights reading
// the same x become one node, and that every output has the bits of the
// node-by-node run, whether the products run together or, when an operand
// is not as they need, one by one.
func TestSharedInputFusion(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 1))
	cases := []struct {
		name    string
		x       *tensor.Dense
		bias    *tensor.Dense
		wInput  bool // the second weight is an input's default, which a run may replace
		shared  int  // fused nodes
		matmuls int  // MatMuls left on their own ("other", on another input, and wk's when it may be replaced)
	}{
		{name: "three projections", x: randDense(rng, 2, 5, 7), bias: randDense(rng, 64), shared: 1, matmuls: 1},
		{name: "one row", x: randDense(rng, 1, 7), bias: randDense(rng, 1, 64), shared: 1, matmuls: 1},
		{name: "full addend runs the nodes", x: randDense(rng, 2, 5, 7), bias: randDense(rng, 2, 5, 64), shared: 1, matmuls: 1},
		{name: "vector x runs the nodes", x: randDense(rng, 7), bias: randDense(rng, 64), shared: 1, matmuls: 1},
		{name: "replaceable weight stays apart", x: randDense(rng, 3, 7), bias: randDense(rng, 64), wInput: true, shared: 1, matmuls: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := graphSpec{
				nodes: []*onnxpb.NodeProto{
					nodeP("q", "MatMul", []string{"x", "wq"}, []string{"q_out"}),
					nodeP("k", "MatMul", []string{"x", "wk"}, []string{"k_out"}),
					nodeP("relu", "Relu", []string{"q_out"}, []string{"q_relu"}),
					nodeP("v", "MatMul", []string{"x", "wv"}, []string{"v_mm"}),
					nodeP("v_bias", "Add", []string{"v_mm", "bv"}, []string{"v_out"}),
					nodeP("other", "MatMul", []string{"q_relu", "wo"}, []string{"o_out"}),
				},
				inits: []*onnxpb.TensorProto{
					initializer(t, "wq", randDense(rng, 7, 32)), initializer(t, "wk", randDense(rng, 7, 40)),
					initializer(t, "wv", randDense(rng, 7, 64)), initializer(t, "bv", c.bias),
					initializer(t, "wo", randDense(rng, 32, 3)),
				},
				inputs: []*onnxpb.ValueInfoProto{untyped("x", onnxio.Float)},
				outputs: []*onnxpb.ValueInfoProto{
					untyped("q_out", onnxio.Float), untyped("k_out", onnxio.Float),
					untyped("v_out", onnxio.Float), untyped("o_out", onnxio.Float),
				},
			}
			if c.wInput {
				spec.inputs = append(spec.inputs, untyped("wk", onnxio.Float))
			}
			m := spec.model()
			g, err := New(m)
			require.NoError(t, err)
			require.Equal(t, c.shared, countOps(g, sharedInputOp), "fused nodes")
			require.Equal(t, c.matmuls, countOps(g, "MatMul"), "MatMuls on their own")
			plain, err := newGraph(m, false)
			require.NoError(t, err)
			feeds := map[string]*tensor.Dense{"x": c.x}
			want, err := plain.Run(feeds)
			require.NoError(t, err)
			for run := range 3 { // the second run records a plan, the third follows it
				got, err := g.Run(feeds)
				require.NoError(t, err)
				for name, w := range want {
					require.Equal(t, w.Shape(), got[name].Shape(), "run %d: %s", run, name)
					require.Equal(t, w.Data(), got[name].Data(), "run %d: %s differs from the node-by-node run", run, name)
				}
			}
		})
	}
}

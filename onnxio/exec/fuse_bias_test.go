package exec

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// countOps counts the graph's scheduled nodes of an op.
func countOps(g *Graph, op string) int {
	n := 0
	for _, x := range g.nodes {
		if x.op == op {
			n++
		}
	}
	return n
}

// randDense returns a float32 tensor of normal random numbers.
func randDense(rng *rand.Rand, shape ...int) *tensor.Dense {
	data := make([]float32, numel(shape))
	for i := range data {
		data[i] = float32(rng.NormFloat64())
	}
	return dense(shape, data...)
}

// TestBiasFusion checks that Add(MatMul(x, W), b) becomes one node, and
// that it equals the node-by-node run whether or not b is a bias vector
// (when it is not, the fused node runs the original nodes).
func TestBiasFusion(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	x := randDense(rng, 2, 5, 7)
	cases := []struct {
		name     string
		bias     *tensor.Dense
		biasLeft bool
		extra    bool // the product is also a graph output
		fused    int
	}{
		{name: "bias vector", bias: randDense(rng, 3), fused: 1},
		{name: "bias first", bias: randDense(rng, 1, 3), biasLeft: true, fused: 1},
		{name: "full addend falls back", bias: randDense(rng, 2, 5, 3), fused: 1},
		{name: "product read elsewhere", bias: randDense(rng, 3), extra: true, fused: 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ins := []string{"p", "b"}
			if c.biasLeft {
				ins = []string{"b", "p"}
			}
			spec := graphSpec{
				nodes: []*onnxpb.NodeProto{
					nodeP("mm", "MatMul", []string{"x", "w"}, []string{"p"}),
					nodeP("add", "Add", ins, []string{"y"}),
				},
				inits:   []*onnxpb.TensorProto{initializer(t, "w", randDense(rng, 7, 3)), initializer(t, "b", c.bias)},
				inputs:  []*onnxpb.ValueInfoProto{info("x", onnxio.Float, 2, 5, 7)},
				outputs: []*onnxpb.ValueInfoProto{untyped("y", onnxio.Float)},
			}
			if c.extra {
				spec.outputs = append(spec.outputs, untyped("p", onnxio.Float))
			}
			m := spec.model()
			g, err := New(m)
			require.NoError(t, err)
			require.Equal(t, c.fused, countOps(g, fusedMatMulAddOp))
			plain, err := newGraph(m, false)
			require.NoError(t, err)
			got, err := g.Run(map[string]*tensor.Dense{"x": x})
			require.NoError(t, err)
			want, err := plain.Run(map[string]*tensor.Dense{"x": x})
			require.NoError(t, err)
			for name, w := range want {
				gv, err := fromDense(got[name])
				require.NoError(t, err)
				wv, err := fromDense(w)
				require.NoError(t, err)
				require.Equal(t, wv.shape, gv.shape, name)
				require.NoError(t, compareValues(gv, wv, tolerance{rtol: 1e-5, atol: 1e-6}), name)
			}
		})
	}
}

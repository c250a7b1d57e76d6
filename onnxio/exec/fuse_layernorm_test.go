package exec

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// TestResidualNormFusion checks that LayerNormalization(Add(x, r))
// becomes one node when the sum is read by the normalization alone and
// it has one output, and that the graph gives the node-by-node run's
// values (within 1e-5 relative, 1e-6 absolute; the sum is rounded to
// float32 as the Add rounds it) whether the fused node runs its kernel
// or, when the Add broadcasts, the original nodes.
func TestResidualNormFusion(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	x := randDense(rng, 2, 3, 8)
	cases := []struct {
		name    string
		res     *tensor.Dense
		lnOuts  []string
		extra   bool // the sum is also a graph output
		noBias  bool
		fused   int
		outputs []string
	}{
		{name: "same shapes", res: randDense(rng, 2, 3, 8), fused: 1},
		{name: "no bias", res: randDense(rng, 2, 3, 8), noBias: true, fused: 1},
		{name: "broadcast add falls back", res: randDense(rng, 1, 3, 8), fused: 1},
		{name: "mean wanted", res: randDense(rng, 2, 3, 8), lnOuts: []string{"y", "mean"}, fused: 0},
		{name: "sum read elsewhere", res: randDense(rng, 2, 3, 8), extra: true, fused: 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			outs := c.lnOuts
			if outs == nil {
				outs = []string{"y"}
			}
			lnIns := []string{"s", "scale", "bias"}
			if c.noBias {
				lnIns = lnIns[:2]
			}
			spec := graphSpec{
				nodes: []*onnxpb.NodeProto{
					nodeP("add", "Add", []string{"x", "r"}, []string{"s"}),
					nodeP("ln", "LayerNormalization", lnIns, outs),
				},
				inits: []*onnxpb.TensorProto{initializer(t, "r", c.res), initializer(t, "scale", randDense(rng, 8)),
					initializer(t, "bias", randDense(rng, 8))},
				inputs: []*onnxpb.ValueInfoProto{info("x", onnxio.Float, 2, 3, 8)},
			}
			for _, o := range outs {
				spec.outputs = append(spec.outputs, untyped(o, onnxio.Float))
			}
			if c.extra {
				spec.outputs = append(spec.outputs, untyped("s", onnxio.Float))
			}
			m := spec.model()
			g, err := New(m)
			require.NoError(t, err)
			require.Equal(t, c.fused, countOps(g, fusedAddLayerNormOp))
			plain, err := newGraph(m, false)
			require.NoError(t, err)
			for range 3 { // the second run records a plan, the third follows it
				got, err := g.Run(map[string]*tensor.Dense{"x": x})
				require.NoError(t, err)
				want, err := plain.Run(map[string]*tensor.Dense{"x": x})
				require.NoError(t, err)
				require.Len(t, got, len(want))
				for name, w := range want {
					gv, err := fromDense(got[name])
					require.NoError(t, err)
					wv, err := fromDense(w)
					require.NoError(t, err)
					require.Equal(t, wv.shape, gv.shape, name)
					require.NoError(t, compareValues(gv, wv, tolerance{rtol: 1e-5, atol: 1e-6}), name)
				}
			}
		})
	}
}

// TestResidualNormFusedOnBert prepares PyTorch 2.15's TorchScript export
// of a seeded BERT (testdata/pytorch2): every LayerNormalization follows
// an Add (the embeddings' sum, and each block's two residual connections)
// and becomes a fused node, and both data sets match PyTorch's outputs at
// 1e-5 relative, 1e-6 absolute.
func TestResidualNormFusedOnBert(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "pytorch2", "fixtures", "bert_sdpa_ts17")
	m, err := onnxio.ReadModel(filepath.Join(dir, "model.onnx"))
	require.NoError(t, err)
	g, err := New(m)
	require.NoError(t, err)
	assert.Equal(t, 5, countOps(g, fusedAddLayerNormOp), "the embeddings' and two per layer")
	assert.Zero(t, countOps(g, "LayerNormalization"))
	for _, set := range []string{"test_data_set_0", "test_data_set_1"} {
		inputs, want := readDecodeSet(t, g, filepath.Join(dir, set))
		for range 3 {
			got, err := g.RunArrays(context.Background(), inputs)
			require.NoError(t, err)
			for _, info := range g.Outputs() {
				assertArraysClose(t, set+" "+info.Name, want[info.Name], got[info.Name], 1e-5, 1e-6)
			}
		}
	}
}

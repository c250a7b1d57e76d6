package exec

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attnrun/attnrun/onnxio"
)

// TestGeluFusedOnBert prepares PyTorch 2.15's TorchScript export of a
// seeded BERT (testdata/pytorch2), whose exact GELU is Div, Erf, Add, Mul,
// Mul in every layer: each becomes one fused node, and both data sets
// match PyTorch's outputs at 1e-5 relative, 1e-6 absolute.
func TestGeluFusedOnBert(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "pytorch2", "fixtures", "bert_sdpa_ts17")
	m, err := onnxio.ReadModel(filepath.Join(dir, "model.onnx"))
	require.NoError(t, err)
	g, err := New(m)
	require.NoError(t, err)
	fused, erfs := 0, 0
	for _, n := range g.nodes {
		switch n.op {
		case fusedGeluOp:
			fused++
		case "Erf":
			erfs++
		}
	}
	assert.Equal(t, 2, fused, "fused GELUs, one per layer")
	assert.Zero(t, erfs, "Erf nodes left")
	for _, set := range []string{"test_data_set_0", "test_data_set_1"} {
		inputs, want := readDecodeSet(t, g, filepath.Join(dir, set))
		got, err := g.RunArrays(context.Background(), inputs)
		require.NoError(t, err)
		for _, info := range g.Outputs() {
			assertArraysClose(t, set+" "+info.Name, want[info.Name], got[info.Name], 1e-5, 1e-6)
		}
	}
}

package exec

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/onnxio"
)

// TestPackedWeightsSameBits checks that the PyTorch exports of multi-head
// attention get their projection weights packed when prepared, and that
// the products on the packed weights give the bits the unpacked products
// give (the fixtures' own test checks them against PyTorch).
func TestPackedWeightsSameBits(t *testing.T) {
	for _, name := range []string{"torch_mha_causal_self_opset17_dynamic", "multihead_opset17_dynamic", "torch_mha_cross_opset13_static"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(pytorchFixtures, name)
			m, err := onnxio.ReadModel(filepath.Join(dir, "model.onnx"))
			require.NoError(t, err)
			g, err := New(m)
			require.NoError(t, err)
			require.NotEmpty(t, g.weights, "no weight was packed")
			inputs, _, err := onnxio.ReadDataSetArrays(filepath.Join(dir, "test_data_set_0"))
			require.NoError(t, err)
			feeds := map[string]*array.Array{}
			for i, info := range g.Inputs() {
				feeds[info.Name] = inputs[i]
			}
			packed, err := g.RunArrays(context.Background(), feeds)
			require.NoError(t, err)
			unpacked := *g
			unpacked.weights = nil
			want, err := unpacked.RunArrays(context.Background(), feeds)
			require.NoError(t, err)
			for name, w := range want {
				require.Equal(t, w.Data, packed[name].Data, "output %q", name)
			}
		})
	}
}

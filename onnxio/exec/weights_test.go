package exec

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// requireAllPacked checks that the graph packed one copy for every float32
// matrix initializer that a MatMul or Gemm node of the model m multiplies
// by on the right, whatever fused node it ended up in.
func requireAllPacked(t *testing.T, m *onnxpb.ModelProto, g *Graph) {
	t.Helper()
	matrices := map[string]bool{}
	for _, init := range m.GetGraph().GetInitializer() {
		if init.GetDataType() == int32(onnxpb.TensorProto_FLOAT) && len(init.GetDims()) == 2 {
			matrices[init.GetName()] = true
		}
	}
	want := map[string]bool{} // name and transB
	for _, n := range m.GetGraph().GetNode() {
		if (n.GetOpType() == "MatMul" || n.GetOpType() == "Gemm") && len(n.GetInput()) > 1 && matrices[n.GetInput()[1]] {
			trans := false
			for _, a := range n.GetAttribute() {
				trans = trans || (a.GetName() == "transB" && a.GetI() != 0)
			}
			want[fmt.Sprintf("%s/%v", n.GetInput()[1], trans)] = true
		}
	}
	require.NotEmpty(t, want, "the model has no product by a constant matrix")
	require.Len(t, g.weights, len(want), "packed weights, for %v", want)
}

// TestPackedWeightsSameBits checks that the PyTorch exports of multi-head
// attention get every projection weight packed when prepared, and that
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
			requireAllPacked(t, m, g)
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

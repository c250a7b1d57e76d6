package lift

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	_ "github.com/attnrun/attnrun/layers"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/attnrun/attnrun/registry"
)

// These tests see what a build without some layer types reports: the
// same graphs must then be named as unlifted, with the reason, and
// --partial must still run them whole.

func hide(t *testing.T, ids ...string) {
	t.Helper()
	for _, id := range ids {
		hidden[id] = true
	}
	t.Cleanup(func() {
		for _, id := range ids {
			delete(hidden, id)
		}
	})
}

func fixture(t *testing.T, name string) *onnxpb.ModelProto {
	t.Helper()
	m, err := onnxio.ReadModel(filepath.Join("../../testdata/onnx", name, "model.onnx"))
	require.NoError(t, err)
	return m
}

func TestCrossAttentionWithoutTorchMHAIsReported(t *testing.T) {
	hide(t, "attention.torch_mha")
	for _, name := range []string{"torch_mha_cross_opset13_static", "torch_mha_cross_opset17_dynamic"} {
		t.Run(name, func(t *testing.T) {
			res, err := Lift(fixture(t, name))
			var u *UnliftedError
			require.ErrorAs(t, err, &u)
			assert.Nil(t, res.Model)
			want := `attention: cross-attention (queries from "query", keys and values from "memory") and a key padding mask from input "key_padding_mask": no layer type attention.torch_mha is registered in this build`
			ops := map[string]bool{}
			for _, n := range u.Nodes {
				assert.Equal(t, want, n.Reason, n.Node)
				ops[n.Op] = true
			}
			for _, op := range []string{"Softmax", "MatMul", "Gemm", "Expand", "Where"} {
				assert.True(t, ops[op], "the attention's %s nodes are reported", op)
			}
		})
	}
}

func TestPartialRunsCrossAttentionAsSubgraph(t *testing.T) {
	hide(t, "attention.torch_mha")
	name := "torch_mha_cross_opset17_dynamic"
	res, err := Options{Partial: true}.Lift(fixture(t, name))
	require.NoError(t, err)
	assert.Equal(t, []string{"onnx.subgraph"}, layerTypesOf(res))
	assert.NotEmpty(t, res.Unlifted)
	checkAgainstPyTorch(t, name, res)
}

func TestTransformerBlockWithoutNormAndGELU(t *testing.T) {
	hide(t, "norm.layer", "activation.gelu")
	for _, name := range []string{"transformer_block_opset13_static", "transformer_block_opset17_dynamic"} {
		t.Run(name, func(t *testing.T) {
			_, err := Lift(fixture(t, name))
			var u *UnliftedError
			require.ErrorAs(t, err, &u)
			reasons := map[string]bool{}
			for _, n := range u.Nodes {
				reasons[n.Reason] = true
			}
			assert.Equal(t, map[string]bool{
				"layer normalization: no layer type norm.layer is registered in this build":   true,
				"exact (erf) GELU: no layer type activation.gelu is registered in this build": true,
			}, reasons)

			// --partial interleaves subgraphs with the lifted layers.
			res, err := Options{Partial: true}.Lift(fixture(t, name))
			require.NoError(t, err)
			assert.Equal(t, []string{"onnx.subgraph", "attention.multihead", "nn.add", "onnx.subgraph",
				"nn.linear", "onnx.subgraph", "nn.linear", "nn.add"}, layerTypesOf(res))
			checkAgainstPyTorch(t, name, res)
		})
	}
}

func layerTypesOf(res *Result) []string {
	var types []string
	for _, l := range res.Model.Layers() {
		types = append(types, l.Type)
	}
	return types
}

// checkAgainstPyTorch runs a lifted model on a fixture's test-data sets.
func checkAgainstPyTorch(t *testing.T, name string, res *Result) {
	t.Helper()
	sets, err := onnxio.DataSetDirs(filepath.Join("../../testdata/onnx", name))
	require.NoError(t, err)
	require.NotEmpty(t, sets)
	for _, set := range sets {
		ds, err := onnxio.ReadDataSet(set)
		require.NoError(t, err)
		var inputs []*tensor.Dense
		for _, tp := range ds.Inputs {
			x, err := onnxio.TensorToDense(tp)
			require.NoError(t, err)
			x, err = ModelInput(x)
			require.NoError(t, err)
			inputs = append(inputs, x)
		}
		got, err := RunOutputs(res.Model, res.Outputs, &registry.Run{}, inputs)
		require.NoError(t, err)
		for i, tp := range ds.Outputs {
			want, err := onnxio.TensorToDense(tp)
			require.NoError(t, err)
			requireClose(t, want, got[i], strings.TrimPrefix(set, "../../testdata/onnx/"))
		}
	}
}

func requireClose(t *testing.T, want, got *tensor.Dense, what string) {
	t.Helper()
	require.Equal(t, want.Shape(), got.Shape(), what)
	w, g := want.Data().([]float32), got.Data().([]float32)
	for i := range w {
		d := float64(w[i] - g[i])
		if d < 0 {
			d = -d
		}
		abs := float64(w[i])
		if abs < 0 {
			abs = -abs
		}
		require.LessOrEqual(t, d, 1e-6+1e-5*abs, "%s: element %d", what, i)
	}
}

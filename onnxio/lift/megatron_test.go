package lift_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/lift"
)

// TestLiftGELUInAnyOrder lifts the exports of
// testdata/export_gelu_orders.py: the exact and tanh GELU with their
// products and sums in the orders of Megatron, Hugging Face's gelu_new and
// two more, recognized by what they compute. Each lifts to activation.gelu
// (or nn.mlp's gelu_tanh between Linears) and gives PyTorch's output within
// 1e-5 relative, 1e-6 absolute; the tanh form with 0.05 for 0.044715 is no
// GELU and does not lift.
func TestLiftGELUInAnyOrder(t *testing.T) {
	for name, want := range map[string]string{
		"megatron_tanh":  "type: nn.mlp, d: 8, d_hidden: 32, activation: gelu_tanh}",
		"hf_tanh":        "type: activation.gelu, approximate: tanh}",
		"reordered_tanh": "type: activation.gelu, approximate: tanh}",
		"reordered_erf":  "type: activation.gelu, approximate: none}",
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("testdata/gelu_orders", name)
			src, err := onnxio.ReadModel(filepath.Join(dir, "model.onnx"))
			require.NoError(t, err)
			res, err := lift.Lift(src)
			require.NoError(t, err, "%v", err)
			assert.Contains(t, res.Config, want)
			checkDataSets(t, dir, res)
		})
	}
	src, err := onnxio.ReadModel("testdata/gelu_orders/near_gelu/model.onnx")
	require.NoError(t, err)
	_, err = lift.Lift(src)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "op Pow is not part of any attnrun layer")
}

// TestLiftFloatToFloatCasts lifts the export of
// testdata/export_float_casts.py: self-attention that casts its float32
// scores and weights to float32 (Megatron's .float() around the softmax),
// Casts that copy. It lifts to one attention layer that gives PyTorch's
// output within 1e-5 relative, 1e-6 absolute.
func TestLiftFloatToFloatCasts(t *testing.T) {
	dir := "testdata/float_casts"
	src, err := onnxio.ReadModel(filepath.Join(dir, "model.onnx"))
	require.NoError(t, err)
	res, err := lift.Lift(src)
	require.NoError(t, err, "%v", err)
	assert.Contains(t, res.Config, "{name: attn, type: attention.multihead, d_in: 8, d_out: 8, context_length: 5, num_heads: 2, qkv_bias: true, out_bias: true, causal: false}")
	checkDataSets(t, dir, res)
}

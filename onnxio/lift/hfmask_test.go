package lift_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/lift"
)

// TestLiftHuggingFaceKeepMasks lifts the exports of
// testdata/hf_masks/export.py: BERT self-attention masked by an
// attention_mask of 1s and 0s (int64, int32, float32) added to the scores
// as (1 - mask) * -10000 or * finfo.min, with pruned heads (all_head_size
// below the width), and two layers sharing one mask, which must lift to a
// mask.padding layer feeding attention.sdpa; GPT-2's attention (Conv1D
// projections as addmm on (B·T, D), the causal buffer applied with
// torch.where and -10000 or finfo.min), alone (attention.multihead, causal)
// and with the extended mask added after it (mask.padding, attention.sdpa).
// A one-layer BERT as pytorch-pretrained-bert wrote it (BertLayerNorm with
// x - mean computed twice, positions expanded over the batch, gelu as
// x * 0.5 * (1 + erf(x / √2))) lifts whole, and pruned heads without a
// mask lift to attention.sdpa with head_dim, as does attention written
// with einsums as Keras does (projections by (d, heads, head_dim)
// kernels), and BART's (heads folded into the batch for bmm, the scores
// viewed as (B, H, T, S) to add the mask and back), and attention under
// the 4-D causal mask decoders build from the attention_mask (keep mask
// and causal), and grouped-query attention with Llama's repeat_kv
// (attention.sdpa with num_kv_heads). Each must reproduce PyTorch's
// output on a padded batch.
func TestLiftHuggingFaceKeepMasks(t *testing.T) {
	data, err := os.ReadFile("testdata/hf_masks/manifest.json")
	require.NoError(t, err)
	var cases []struct {
		Name   string   `json:"name"`
		Layers []string `json:"layers"`
	}
	require.NoError(t, json.Unmarshal(data, &cases))
	require.Len(t, cases, 14)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			dir := filepath.Join("testdata/hf_masks", c.Name)
			m, err := onnxio.ReadModel(filepath.Join(dir, "model.onnx"))
			require.NoError(t, err)
			res, err := lift.Lift(m)
			require.NoError(t, err)
			assert.Equal(t, c.Layers, layerTypes(res.Config), res.Config)
			if slices.Contains(c.Layers, "mask.padding") {
				assert.Contains(t, res.Config, "mask: bool, mask_polarity: keep")
			}
			causal := strings.HasPrefix(c.Name, "gpt2") || strings.HasPrefix(c.Name, "decoder") || strings.HasPrefix(c.Name, "gqa")
			assert.Equal(t, causal, strings.Contains(res.Config, "causal: true"), res.Config)
			if strings.HasPrefix(c.Name, "gqa") {
				assert.Contains(t, res.Config, "num_heads: 4, num_kv_heads: 2")
			}
			if strings.Contains(c.Name, "pruned") {
				assert.Contains(t, res.Config, "d: 16, num_heads: 2, head_dim: 4")
			}
			checkDataSets(t, dir, res)
		})
	}
}

// TestLiftNodesOutOfOrder lifts a graph whose nodes are stored in reverse
// order, as ONNX Runtime accepts it: the lift is the one of the ordered
// graph, with a note, and the caller's model is left as it was.
func TestLiftNodesOutOfOrder(t *testing.T) {
	dir := "testdata/hf_masks/int64_mask_two_layers"
	m, err := onnxio.ReadModel(filepath.Join(dir, "model.onnx"))
	require.NoError(t, err)
	first := m.GetGraph().GetNode()[0]
	slices.Reverse(m.GetGraph().Node)
	res, err := lift.Lift(m)
	require.NoError(t, err)
	assert.Equal(t, []string{"mask.padding", "attention.sdpa", "nn.add", "attention.sdpa", "nn.add"}, layerTypes(res.Config))
	assert.Contains(t, res.Notes, "the nodes are not in topological order (node "+m.GetGraph().GetNode()[0].GetName()+" is not at position 0); they were read in dependency order, as ONNX Runtime runs them")
	assert.Same(t, first, m.GetGraph().GetNode()[len(m.GetGraph().GetNode())-1])
	checkDataSets(t, dir, res)
}

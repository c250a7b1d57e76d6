package lift_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/lift"
)

// TestLiftFusedProjections lifts the exports of
// testdata/export_fused_projections.py: a tiny Hugging Face Phi-3, whose
// qkv_proj is sliced into queries, keys and values and whose gate_up_proj
// is cut in halves (Slices through the TorchScript exporter, a Split
// through dynamo), and whose rotary embedding concatenates an empty
// pass-through slice. Each part lifts as a Linear of its own rows of the
// fused weight, the whole into attention.sdpa and a gated nn.mlp, and the
// lifted model gives PyTorch's logits within 1e-5 relative, 1e-6 absolute.
func TestLiftFusedProjections(t *testing.T) {
	for _, exporter := range []string{"ts17", "dynamo18"} {
		t.Run(exporter, func(t *testing.T) {
			dir := filepath.Join("testdata", "fused_projections_"+exporter)
			src, err := onnxio.ReadModel(filepath.Join(dir, "model.onnx"))
			require.NoError(t, err)
			res, err := lift.Lift(src)
			require.NoError(t, err, "%v", err)
			assert.Contains(t, res.Config, "type: attention.sdpa, inputs: [")
			assert.Contains(t, res.Config, "d: 32, num_heads: 2, num_kv_heads: 1, qkv_bias: false, out_bias: false, causal: true, mask: bool, mask_polarity: keep, rope: half}")
			assert.Contains(t, res.Config, "type: nn.mlp, d: 32, d_hidden: 24, gated: true, activation: silu, bias: false}")
			split := map[string]string{}
			for _, m := range res.Mapping {
				if i := strings.LastIndex(m.Param, "."); i > 0 && strings.Contains(m.Transform, "split rows") {
					split[m.Param[strings.LastIndex(m.Param[:i], ".")+1:]] = m.Transform
				}
			}
			assert.Equal(t, map[string]string{
				"q_proj.weight": "transposed, split rows 0:32", "k_proj.weight": "transposed, split rows 32:48",
				"v_proj.weight":    "transposed, split rows 48:64",
				"gate_proj.weight": "transposed, split rows 0:24", "up_proj.weight": "transposed, split rows 24:48",
			}, split)
			checkDataSets(t, dir, res)
		})
	}
}

package lift_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/lift"
)

// Heads picked out of one fused projection viewed as (B, T, G, d), by Split
// (multi-query: H query heads, one key and one value head) and by Gather
// (groups packed per head: query, key, value of head 0, then of head 1),
// lift to attention.sdpa and give PyTorch's outputs; the mapping table
// names the rows each projection takes (testdata/export_viewed_heads.py).
func TestLiftViewedHeads(t *testing.T) {
	for fixture, want := range map[string]struct {
		config string
		kRows  []string
	}{
		"viewed_heads_split": {"num_heads: 2, num_kv_heads: 1, qkv_bias: false", []string{
			"onnx::MatMul_54: transposed, split rows 16:24",
		}},
		"viewed_heads_gather": {"num_heads: 2, qkv_bias: true", []string{
			"onnx::MatMul_58: transposed, split rows 8:16, into rows 0:8",
			"onnx::MatMul_58: transposed, split rows 32:40, into rows 8:16",
		}},
	} {
		t.Run(fixture, func(t *testing.T) {
			dir := filepath.Join("testdata", fixture)
			m, err := onnxio.ReadModel(filepath.Join(dir, "model.onnx"))
			require.NoError(t, err)
			res, err := lift.Lift(m)
			require.NoError(t, err)
			assert.Equal(t, []string{"attention.sdpa"}, attentionTypes(res.Config), res.Config)
			assert.Contains(t, res.Config, want.config)
			var k []string
			for _, mp := range res.Mapping {
				if mp.Param == "attn.k_proj.weight" {
					k = append(k, mp.Initializer+": "+mp.Transform)
				}
			}
			assert.Equal(t, want.kRows, k)
			checkDataSets(t, dir, res)
		})
	}
}

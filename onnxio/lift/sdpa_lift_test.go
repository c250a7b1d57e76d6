package lift_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/export"
	"github.com/attnrun/attnrun/onnxio/lift"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// attention.sdpa is lifted by structure from the standard ops attnrun
// writes it as before opset 23, and at every opset for sinks and
// score_mod: the softmax over the scores and a column of sink logits that
// is then dropped, and each built-in score modification as its ExportONNX
// writes it. The lifted layer has the original's fields (grouped-query
// heads, qk_norm, biases, o_proj, scale, causal, sinks, score_mod), its
// parameters are the graph's, it computes the original model's numbers,
// and it exports again to the same initializers.
func TestLiftDecomposedSDPA(t *testing.T) {
	for _, c := range []struct {
		config, want string
		opsets       []int
	}{
		{"sdpa_sinks", "{name: a, type: attention.sdpa, d: 32, num_heads: 4, num_kv_heads: 2, qkv_bias: false, out_bias: true, causal: true, qk_norm: rms, qk_norm_eps: 1e-06, sinks: true}", nil},
		{sinksPlain, "{name: attn, type: attention.sdpa, d: 12, num_heads: 3, qkv_bias: true, out_bias: false, out_name: o_proj, causal: false, scale: 0.3, sinks: true}", nil},
		{"sdpa_score_mod", "{name: attn, type: attention.sdpa, d: 16, num_heads: 4, num_kv_heads: 2, qkv_bias: false, out_bias: true, causal: true, score_mod: [{type: softcap, cap: 2}, {type: alibi}, {type: relative_bias, max_distance: 3}, {type: document_mask, lengths: [2, 3, 1]}]}", nil},
		{scoreModSinks, "{name: attn, type: attention.sdpa, d: 12, num_heads: 2, qkv_bias: false, out_bias: true, causal: false, scale: 0.25, sinks: true, score_mod: {type: relative_bias, max_distance: 2}}", nil},
		{"sdpa_softcap", "{name: attn, type: attention.sdpa, d: 8, num_heads: 2, qkv_bias: false, out_bias: true, causal: true, scale: 0.9, softcap: 1.5}", []int{13, 17}},
		{"sdpa_gqa", "{name: attn, type: attention.sdpa, d: 8, num_heads: 4, num_kv_heads: 2, qkv_bias: false, out_bias: true, causal: true}", []int{13, 17}},
		{"sdpa_window", "{name: attn, type: attention.sdpa, d: 8, num_heads: 2, qkv_bias: false, out_bias: true, causal: true, window: 3}", []int{13, 17}},
		{"sdpa_alibi", "{name: attn, type: attention.sdpa, d: 9, num_heads: 3, qkv_bias: false, out_bias: false, out_name: o_proj, causal: true, alibi: true}", []int{13, 17}},
		{"multi/sdpa_keep_mask", "{name: attn, type: attention.sdpa, inputs: [x, mask], d: 8, num_heads: 2, qkv_bias: false, out_bias: true, causal: false, mask: bool, mask_polarity: keep}", []int{13, 17}},
		{"multi/sdpa_drop_mask_nan", "{name: attn, type: attention.sdpa, inputs: [x, mask], d: 8, num_heads: 2, qkv_bias: false, out_bias: true, causal: false, mask: bool, mask_polarity: mask, masked_rows: nan}", []int{13, 17}},
		{"multi/sdpa_additive", "{name: attn, type: attention.sdpa, inputs: [x, bias], d: 8, num_heads: 2, qkv_bias: false, out_bias: true, causal: true, mask: additive}", []int{13, 17}},
		{"multi/sdpa_alibi_additive", "{name: attn, type: attention.sdpa, inputs: [x, bias], d: 9, num_heads: 3, qkv_bias: false, out_bias: true, causal: true, window: 3, alibi: true, mask: additive}", []int{13, 17}},
		{"multi/sdpa_everything", "{name: attn, type: attention.sdpa, inputs: [x, keep], d: 8, num_heads: 4, num_kv_heads: 2, qkv_bias: false, out_bias: false, out_name: o_proj, causal: true, window: 4, mask: bool, mask_polarity: keep, softcap: 2, rope: half}", []int{13, 17}},
		{"multi/sdpa_sinks_padding", "{name: attn, type: attention.sdpa, inputs: [x, keep], d: 16, num_heads: 2, qkv_bias: false, out_bias: true, causal: true, window: 3, mask: bool, mask_polarity: keep, rope: half, sinks: true}", nil},
		{"multi/sdpa_cross_bottom_right", "{name: attn, type: attention.sdpa, inputs: [x, memory], d: 8, d_memory: 6, num_heads: 2, qkv_bias: true, out_bias: true, causal: true}", []int{13, 17}},
		{"multi/sdpa_cross_top_left", "{name: attn, type: attention.sdpa, inputs: [x, memory], d: 8, d_memory: 6, num_heads: 2, qkv_bias: false, out_bias: true, causal: true, causal_align: top_left}", []int{13, 17}},
		{"multi/sdpa_cross_window_bottom_right", "{name: attn, type: attention.sdpa, inputs: [x, memory], d: 8, d_memory: 6, num_heads: 2, num_kv_heads: 1, qkv_bias: false, out_bias: true, causal: true, window: 3}", []int{13, 17}},
		{"multi/sdpa_cross_window_top_left", "{name: attn, type: attention.sdpa, inputs: [x, memory], d: 8, d_memory: 6, num_heads: 2, qkv_bias: false, out_bias: true, causal: true, causal_align: top_left, window: 2}", []int{13, 17}},
		{"multi/sdpa_cross_padding", "{name: attn, type: attention.sdpa, inputs: [x, memory, padding], d: 8, num_heads: 2, qkv_bias: false, out_bias: true, causal: false, mask: bool, mask_polarity: mask}", []int{13, 17}},
		{"multi/sdpa_score_mod_cross", "{name: attn, type: attention.sdpa, inputs: [x, memory], d: 16, d_memory: 12, num_heads: 2, qkv_bias: false, out_bias: true, causal: false, score_mod: [{type: relative_bias, max_distance: 2}, {type: document_mask, lengths: [1, 2, 3]}]}", nil},
		{"sdpa_rope", "{name: attn, type: attention.sdpa, d: 8, num_heads: 2, qkv_bias: false, out_bias: true, causal: true, rope: half}\n" +
			"{name: attn_gptj, type: attention.sdpa, d: 8, num_heads: 2, num_kv_heads: 1, qkv_bias: false, out_bias: true, causal: true, rope: interleaved, rope_rotary_dim: 2}", []int{13, 17}},
		{"sdpa_qk_norm", "{name: attn, type: attention.sdpa, d: 32, num_heads: 4, num_kv_heads: 2, qkv_bias: false, out_bias: false, out_name: o_proj, causal: true, rope: half, qk_norm: rms, qk_norm_eps: 1e-05}", []int{13, 17}},
	} {
		opsets := c.opsets
		if opsets == nil {
			opsets = []int{13, 17, 23}
		}
		for _, opset := range opsets {
			t.Run(fmt.Sprintf("%s/opset%d", strings.Fields(c.want)[1], opset), func(t *testing.T) {
				checkStructuralLift(t, c.config, c.want, opset)
			})
		}
	}
}

// sinksPlain is multi-head attention with sinks and what a lift must read
// besides: q/k/v biases, no output bias, Hugging Face's o_proj, an
// explicit scale and no causal mask.
const sinksPlain = `# input: [2, 5, 12]
name: sinks-plain
layers:
  - {name: attn, type: attention.sdpa, d: 12, num_heads: 3, qkv_bias: true, out_bias: false, out_name: o_proj, scale: 0.3, sinks: true}
`

// scoreModSinks has sinks and a single score_mod, whose parameter is
// score_mod.bias rather than score_mod.<i>.bias.
const scoreModSinks = `# input: [2, 6, 12]
name: score-mod-sinks
layers:
  - {name: attn, type: attention.sdpa, d: 12, num_heads: 2, scale: 0.25, sinks: true, score_mod: {type: relative_bias, max_distance: 2}}
`

// liftTestModel is roundTripModel for an export config under
// testdata/export, or one written out in the test (YAML, with its
// "# input:" line) in a temporary copy of that layout.
func liftTestModel(t *testing.T, config string) (*models.Model, func(seed uint64) map[string]*tensor.Dense) {
	t.Helper()
	if !strings.Contains(config, "\n") {
		return roundTripModel(t, config)
	}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "inline.yaml"), []byte(config), 0o644))
	base, err := filepath.Abs(exportConfigs)
	require.NoError(t, err)
	rel, err := filepath.Rel(base, filepath.Join(dir, "inline"))
	require.NoError(t, err)
	return roundTripModel(t, rel)
}

// attention.mla is lifted by structure from its export (standard ops at
// every opset): the low-rank projections and their RMSNorms, the split of
// each head into its non-RoPE and rotated parts, the shared rotated key,
// the rotary layout and base, biases and scale.
func TestLiftMLA(t *testing.T) {
	for _, c := range []struct{ config, want string }{
		{"attention_mla", "{name: m, type: attention.mla, d: 32, num_heads: 4, q_lora_rank: 16, kv_lora_rank: 8, qk_nope_head_dim: 8, qk_rope_head_dim: 4, v_head_dim: 8, attention_bias: false, rope: interleaved}"},
		{"attention_mla_q_proj", "{name: m, type: attention.mla, d: 12, num_heads: 2, q_lora_rank: 0, kv_lora_rank: 6, qk_nope_head_dim: 4, qk_rope_head_dim: 6, v_head_dim: 3, attention_bias: true, rope: half, scale: 0.3}"},
		{mlaBase, "{name: attn, type: attention.mla, d: 16, num_heads: 2, q_lora_rank: 8, kv_lora_rank: 4, qk_nope_head_dim: 2, qk_rope_head_dim: 4, v_head_dim: 5, attention_bias: false, rope: half, rope_base: 500, eps: 1e-05}"},
	} {
		for _, opset := range []int{13, 17, 23} {
			t.Run(fmt.Sprintf("%s/opset%d", strings.Fields(c.want)[1], opset), func(t *testing.T) {
				checkStructuralLift(t, c.config, c.want, opset)
			})
		}
	}
}

// mlaBase has a rotary base and an epsilon of its own.
const mlaBase = `# input: [2, 5, 16]
name: mla-base
layers:
  - {name: attn, type: attention.mla, d: 16, num_heads: 2, q_lora_rank: 8, kv_lora_rank: 4, qk_nope_head_dim: 2, qk_rope_head_dim: 4, v_head_dim: 5, rope: half, rope_base: 500, eps: 1e-5}
`

// checkStructuralLift exports a config at an opset, lifts the export
// without its metadata (by structure), and checks that the lifted config
// holds want (one layer), reparses, computes the original model's numbers
// and exports again to the same initializers and outputs.
func checkStructuralLift(t *testing.T, config, want string, opset int) {
	t.Helper()
	m, inputs := liftTestModel(t, config)
	first, err := export.Model(m, export.Options{Opset: opset})
	require.NoError(t, err)
	stripped := proto.Clone(first).(*onnxpb.ModelProto)
	stripped.MetadataProps = nil
	require.False(t, lift.IsAttnrun(stripped))

	res, err := lift.Lift(stripped)
	require.NoError(t, err, "%v", res)
	assert.False(t, res.Attnrun)
	assert.Equal(t, layerTypes(want), layerTypes(res.Config), res.Config)
	for _, line := range strings.Split(want, "\n") {
		assert.Contains(t, res.Config, line)
	}
	reparsed, err := models.Parse([]byte(res.Config), "lifted.yaml")
	require.NoError(t, err, res.Config)
	require.NoError(t, reparsed.Init(1))

	second, err := export.Model(res.Model, export.Options{Opset: opset})
	require.NoError(t, err, res.Config)
	assert.Equal(t, initializers(t, first), initializers(t, second), res.Config)
	for seed := range uint64(2) {
		feeds := inputs(seed)
		var xs []*tensor.Dense
		for _, in := range m.Config().Inputs {
			xs = append(xs, feeds[in])
		}
		if len(xs) == 0 {
			xs = []*tensor.Dense{feeds["x"]}
		}
		want, err := m.Forward(nil, xs...)
		require.NoError(t, err)
		got, err := res.Model.Forward(nil, xs...)
		require.NoError(t, err)
		assertSameOutput(t, want, got)
		assertSameOutput(t, runExport(t, first, feeds), runExport(t, second, feeds))
	}
}

// attention.linear is lifted by structure from its parallel-form export:
// every update rule, grouped key heads, the convolution's kernel, the L2
// norm, the gates' projections and parameters.
func TestLiftLinearAttention(t *testing.T) {
	for _, c := range []struct{ config, want string }{
		{"attention_linear", "{name: l, type: attention.linear, d: 32, num_heads: 4, head_k_dim: 8, head_v_dim: 8, update_rule: gated_delta, conv_kernel_size: 4, qk_l2norm: true, eps: 1e-06}"},
		{"attention_linear_delta", "{name: l, type: attention.linear, d: 12, num_heads: 4, num_key_heads: 2, head_k_dim: 4, head_v_dim: 2, update_rule: delta, conv_kernel_size: 3, qk_l2norm: true, eps: 1e-06}"},
		{"attention_linear_gated", "{name: l, type: attention.linear, d: 8, num_heads: 2, head_k_dim: 4, head_v_dim: 4, update_rule: gated, conv_kernel_size: 1, qk_l2norm: true, eps: 1e-06}"},
		{"attention_linear_plain", "{name: l, type: attention.linear, d: 8, num_heads: 2, head_k_dim: 4, head_v_dim: 4, update_rule: linear, conv_kernel_size: 4, qk_l2norm: false, eps: 1e-06}"},
	} {
		for _, opset := range []int{13, 17, 23} {
			t.Run(fmt.Sprintf("%s/opset%d", c.config, opset), func(t *testing.T) {
				checkStructuralLift(t, c.config, c.want, opset)
			})
		}
	}
}

// The frontier model, its three attention layers one after
// another, is lifted by structure into the same three layers.
func TestLiftFrontierModel(t *testing.T) {
	const frontier = `# input: [2, 6, 32]
name: frontier
layers:
  - {name: a, type: attention.sdpa, d: 32, num_heads: 4, num_kv_heads: 2, causal: true, qk_norm: rms, sinks: true}
  - {name: l, type: attention.linear, d: 32, num_heads: 4, update_rule: gated_delta}
  - {name: m, type: attention.mla, d: 32, num_heads: 4, q_lora_rank: 16, kv_lora_rank: 8, qk_nope_head_dim: 8, qk_rope_head_dim: 4, v_head_dim: 8}
`
	for _, opset := range []int{17, 23} {
		t.Run(fmt.Sprintf("opset%d", opset), func(t *testing.T) {
			m, inputs := liftTestModel(t, frontier)
			pb, err := export.Model(m, export.Options{Opset: opset})
			require.NoError(t, err)
			pb.MetadataProps = nil
			res, err := lift.Lift(pb)
			require.NoError(t, err, "%v", res)
			assert.Equal(t, []string{"attention.sdpa", "attention.linear", "attention.mla"}, layerTypes(res.Config), res.Config)
			for seed := range uint64(2) {
				feeds := inputs(seed)
				want, err := m.Forward(nil, feeds["x"])
				require.NoError(t, err)
				got, err := res.Model.Forward(nil, feeds["x"])
				require.NoError(t, err)
				assertSameOutput(t, want, got)
			}
		})
	}
}

// What the structural lifts cannot read they name rather than lift it
// wrong: ALiBi whose slopes are not ALiBi's, documents not numbered in
// order.
func TestLiftDecomposedRefusals(t *testing.T) {
	m, _ := liftTestModel(t, "# input: [2, 5, 8]\nname: alibi\nlayers:\n  - {name: attn, type: attention.sdpa, d: 8, num_heads: 2, score_mod: {type: alibi}}\n")
	pb, err := export.Model(m, export.Options{Opset: 17})
	require.NoError(t, err)
	pb.MetadataProps = nil
	tampered := false
	for _, n := range pb.GetGraph().GetNode() {
		for _, a := range n.GetAttribute() {
			if tp := a.GetT(); n.GetOpType() == "Constant" && tp != nil && slices.Equal(tp.GetDims(), []int64{1, 2, 1, 1}) {
				tp.FloatData, tp.RawData = []float32{0.5, 0.5}, nil
				tampered = true
			}
		}
	}
	require.True(t, tampered, "no ALiBi slopes constant found")
	_, err = lift.Lift(pb)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "has slope 0.5 for head 0, ALiBi's is")
}

// document_mask whose table of document ids was changed with its table of document ids
// changed to skip a document number, which no lengths give.
func TestLiftDocumentMaskRefusal(t *testing.T) {
	m, _ := liftTestModel(t, "# input: [2, 5, 8]\nname: docs\nlayers:\n  - {name: attn, type: attention.sdpa, d: 8, num_heads: 2, score_mod: {type: document_mask, lengths: [2, 3]}}\n")
	pb, err := export.Model(m, export.Options{Opset: 17})
	require.NoError(t, err)
	pb.MetadataProps = nil
	tampered := false
	for _, n := range pb.GetGraph().GetNode() {
		for _, a := range n.GetAttribute() {
			if tp := a.GetT(); n.GetOpType() == "Constant" && tp != nil && slices.Equal(tp.GetDims(), []int64{5}) {
				d, err := onnxio.TensorToDense(tp)
				require.NoError(t, err)
				if ids, ok := d.Data().([]int64); ok && slices.Equal(ids, []int64{0, 0, 1, 1, 1}) {
					tp.Int64Data, tp.RawData = []int64{0, 0, 2, 2, 2}, nil
					tampered = true
				}
			}
		}
	}
	require.True(t, tampered, "no document ids constant found")
	_, err = lift.Lift(pb)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "do not number documents one after another")
}

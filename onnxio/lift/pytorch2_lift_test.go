package lift_test

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/lift"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// pytorch2Fixtures are PyTorch 2.15's exports (testdata/pytorch2/gen.py).
const pytorch2Fixtures = "../../testdata/pytorch2/fixtures"

// pytorch2Lifts lists the PyTorch 2.x fixtures that must lift without
// --partial, with the attention layer types of the lifted config (the
// other layers depend on the patterns registered: this package's tests
// register one of Linear and ReLU): the functional
// F.scaled_dot_product_attention as each exporter writes it (the
// TorchScript exporter and dynamo at opset 18 decompose it, √scale on Q and
// Kᵀ, IsNaN/Where for bool masks, Expand for GQA; dynamo at opset 23 writes
// the Attention op), the transformer block whose MLP uses ONNX's Gelu op
// (opset 20), and PyTorch's attention modules.
var pytorch2Lifts = []struct {
	fixture   string
	attention []string
}{
	{"sdpa_causal_ts17", []string{"attention.scaled_dot_product"}},
	{"sdpa_causal_dynamo18", []string{"attention.scaled_dot_product"}},
	{"sdpa_causal_dynamo23", []string{"attention.scaled_dot_product"}},
	{"sdpa_bool_mask_ts17", []string{"attention.scaled_dot_product"}},
	{"sdpa_bool_mask_dynamo18", []string{"attention.scaled_dot_product"}},
	{"sdpa_bool_mask_dynamo23", []string{"attention.scaled_dot_product"}},
	{"sdpa_float_mask_ts17", []string{"attention.scaled_dot_product"}},
	{"sdpa_float_mask_dynamo18", []string{"attention.scaled_dot_product"}},
	{"sdpa_float_mask_dynamo23", []string{"attention.scaled_dot_product"}},
	{"sdpa_gqa_dynamo18", []string{"attention.scaled_dot_product"}},
	{"sdpa_gqa_dynamo23", []string{"attention.scaled_dot_product"}},
	{"modules_transformer_block_dynamo23", []string{"attention.multihead"}},
	// nn.MultiheadAttention and nn.TransformerEncoderLayer with key padding
	// masks: dynamo at opset 18 drops out_proj's zero bias; the TorchScript
	// exports run only at the example's sequence lengths (probe_frozen.go).
	{"mha_padding_ts17", []string{"attention.torch_mha"}},
	{"mha_padding_dynamo18", []string{"attention.torch_mha"}},
	{"modules_torch_mha_cross_ts17", []string{"attention.torch_mha"}},
	{"modules_torch_mha_cross_dynamo18", []string{"attention.torch_mha"}},
	{"modules_torch_mha_causal_self_ts17", []string{"attention.multihead"}},
	{"encoder_layer_ts17", []string{"attention.torch_mha"}},
	{"encoder_layer_dynamo18", []string{"attention.torch_mha"}},
	{"encoder_layer_prenorm_ts17", []string{"attention.torch_mha"}},
	{"encoder_layer_prenorm_dynamo18", []string{"attention.torch_mha"}},
	// The same at opset 23, where their Attention op reads sequence-first
	// heads of a packed in_proj (attention_op_decompose.go).
	{"mha_padding_dynamo23", []string{"attention.torch_mha"}},
	{"modules_torch_mha_cross_dynamo23", []string{"attention.torch_mha"}},
	{"encoder_layer_dynamo23", []string{"attention.torch_mha"}},
	{"encoder_layer_prenorm_dynamo23", []string{"attention.torch_mha"}},
	// Hugging Face's sdpa attention through the TorchScript exporter: a
	// bool mask shared by the layers, each adding its Where(mask, 0, -inf).
	{"bert_sdpa_ts17", []string{"attention.sdpa", "attention.sdpa"}},
	{"bert_sdpa_dynamo18", []string{"attention.sdpa", "attention.sdpa"}}, // one Where shared by the layers
	// GPT-2's Conv1D on x.view(-1, d) (rows.go).
	{"gpt2_nocache_sdpa_ts17", []string{"attention.sdpa", "attention.sdpa"}},
	{"gpt2_nocache_sdpa_dynamo18", []string{"attention.sdpa", "attention.sdpa"}},
	// The Attention op reading a bool mask built from an int64
	// attention_mask, spelled out (attention_op_decompose.go).
	{"bert_sdpa_dynamo23", []string{"attention.sdpa", "attention.sdpa"}},
	{"distilbert_sdpa_dynamo23", []string{"attention.sdpa", "attention.sdpa"}},
	{"gpt2_nocache_sdpa_dynamo23", []string{"attention.sdpa", "attention.sdpa"}},
	// RoBERTa's positions from CumSum over the ids past the padding.
	{"roberta_sdpa_dynamo18", []string{"attention.sdpa", "attention.sdpa"}},
	// Hugging Face decoders with their KV cache in and out. Before opset
	// 23, PyTorch's decomposition of sdpa (√scale on Q and Kᵀ, the mask
	// from the int64 attention_mask added as Where(keep, 0, −Inf), the
	// weights' Where(IsNaN(w), 0, w)) with Llama's RoPE and repeat_kv; at
	// opset 23 the Attention op reading the mask built from the
	// attention_mask over past and new tokens (mask.padding, the causal
	// frontier, a length of its own tied to the keys': probe_ties.go),
	// with RoPE, GQA and QK-norm.
	{"llama_sdpa_ts17", []string{"attention.sdpa", "attention.sdpa"}},
	{"llama_sdpa_dynamo18", []string{"attention.sdpa", "attention.sdpa"}},
	{"gpt2_sdpa_ts17", []string{"attention.sdpa", "attention.sdpa"}},
	{"gpt2_sdpa_dynamo18", []string{"attention.sdpa", "attention.sdpa"}},
	{"gpt2_sdpa_dynamo23", []string{"attention.sdpa", "attention.sdpa"}},
	{"llama_sdpa_dynamo23", []string{"attention.sdpa", "attention.sdpa"}},
	{"mistral_sdpa_dynamo18", []string{"attention.sdpa", "attention.sdpa"}}, // sliding window 4
	{"mistral_sdpa_dynamo23", []string{"attention.sdpa", "attention.sdpa"}},
	// Sliding windows whose present returns every token (DynamicCache):
	// the lifted layers' resumed sessions keep them all.
	{"mistral_sdpa_ts17", []string{"attention.sdpa", "attention.sdpa"}},
	{"gemma2_eager_ts17", []string{"attention.sdpa", "attention.sdpa"}},
	// Eager attention at opset 23: finfo.min masks; the self-check's masks
	// leave a key in every window.
	{"gemma2_eager_dynamo23", []string{"attention.sdpa", "attention.sdpa"}},
	// OPT's learned positions from CumSum(attention_mask), sliced past
	// the past tokens (position.padded, input: attention_mask).
	{"opt_sdpa_ts17", []string{"attention.sdpa", "attention.sdpa"}},
	// GPT-NeoX: query_key_value packed per head, view (B, T, H, 3·d)
	// sliced after the Transpose; rotary_pct 0.25 (rope_rotary_dim 4).
	{"gpt_neox_sdpa_ts17", []string{"attention.sdpa", "attention.sdpa"}},
	// Falcon: multi-query query_key_value viewed as (B, T, H+2, d), the
	// queries sliced from it, the key and the value gathered (GatherND) from
	// a transposed view; Kᵀ by 3-D Transposes; one key head broadcast.
	{"falcon_sdpa_dynamo18", []string{"attention.sdpa", "attention.sdpa"}},
	{"gemma2_eager_dynamo18", []string{"attention.sdpa", "attention.sdpa"}}, // softcap 1 (tanh alone), a sliding-window and a global mask from one attention_mask
	{"qwen3_sdpa_ts17", []string{"attention.sdpa", "attention.sdpa"}},
	{"qwen3_sdpa_dynamo18", []string{"attention.sdpa", "attention.sdpa"}},
	{"qwen3_sdpa_dynamo23", []string{"attention.sdpa", "attention.sdpa"}},
	// Architectures tried after the ones above, from the same patterns:
	// ELECTRA's embeddings projected to the hidden width, XLM-RoBERTa's
	// positions from input_ids, ALBERT's one layer run twice (its weights
	// lift into both layers), GPTBigCode's multi-query c_attn.
	{"electra_sdpa_ts17", []string{"attention.sdpa", "attention.sdpa"}},
	{"xlm_roberta_sdpa_ts17", []string{"attention.sdpa", "attention.sdpa"}},
	{"albert_sdpa_ts17", []string{"attention.sdpa", "attention.sdpa"}},
	{"gpt_bigcode_sdpa_ts17", []string{"attention.sdpa", "attention.sdpa"}},
	// Granite's constant multipliers: the embedding's scale, an nn.scale
	// on each sublayer's output before the residual sum and on the logits,
	// attention_multiplier as the attention's scale. OLMo-2's RMSNorm over
	// the whole q and k projections (qk_norm: rms_projection), its rotated
	// heads cast back to float32, norms after attention and MLP.
	{"granite_sdpa_dynamo18", []string{"attention.sdpa", "attention.sdpa"}},
	{"olmo2_sdpa_ts17", []string{"attention.sdpa", "attention.sdpa"}},
	// ModernBERT: Wqkv viewed as (B, T, 3, H, d) and split on the 3, RoPE
	// between float32 Casts, and a local layer whose mask keeps the keys
	// within 2 positions on either side (window: 5 without causal).
	{"modernbert_sdpa_ts17", []string{"attention.sdpa", "attention.sdpa"}},
	// Cohere at opset 23: the Attention op over queries and keys rotated
	// by interleaved pairs out of standard ops (stack(−x[…, 1::2],
	// x[…, ::2]) flattened), its LayerNorm without bias as an
	// RMSNormalization of the centred input, attention and MLP in
	// parallel from one norm, logits scaled by nn.scale, the KV cache.
	{"cohere_sdpa_dynamo23", []string{"attention.sdpa", "attention.sdpa"}},
}

// The lift says how it read what it could not read as written: the sizes
// a frozen TorchScript export runs at, an Attention op spelled out; and an
// Attention op that cannot be lifted either way is reported as the graph
// names it, not as the nodes that spelled it out.
func TestLiftPyTorch2Notes(t *testing.T) {
	for fixture, want := range map[string]string{
		"mha_padding_ts17":     "it runs at batch=2, sequence=6 (found among the sizes its Reshape targets are built from",
		"mha_padding_dynamo23": `Attention node(s) "node_scaled_dot_product_attention" read as the MatMul, Softmax and masks they compute`,
	} {
		m, err := onnxio.ReadModel(filepath.Join(pytorch2Fixtures, fixture, "model.onnx"))
		require.NoError(t, err)
		res, err := lift.Lift(m)
		require.NoError(t, err, fixture)
		assert.Contains(t, strings.Join(res.Notes, "\n"), want, fixture)
	}
	// nn.MultiheadAttention's padding mask filled with 5 instead of -inf:
	// a bias, which neither reading lifts.
	m, err := onnxio.ReadModel(filepath.Join(pytorch2Fixtures, "mha_padding_dynamo23", "model.onnx"))
	require.NoError(t, err)
	tampered := false
	for _, init := range m.GetGraph().GetInitializer() {
		if init.GetName() == "val_9" {
			require.Equal(t, []byte{0, 0, 0x80, 0xff}, init.GetRawData(), "val_9 is no longer the mask's -inf")
			init.RawData = []byte{0, 0, 0xa0, 0x40} // 5
			tampered = true
		}
	}
	require.True(t, tampered)
	res, err := lift.Lift(m)
	var unlifted *lift.UnliftedError
	require.ErrorAs(t, err, &unlifted)
	var ops []string
	for _, u := range res.Unlifted {
		assert.NotContains(t, u.Node, "__lift_", "a node of the spelled-out reading is reported")
		ops = append(ops, u.Op)
	}
	assert.Contains(t, ops, "Attention")
}

// attentionTypes lists the attention.* layer types of a config, in order.
func attentionTypes(config string) []string {
	var out []string
	for _, typ := range layerTypes(config) {
		if strings.HasPrefix(typ, "attention.") {
			out = append(out, typ)
		}
	}
	return out
}

// TestLiftPyTorch2Fixtures lifts each fixture of pytorch2Lifts, checks its
// layer types, and runs the lifted model on the fixture's test-data sets
// against PyTorch's outputs at 1e-5 relative / 1e-6 absolute.
func TestLiftPyTorch2Fixtures(t *testing.T) {
	for _, c := range pytorch2Lifts {
		t.Run(c.fixture, func(t *testing.T) {
			dir := filepath.Join(pytorch2Fixtures, c.fixture)
			m, err := onnxio.ReadModel(filepath.Join(dir, "model.onnx"))
			require.NoError(t, err)
			res, err := lift.Lift(m)
			require.NoError(t, err)
			require.NotNil(t, res.Model)
			assert.Equal(t, c.attention, attentionTypes(res.Config), res.Config)
			checkDataSets(t, dir, res)
		})
	}
}

// Granite's and OLMo-2's lifted layers, in order: Granite's multipliers
// as the embedding's scale (embedding_multiplier 2), the attention's scale
// (attention_multiplier 0.1), an nn.scale of each sublayer's output
// (residual_multiplier 0.5) and one dividing the logits (logits_scaling
// 2); OLMo-2's norms of the whole projections in the attention and
// norm.rms after each sublayer, before its residual sum.
func TestLiftGraniteAndOLMo2Layers(t *testing.T) {
	graniteBlock := []string{"attention.sdpa", "nn.scale, factor: 0.5}", "nn.add", "norm.rms", "nn.mlp", "nn.scale, factor: 0.5}", "nn.add"}
	olmo2Block := []string{"attention.sdpa", "norm.rms", "nn.add", "nn.mlp", "norm.rms", "nn.add"}
	for fixture, want := range map[string][]string{
		"granite_sdpa_dynamo18": slices.Concat(
			[]string{"nn.embedding, num_embeddings: 32, embedding_dim: 64, scale: 2}", "norm.rms", "mask.padding"}, graniteBlock,
			[]string{"norm.rms"}, graniteBlock, []string{"norm.rms", "nn.linear", "nn.scale, divisor: 2}"}),
		"olmo2_sdpa_ts17": slices.Concat([]string{"nn.embedding", "mask.padding"}, olmo2Block, olmo2Block, []string{"norm.rms", "nn.linear"}),
	} {
		m, err := onnxio.ReadModel(filepath.Join(pytorch2Fixtures, fixture, "model.onnx"))
		require.NoError(t, err)
		res, err := lift.Lift(m)
		require.NoError(t, err, fixture)
		var got []string
		for _, line := range strings.Split(res.Config, "\n") {
			if _, rest, ok := strings.Cut(line, " type: "); ok && strings.HasPrefix(strings.TrimSpace(line), "- {") {
				got = append(got, rest)
			}
		}
		require.Len(t, got, len(want), res.Config)
		for i, w := range want {
			typ, fields, _ := strings.Cut(w, ", ")
			assert.True(t, strings.HasPrefix(got[i], typ+",") || got[i] == typ+"}", "layer %d of %s is %q, want %s", i, fixture, got[i], typ)
			if fields != "" {
				assert.True(t, strings.HasSuffix(got[i], fields), "layer %d of %s is %q, want it to end in %q", i, fixture, got[i], fields)
			}
		}
		for _, l := range got {
			if strings.HasPrefix(l, "attention.sdpa,") {
				if fixture == "olmo2_sdpa_ts17" {
					assert.Contains(t, l, "qk_norm: rms_projection, qk_norm_eps: 1e-05}", fixture)
				} else {
					assert.Contains(t, l, "scale: 0.1, rope: half}", fixture)
				}
			}
		}
	}
}

// The configs say what PyTorch's call said: the scale of
// scaled_dot_product_attention(scale=0.3) (√0.3 on Q and on Kᵀ), a bool
// mask that attends where True, the NaN of a plain softmax where the graph
// does not zero them, and the Attention op's is_causal.
func TestLiftPyTorch2SDPAConfigs(t *testing.T) {
	for fixture, want := range map[string]string{
		"sdpa_float_mask_ts17":    "inputs: [query, key, value, attn_mask], scale: 0.3, mask: additive, masked_rows: nan}",
		"sdpa_bool_mask_dynamo18": "inputs: [query, key, value, attn_mask], mask: bool, mask_polarity: keep}",
		"sdpa_gqa_dynamo23":       "inputs: [query, key, value], causal: true}",
		"sdpa_causal_ts17":        "inputs: [query, key, value], causal: true}",
	} {
		m, err := onnxio.ReadModel(filepath.Join(pytorch2Fixtures, fixture, "model.onnx"))
		require.NoError(t, err)
		res, err := lift.Lift(m)
		require.NoError(t, err, fixture)
		assert.Contains(t, res.Config, "type: attention.scaled_dot_product, "+want, fixture)
	}
}

// ModernBERT lifts as it is built: global attention with RoPE of base
// 160000, then local attention of 2 keys on either side of the query
// with RoPE of base 10000, neither causal, both reading the padding of
// attention_mask.
func TestLiftModernBERTConfig(t *testing.T) {
	m, err := onnxio.ReadModel(filepath.Join(pytorch2Fixtures, "modernbert_sdpa_ts17", "model.onnx"))
	require.NoError(t, err)
	res, err := lift.Lift(m)
	require.NoError(t, err)
	var attns []string
	for _, line := range strings.Split(res.Config, "\n") {
		if strings.Contains(line, "type: attention.sdpa") {
			attns = append(attns, line)
		}
	}
	require.Len(t, attns, 2, res.Config)
	assert.Contains(t, attns[0], "causal: false, mask: bool, mask_polarity: keep, rope: half, rope_base: 160000}")
	assert.Contains(t, attns[1], "causal: false, window: 5, mask: bool, mask_polarity: keep, rope: half}")
}

// ONNX's Gelu op lifts with its approximate attribute, "none" or "tanh":
// alone as activation.gelu, and as nn.mlp's activation between Linears.
// The lifted model gives PyTorch's formulas, computed here in float64.
func TestLiftGeluOp(t *testing.T) {
	formulas := map[string]func(float64) float64{
		"none": func(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) },
		"tanh": func(x float64) float64 {
			return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
		},
	}
	for approximate, gelu := range formulas {
		t.Run(approximate, func(t *testing.T) {
			dims := []onnxio.Dim{onnxio.SymbolicDim("batch"), onnxio.SymbolicDim("sequence"), onnxio.FixedDim(3)}
			m := &onnxpb.ModelProto{
				IrVersion:   proto.Int64(9),
				OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(20)}},
				Graph: &onnxpb.GraphProto{
					Name: proto.String("gelu"),
					Node: []*onnxpb.NodeProto{{OpType: proto.String("Gelu"), Name: proto.String("gelu"), Input: []string{"x"}, Output: []string{"y"},
						Attribute: []*onnxpb.AttributeProto{{Name: proto.String("approximate"), Type: onnxpb.AttributeProto_STRING.Enum(), S: []byte(approximate)}}}},
					Input:  []*onnxpb.ValueInfoProto{onnxio.TensorValueInfo("x", onnxio.Float, dims)},
					Output: []*onnxpb.ValueInfoProto{onnxio.TensorValueInfo("y", onnxio.Float, dims)},
				},
			}
			res, err := lift.Lift(m)
			require.NoError(t, err)
			assert.Contains(t, res.Config, "type: activation.gelu, approximate: "+approximate+"}")
			x := []float32{-3, -1, -0.25, 0, 0.5, 2}
			y, err := res.Model.Forward(nil, tensor.New(tensor.WithShape(1, 2, 3), tensor.WithBacking(x)))
			require.NoError(t, err)
			for i, v := range y.Data().([]float32) {
				want := gelu(float64(x[i]))
				assert.InDelta(t, want, float64(v), 1e-6+1e-5*math.Abs(want), fmt.Sprintf("gelu(%g)", x[i]))
			}
		})
	}
	// In the transformer block, the tanh form makes the MLP's activation
	// gelu_tanh (the lift runs the model against the changed graph).
	m, err := onnxio.ReadModel(filepath.Join(pytorch2Fixtures, "modules_transformer_block_dynamo23", "model.onnx"))
	require.NoError(t, err)
	changed := 0
	for _, n := range m.GetGraph().GetNode() {
		for _, a := range n.GetAttribute() {
			if n.GetOpType() == "Gelu" && a.GetName() == "approximate" {
				require.Equal(t, "none", string(a.GetS()))
				a.S = []byte("tanh")
				changed++
			}
		}
	}
	require.Equal(t, 1, changed)
	res, err := lift.Lift(m)
	require.NoError(t, err)
	assert.Contains(t, res.Config, "activation: gelu_tanh")
}

// RoBERTa's positions count the tokens that are not padding (id 1): the
// fixture's data pad with id 0, so the lifted model is run here against
// the graph on ids with padding tokens inside and at the ends.
func TestLiftRobertaPositions(t *testing.T) {
	m, err := onnxio.ReadModel(filepath.Join(pytorch2Fixtures, "roberta_sdpa_dynamo18", "model.onnx"))
	require.NoError(t, err)
	res, err := lift.Lift(m)
	require.NoError(t, err)
	assert.Contains(t, res.Config, "type: position.padded, inputs: [input_ids], num_embeddings: 32, embedding_dim: 64, padding_idx: 1}")
	ints := func(v ...int64) *tensor.Dense { return tensor.New(tensor.WithShape(2, 6), tensor.WithBacking(v)) }
	feeds := map[string]*tensor.Dense{
		"input_ids":      ints(1, 5, 1, 7, 9, 1, 4, 1, 1, 3, 2, 8),
		"attention_mask": ints(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0),
		"token_type_ids": ints(0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 1, 1),
	}
	g, err := exec.New(m)
	require.NoError(t, err)
	want, err := g.Run(feeds)
	require.NoError(t, err)
	var inputs []*tensor.Dense
	for _, name := range []string{"input_ids", "attention_mask", "token_type_ids"} {
		inputs = append(inputs, feeds[name])
	}
	got, err := res.Model.Forward(nil, inputs...)
	require.NoError(t, err)
	assertClose(t, want["last_hidden_state"], got, "last_hidden_state")
}

// What attention.scaled_dot_product cannot compute is refused with the
// reason: a static mask that adds a bias rather than hiding future keys,
// and an Attention op that soft-caps its scores.
func TestLiftScaledDotProductRefusals(t *testing.T) {
	m, err := onnxio.ReadModel(filepath.Join(pytorch2Fixtures, "sdpa_causal_ts17", "model.onnx"))
	require.NoError(t, err)
	changed := false
	for _, n := range m.GetGraph().GetNode() {
		if n.GetName() == "/Constant_7" { // the -inf of the causal mask
			n.GetAttribute()[0].GetT().RawData = []byte{0, 0, 0x40, 0x40} // 3
			changed = true
		}
	}
	require.True(t, changed)
	_, err = lift.Lift(m)
	require.ErrorContains(t, err, "F.scaled_dot_product_attention on graph inputs: a static mask added to the scores is not causal: query 0, key 1 holds 3")

	m, err = onnxio.ReadModel(filepath.Join(pytorch2Fixtures, "sdpa_causal_dynamo23", "model.onnx"))
	require.NoError(t, err)
	changed = false
	for _, n := range m.GetGraph().GetNode() {
		for _, a := range n.GetAttribute() {
			if n.GetOpType() == "Attention" && a.GetName() == "softcap" {
				a.F = proto.Float32(5)
				changed = true
			}
		}
	}
	require.True(t, changed)
	_, err = lift.Lift(m)
	require.ErrorContains(t, err, "Attention op on graph inputs: softcap 5")
}

// GPT-NeoX's query_key_value packs each head's query, key and value side
// by side: the mapping table names the rows each head's block takes.
func TestLiftNeoXPackedHeadsMapping(t *testing.T) {
	m, err := onnxio.ReadModel(filepath.Join(pytorch2Fixtures, "gpt_neox_sdpa_ts17", "model.onnx"))
	require.NoError(t, err)
	res, err := lift.Lift(m)
	require.NoError(t, err)
	var k []string
	for _, mp := range res.Mapping {
		if mp.Param == "attention.k_proj.weight" {
			k = append(k, mp.Initializer+": "+mp.Transform)
		}
	}
	assert.Equal(t, []string{
		"onnx::MatMul_559: transposed, split rows 16:32, into rows 0:16",
		"onnx::MatMul_559: transposed, split rows 64:80, into rows 16:32",
		"onnx::MatMul_559: transposed, split rows 112:128, into rows 32:48",
		"onnx::MatMul_559: transposed, split rows 160:176, into rows 48:64",
	}, k)
}

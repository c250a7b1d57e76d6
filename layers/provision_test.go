package layers

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/registry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// shapeCases are configs of every built-in layer type, with input shapes
// the forward pass accepts and shapes it refuses.
var shapeCases = []struct {
	id, config string
	good, bad  [][]tensor.Shape
}{
	{"attention.simple", "{scaled: true}", [][]tensor.Shape{{{6, 3}}, {{2, 6, 3}}}, [][]tensor.Shape{{{3}}, {{6, 3}, {6, 3}}}},
	{"attention.self", "{d_in: 3, d_out: 2, weights: linear}", [][]tensor.Shape{{{6, 3}}, {{2, 6, 3}}}, [][]tensor.Shape{{{6, 4}}}},
	{"attention.self", "{d_in: 3, d_out: 2, weights: matrix}", [][]tensor.Shape{{{6, 3}}}, [][]tensor.Shape{{{1, 1, 6, 3}}}},
	{"attention.causal", "{d_in: 3, d_out: 2, context_length: 6, qkv_bias: true}", [][]tensor.Shape{{{6, 3}}, {{2, 4, 3}}}, [][]tensor.Shape{{{7, 3}}, {{6, 2}}}},
	{"attention.multihead_wrapper", "{d_in: 3, d_out: 2, context_length: 6, num_heads: 3}", [][]tensor.Shape{{{6, 3}}, {{2, 6, 3}}}, [][]tensor.Shape{{{2, 7, 3}}}},
	{"attention.multihead", "{d_in: 3, d_out: 4, context_length: 6, num_heads: 2}", [][]tensor.Shape{{{5, 3}}, {{2, 6, 3}}}, [][]tensor.Shape{{{2, 7, 3}}, {{5, 4}}}},
	{"attention.average", "{}", [][]tensor.Shape{{{5, 3}}, {{2, 6, 3}}}, [][]tensor.Shape{{}}},
	{"attention.sdpa", "{d: 8, num_heads: 2, num_kv_heads: 1, causal: true, rope: half}", [][]tensor.Shape{{{5, 8}}, {{2, 6, 8}}}, [][]tensor.Shape{{{5, 6}}}},
	{"attention.sdpa", "{d: 8, num_heads: 2, d_memory: 4, out_name: o_proj, out_bias: false}", [][]tensor.Shape{{{2, 5, 8}, {2, 3, 4}}}, [][]tensor.Shape{{{2, 5, 8}, {3, 3, 4}}, {{2, 5, 8}, {2, 3, 8}}}},
	{"attention.sdpa", "{d: 8, num_heads: 2, mask: additive}", [][]tensor.Shape{{{2, 5, 8}, {5, 5}}}, [][]tensor.Shape{{{2, 5, 8}}}},
	{"attention.sdpa", "{d: 8, num_heads: 2, causal: true, qk_norm: rms, sinks: true}", [][]tensor.Shape{{{5, 8}}}, nil},
	{"attention.sdpa", "{d: 8, num_heads: 2, num_kv_heads: 1, causal: true, qk_norm: rms_projection}", [][]tensor.Shape{{{2, 5, 8}}}, nil},
	{"attention.sdpa", "{d: 8, num_heads: 2, score_mod: [{type: softcap, cap: 30}, {type: relative_bias, max_distance: 4}]}", [][]tensor.Shape{{{2, 5, 8}}}, [][]tensor.Shape{{{5, 4}}}},
	{"attention.linear", "{d: 8, num_heads: 2, update_rule: gated_delta}", [][]tensor.Shape{{{5, 8}}, {{2, 3, 8}}}, [][]tensor.Shape{{{5, 6}}}},
	{"attention.linear", "{d: 8, num_heads: 2, update_rule: linear, qk_l2norm: false}", [][]tensor.Shape{{{5, 8}}}, nil},
	{"attention.mla", "{d: 32, num_heads: 4, q_lora_rank: 16, kv_lora_rank: 8, qk_nope_head_dim: 8, qk_rope_head_dim: 4, v_head_dim: 8}", [][]tensor.Shape{{{5, 32}}, {{2, 3, 32}}}, [][]tensor.Shape{{{5, 8}}}},
	{"attention.mla", "{d: 32, num_heads: 4, kv_lora_rank: 8, qk_nope_head_dim: 8, qk_rope_head_dim: 4, v_head_dim: 8, attention_bias: true}", [][]tensor.Shape{{{5, 32}}}, nil},
	{"attention.torch_mha", "{embed_dim: 8, num_heads: 2}", [][]tensor.Shape{{{5, 2, 8}}, {{5, 8}}, {{5, 2, 8}, {3, 2, 8}}}, [][]tensor.Shape{{{5, 2, 8}, {3, 3, 8}}}},
	{"attention.torch_mha", "{embed_dim: 8, num_heads: 2, kdim: 4, vdim: 6, batch_first: true, add_bias_kv: true}", [][]tensor.Shape{{{2, 5, 8}, {2, 3, 4}, {2, 3, 6}}}, [][]tensor.Shape{{{2, 5, 8}, {2, 3, 4}, {2, 4, 6}}, {{2, 5, 8}, {2, 3, 6}, {2, 3, 6}}}},
	{"attention.torch_mha", "{embed_dim: 8, num_heads: 4, bias: false, add_zero_attn: true}", [][]tensor.Shape{{{5, 8}}}, nil},
	{"nn.linear", "{d_in: 3, d_out: 5}", [][]tensor.Shape{{{4, 3}}, {{2, 4, 3}}}, [][]tensor.Shape{{{4, 5}}}},
	{"nn.linear", "{d_in: 3, d_out: 5, bias: false}", [][]tensor.Shape{{{4, 3}}}, nil},
	{"nn.linear_integer", "{d_in: 3, d_out: 5, per_channel: true}", [][]tensor.Shape{{{4, 3}}, {{2, 4, 3}}}, [][]tensor.Shape{{{4, 5}}}},
	{"nn.linear_integer", "{d_in: 3, d_out: 5, bias: false, input_type: int8, weight_type: uint8}", [][]tensor.Shape{{{4, 3}}}, nil},
	{"nn.mlp", "{d: 4, d_hidden: 8}", [][]tensor.Shape{{{3, 4}}}, [][]tensor.Shape{{{3, 8}}}},
	{"nn.mlp", "{d: 4, d_hidden: 8, gated: true, activation: silu, bias: false}", [][]tensor.Shape{{{2, 3, 4}}}, nil},
	{"nn.moe", "{d: 4, d_hidden: 8, experts: 3, shared_d_hidden: 5}", [][]tensor.Shape{{{3, 4}}, {{2, 3, 4}}}, [][]tensor.Shape{{{3, 8}}}},
	{"nn.patch_embedding", "{channels: 2, image_size: 4, patch_size: 2, d_out: 3, cls_token: true, positions: true}", [][]tensor.Shape{{{2, 2, 4, 4}}, {{1, 2, 4, 4}}}, [][]tensor.Shape{{{2, 3, 4, 4}}, {{2, 2, 4, 6}}, {{2, 4, 4}}}},
	{"position.learned", "{context_length: 6, d: 3}", [][]tensor.Shape{{{6, 3}}, {{2, 4, 3}}}, [][]tensor.Shape{{{7, 3}}, {{6, 4}}}},
	{"position.sinusoidal", "{d: 6}", [][]tensor.Shape{{{5, 6}}}, [][]tensor.Shape{{{5, 4}}}},
	{"position.rope", "{head_dim: 4}", [][]tensor.Shape{{{5, 8}}, {{2, 5, 4}}}, [][]tensor.Shape{{{5, 6}}}},
	{"position.alibi", "{num_heads: 3, causal: true}", [][]tensor.Shape{{{5, 8}}, {{2, 4, 8}}}, [][]tensor.Shape{{{8}}}},
	{"norm.layer", "{d: 4}", [][]tensor.Shape{{{3, 4}}}, [][]tensor.Shape{{{3, 5}}}},
	{"norm.layer", "{d: 4, elementwise_affine: false}", [][]tensor.Shape{{{2, 3, 4}}}, nil},
	{"norm.rms", "{d: 4}", [][]tensor.Shape{{{3, 4}}}, [][]tensor.Shape{{{3, 5}}}},
	{"activation.gelu", "{}", [][]tensor.Shape{{{3, 4}}}, [][]tensor.Shape{{{3, 4}, {3, 4}}}},
	{"nn.dropout", "{p: 0.1}", [][]tensor.Shape{{{3, 4}}}, [][]tensor.Shape{{{0, 4}}}},
	{"nn.concat", "{}", [][]tensor.Shape{{{3, 4}, {3, 2}}, {{2, 3, 4}}}, [][]tensor.Shape{{{3, 4}, {2, 2}}, {{3, 4}, {1, 3, 4}}, {}}},
	{"nn.add", "{}", [][]tensor.Shape{{{3, 4}, {3, 4}, {3, 4}}}, [][]tensor.Shape{{{3, 4}, {3, 5}}}},
	{"nn.embedding", "{num_embeddings: 5, embedding_dim: 3, padding_idx: 0}", [][]tensor.Shape{{{4}}, {{2, 4}}}, [][]tensor.Shape{{{1, 2, 3}}, {{4}, {4}}}},
	{"nn.linear", "{d_in: 3, d_out: 5, tied_weight: wte.weight}", nil, nil},
	{"position.learned", "{context_length: 6, d: 3, offset: 2}", [][]tensor.Shape{{{6, 3}}, {{2, 4, 3}}}, [][]tensor.Shape{{{7, 3}}, {{6, 4}}}},
	{"pool.mean", "{}", [][]tensor.Shape{{{2, 5, 3}}, {{2, 5, 3}, {2, 5}}, {{5, 3}, {5}}}, [][]tensor.Shape{{{2, 5, 3}, {2, 4}}, {{5}}}},
	{"nn.scale", "{factor: 0.5}", [][]tensor.Shape{{{3, 4}}, {{2, 3, 4}}}, [][]tensor.Shape{{{3, 4}, {3, 4}}}},
	{"nn.scale", "{divisor: 3}", [][]tensor.Shape{{{2, 3, 4}}}, [][]tensor.Shape{{}}},
	{"activation.softcap", "{cap: 2}", [][]tensor.Shape{{{3, 4}}, {{2, 3, 4}}}, [][]tensor.Shape{{{3, 4}, {3, 4}}}},
	{"mask.padding", "{}", [][]tensor.Shape{{{2, 5}}}, [][]tensor.Shape{{{5}}, {{2, 5}, {2, 5}}}},
	{"attention.scaled_dot_product", "{causal: true}", [][]tensor.Shape{{{2, 4, 5, 8}, {2, 2, 5, 8}, {2, 2, 5, 6}}}, [][]tensor.Shape{{{2, 4, 5, 8}, {2, 3, 5, 8}, {2, 3, 5, 8}}, {{5, 8}, {5, 8}, {5, 8}}}},
	{"attention.scaled_dot_product", "{mask: bool, mask_polarity: keep}", [][]tensor.Shape{{{1, 2, 3, 4}, {1, 2, 5, 4}, {1, 2, 5, 4}, {1, 1, 3, 5}}}, [][]tensor.Shape{{{1, 2, 3, 4}, {1, 2, 5, 4}, {1, 2, 5, 4}, {3, 4}}, {{1, 2, 3, 4}, {1, 2, 5, 4}, {1, 2, 5, 4}}}},
	{"position.padded", "{num_embeddings: 8, embedding_dim: 3, padding_idx: 1}", [][]tensor.Shape{{{4}}, {{2, 4}}}, [][]tensor.Shape{{{1, 2, 3}}, {{4}, {4}}}},
	{"nn.normalize", "{}", [][]tensor.Shape{{{3, 4}}, {{2, 3, 4}}}, [][]tensor.Shape{{{3, 4}, {3, 4}}}},
	{"mask.additive", "{fill: -10000}", [][]tensor.Shape{{{2, 5}}}, [][]tensor.Shape{{{5}}, {{2, 5}, {2, 5}}}},
	{"mask.context", "{}", [][]tensor.Shape{{{2, 5, 3}, {2, 1, 8, 8}}, {{5, 3}, {1, 1, 5, 6}}}, [][]tensor.Shape{{{2, 5, 3}}, {{2, 5, 3}, {3, 1, 8, 8}}, {{2, 5, 3}, {2, 1, 4, 8}}, {{2, 5, 3}, {2, 8, 8}}}},
	{"mask.lengths", "{}", [][]tensor.Shape{{{2}, {2, 5, 3}}}, [][]tensor.Shape{{{2}}, {{3}, {2, 5, 3}}, {{2, 5}, {2, 5, 3}}}},
	{"nn.transpose", "{}", [][]tensor.Shape{{{2, 5, 3}}, {{5, 3}}}, [][]tensor.Shape{{{3}}}},
	{"nn.transpose", "{dim0: 1, dim1: 2}", [][]tensor.Shape{{{2, 5, 3}}}, [][]tensor.Shape{{{5, 3}}}},
	{"nn.select", "{index: 1}", [][]tensor.Shape{{{2, 5, 3}}, {{5, 3}}}, [][]tensor.Shape{{{3}}, {{2, 5, 1}}}},
	{"pool.first", "{}", [][]tensor.Shape{{{2, 5, 3}}, {{5, 3}}}, [][]tensor.Shape{{{3}}, {{2, 5, 3}, {2, 5}}}},
}

// TestPlanParamsMatchesProvision checks, for every layer type with
// parameters, that PlanParams lists exactly the names and shapes Params
// lists after Provision, allocating nothing, and that Provision reserves
// their bytes (with ParamOverhead each) from the budget.
func TestPlanParamsMatchesProvision(t *testing.T) {
	for _, tt := range shapeCases {
		t.Run(tt.id+" "+tt.config, func(t *testing.T) {
			l := fromYAML(t, tt.id, tt.config)
			p, ok := l.(registry.Provisioner)
			if !ok {
				require.NoError(t, l.Validate())
				require.Empty(t, l.Params(), "a layer with parameters must be a Provisioner")
				return
			}
			plan, err := p.PlanParams()
			require.NoError(t, err)
			require.Empty(t, l.Params(), "PlanParams allocated the parameters")

			mem := budget.New(1 << 30)
			require.NoError(t, p.Provision(mem))
			got := []registry.ParamShape{}
			var bytes int64
			for _, param := range l.Params() {
				got = append(got, registry.ParamShape{Name: param.Name, Shape: []int(param.Value.Shape())})
				bytes += int64(4*param.Value.Shape().TotalSize()) + registry.ParamOverhead
			}
			require.Equal(t, got, plan)
			require.Equal(t, bytes, mem.Used())
		})
	}
}

// TestProvisionOverBudget checks that a config over the budget is refused
// before anything is allocated: no parameters, nothing left reserved.
func TestProvisionOverBudget(t *testing.T) {
	tests := []struct {
		id, config, want string
	}{
		{"nn.linear", "{d_in: 65536, d_out: 65536}", "storage for 2 parameters (the largest: weight of shape (65536, 65536)) needs 16 GiB, over the memory budget of 1 MiB"},
		{"attention.multihead_wrapper", "{d_in: 1, d_out: 1, context_length: 1, num_heads: 65536}",
			"storage for 196608 parameters (the largest: heads.0.W_query.weight of shape (1, 1)) needs 96.8 MiB, over the memory budget of 1 MiB"},
		{"attention.torch_mha", "{embed_dim: 1024, num_heads: 8}", "storage for 4 parameters (the largest: in_proj_weight of shape (3072, 1024)) needs 16"},
		{"attention.sdpa", "{d: 4096, num_heads: 32}", "over the memory budget of 1 MiB"},
		{"position.learned", "{context_length: 1000000, d: 1000000}", "parameter weight of shape (1000000, 1000000) needs 3.6 TiB"},
		{"nn.mlp", "{d: 1024, d_hidden: 4096, gated: true}", "storage for 6 parameters (the largest: gate_proj.weight of shape (4096, 1024)) needs 48"},
		{"norm.layer", "{d: 1000000}", "storage for 2 parameters (the largest: weight of shape (1000000,))"},
		{"attention.self", "{d_in: 4096, d_out: 4096, weights: matrix}", "storage for 3 parameters (the largest: W_query of shape (4096, 4096)) needs 192"},
		{"attention.sdpa", "{d: 8, num_heads: 65536, head_dim: 1, score_mod: {type: relative_bias, max_distance: 100000}}", "the largest: score_mod.bias of shape (65536, 199999)"},
		{"attention.linear", "{d: 4096, num_heads: 32}", "over the memory budget of 1 MiB"},
		{"attention.mla", "{d: 4096, num_heads: 64, kv_lora_rank: 512, qk_nope_head_dim: 128, qk_rope_head_dim: 64, v_head_dim: 128}", "over the memory budget of 1 MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			l := fromYAML(t, tt.id, tt.config).(registry.Provisioner)
			mem := budget.New(1 << 20)
			err := l.Provision(mem)
			require.ErrorContains(t, err, tt.want)
			require.True(t, errors.Is(err, budget.ErrExceeded), "%v", err)
			require.Empty(t, l.Params())
			require.Zero(t, mem.Used())
		})
	}
}

// TestWrapperHeadLimit: 114 bytes of YAML asking for 10⁸ heads used to
// build 10⁸ modules (4 GB and more before the first error); the head count
// is bounded like attention.sdpa's before anything is planned.
func TestWrapperHeadLimit(t *testing.T) {
	l := fromYAML(t, "attention.multihead_wrapper", "{d_in: 1, d_out: 1, context_length: 1, num_heads: 100000000}")
	_, err := l.(registry.Provisioner).PlanParams()
	require.EqualError(t, err, "num_heads 100000000 is above the limit of 65536")
	require.EqualError(t, l.Validate(), "num_heads 100000000 is above the limit of 65536")
}

// TestOutputShapeMatchesForward checks every layer type's OutputShape
// against the shape its Forward returns, and that both refuse the same
// bad shapes.
func TestOutputShapeMatchesForward(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tt := range shapeCases {
		t.Run(tt.id+" "+tt.config, func(t *testing.T) {
			l := fromYAML(t, tt.id, tt.config)
			shaper, ok := l.(registry.OutputShaper)
			require.True(t, ok, "%s is not a registry.OutputShaper", tt.id)
			validated(t, l, 1)
			if tt.id == "nn.linear_integer" { // quantized parameters hold integers (of uint8 or int8)
				for _, p := range l.Params() {
					for i, v := range floats(p.Value) {
						floats(p.Value)[i] = float32(math.Abs(math.Round(float64(v))))
					}
				}
			}
			inputs := func(shapes []tensor.Shape) []*tensor.Dense {
				var xs []*tensor.Dense
				for _, s := range shapes {
					if s.TotalSize() == 0 || len(s) == 0 {
						xs = append(xs, tensor.New(tensor.WithShape(1), tensor.WithBacking([]float32{0})))
						continue
					}
					if tt.id == "nn.embedding" || tt.id == "position.padded" || tt.id == "nn.linear_integer" { // token ids, quantized tokens
						xs = append(xs, tensor.New(tensor.WithShape(s...), tensor.WithBacking(make([]int64, s.TotalSize()))))
						continue
					}
					xs = append(xs, randomDense(rng, s...))
				}
				return xs
			}
			for _, shapes := range tt.good {
				want, err := l.Forward(&registry.Run{}, inputs(shapes))
				require.NoError(t, err, "Forward on %v", shapes)
				got, err := shaper.OutputShape(shapes)
				require.NoError(t, err, "OutputShape of %v", shapes)
				require.Equal(t, want.Shape(), got, "on %v", shapes)
			}
			for _, shapes := range tt.bad {
				_, ferr := l.Forward(&registry.Run{}, inputs(shapes))
				require.Error(t, ferr, "Forward on %v", shapes)
				_, err := shaper.OutputShape(shapes)
				require.Error(t, err, "OutputShape of %v (Forward: %v)", shapes, ferr)
			}
		})
	}
}

// TestShapeCasesCoverEveryLayer: every built-in layer type is in
// shapeCases, so that each is checked as a Provisioner (when it has
// parameters) and an OutputShaper.
func TestShapeCasesCoverEveryLayer(t *testing.T) {
	covered := map[string]bool{}
	for _, c := range shapeCases {
		covered[c.id] = true
	}
	for _, info := range registry.Infos() {
		if reflect.TypeOf(info.New()).Elem().PkgPath() != reflect.TypeOf(Linear{}).PkgPath() {
			continue // registered by a test or another package
		}
		if info.ID == "onnx.subgraph" {
			continue // its shapes are those of the ONNX graph it holds: onnxio/lift's partial tests run it
		}
		assert.True(t, covered[info.ID], "%s has no entry in shapeCases", info.ID)
	}
}

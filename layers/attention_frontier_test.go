package layers

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/registry"
)

// TestFrontierValidate checks that each broken config of attention.linear
// and attention.mla fails naming its field and rule, and that the good
// ones list their parameters under Hugging Face's names.
func TestFrontierValidate(t *testing.T) {
	for _, tt := range []struct{ id, config, err string }{
		{"attention.linear", "{num_heads: 4}", "d must be positive, got 0"},
		{"attention.linear", "{d: 32, num_heads: 4, num_key_heads: 3}", "num_key_heads 3 does not divide num_heads 4"},
		{"attention.linear", "{d: 30, num_heads: 4}", "num_heads 4 does not divide d 30 (or set head_k_dim)"},
		{"attention.linear", "{d: 30, num_heads: 4, head_k_dim: 8}", "num_heads 4 does not divide d 30 (or set head_v_dim)"},
		{"attention.linear", "{d: 32, num_heads: 4, head_v_dim: -1}", "head_v_dim must be positive, got -1"},
		{"attention.linear", "{d: 32, num_heads: 4, update_rule: mamba}", `update_rule "mamba" is not "linear", "gated", "delta" or "gated_delta"`},
		{"attention.linear", "{d: 32, num_heads: 4, conv_kernel_size: 0}", "conv_kernel_size must be positive, got 0"},
		{"attention.linear", "{d: 32, num_heads: 4, eps: -1}", "eps must be a finite number ≥ 0, got -1"},
		{"attention.linear", "{d: 32, num_heads: 4, qk_l2norm: false}", `qk_l2norm: false does not fit update_rule "gated_delta": the delta rules need unit keys`},
		{"attention.linear", "{d: 32, num_heads: 4, update_rule: delta, qk_l2norm: false}", `does not fit update_rule "delta"`},
		{"attention.mla", "{d: 32, num_heads: 4, kv_lora_rank: 8, qk_nope_head_dim: 8, qk_rope_head_dim: 4}", "v_head_dim must be positive, got 0"},
		{"attention.mla", "{d: 32, num_heads: 4, q_lora_rank: -1, kv_lora_rank: 8, qk_nope_head_dim: 8, qk_rope_head_dim: 4, v_head_dim: 8}", "q_lora_rank must be 0 or positive, got -1"},
		{"attention.mla", "{d: 32, num_heads: 4, kv_lora_rank: 8, qk_nope_head_dim: 8, qk_rope_head_dim: 3, v_head_dim: 8}", "qk_rope_head_dim must be even"},
		{"attention.mla", "{d: 32, num_heads: 4, kv_lora_rank: 8, qk_nope_head_dim: 8, qk_rope_head_dim: 4, v_head_dim: 8, rope: neox}", `rope "neox" is not "half"`},
		{"attention.mla", "{d: 32, num_heads: 4, kv_lora_rank: 8, qk_nope_head_dim: 8, qk_rope_head_dim: 4, v_head_dim: 8, rope_base: 1}", "rope_base must be a finite number above 1, got 1"},
		{"attention.mla", "{d: 32, num_heads: 4, kv_lora_rank: 8, qk_nope_head_dim: 8, qk_rope_head_dim: 4, v_head_dim: 8, scale: .inf}", "scale must be finite"},
	} {
		err := fromYAML(t, tt.id, tt.config).Validate()
		require.ErrorContains(t, err, tt.err, "%s %s", tt.id, tt.config)
	}

	names := func(l registry.Layer) []string {
		require.NoError(t, l.Validate())
		var ns []string
		for _, p := range l.Params() {
			ns = append(ns, p.Name)
		}
		return ns
	}
	for config, want := range map[string][]string{
		"{d: 8, num_heads: 2}":                      {"dt_bias", "A_log", "conv1d.weight", "in_proj_qkvz.weight", "in_proj_ba.weight", "norm.weight", "out_proj.weight"},
		"{d: 8, num_heads: 2, update_rule: delta}":  {"conv1d.weight", "in_proj_qkvz.weight", "in_proj_b.weight", "norm.weight", "out_proj.weight"},
		"{d: 8, num_heads: 2, update_rule: gated}":  {"dt_bias", "A_log", "conv1d.weight", "in_proj_qkvz.weight", "in_proj_a.weight", "norm.weight", "out_proj.weight"},
		"{d: 8, num_heads: 2, update_rule: linear}": {"conv1d.weight", "in_proj_qkvz.weight", "norm.weight", "out_proj.weight"},
	} {
		require.Equal(t, want, names(fromYAML(t, "attention.linear", config)), config)
	}
	require.Equal(t, []string{"q_a_proj.weight", "q_a_proj.bias", "q_a_layernorm.weight", "q_b_proj.weight",
		"kv_a_proj_with_mqa.weight", "kv_a_proj_with_mqa.bias", "kv_a_layernorm.weight", "kv_b_proj.weight", "o_proj.weight", "o_proj.bias"},
		names(fromYAML(t, "attention.mla", "{d: 8, num_heads: 2, q_lora_rank: 4, kv_lora_rank: 3, qk_nope_head_dim: 2, qk_rope_head_dim: 2, v_head_dim: 3, attention_bias: true}")))
}

// TestFrontierFLOPs checks the counts against the formulas worked out by
// hand (m·n·k multiply-adds are 2·m·n·k FLOPs).
func TestFrontierFLOPs(t *testing.T) {
	for _, tt := range []struct {
		id, config string
		shape      tensor.Shape
		want       int64
	}{
		// 6 rows, heads of 4: in_proj_qkvz and in_proj_ba 2·6·8·(32+4) = 3456;
		// per token and head Sᵀk, kδᵀ, Sᵀq: 2·6·2·3·16 = 1152; out_proj 2·6·8·8 = 768.
		{"attention.linear", "{d: 8, num_heads: 2}", tensor.Shape{2, 3, 8}, 5376},
		// No gates, no Sᵀk: 2·6·8·32 = 3072; 2·6·2·2·16 = 768; out_proj 768.
		{"attention.linear", "{d: 8, num_heads: 2, update_rule: linear}", tensor.Shape{2, 3, 8}, 4608},
		// 5 rows: q_a 2·5·8·4 = 320; q_b 2·5·4·8 = 320; kv_a 2·5·8·5 = 400;
		// kv_b 2·5·3·10 = 300; attention 2·2·25·(4+3) = 700; o 2·5·6·8 = 480.
		{"attention.mla", "{d: 8, num_heads: 2, q_lora_rank: 4, kv_lora_rank: 3, qk_nope_head_dim: 2, qk_rope_head_dim: 2, v_head_dim: 3}", tensor.Shape{5, 8}, 2520},
	} {
		n, err := flopLayer(t, tt.id, tt.config).FLOPs([]tensor.Shape{tt.shape})
		require.NoError(t, err, tt.config)
		require.Equal(t, tt.want, n, "%s %s", tt.id, tt.config)
	}
	_, err := flopLayer(t, "attention.linear", "{d: 8, num_heads: 2}").FLOPs([]tensor.Shape{{2, 3, 7}})
	require.ErrorContains(t, err, "d mismatch")
}

// TestFrontierStepEqualsForward steps configurations beyond the Hugging
// Face cases, with random weights, token by token and in chunks, against
// their own full pass. For attention.mla that is the weight-absorbed
// decoding (a step, even of every token at once) against the naive
// expansion of Forward.
func TestFrontierStepEqualsForward(t *testing.T) {
	x := func(shape ...int) *tensor.Dense { return randomDense(rand.New(rand.NewPCG(9, 10)), shape...) }
	for _, tt := range []struct {
		id, config string
		input      *tensor.Dense
	}{
		{"attention.linear", "{d: 12, num_heads: 3, head_k_dim: 5, head_v_dim: 2}", x(2, 9, 12)},
		{"attention.linear", "{d: 12, num_heads: 4, num_key_heads: 2, update_rule: delta, conv_kernel_size: 1}", x(3, 5, 12)},
		{"attention.linear", "{d: 8, num_heads: 2, update_rule: gated, conv_kernel_size: 6}", x(7, 8)},
		{"attention.linear", "{d: 8, num_heads: 1, update_rule: linear, qk_l2norm: false}", x(2, 6, 8)},
		{"attention.mla", "{d: 12, num_heads: 3, q_lora_rank: 5, kv_lora_rank: 4, qk_nope_head_dim: 3, qk_rope_head_dim: 2, v_head_dim: 5}", x(2, 8, 12)},
		{"attention.mla", "{d: 12, num_heads: 2, kv_lora_rank: 6, qk_nope_head_dim: 4, qk_rope_head_dim: 6, v_head_dim: 2, rope: half, attention_bias: true, scale: 0.3}", x(7, 12)},
	} {
		t.Run(tt.id+tt.config, func(t *testing.T) {
			l := validated(t, fromYAML(t, tt.id, tt.config), 3)
			checkSteps(t, l, []*tensor.Dense{tt.input}, stepSpec{roles: []role{stream}}, nil)
		})
	}
}

// TestFrontierStepStates checks what the states hold (the latent, not
// keys and values; the conv history and recurrent states), the errors a
// step reports, and that a failed step leaves the state as it was.
func TestFrontierStepStates(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	mla := validated(t, fromYAML(t, "attention.mla", "{d: 8, num_heads: 2, q_lora_rank: 4, kv_lora_rank: 3, qk_nope_head_dim: 2, qk_rope_head_dim: 2, v_head_dim: 3}"), 1).(*MLA)
	lin := validated(t, fromYAML(t, "attention.linear", "{d: 8, num_heads: 2, num_key_heads: 1, head_k_dim: 3}"), 1).(*LinearAttention)
	for _, l := range []registry.Stepper{mla, lin} {
		state := l.NewState()
		_, err := l.Step(nil, state, []*tensor.Dense{randomDense(rng, 2, 3, 8)})
		require.NoError(t, err)
		before := stateCopy(state)
		_, err = l.Step(nil, state, []*tensor.Dense{randomDense(rng, 3, 1, 8)})
		require.ErrorContains(t, err, "step has 3 sequence(s), the session started with 2")
		_, err = l.Step(nil, state, []*tensor.Dense{randomDense(rng, 2, 1, 5)})
		require.ErrorContains(t, err, "d mismatch")
		_, err = l.Step(nil, &positionState{}, []*tensor.Dense{randomDense(rng, 2, 1, 8)})
		require.ErrorContains(t, err, "not from this layer's NewState")
		require.Equal(t, 3, state.Tokens(), "a failed step changed the state")
		require.Equal(t, before, stateCopy(state), "a failed step changed the state")
	}

	st := mla.NewState().(*mlaState)
	_, err := mla.Step(nil, st, []*tensor.Dense{randomDense(rng, 2, 5, 8)})
	require.NoError(t, err)
	require.Len(t, st.latent, 2)
	require.Len(t, st.latent[0], 5*(3+2), "the cache holds kv_lora_rank + qk_rope_head_dim per token")

	ls := lin.NewState().(*linearState)
	for range 4 {
		_, err := lin.Step(nil, ls, []*tensor.Dense{randomDense(rng, 2, 2, 8)})
		require.NoError(t, err)
	}
	require.Len(t, ls.history[1], 3*(2*3+8), "conv history: kernel−1 rows of conv_dim")
	require.Len(t, ls.memory[1], 2*3*4, "one head_k_dim × head_v_dim state per value head")
}

// stateCopy copies what a frontier layer's state holds, to compare.
func stateCopy(s registry.State) [][]float32 {
	var rows [][]float32
	switch s := s.(type) {
	case *mlaState:
		rows = s.latent
	case *linearState:
		rows = append(slices.Clone(s.history), s.memory...)
	}
	out := make([][]float32, len(rows))
	for i, r := range rows {
		out[i] = slices.Clone(r)
	}
	return out
}

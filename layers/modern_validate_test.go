package layers

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/attnrun/attnrun/registry"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// TestModernValidate checks that every rule of the new layers' configs is
// enforced with an error naming the field, and that valid configs pass.
func TestModernValidate(t *testing.T) {
	tests := []struct {
		id, config string
		err        string // "" for a valid config
	}{
		{"attention.sdpa", "{d: 8, num_heads: 2}", ""},
		{"attention.sdpa", "{d: 0, num_heads: 2}", "d must be positive, got 0"},
		{"attention.sdpa", "{d: 8, num_heads: 3}", "num_heads 3 does not divide d 8 (or set head_dim)"},
		{"attention.sdpa", "{d: 8, num_heads: 3, head_dim: 5}", ""},
		{"attention.sdpa", "{d: 8, num_heads: 4, num_kv_heads: 3}", "num_kv_heads 3 does not divide num_heads 4"},
		{"attention.sdpa", "{d: 8, num_heads: 4, num_kv_heads: -2}", "num_kv_heads -2 does not divide num_heads 4"},
		{"attention.sdpa", "{d: 8, num_heads: 2, d_memory: -1}", "d_memory must be positive, got -1"},
		{"attention.sdpa", "{d: 8, num_heads: 2, head_dim: -4}", "head_dim must be positive, got -4"},
		{"attention.sdpa", "{d: 8, num_heads: 2, dropout: 1}", "dropout must be in [0, 1), got 1"},
		{"attention.sdpa", "{d: 8, num_heads: 2, causal_align: bottom}", `causal_align "bottom" is not "bottom_right" or "top_left"`},
		{"attention.sdpa", "{d: 8, num_heads: 2, scale: .inf}", "scale must be finite, got +Inf"},
		{"attention.sdpa", "{d: 8, num_heads: 2, softcap: -1}", "softcap must be 0 (off) or a positive number, got -1"},
		{"attention.sdpa", "{d: 8, num_heads: 2, window: -1, causal: true}", "window must be 0 (off) or positive, got -1"},
		{"attention.sdpa", "{d: 8, num_heads: 2, window: 4}", "window 4 is even"},
		{"attention.sdpa", "{d: 8, num_heads: 2, mask: bool}", `mask_polarity is required with a bool mask: "keep" (True attends, as PyTorch SDPA) or "mask"`},
		{"attention.sdpa", "{d: 8, num_heads: 2, mask: bool, mask_polarity: yes}", `mask_polarity "yes" is not "keep" or "mask"`},
		{"attention.sdpa", "{d: 8, num_heads: 2, mask_polarity: keep}", `mask_polarity is set but mask is not "bool"`},
		{"attention.sdpa", "{d: 8, num_heads: 2, mask: additive, mask_polarity: keep}", `mask_polarity is set but mask is not "bool"`},
		{"attention.sdpa", "{d: 8, num_heads: 2, mask: float}", `mask "float" is not "" (none), "bool" or "additive"`},
		{"attention.sdpa", "{d: 8, num_heads: 2, masked_rows: inf}", `masked_rows "inf" is not "zeros" or "nan"`},
		{"attention.sdpa", "{d: 8, num_heads: 2, rope: neox}", `rope "neox" is not "half" (GPT-NeoX, Llama) or "interleaved" (GPT-J)`},
		{"attention.sdpa", "{d: 8, num_heads: 2, rope: half, rope_rotary_dim: 3}", "rope_rotary_dim must be even and at most the head size 4, got 3"},
		{"attention.sdpa", "{d: 8, num_heads: 2, rope: half, rope_rotary_dim: 6}", "rope_rotary_dim must be even and at most the head size 4, got 6"},
		{"attention.sdpa", "{d: 8, num_heads: 2, rope: half, rope_base: 1}", "rope_base must be a finite number above 1, got 1"},
		{"attention.sdpa", "{d: 8, num_heads: 2, rope_rotary_dim: 2}", "rope_rotary_dim is set but rope is not"},
		{"attention.sdpa", "{d: 8, num_heads: 2, out_name: c_proj}", `out_name "c_proj" is not "out_proj" (PyTorch) or "o_proj" (Hugging Face)`},
		{"attention.sdpa", "{d: 8, num_heads: 100000}", "num_heads 100000 is above the limit of 65536"},
		{"attention.sdpa", "{d: 8, num_heads: 60000, head_dim: 60000}", "num_heads 60000 × head_dim 60000 is above the limit"},
		{"attention.torch_mha", "{embed_dim: 8, num_heads: 2}", ""},
		{"attention.torch_mha", "{embed_dim: 8, num_heads: 3}", "num_heads 3 does not divide embed_dim 8"},
		{"attention.torch_mha", "{embed_dim: 8, num_heads: 2, kdim: -1}", "kdim must be positive, got -1"},
		{"attention.torch_mha", "{embed_dim: 8, num_heads: 2, key_padding_mask: keep}", `key_padding_mask "keep" is not "" (none), "bool"`},
		{"attention.torch_mha", "{embed_dim: 8, num_heads: 2, attn_mask: additive}", `attn_mask "additive" is not "" (none), "bool"`},
		{"attention.torch_mha", "{embed_dim: 8, num_heads: 2, masked_rows: zero}", `masked_rows "zero" is not "nan" or "zeros"`},
		{"attention.torch_mha", "{embed_dim: 8, num_heads: 2, dropout: -0.1}", "dropout must be in [0, 1), got -0.1"},
		{"position.sinusoidal", "{d: 6}", ""},
		{"position.sinusoidal", "{d: 6, base: 0}", "base must be a positive finite number, got 0"},
		{"position.sinusoidal", "{}", "d must be positive, got 0"},
		{"position.rope", "{head_dim: 4}", ""},
		{"position.rope", "{head_dim: 0}", "head_dim must be positive, got 0"},
		{"position.rope", "{head_dim: 4, style: gptj}", `style "gptj" is not "half" (GPT-NeoX, Llama) or "interleaved" (GPT-J)`},
		{"position.rope", "{head_dim: 4, rotary_dim: -2}", "rotary_dim must be even and at most the head size 4, got -2"},
		{"position.rope", "{head_dim: 5}", "rotary_dim must be even and at most the head size 5, got 5"},
		{"position.rope", "{head_dim: 5, rotary_dim: 4}", ""},
		{"position.alibi", "{num_heads: 3}", ""},
		{"position.alibi", "{num_heads: 0}", "num_heads must be positive, got 0"},
		{"position.alibi", "{num_heads: 70000}", "num_heads 70000 is above the limit of 65536"},
		{"norm.layer", "{d: 4}", ""},
		{"norm.layer", "{d: 4, eps: -1}", "eps must be a finite number ≥ 0, got -1"},
		{"norm.layer", "{d: -4}", "d must be positive, got -4"},
		{"norm.rms", "{d: 4, eps: .nan}", "eps must be a finite number ≥ 0, got NaN"},
		{"activation.gelu", "{}", ""},
		{"activation.gelu", "{approximate: erf}", `approximate "erf" is not "none" or "tanh"`},
		{"nn.mlp", "{d: 4, d_hidden: 8}", ""},
		{"nn.mlp", "{d: 4, d_hidden: 0}", "d_hidden must be positive, got 0"},
		{"nn.mlp", "{d: 4, d_hidden: 8, activation: swish}", `activation "swish" is not gelu, gelu_tanh, silu or relu`},
	}
	for _, tt := range tests {
		t.Run(tt.id+" "+tt.config, func(t *testing.T) {
			l := fromYAML(t, tt.id, tt.config)
			err := l.Validate()
			if tt.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.err)
			require.Empty(t, l.Params(), "a failed Validate left parameters")
			_, err = l.Forward(&registry.Run{}, []*tensor.Dense{randomDense(rand.New(rand.NewPCG(1, 1)), 2, 3, 4)})
			require.Error(t, err, "Forward after a failed Validate")
		})
	}
}

// TestModernInputErrors checks the errors for inputs that do not fit.
func TestModernInputErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	x := func(shape ...int) *tensor.Dense { return randomDense(rng, shape...) }
	tests := []struct {
		id, config string
		inputs     []*tensor.Dense
		err        string
	}{
		{"attention.sdpa", "{d: 8, num_heads: 2}", nil, "takes [x] or [x, memory], got 0 input(s)"},
		{"attention.sdpa", "{d: 8, num_heads: 2}", []*tensor.Dense{x(2, 3, 8), x(2, 3, 8), x(2, 3, 8)}, "takes [x] or [x, memory], got 3 input(s)"},
		{"attention.sdpa", "{d: 8, num_heads: 2, mask: additive}", []*tensor.Dense{x(2, 3, 8)}, "takes [x, mask] or [x, memory, mask], got 1 input(s)"},
		{"attention.sdpa", "{d: 8, num_heads: 2}", []*tensor.Dense{x(2, 3, 6)}, "d mismatch: input last dim 6, layer expects d 8"},
		{"attention.sdpa", "{d: 8, num_heads: 2}", []*tensor.Dense{x(2, 3, 8), x(2, 3, 6)}, "d_memory mismatch: memory last dim 6, layer expects d_memory 8"},
		{"attention.sdpa", "{d: 8, num_heads: 2}", []*tensor.Dense{x(2, 3, 8), x(3, 3, 8)}, "memory shape (3, 3, 8) does not match x (2, 3, 8): want the same batch"},
		{"attention.sdpa", "{d: 8, num_heads: 2, rope: half}", []*tensor.Dense{x(2, 3, 8), x(2, 3, 8)}, "rope and alibi apply to self-attention"},
		{"attention.sdpa", "{d: 8, num_heads: 2, mask: additive}", []*tensor.Dense{x(2, 3, 8), x(4, 3)}, "mask has shape (4, 3), which does not broadcast to (B, H, Tq, Tk) = (2, 2, 3, 3)"},
		{"attention.sdpa", "{d: 8, num_heads: 2, mask: additive}", []*tensor.Dense{x(2, 3, 8), x(1, 1, 1, 3, 3)}, "mask has shape (1, 1, 1, 3, 3): want at most 4 dimensions"},
		{"attention.sdpa", "{d: 8, num_heads: 2, mask: additive}", []*tensor.Dense{x(2, 3, 8), x(2, 1, 3, 4)}, "does not broadcast"},
		{"attention.sdpa", "{d: 8, num_heads: 2, mask: additive}", []*tensor.Dense{x(2, 3, 8), nil}, "mask is nil"},
		{"attention.sdpa", "{d: 8, num_heads: 2, dropout: 0.5}", []*tensor.Dense{x(2, 3, 8)}, ""},
		{"attention.torch_mha", "{embed_dim: 8, num_heads: 2, key_padding_mask: bool}", []*tensor.Dense{x(3, 2, 8), nil}, "key_padding_mask is nil"},
		{"attention.torch_mha", "{embed_dim: 8, num_heads: 2}", []*tensor.Dense{x(3, 2, 6)}, "query has width 6, want 8"},
		{"attention.torch_mha", "{embed_dim: 8, num_heads: 2, kdim: 5}", []*tensor.Dense{x(3, 2, 8)}, "key has width 8, want 5"},
		{"attention.torch_mha", "{embed_dim: 8, num_heads: 2}", []*tensor.Dense{x(3, 2, 8), x(4, 3, 8)}, "key shape (3, 4, 8) does not match query shape (2, 3, 8): want the same batch"},
		{"attention.torch_mha", "{embed_dim: 8, num_heads: 2, kdim: 5}", []*tensor.Dense{x(3, 2, 8), x(4, 2, 5), x(3, 2, 8)}, "value shape (2, 3, 8) does not match key shape (2, 4, 5)"},
		{"attention.torch_mha", "{embed_dim: 8, num_heads: 2, key_padding_mask: bool}", []*tensor.Dense{x(3, 2, 8), x(3, 2)}, "key_padding_mask has shape (3, 2), want (2, 3)"},
		{"attention.torch_mha", "{embed_dim: 8, num_heads: 2, attn_mask: float}", []*tensor.Dense{x(3, 2, 8), x(2, 3, 3)}, "attn_mask has shape (2, 3, 3), want (3, 3) or (4, 3, 3)"},
		{"attention.torch_mha", "{embed_dim: 8, num_heads: 2, attn_mask: float}", []*tensor.Dense{x(3, 2, 8)}, "takes [query], [query, memory] or [query, key, value], then 1 mask input(s); got 1 input(s)"},
		{"position.rope", "{head_dim: 3, rotary_dim: 2}", []*tensor.Dense{x(2, 3, 8)}, "head_dim 3 does not divide the input width 8"},
		{"position.sinusoidal", "{d: 6}", []*tensor.Dense{x(2, 3, 8)}, "d mismatch: input last dim 8, layer expects d 6"},
		{"norm.layer", "{d: 6}", []*tensor.Dense{x(2, 3, 8)}, "d mismatch"},
		{"nn.mlp", "{d: 6, d_hidden: 3}", []*tensor.Dense{x(2, 3, 8)}, "d mismatch"},
	}
	for _, tt := range tests {
		t.Run(tt.id+" "+tt.err, func(t *testing.T) {
			l := fromYAML(t, tt.id, tt.config)
			require.NoError(t, l.Validate())
			_, err := l.Forward(&registry.Run{Train: true}, tt.inputs)
			if tt.err == "" {
				require.ErrorContains(t, err, "dropout 0.5 in train mode needs run.RNG")
				return
			}
			require.ErrorContains(t, err, tt.err)
		})
	}
}

// TestModernInitSchemes checks the init schemes the new layers give their
// parameters: PyTorch's for each module.
func TestModernInitSchemes(t *testing.T) {
	inits := func(l registry.Layer) map[string]registry.Init {
		require.NoError(t, l.Validate())
		m := map[string]registry.Init{}
		for _, p := range l.Params() {
			m[p.Name] = p.Init
		}
		return m
	}
	mha := inits(fromYAML(t, "attention.torch_mha", "{embed_dim: 8, num_heads: 2, add_bias_kv: true}"))
	b := math.Sqrt(6.0 / 32) // xavier_uniform_ of (24, 8)
	require.Equal(t, registry.UniformInit(-b, b), mha["in_proj_weight"])
	require.Equal(t, registry.ConstantInit(0), mha["in_proj_bias"])
	require.Equal(t, registry.NormalInit(0, math.Sqrt(1.0/8)), mha["bias_k"])
	require.Equal(t, registry.LinearInit(8), mha["out_proj.weight"])
	require.Equal(t, registry.ConstantInit(0), mha["out_proj.bias"])
	sep := inits(fromYAML(t, "attention.torch_mha", "{embed_dim: 8, num_heads: 2, kdim: 4}"))
	b = math.Sqrt(6.0 / 12)
	require.Equal(t, registry.UniformInit(-b, b), sep["k_proj_weight"])

	sdpa := inits(fromYAML(t, "attention.sdpa", "{d: 8, num_heads: 2, d_memory: 6, qkv_bias: true}"))
	require.Equal(t, registry.LinearInit(6), sdpa["k_proj.weight"])
	require.Equal(t, registry.LinearBiasInit(6), sdpa["v_proj.bias"])
	require.Equal(t, registry.LinearInit(8), sdpa["out_proj.weight"])

	norm := inits(fromYAML(t, "norm.layer", "{d: 4}"))
	require.Equal(t, registry.ConstantInit(1), norm["weight"])
	require.Equal(t, registry.ConstantInit(0), norm["bias"])
	require.Equal(t, registry.ConstantInit(1), inits(fromYAML(t, "norm.rms", "{d: 4}"))["weight"])
	require.Empty(t, inits(fromYAML(t, "norm.layer", "{d: 4, elementwise_affine: false}")))
	require.Equal(t, registry.LinearInit(8), inits(fromYAML(t, "nn.mlp", "{d: 4, d_hidden: 8, gated: true}"))["down_proj.weight"])
}

// TestModernDropout checks train-mode dropout on the attention weights of
// attention.sdpa (fused and soft-capped paths) and attention.torch_mha: each
// weight the hook sees is either dropped (0) or its eval value scaled by
// 1/(1−p), about p of them are dropped, and the same seed gives the same
// output.
func TestModernDropout(t *testing.T) {
	const p = 0.3
	for _, tt := range []struct{ id, config string }{
		{"attention.sdpa", "{d: 8, num_heads: 2, dropout: 0.3, causal: true}"},
		{"attention.sdpa", "{d: 8, num_heads: 2, dropout: 0.3, causal: true, softcap: 2}"},
		{"attention.torch_mha", "{embed_dim: 8, num_heads: 2, dropout: 0.3, batch_first: true, average_attn_weights: false}"},
	} {
		t.Run(tt.config, func(t *testing.T) {
			l := validated(t, fromYAML(t, tt.id, tt.config), 9)
			x := randomDense(rand.New(rand.NewPCG(4, 4)), 4, 16, 8)
			weightsOf := func(run *registry.Run) (*tensor.Dense, []float32) {
				var w *tensor.Dense
				run.Hook = func(_ string, got *tensor.Dense) { w = got }
				out, err := l.Forward(run, []*tensor.Dense{x})
				require.NoError(t, err)
				return out, floats(w)
			}
			_, eval := weightsOf(&registry.Run{})
			out1, train := weightsOf(&registry.Run{Train: true, RNG: rand.New(rand.NewPCG(1, 1))})
			out2, _ := weightsOf(&registry.Run{Train: true, RNG: rand.New(rand.NewPCG(1, 1))})
			require.Equal(t, floats(out1), floats(out2), "same seed, same output")
			dropped, positive := 0, 0
			for i, w := range eval {
				if w == 0 {
					continue
				}
				positive++
				if train[i] == 0 {
					dropped++
					continue
				}
				require.InDelta(t, w/(1-p), train[i], 1e-6)
			}
			frac := float64(dropped) / float64(positive)
			require.InDelta(t, p, frac, 0.05, "dropped %d of %d", dropped, positive)
		})
	}
}

// TestModernTokenWiseAndSteppers lists which new layers run incrementally
// and how.
func TestModernTokenWiseAndSteppers(t *testing.T) {
	for _, id := range []string{"norm.layer", "norm.rms", "activation.gelu", "nn.mlp", "nn.linear", "nn.add", "nn.concat", "nn.dropout"} {
		info, err := registry.Lookup(id)
		require.NoError(t, err)
		_, ok := info.New().(registry.TokenWise)
		require.True(t, ok, "%s is not token-wise", id)
	}
	for _, id := range []string{"attention.sdpa", "attention.torch_mha", "attention.causal", "attention.multihead",
		"attention.multihead_wrapper", "attention.average", "position.learned", "position.sinusoidal",
		"position.rope", "position.alibi"} {
		info, err := registry.Lookup(id)
		require.NoError(t, err)
		_, ok := info.New().(registry.Stepper)
		require.True(t, ok, "%s is not a Stepper", id)
	}
}

// TestALiBiSlopes checks the slopes against the ALiBi paper's values: 8
// heads give 1/2, 1/4, ..., 1/256; 6 heads take the 4-head slopes and every
// other 8-head slope.
func TestALiBiSlopes(t *testing.T) {
	require.Equal(t, []float32{1.0 / 2, 1.0 / 4, 1.0 / 8, 1.0 / 16, 1.0 / 32, 1.0 / 64, 1.0 / 128, 1.0 / 256}, alibiSlopes(8))
	require.Equal(t, []float32{1.0 / 4, 1.0 / 16, 1.0 / 64, 1.0 / 256, 1.0 / 2, 1.0 / 8}, alibiSlopes(6))
	require.Equal(t, []float32{1.0 / 256}, alibiSlopes(1))
}

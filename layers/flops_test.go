package layers

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/registry"
)

// flopLayer builds a validated layer of type id from a YAML mapping of its
// fields, decoded strictly, with the registry's defaults for the others.
func flopLayer(t *testing.T, id, fields string) registry.FLOPCounter {
	t.Helper()
	l := fromYAML(t, id, fields)
	require.NoError(t, l.Validate())
	counter, ok := l.(registry.FLOPCounter)
	require.True(t, ok, "%s does not implement registry.FLOPCounter", id)
	return counter
}

// TestFLOPs checks every built-in layer's count against the formula worked
// out by hand in the case's comment (m·n·k multiply-adds are 2·m·n·k FLOPs).
func TestFLOPs(t *testing.T) {
	cases := []struct {
		name, id, fields string
		inputs           []tensor.Shape
		want             int64
	}{
		// QKᵀ and PV over the input: 2·(2·4·4·3)·2 = 4·B·T²·d = 384.
		{"simple", "attention.simple", "{causal: true}", []tensor.Shape{{2, 4, 3}}, 384},
		// Projections 2·5·3·(3·2) = 180; attention 4·1·25·2 = 200.
		{"self linear", "attention.self", "{d_in: 3, d_out: 2}", []tensor.Shape{{5, 3}}, 380},
		{"self matrix", "attention.self", "{d_in: 3, d_out: 2, weights: matrix}", []tensor.Shape{{5, 3}}, 380},
		// Projections 2·12·3·6 = 432; attention 4·2·36·2 = 576 (no causal halving).
		{"causal", "attention.causal", "{d_in: 3, d_out: 2, context_length: 6}", []tensor.Shape{{2, 6, 3}}, 1008},
		// seed-mha-wrapper: two heads of the causal case above, 2·1008.
		{"multihead_wrapper", "attention.multihead_wrapper", "{d_in: 3, d_out: 2, context_length: 6, num_heads: 2}",
			[]tensor.Shape{{2, 6, 3}}, 2016},
		// Projections 2·8·4·12 = 768; attention 2 heads of dh 2: 2·2·(1·2·8·8·2) = 1024; out_proj 2·8·4·4 = 256.
		{"multihead", "attention.multihead", "{d_in: 4, d_out: 4, context_length: 8, num_heads: 2}",
			[]tensor.Shape{{1, 8, 4}}, 2048},
		// GQA, dh 2: q 2·10·8·8 = 1280; k, v 2·10·8·(2·2·2) = 1280;
		// attention 2·2·(2·4·5·5·2) = 1600 (every query head); out 1280.
		{"sdpa gqa", "attention.sdpa", "{d: 8, num_heads: 4, num_kv_heads: 2, causal: true, rope: half}",
			[]tensor.Shape{{2, 5, 8}}, 5440},
		// Cross-attention, 3 queries of d 4, 7 keys of d_memory 6, 2 heads of 3:
		// q 2·3·4·6 = 144; k, v 2·7·6·12 = 1008; attention 2·2·(2·3·7·3) = 504; out 2·3·6·4 = 144.
		{"sdpa cross", "attention.sdpa", "{d: 4, d_memory: 6, num_heads: 2, head_dim: 3}",
			[]tensor.Shape{{3, 4}, {7, 6}}, 1800},
		// The mask input is not a token stream: q 2·6·4·4 = 192, k, v 384,
		// attention 2·2·(2·1·3·3·4) = 288, out 192.
		{"sdpa mask", "attention.sdpa", "{d: 4, num_heads: 1, causal: true, mask: additive}",
			[]tensor.Shape{{2, 3, 4}, {3, 3}}, 1056},
		// Sequence first: B 2, L 3 queries, S 5 keys, E 4:
		// q 2·6·4·4 = 192; k, v 2·10·4·4 = 320 each; attention 4·2·3·5·4 = 480; out 192.
		{"torch_mha seq first", "attention.torch_mha", "{embed_dim: 4, num_heads: 2}",
			[]tensor.Shape{{3, 2, 4}, {5, 2, 4}}, 1504},
		// Batch first, kdim 6, vdim 2, 5 keys + bias_k + zero key:
		// q 2·3·4·4 = 96; k 2·5·6·4 = 240; v 2·5·2·4 = 80; attention 4·1·3·7·4 = 336; out 96.
		{"torch_mha extras", "attention.torch_mha",
			"{embed_dim: 4, num_heads: 2, kdim: 6, vdim: 2, add_bias_kv: true, add_zero_attn: true, batch_first: true, key_padding_mask: bool}",
			[]tensor.Shape{{1, 3, 4}, {1, 5, 6}, {1, 5, 2}, {1, 5}}, 848},
		// 2·8·3·5.
		{"linear", "nn.linear", "{d_in: 3, d_out: 5}", []tensor.Shape{{2, 4, 3}}, 240},
		// fc1 and fc2: 2·3·4·8 each.
		{"mlp", "nn.mlp", "{d: 4, d_hidden: 8}", []tensor.Shape{{3, 4}}, 384},
		// gate, up and down: 2·3·4·8 each.
		{"mlp gated", "nn.mlp", "{d: 4, d_hidden: 8, gated: true, activation: silu, bias: false}", []tensor.Shape{{3, 4}}, 576},
		// Elementwise layers count nothing.
		{"average", "attention.average", "{}", []tensor.Shape{{2, 4, 3}}, 0},
		{"position.learned", "position.learned", "{context_length: 4, d: 3}", []tensor.Shape{{2, 4, 3}}, 0},
		{"position.sinusoidal", "position.sinusoidal", "{d: 4}", []tensor.Shape{{2, 4, 4}}, 0},
		{"position.rope", "position.rope", "{head_dim: 2}", []tensor.Shape{{2, 4, 4}}, 0},
		{"position.alibi", "position.alibi", "{num_heads: 2}", []tensor.Shape{{2, 4, 4}}, 0},
		{"norm.layer", "norm.layer", "{d: 4}", []tensor.Shape{{2, 4, 4}}, 0},
		{"norm.rms", "norm.rms", "{d: 4}", []tensor.Shape{{2, 4, 4}}, 0},
		{"activation.gelu", "activation.gelu", "{}", []tensor.Shape{{2, 4, 4}}, 0},
		{"nn.dropout", "nn.dropout", "{p: 0.5}", []tensor.Shape{{2, 4, 4}}, 0},
		{"nn.concat", "nn.concat", "{}", []tensor.Shape{{2, 4, 4}, {2, 4, 2}}, 0},
		{"nn.add", "nn.add", "{}", []tensor.Shape{{2, 4, 4}, {2, 4, 4}}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := flopLayer(t, c.id, c.fields).FLOPs(c.inputs)
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
}

func TestFLOPsErrors(t *testing.T) {
	cases := []struct {
		name, id, fields string
		inputs           []tensor.Shape
		want             string
	}{
		{"width", "nn.linear", "{d_in: 3, d_out: 5}", []tensor.Shape{{2, 4}}, "d_in mismatch: input last dim 4, layer expects d_in 3"},
		{"rank", "attention.simple", "{}", []tensor.Shape{{4}}, "want (T, d) or (B, T, d)"},
		{"empty", "attention.simple", "{}", []tensor.Shape{{0, 4}}, "empty dimension"},
		{"inputs", "attention.multihead", "{d_in: 4, d_out: 4, context_length: 8, num_heads: 2}", nil, "takes 1 input, got 0"},
		{"memory width", "attention.sdpa", "{d: 4, num_heads: 2}", []tensor.Shape{{3, 4}, {5, 6}}, "d_memory mismatch"},
		{"sdpa inputs", "attention.sdpa", "{d: 4, num_heads: 2}", []tensor.Shape{{3, 4}, {3, 4}, {3, 4}}, "got 3 input(s)"},
		{"kdim", "attention.torch_mha", "{embed_dim: 4, num_heads: 2, kdim: 6}", []tensor.Shape{{3, 4}, {5, 4}}, "kdim mismatch"},
		// 2·2³¹·2³¹·2 overflows an int64: an error, not a wrapped count.
		{"overflow", "attention.simple", "{}", []tensor.Shape{{1 << 31, 2}}, "overflows int64"},
		{"overflow rows", "nn.linear", "{d_in: 3, d_out: 5}", []tensor.Shape{{1 << 30, 1 << 30, 3}}, "overflows int64"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := flopLayer(t, c.id, c.fields).FLOPs(c.inputs)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

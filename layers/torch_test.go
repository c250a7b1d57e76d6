package layers

import (
	"fmt"
	"testing"

	"github.com/attnrun/attnrun/registry"
	"github.com/stretchr/testify/require"
)

// Float32 agreement with PyTorch's full-precision output.
const (
	torchAbs = 1e-6
	torchRel = 1e-5
)

// TestAgainstPyTorch runs each layer on the weights and input of a
// testdata/torch_cases.json case and compares the output and the attention
// weights with PyTorch's. Loading the weights also checks that Params lists
// the module's state_dict names in order, with its shapes.
func TestAgainstPyTorch(t *testing.T) {
	tests := []struct {
		name  string // case in torch_cases.json
		chain []registry.Layer
		// prefixes of the chain's parameter names in the state dict
		prefixes []string
	}{
		{"rand123", []registry.Layer{&Self{DIn: 3, DOut: 2, Weights: "matrix", Scaled: true}}, nil},
		{"rand123_causal", []registry.Layer{&Self{DIn: 3, DOut: 2, Weights: "matrix", Scaled: true, Causal: true}}, nil},
		{"randn1", []registry.Layer{&Self{DIn: 3, DOut: 2, Weights: "matrix", Scaled: true}}, nil},
		{"linear789", []registry.Layer{&Self{DIn: 3, DOut: 2, Weights: "linear", Scaled: true}}, nil},
		{"linear123", []registry.Layer{&Self{DIn: 3, DOut: 2, Weights: "linear", Scaled: true}}, nil},
		{"wrapper123", []registry.Layer{&MultiHeadWrapper{DIn: 3, DOut: 2, ContextLength: 6, NumHeads: 2}}, nil},
		{"bishop_self", []registry.Layer{&Self{DIn: 3, DOut: 3, Weights: "linear", Scaled: true}}, nil},
		{
			"bishop_positional",
			[]registry.Layer{&LearnedPosition{ContextLength: 5, D: 3}, &Self{DIn: 3, DOut: 3, Weights: "linear", Scaled: true}},
			[]string{"position.", "attn."},
		},
		{"bishop_multihead", []registry.Layer{&MultiHead{DIn: 6, DOut: 6, ContextLength: 5, NumHeads: 2, OutBias: true, Causal: true}}, nil},
		{"multihead_bias", []registry.Layer{&MultiHead{DIn: 4, DOut: 6, ContextLength: 5, NumHeads: 3, QKVBias: true, OutBias: true, Causal: true}}, nil},
		{"multihead_noncausal", []registry.Layer{&MultiHead{DIn: 4, DOut: 4, ContextLength: 8, NumHeads: 2}}, nil},
		{"causal_bias", []registry.Layer{&Causal{DIn: 4, DOut: 3, ContextLength: 6, QKVBias: true}}, nil},
		{"causal_bias", []registry.Layer{&Self{DIn: 4, DOut: 3, Weights: "linear", QKVBias: true, Causal: true, Scaled: true}}, nil},
		{"linear", []registry.Layer{&Linear{DIn: 4, DOut: 5, Bias: true}}, nil},
		{"average1337", []registry.Layer{&Average{}}, nil},
		{"simple_scaled_causal", []registry.Layer{&Simple{Scaled: true, Causal: true}}, nil},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %T", tt.name, tt.chain[len(tt.chain)-1]), func(t *testing.T) {
			c := torchCaseNamed(t, tt.name)
			for i, l := range tt.chain {
				prefix := ""
				if tt.prefixes != nil {
					prefix = tt.prefixes[i]
				}
				setParams(t, l, c.Params, prefix)
			}
			out, weights := forward(t, c.Input.dense(), tt.chain...)
			require.Equal(t, c.Output.Shape, []int(out.Shape()), "output shape")
			assertClose(t, c.Output.Data, floats(out), torchAbs, torchRel, "output")
			if c.Weights == nil {
				require.Nil(t, weights, "a layer without attention reported weights")
				return
			}
			require.NotNil(t, weights, "the hook received no weights")
			wantShape := c.Weights.Shape
			if len(wantShape) == 2 { // PyTorch's (T, T) for a (T, d) input of a single head
				wantShape = append([]int{1, 1}, wantShape...)
			}
			require.Equal(t, wantShape, []int(weights.Shape()), "weights shape (B, H, T, T)")
			assertClose(t, c.Weights.Data, floats(weights), torchAbs, torchRel, "weights")
		})
	}
}

package models

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/registry"
)

// rows copies rows t0..t1 of the token axis (the second to last) of x.
func rows(x *tensor.Dense, t0, t1 int) *tensor.Dense {
	shape := x.Shape().Clone()
	axis := len(shape) - 2
	inner := shape[axis+1]
	outer := 1
	for _, d := range shape[:axis] {
		outer *= d
	}
	data := x.Data().([]float32)
	var out []float32
	for o := range outer {
		base := o * shape[axis] * inner
		out = append(out, data[base+t0*inner:base+t1*inner]...)
	}
	shape[axis] = t1 - t0
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(out))
}

// TestBlocksStep decodes every block token by token and in chunks: the
// rows of each step must equal PyTorch's full-sequence output. The first
// model input is the token stream; the others (a cross-attention memory
// and its padding mask) are passed whole at every step.
func TestBlocksStep(t *testing.T) {
	for _, name := range blockNames {
		b := loadBlock(t, name)
		tokens := b.inputs[0].Shape()[1]
		for _, chunk := range []int{1, 2, 4, tokens} {
			t.Run(name, func(t *testing.T) {
				state, err := b.model.NewState()
				require.NoError(t, err)
				for t0 := 0; t0 < tokens; t0 += chunk {
					t1 := min(t0+chunk, tokens)
					args := append([]*tensor.Dense{rows(b.inputs[0], t0, t1)}, b.inputs[1:]...)
					out, err := b.model.Step(nil, state, args...)
					require.NoError(t, err)
					require.Equal(t, t1, state.Tokens())
					want := rows(b.expected, t0, t1)
					require.Equal(t, want.Shape(), out.Shape())
					requireClose(t, want.Data().([]float32), out.Data().([]float32), 1e-5, 1e-6, "step output")
				}
			})
		}
	}
}

// TestStepWeightsHook checks that a step reports each attention layer's
// weights for the new queries against every key so far.
func TestStepWeightsHook(t *testing.T) {
	b := loadBlock(t, "llama")
	var full *tensor.Dense
	_, err := b.model.Forward(&registry.Run{Hook: func(layer string, w *tensor.Dense) { full = w }}, b.inputs...)
	require.NoError(t, err)
	state, err := b.model.NewState()
	require.NoError(t, err)
	for t0 := range 3 {
		var got *tensor.Dense
		run := &registry.Run{Hook: func(layer string, w *tensor.Dense) {
			require.Equal(t, "self_attn", layer)
			got = w
		}}
		_, err := b.model.Step(run, state, rows(b.inputs[0], t0, t0+1))
		require.NoError(t, err)
		require.Equal(t, tensor.Shape{2, 4, 1, t0 + 1}, got.Shape())
		fw := full.Data().([]float32)
		tk := full.Shape()[3]
		for bh := range 2 * 4 {
			want := fw[(bh*tk+t0)*tk:][:t0+1]
			requireClose(t, want, got.Data().([]float32)[bh*(t0+1):][:t0+1], 1e-5, 1e-6, "weights")
		}
	}
}

// TestStepErrors checks that a model that cannot run incrementally says
// which layer, and that a failed step ends the session.
func TestStepErrors(t *testing.T) {
	m, err := Parse([]byte(`
name: bidirectional
layers:
  - {name: norm, type: norm.layer, d: 4}
  - {name: attn, type: attention.self, d_in: 4, d_out: 4}
`), "m.yaml")
	require.NoError(t, err)
	_, err = m.NewState()
	require.EqualError(t, err, `model "bidirectional": layer "attn" (attention.self) cannot run incrementally: it is neither a registry.Stepper nor registry.TokenWise`)

	b := loadBlock(t, "gpt2")
	state, err := b.model.NewState()
	require.NoError(t, err)
	x := rows(b.inputs[0], 0, 1)
	_, err = b.model.Step(nil, nil, x)
	require.ErrorContains(t, err, "needs a State from this model's NewState")
	other, err := loadBlock(t, "llama").model.NewState()
	require.NoError(t, err)
	_, err = b.model.Step(nil, other, x)
	require.ErrorContains(t, err, "needs a State from this model's NewState")

	long := tensor.New(tensor.WithShape(2, 13, 16), tensor.WithBacking(make([]float32, 2*13*16)))
	_, err = b.model.Step(nil, state, long)
	require.EqualError(t, err, `layer "wpe" (position.learned) at token 0: sequence length 13 exceeds context_length 12`)
	_, err = b.model.Step(nil, state, x)
	require.ErrorContains(t, err, "session unusable after an earlier failed step")

	state, err = b.model.NewState()
	require.NoError(t, err)
	_, err = b.model.Step(&registry.Run{Train: true}, state, x)
	require.ErrorContains(t, err, "train mode needs a Run.RNG")
	state, err = b.model.NewState()
	require.NoError(t, err)
	_, err = b.model.Step(&registry.Run{Train: true, RNG: rand.New(rand.NewPCG(1, 2))}, state, x)
	require.NoError(t, err, "train mode with an RNG")
}

// TestDecode runs every block through Decode, whole sequences fed chunk by
// chunk, and requires PyTorch's full-sequence output.
func TestDecode(t *testing.T) {
	for _, name := range blockNames {
		b := loadBlock(t, name)
		for _, chunk := range []int{1, 3, 100} {
			out, err := b.model.Decode(nil, chunk, b.inputs...)
			require.NoError(t, err)
			require.Equal(t, b.expected.Shape(), out.Shape())
			requireClose(t, b.expected.Data().([]float32), out.Data().([]float32), 1e-5, 1e-6, name)
		}
	}
	b := loadBlock(t, "gpt2")
	_, err := b.model.Decode(nil, 0, b.inputs...)
	require.EqualError(t, err, `model "gpt2-block": chunk must be positive, got 0`)
	_, err = b.model.Decode(nil, 1)
	require.ErrorContains(t, err, "Decode needs the token stream as the first input")
}

// TestALiBiLayerFeedsMask wires position.alibi's output into
// attention.sdpa's additive mask input and checks that it equals the
// layer's alibi option, whole and incrementally: masks reach layers as
// ordinary inputs.
func TestALiBiLayerFeedsMask(t *testing.T) {
	viaInput, err := Parse([]byte(`
name: alibi-input
layers:
  - {name: bias, type: position.alibi, num_heads: 2, causal: true}
  - {name: attn, type: attention.sdpa, inputs: [x, bias], d: 8, num_heads: 2, mask: additive}
`), "a.yaml")
	require.NoError(t, err)
	viaOption, err := Parse([]byte(`
name: alibi-option
layers:
  - {name: attn, type: attention.sdpa, d: 8, num_heads: 2, causal: true, alibi: true}
`), "b.yaml")
	require.NoError(t, err)
	require.NoError(t, viaInput.Init(3))
	require.NoError(t, viaOption.Init(3))
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]float32, 2*7*8)
	for i := range data {
		data[i] = 2*rng.Float32() - 1
	}
	x := tensor.New(tensor.WithShape(2, 7, 8), tensor.WithBacking(data))
	want, err := viaOption.Forward(nil, x)
	require.NoError(t, err)
	got, err := viaInput.Forward(nil, x)
	require.NoError(t, err)
	requireClose(t, want.Data().([]float32), got.Data().([]float32), 1e-5, 1e-6, "forward")
	got, err = viaInput.Decode(nil, 2, x)
	require.NoError(t, err)
	requireClose(t, want.Data().([]float32), got.Data().([]float32), 1e-5, 1e-6, "decode")
}

// ExampleModel_Step decodes a Llama-style block token by token.
func ExampleModel_Step() {
	m, err := Load("testdata/blocks/llama/model.yaml")
	if err != nil {
		panic(err)
	}
	if err := m.Init(1); err != nil { // or m.LoadWeights("weights.npz")
		panic(err)
	}
	state, err := m.NewState()
	if err != nil {
		panic(err)
	}
	for range 3 {
		token := tensor.New(tensor.WithShape(1, 1, 16), tensor.WithBacking(make([]float32, 16)))
		out, err := m.Step(nil, state, token) // (B, 1, d): the output at the new position
		if err != nil {
			panic(err)
		}
		fmt.Println(out.Shape(), "after", state.Tokens(), "tokens")
	}
	// Output:
	// (1, 1, 16) after 1 tokens
	// (1, 1, 16) after 2 tokens
	// (1, 1, 16) after 3 tokens
}

package models

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// sessionYAML is a transformer block: position, norms, attention.multihead
// (the layer `attnrun import` lifts the seeds' MHA to), the MLP, the
// residual adds and a linear head. (encoderYAML covers attention.sdpa.)
const sessionYAML = `name: session
layers:
  - {name: pos, type: position.learned, context_length: 64, d: 32}
  - {name: ln1, type: norm.layer, d: 32}
  - {name: mha, type: attention.multihead, d_in: 32, d_out: 32, context_length: 64, num_heads: 4, qkv_bias: true, causal: true}
  - {name: res1, type: nn.add, inputs: [pos, mha]}
  - {name: ln2, type: norm.rms, d: 32}
  - {name: mlp, type: nn.mlp, d: 32, d_hidden: 64}
  - {name: res2, type: nn.add, inputs: [res1, mlp]}
  - {name: head, type: nn.linear, d_in: 32, d_out: 48}
`

// TestSessionForwardAllocatesNothing checks that a Session's Forward, after
// a warm-up pass, allocates nothing at one token, a short sentence and a
// longer batch, and gives Model.Forward's output bit for bit; and that a
// new input shape gets new outputs.
func TestSessionForwardAllocatesNothing(t *testing.T) {
	m, err := Parse([]byte(sessionYAML), "session.yaml")
	require.NoError(t, err)
	require.NoError(t, m.Init(1))
	s := m.NewSession()
	for _, shape := range [][]int{{1, 1, 32}, {1, 16, 32}, {4, 64, 32}} {
		x := sequence(shape...)
		want, err := m.Forward(nil, x)
		require.NoError(t, err)
		got, err := s.Forward(nil, x)
		require.NoError(t, err)
		require.Equal(t, want.Shape(), got.Shape())
		require.Equal(t, want.Data(), got.Data(), "shape %v", shape)

		forward := func() {
			if _, err := s.Forward(nil, x); err != nil {
				t.Fatal(err)
			}
		}
		for range 3 { // every pooled workspace reaches this size
			forward()
		}
		runtime.GC()
		gc := debug.SetGCPercent(-1)
		allocs := testing.AllocsPerRun(20, forward)
		debug.SetGCPercent(gc)
		require.Zero(t, allocs, "allocations per Session.Forward at %v", shape)
		again, err := s.Forward(nil, x)
		require.NoError(t, err)
		require.Equal(t, want.Data(), again.Data(), "shape %v, again", shape)
	}
}

// TestSessionStepAllocations checks that a Session's Step decoding one
// token at a time after a prompt allocates nothing per step but the KV
// cache's and the kernels' workspace's amortized growth (a reallocation
// every many steps: AllocsPerRun's average rounds it to 0), and that its
// outputs are Model.Step's bit for bit.
func TestSessionStepAllocations(t *testing.T) {
	requireStepsAllocateNothing(t, sessionYAML, sequence(1, 8, 32), sequence(1, 1, 32))
}

// requireStepsAllocateNothing builds the model of config, steps a Session
// and Model.Step through prompt and then token alike, requiring the same
// bits, and requires no allocation per Session.Step of token after that.
func requireStepsAllocateNothing(t *testing.T, config string, prompt, token *tensor.Dense) {
	t.Helper()
	m, err := Parse([]byte(config), "model.yaml")
	require.NoError(t, err)
	require.NoError(t, m.Init(1))
	s := m.NewSession()
	plain, err := m.NewState()
	require.NoError(t, err)
	state, err := m.NewState()
	require.NoError(t, err)
	want, err := m.Step(nil, plain, prompt)
	require.NoError(t, err)
	got, err := s.Step(nil, state, prompt)
	require.NoError(t, err)
	require.Equal(t, want.Data(), got.Data())
	for range 4 {
		want, err = m.Step(nil, plain, token)
		require.NoError(t, err)
		got, err = s.Step(nil, state, token)
		require.NoError(t, err)
		require.Equal(t, want.Data(), got.Data())
	}
	step := func() {
		if _, err := s.Step(nil, state, token); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	gc := debug.SetGCPercent(-1)
	allocs := testing.AllocsPerRun(40, step)
	debug.SetGCPercent(gc)
	require.Zero(t, allocs, "allocations per Session.Step")
}

// encoderYAML is BERT's encoder as `attnrun import` lifts a Hugging Face
// export: word, token-type and learned position embeddings of int64 ids,
// a padding mask read from attention_mask, attention.sdpa with a keep
// mask and the exact GELU MLP.
const encoderYAML = `name: encoder
inputs: [{name: input_ids, dtype: int64}, {name: attention_mask, dtype: int64}, {name: token_type_ids, dtype: int64}]
layers:
  - {name: words, type: nn.embedding, inputs: [input_ids], num_embeddings: 50, embedding_dim: 32}
  - {name: types, type: nn.embedding, inputs: [token_type_ids], num_embeddings: 2, embedding_dim: 32}
  - {name: sum, type: nn.add, inputs: [words, types]}
  - {name: pos, type: position.learned, context_length: 64, d: 32}
  - {name: ln, type: norm.layer, d: 32, eps: 1e-12}
  - {name: keep, type: mask.padding, inputs: [attention_mask]}
  - {name: attn, type: attention.sdpa, inputs: [ln, keep], d: 32, num_heads: 4, qkv_bias: true, out_bias: true, mask: bool, mask_polarity: keep}
  - {name: res1, type: nn.add, inputs: [attn, ln]}
  - {name: ln1, type: norm.layer, d: 32, eps: 1e-12}
  - {name: mlp, type: nn.mlp, d: 32, d_hidden: 64}
  - {name: res2, type: nn.add, inputs: [mlp, ln1]}
  - {name: ln2, type: norm.layer, d: 32, eps: 1e-12}
`

// ids is (B, T) int64 ids below n, deterministic.
func ids(b, t, n int) *tensor.Dense {
	data := make([]int64, b*t)
	for i := range data {
		data[i] = int64((i*7 + 3) % n)
	}
	return tensor.New(tensor.WithShape(b, t), tensor.WithBacking(data))
}

// TestSessionEncoderAllocatesNothing is TestSessionForwardAllocatesNothing
// on a lifted BERT's layers: embeddings of int64 ids, the padding mask and
// attention.sdpa allocate nothing per pass either, with padding in the
// batch.
func TestSessionEncoderAllocatesNothing(t *testing.T) {
	m, err := Parse([]byte(encoderYAML), "encoder.yaml")
	require.NoError(t, err)
	require.NoError(t, m.Init(1))
	s := m.NewSession()
	for _, bt := range [][2]int{{1, 1}, {1, 16}, {4, 32}} {
		words, types := ids(bt[0], bt[1], 50), ids(bt[0], bt[1], 2)
		keep := ids(bt[0], bt[1], 1)
		mask := keep.Int64s()
		for i := range mask {
			mask[i] = 1
		}
		if bt[0] > 1 {
			mask[len(mask)-1] = 0 // the last sequence is padded
		}
		want, err := m.Forward(nil, words, keep, types)
		require.NoError(t, err)
		forward := func() {
			got, err := s.Forward(nil, words, keep, types)
			if err != nil {
				t.Fatal(err)
			}
			require.Equal(t, want.Data(), got.Data(), "B, T = %v", bt)
		}
		for range 3 {
			forward()
		}
		runtime.GC()
		gc := debug.SetGCPercent(-1)
		allocs := testing.AllocsPerRun(20, func() {
			if _, err := s.Forward(nil, words, keep, types); err != nil {
				t.Fatal(err)
			}
		})
		debug.SetGCPercent(gc)
		require.Zero(t, allocs, "allocations per Session.Forward at B, T = %v", bt)
		forward()
	}
}

// decoderYAML is a Llama decoder as `attnrun import` lifts one: token
// embedding, RMSNorm, attention.sdpa with grouped-query heads, RoPE and a
// causal mask, the gated SiLU MLP and a head.
const decoderYAML = `name: decoder
inputs: [{name: input_ids, dtype: int64}]
layers:
  - {name: embed, type: nn.embedding, num_embeddings: 50, embedding_dim: 32}
  - {name: ln1, type: norm.rms, d: 32}
  - {name: attn, type: attention.sdpa, d: 32, num_heads: 4, num_kv_heads: 2, causal: true, rope: half, out_bias: false}
  - {name: res1, type: nn.add, inputs: [embed, attn]}
  - {name: ln2, type: norm.rms, d: 32}
  - {name: mlp, type: nn.mlp, d: 32, d_hidden: 64, gated: true, activation: silu, bias: false}
  - {name: res2, type: nn.add, inputs: [res1, mlp]}
  - {name: head, type: nn.linear, d_in: 32, d_out: 50, bias: false}
`

// TestSessionDecoderStepAllocations is TestSessionStepAllocations on a
// lifted Llama's layers: a Session's one-token Step through
// attention.sdpa's KV cache allocates nothing but the cache's amortized
// growth, and gives Model.Step's bits.
func TestSessionDecoderStepAllocations(t *testing.T) {
	requireStepsAllocateNothing(t, decoderYAML, ids(1, 8, 50), ids(1, 1, 50))
}

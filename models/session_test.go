package models

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

// sessionYAML is a transformer block: position, norms, attention.multihead
// (the layer `attnrun import` lifts the seeds' MHA to), the MLP, the
// residual adds and a linear head. (attention.sdpa and attention.torch_mha
// still allocate their per-sequence views: not yet covered.)
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
	m, err := Parse([]byte(sessionYAML), "session.yaml")
	require.NoError(t, err)
	require.NoError(t, m.Init(1))
	s := m.NewSession()
	plain, err := m.NewState()
	require.NoError(t, err)
	state, err := m.NewState()
	require.NoError(t, err)
	prompt, token := sequence(1, 8, 32), sequence(1, 1, 32)
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

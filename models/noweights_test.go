package models

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/registry"
)

// A model built from a config has zero parameters until Init or a state
// dict sets them; running it then would print numbers that look like an
// answer. Forward and NewState refuse instead, naming what to call.
func TestForwardNeedsWeights(t *testing.T) {
	const config = `name: causal
layers:
  - {name: attn, type: attention.causal, d_in: 2, d_out: 2, context_length: 4}
`
	x := tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float32{1, 0, 0, 1, 1, 1}))
	want := `model "causal" has no weights: call Init(seed), LoadWeights(path) or LoadStateDict before running it (its parameters are all zero)`

	m, err := Parse([]byte(config), "causal.yaml")
	require.NoError(t, err)
	assert.False(t, m.HasWeights())
	_, err = m.Forward(nil, x)
	assert.EqualError(t, err, want)
	_, err = m.NewState()
	assert.EqualError(t, err, want)
	_, err = m.Decode(nil, 1, x)
	assert.EqualError(t, err, want)

	// A failed load leaves the model as it was: still without weights.
	bad := map[string]*tensor.Dense{"attn.W_query.weight": tensor.New(tensor.WithShape(2, 2), tensor.WithBacking(make([]float32, 4)))}
	require.Error(t, m.LoadStateDict(bad))
	assert.False(t, m.HasWeights())

	require.NoError(t, m.Init(0))
	assert.True(t, m.HasWeights())
	_, err = m.Forward(nil, x)
	require.NoError(t, err)

	loaded, err := Parse([]byte(config), "causal.yaml")
	require.NoError(t, err)
	_, dict := m.StateDict()
	require.NoError(t, loaded.LoadStateDict(dict))
	_, err = loaded.Forward(nil, x)
	require.NoError(t, err)
}

// A model without parameters has nothing to set and runs at once.
func TestForwardWithoutParameters(t *testing.T) {
	m, err := Parse([]byte("name: avg\nlayers:\n  - {name: a, type: attention.average}\n"), "avg.yaml")
	require.NoError(t, err)
	assert.True(t, m.HasWeights())
	x := tensor.New(tensor.WithShape(2, 1), tensor.WithBacking([]float32{1, 3}))
	out, err := m.Forward(nil, x)
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2}, out.Data()) // the running mean: x₀, (x₀+x₁)/2
}

// A done context stops a pass before the next layer, whole or stepwise.
func TestForwardStopsWhenContextIsDone(t *testing.T) {
	m, err := Parse([]byte("name: two\nlayers:\n  - {name: a, type: attention.average}\n  - {name: b, type: attention.average}\n"), "two.yaml")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	x := tensor.New(tensor.WithShape(2, 1), tensor.WithBacking([]float32{1, 3}))
	_, err = m.Forward(&registry.Run{Context: ctx}, x)
	assert.ErrorIs(t, err, context.Canceled)
	assert.EqualError(t, err, `model "two" stopped before layer "a" (attention.average): context canceled`)
	_, err = m.Decode(&registry.Run{Context: ctx}, 1, x)
	assert.ErrorIs(t, err, context.Canceled)
}

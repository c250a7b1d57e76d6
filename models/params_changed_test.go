package models

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// packedYAML has every layer whose nn.Linear weights keep packed copies
// between passes (layers/packs.go).
const packedYAML = `name: packed
layers:
  - {name: mha, type: attention.multihead, d_in: 32, d_out: 32, context_length: 64, num_heads: 4, qkv_bias: true}
  - {name: sdpa, type: attention.sdpa, d: 32, num_heads: 4, causal: true}
  - {name: torch, type: attention.torch_mha, embed_dim: 32, num_heads: 4, bias: true}
  - {name: causal, type: attention.causal, d_in: 32, d_out: 32, context_length: 64}
  - {name: mlp, type: nn.mlp, d: 32, d_hidden: 64}
  - {name: proj, type: nn.linear, d_in: 32, d_out: 32}
`

// TestParamsChangedRepacks checks that weights written in place after a
// pass (the packed copies made) are used by the next pass once
// ParamsChanged is called: the output is, bit for bit, that of a model
// built with those weights; and that LoadStateDict drops the copies too.
func TestParamsChangedRepacks(t *testing.T) {
	cfg := []byte(packedYAML)
	m, err := Parse(cfg, "packed.yaml")
	require.NoError(t, err)
	other, err := Parse(cfg, "packed.yaml")
	require.NoError(t, err)
	require.NoError(t, m.Init(1))
	require.NoError(t, other.Init(2))
	x := sequence(2, 16, 32) // 32 rows: every product packs its weight

	first, err := m.Forward(nil, x)
	require.NoError(t, err)
	again, err := m.Forward(nil, x)
	require.NoError(t, err)
	require.Equal(t, first.Data(), again.Data())

	for i, p := range m.Params() {
		copy(p.Value.Data().([]float32), other.Params()[i].Value.Data().([]float32))
	}
	m.ParamsChanged()
	got, err := m.Forward(nil, x)
	require.NoError(t, err)
	want, err := other.Forward(nil, x)
	require.NoError(t, err)
	require.Equal(t, want.Data(), got.Data(), "the pass after ParamsChanged uses the written weights")
	require.NotEqual(t, first.Data(), got.Data())

	// LoadStateDict drops the copies too: back to the first weights.
	fresh, err := Parse(cfg, "packed.yaml")
	require.NoError(t, err)
	require.NoError(t, fresh.Init(1))
	_, dict := fresh.StateDict()
	require.NoError(t, m.LoadStateDict(dict))
	got, err = m.Forward(nil, x)
	require.NoError(t, err)
	require.Equal(t, first.Data(), got.Data())
}

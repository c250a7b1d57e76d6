package models

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/registry"
)

// uncounted is a layer type without a FLOP count, as a custom layer may be.
type uncounted struct{}

func (uncounted) Validate() error          { return nil }
func (uncounted) Params() []registry.Param { return nil }
func (uncounted) Forward(_ *registry.Run, in []*tensor.Dense) (*tensor.Dense, error) {
	return in[0], nil
}

func init() {
	registry.Register(registry.Info{ID: "modelstest.uncounted", Summary: "a layer without a FLOP count",
		New: func() registry.Layer { return uncounted{} }})
}

func TestProfilePreset(t *testing.T) {
	p, err := LookupPreset("seed-mha-wrapper")
	require.NoError(t, err)
	m, err := p.Model()
	require.NoError(t, err)
	prof, err := m.Profile(tensor.Shape{2, 6, 3})
	require.NoError(t, err)
	// Two heads, each W_query, W_key, W_value of (d_out 2, d_in 3): 2·3·(2·3) = 36.
	// Per head on (2, 6, 3): projections 2·12·3·6 = 432, QKᵀ and PV
	// 2·(2·6·6·2) = 576, so 2·1008 = 2016.
	want := LayerProfile{Name: "attn", Type: "attention.multihead_wrapper", Params: 36,
		Output: tensor.Shape{2, 6, 4}, FLOPs: 2016, Counted: true}
	require.Len(t, prof.Layers, 1)
	assert.Equal(t, want, prof.Layers[0])
	assert.Equal(t, int64(36), prof.Params)
	assert.Equal(t, int64(m.NumParams()), prof.Params)
	assert.Equal(t, int64(2016), prof.FLOPs)
	assert.Empty(t, prof.Uncounted)
	assert.Equal(t, []tensor.Shape{{2, 6, 3}}, prof.Inputs)
}

func TestProfileBlock(t *testing.T) {
	m, err := Parse([]byte(`name: block
layers:
  - {name: ln, type: norm.layer, d: 4}
  - {name: attn, type: attention.multihead, d_in: 4, d_out: 4, context_length: 8, num_heads: 2}
  - {name: res, type: nn.add, inputs: [x, attn]}
  - {name: mlp, type: nn.mlp, d: 4, d_hidden: 8}
  - {name: custom, type: modelstest.uncounted}
`), "block.yaml")
	require.NoError(t, err)
	prof, err := m.Profile(tensor.Shape{8, 4})
	require.NoError(t, err)
	want := []LayerProfile{
		// weight and bias of d 4.
		{Name: "ln", Type: "norm.layer", Params: 8, Output: tensor.Shape{8, 4}, FLOPs: 0, Counted: true},
		// W_query, W_key, W_value 3·16, out_proj 16 + 4. On (8, 4):
		// projections 2·8·4·12 = 768, QKᵀ and PV 2·2·(2·8·8·2) = 1024, out_proj 2·8·4·4 = 256.
		{Name: "attn", Type: "attention.multihead", Params: 68, Output: tensor.Shape{8, 4}, FLOPs: 2048, Counted: true},
		{Name: "res", Type: "nn.add", Params: 0, Output: tensor.Shape{8, 4}, FLOPs: 0, Counted: true},
		// fc1 4·8 + 8, fc2 8·4 + 4; 2·8·4·8 each.
		{Name: "mlp", Type: "nn.mlp", Params: 76, Output: tensor.Shape{8, 4}, FLOPs: 1024, Counted: true},
		{Name: "custom", Type: "modelstest.uncounted", Output: tensor.Shape{8, 4}},
	}
	assert.Equal(t, want, prof.Layers)
	assert.Equal(t, int64(152), prof.Params)
	assert.Equal(t, int64(3072), prof.FLOPs)
	assert.Equal(t, []string{"custom"}, prof.Uncounted)
}

func TestProfileErrors(t *testing.T) {
	p, err := LookupPreset("seed-mha-wrapper")
	require.NoError(t, err)
	m, err := p.Model()
	require.NoError(t, err)
	cases := []struct {
		name   string
		shapes []tensor.Shape
		want   string
	}{
		{"no shape", nil, "takes 1 input(s) ([x]), got 0 shape(s)"},
		{"empty shape", []tensor.Shape{{}}, `input "x": empty shape`},
		{"zero dimension", []tensor.Shape{{2, 0, 3}}, "every dimension must be positive"},
		{"too long for the layer", []tensor.Shape{{1 << 20, 1 << 20, 3}}, `layer "attn" (attention.multihead_wrapper): sequence length 1048576 exceeds context_length 6`},
		{"wrong width", []tensor.Shape{{2, 6, 4}}, `layer "attn" (attention.multihead_wrapper): d_in mismatch`},
		{"too long", []tensor.Shape{{2, 7, 3}}, "exceeds context_length 6"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := m.Profile(c.shapes...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}
